/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rspt_dev.h - inside the ringswitch_pt module: the bound device
 * (rspt_main.c: PCI and /dev/rsptN) and the network interface over it
 * (ptnet.c). Not a user API: that is rspt.h.
 */
#ifndef RSPT_DEV_H
#define RSPT_DEV_H

#include <linux/kref.h>
#include <linux/miscdevice.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/rwsem.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>

#include "rspt.h"

#define DRV_NAME "ringswitch_pt"

#define RSPT_REG_IVPOSITION 8
#define RSPT_REG_DOORBELL 12
#define RSPT_REGS_LEN 16

struct rspt_dev;
struct ptnet;

/* The cookie of one MSI-X vector's handler (character device mode). */
struct rspt_vector {
	struct rspt_dev *dev;
	unsigned int index;
	char name[24]; /* "rsptN-vI", shown in /proc/interrupts */
};

struct rspt_dev {
	struct kref ref;
	struct miscdevice misc;
	char name[16]; /* "rsptN" */
	int id;

	/* Set at probe, constant afterwards. */
	struct pci_dev *pdev;
	phys_addr_t mem_phys;	/* BAR2 */
	resource_size_t mem_len;
	u32 ivposition;
	u32 vectors;
	/* The region header as probe() read and checked it (one copy). */
	struct rspt_region_header hdr;

	/*
	 * gone, and the hardware behind regs and mem_phys: held for reading
	 * while the doorbell is written and while a fault inserts a PFN, for
	 * writing by remove() to set gone. After that nothing touches them.
	 */
	struct rw_semaphore state;
	bool gone;		/* also written under lock, for read/poll */
	void __iomem *regs;	/* BAR0 */
	void *mem;		/* BAR2, kernel mapping */

	/* The network interface, when the device is one (ptnet=1), else NULL. */
	struct ptnet *net;

	/*
	 * lock: the files list and every file's mask (the IRQ handler sets
	 * bits), and gone. files_lock: membership of the list, held by
	 * remove() while it walks the list to zap mappings (which sleeps).
	 * Order: files_lock, then lock.
	 */
	struct mutex files_lock;
	spinlock_t lock;
	struct list_head files;
	wait_queue_head_t wq;	/* readers and pollers of every file */

	struct rspt_vector vec[];
};

/*
 * ptnet.c: a network interface (ptnetN) on the device's rings, in place of
 * /dev/rsptN. ptnet_attach() is called by probe() once the header is
 * checked and MSI-X is enabled; it requests the vectors' IRQs itself.
 * ptnet_detach() undoes it, before remove() tears the device down.
 */
int ptnet_attach(struct rspt_dev *d);
void ptnet_detach(struct rspt_dev *d);

/* Answers the daemon's resume ask (rspt.h); true when it answered. Any context. */
bool rspt_resume_answer(struct rspt_dev *d);

#endif /* RSPT_DEV_H */
