// SPDX-License-Identifier: GPL-2.0
/*
 * ringswitch_pt - guest driver for ringswitch passthrough ports.
 *
 * The host hands a port's whole region (rings, buffers, CSB, region header)
 * to the guest as BAR2 of QEMU's ivshmem-doorbell device (PCI 1af4:1110,
 * revision 1). This driver binds such a device when BAR2 starts with a valid
 * region header, enables its MSI-X vectors (one per ring pair), and gives
 * userspace /dev/rsptN: mmap of the region, the doorbell, and a per-open-file
 * mask of the vectors that fired. The uapi is rspt.h; docs/passthrough.md
 * describes the host side.
 *
 * BAR0 registers (32 bit): IntrMask @0, IntrStatus @4 (both unused: rev 1
 * interrupts are MSI-X only), IVPosition @8 (our peer id), Doorbell @12
 * (write (peer << 16) | vector).
 *
 * Lifetime: struct rspt_dev is reference counted; the PCI binding holds one
 * reference and every open file holds one. Removal (unbind, hot unplug)
 * marks the device gone, zaps every userspace mapping, and tears the
 * hardware down; open files then get ENODEV from every call and SIGBUS from
 * touching a former mapping, and the structure is freed at the last close.
 * Unloading the module needs no extra care: each open file holds a module
 * reference (.owner), so rmmod fails (EAGAIN) while one is open.
 *
 * With the module parameter ptnet=1 a bound device is a network interface
 * instead (ptnet.c), and has no /dev/rsptN: one driver of the rings at a
 * time.
 */

#include <linux/bits.h>
#include <linux/compat.h>
#include <linux/fs.h>
#include <linux/idr.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/kref.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/poll.h>
#include <linux/rwsem.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>
#include <linux/version.h>
#include <linux/wait.h>

#include "rspt_dev.h"

static bool ptnet;
module_param(ptnet, bool, 0444);
MODULE_PARM_DESC(ptnet, "Bind each passthrough device as a network interface ptnetN (the guest's own TCP/IP over the port's rings) instead of the character device /dev/rsptN for netmap programs (default: no)");

static_assert(sizeof(struct rspt_info) == 16);
static_assert(sizeof(struct rspt_region_header) == 96);
static_assert(offsetof(struct rspt_region_header, vnet_hdr_len) == 88);
static_assert(offsetof(struct rspt_region_header, buf_base) == 40);
static_assert(offsetof(struct rspt_region_header, csb_ofs) == 72);

static DEFINE_IDA(rspt_ida);

/* One open file: its own mask of the vectors that fired since its last read. */
struct rspt_file {
	struct rspt_dev *dev;
	struct file *file;
	struct list_head node;	/* in dev->files */
	u64 mask;		/* under dev->lock */
};

static void rspt_free(struct kref *ref)
{
	kfree(container_of(ref, struct rspt_dev, ref));
}

static inline void rspt_vma_set_flags(struct vm_area_struct *vma, unsigned long flags)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	vm_flags_set(vma, flags);
#else
	vma->vm_flags |= flags;
#endif
}

/* ---- interrupts --------------------------------------------------------- */

/*
 * A migratable port's daemon asks whether the guest runs on this memory by
 * writing a nonzero epoch into the header's ask word and raising our
 * vectors; the answer is the ask copied into the ack word. Only a running
 * guest answers, so after a migration the destination's daemon adopts the
 * memory once QEMU has written the last of it, then raises every vector so
 * that whoever drives the rings looks at them again. Two words read, one
 * written, and the daemon's doorbell rung; nothing else of the header is
 * read again.
 */
bool rspt_resume_answer(struct rspt_dev *d)
{
	u32 *ask, *ack;
	u32 a;

	if (d->mem_len < RSPT_RESUME_ACK + sizeof(u32))
		return false;
	ask = d->mem + RSPT_RESUME_ASK;
	ack = d->mem + RSPT_RESUME_ACK;
	a = READ_ONCE(*ask);
	if (!a || READ_ONCE(*ack) == a)
		return false;
	WRITE_ONCE(*ack, a);
	/*
	 * And the daemon's doorbell, which it watches while it waits: the
	 * answer is taken at once. Its IRQs are freed before regs is unmapped,
	 * and probe calls this after mapping it.
	 */
	iowrite32(RSPT_KICK(d->ivposition ? RSPT_PEER_HOST : RSPT_PEER_HOST_MIGRATABLE, 0),
		  d->regs + RSPT_REG_DOORBELL);
	dev_info_ratelimited(&d->pdev->dev, "the host asked whether we run on this memory (epoch %08x): answered\n", a);
	return true;
}

/* Hard IRQ context: no allocation, no sleeping; bounded by the open files. */
static irqreturn_t rspt_irq(int irq, void *data)
{
	struct rspt_vector *v = data;
	struct rspt_dev *d = v->dev;
	struct rspt_file *f;
	const u64 bit = BIT_ULL(v->index);

	rspt_resume_answer(d);
	spin_lock(&d->lock);
	list_for_each_entry(f, &d->files, node)
		f->mask |= bit;
	spin_unlock(&d->lock);
	/*
	 * The mask is published (unlock) before the wakeup; wait_event's
	 * prepare_to_wait and wake_up's waitqueue lock order it against a
	 * reader that checks the mask and goes to sleep, so no wakeup is lost.
	 */
	wake_up_interruptible(&d->wq);
	return IRQ_HANDLED;
}

/* ---- file operations ---------------------------------------------------- */

static int rspt_open(struct inode *inode, struct file *file)
{
	/* misc_open() put our miscdevice here, and calls us under misc_mtx. */
	struct rspt_dev *d = container_of(file->private_data, struct rspt_dev, misc);
	struct rspt_file *f;

	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (!f)
		return -ENOMEM;
	f->dev = d;
	f->file = file;

	/*
	 * Safe without holding a reference yet: remove() calls
	 * misc_deregister(), which waits for misc_mtx, before it drops the
	 * binding's reference, so d is alive for the whole of this call.
	 */
	mutex_lock(&d->files_lock);
	spin_lock_irq(&d->lock);
	if (d->gone) {
		spin_unlock_irq(&d->lock);
		mutex_unlock(&d->files_lock);
		kfree(f);
		return -ENODEV;
	}
	kref_get(&d->ref);
	list_add_tail(&f->node, &d->files);
	spin_unlock_irq(&d->lock);
	mutex_unlock(&d->files_lock);

	file->private_data = f;
	return stream_open(inode, file);
}

static int rspt_release(struct inode *inode, struct file *file)
{
	struct rspt_file *f = file->private_data;
	struct rspt_dev *d = f->dev;

	mutex_lock(&d->files_lock);
	spin_lock_irq(&d->lock);
	list_del(&f->node);
	spin_unlock_irq(&d->lock);
	mutex_unlock(&d->files_lock);
	kfree(f);
	kref_put(&d->ref, rspt_free);
	return 0;
}

static ssize_t rspt_read(struct file *file, char __user *buf, size_t count, loff_t *ppos)
{
	struct rspt_file *f = file->private_data;
	struct rspt_dev *d = f->dev;
	u64 mask;
	int ret;

	if (count < sizeof(mask))
		return -EINVAL;
	for (;;) {
		spin_lock_irq(&d->lock);
		if (d->gone) {
			spin_unlock_irq(&d->lock);
			return -ENODEV;
		}
		mask = f->mask;
		f->mask = 0;
		spin_unlock_irq(&d->lock);
		if (mask)
			break;
		if (file->f_flags & O_NONBLOCK)
			return -EAGAIN;
		ret = wait_event_interruptible(d->wq, READ_ONCE(f->mask) || READ_ONCE(d->gone));
		if (ret)
			return ret;
	}
	if (copy_to_user(buf, &mask, sizeof(mask))) {
		/* Not delivered: give the bits back for the next read. */
		spin_lock_irq(&d->lock);
		f->mask |= mask;
		spin_unlock_irq(&d->lock);
		return -EFAULT;
	}
	return sizeof(mask);
}

static __poll_t rspt_poll(struct file *file, poll_table *wait)
{
	struct rspt_file *f = file->private_data;
	struct rspt_dev *d = f->dev;
	__poll_t events = 0;

	poll_wait(file, &d->wq, wait);
	spin_lock_irq(&d->lock);
	if (d->gone)
		events = EPOLLERR | EPOLLHUP;
	else if (f->mask)
		events = EPOLLIN | EPOLLRDNORM;
	spin_unlock_irq(&d->lock);
	return events;
}

static long rspt_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct rspt_file *f = file->private_data;
	struct rspt_dev *d = f->dev;
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case RSPT_IOC_INFO: {
		struct rspt_info info = {
			.mem_size = d->mem_len,
			.ivposition = d->ivposition,
			.vectors = d->vectors,
		};

		if (READ_ONCE(d->gone))
			return -ENODEV;
		if (copy_to_user(uarg, &info, sizeof(info)))
			return -EFAULT;
		return 0;
	}
	case RSPT_IOC_KICK: {
		u32 val;
		long ret = 0;

		if (get_user(val, (u32 __user *)uarg))
			return -EFAULT;
		/* The vector must be one of ours; the peer id is the caller's business. */
		if ((val & 0xffff) >= d->vectors)
			return -EINVAL;
		down_read(&d->state);
		if (d->gone)
			ret = -ENODEV;
		else
			iowrite32(val, d->regs + RSPT_REG_DOORBELL);
		up_read(&d->state);
		return ret;
	}
	default:
		return -ENOTTY;
	}
}

/*
 * Pages are inserted at fault time rather than all at mmap time, so that
 * remove() can make every mapping unusable: after gone is set no fault
 * inserts a PFN, and the ones inserted before are zapped by remove().
 * Faults cost one per 4 KiB page, once.
 */
static vm_fault_t rspt_vm_fault(struct vm_fault *vmf)
{
	struct rspt_dev *d = vmf->vma->vm_private_data;
	u64 off = (u64)vmf->pgoff << PAGE_SHIFT;
	vm_fault_t ret = VM_FAULT_SIGBUS;

	down_read(&d->state);
	if (!d->gone && off < d->mem_len)
		ret = vmf_insert_pfn(vmf->vma, vmf->address, PHYS_PFN(d->mem_phys + off));
	up_read(&d->state);
	return ret;
}

static const struct vm_operations_struct rspt_vm_ops = {
	.fault = rspt_vm_fault,
};

/*
 * Caching. BAR2 of ivshmem is host RAM (the region's memfd), which the host
 * side accesses with ordinary cacheable loads, stores and atomics, so the
 * driver asks for write-back: probe() maps the whole BAR with
 * memremap(MEMREMAP_WB), which records the range's cache mode in the x86 PAT
 * memtype table, and vmf_insert_pfn() gives userspace mappings the mode
 * recorded there (track_pfn_insert()). x86 grants WB only where the
 * firmware's MTRRs say WB, though: SeaBIOS marks the 32-bit PCI hole
 * (2-4 GiB) uncachable, so a BAR placed there gets UC- (QEMU 7.2 places
 * BARs of up to at least 256 MiB there), while one above 4 GiB (2 GiB BARs)
 * gets WB. tests/pt/run.sh prints what a guest got. UC- is still correct
 * (coherent and strongly ordered); it costs speed only where the
 * hypervisor honours guest memory types: TCG models no caches, and KVM on
 * Intel (Linux 6.1 hosts) forces WB for RAM-backed guest memory unless a
 * non-coherent DMA device is assigned. WC would be wrong: weakly ordered
 * stores and uncached reads of the CSB. (Jailhouse's ivshmem-net driver
 * maps its shared memory the same way.)
 */
static int rspt_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct rspt_file *f = file->private_data;
	struct rspt_dev *d = f->dev;
	u64 off = (u64)vma->vm_pgoff << PAGE_SHIFT;
	u64 len = vma->vm_end - vma->vm_start;

	/* A private (copy-on-write) mapping of device memory makes no sense. */
	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if (off >= d->mem_len || len > d->mem_len - off)
		return -EINVAL;
	if (READ_ONCE(d->gone))
		return -ENODEV;
	rspt_vma_set_flags(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_ops = &rspt_vm_ops;
	/* The vma holds the file, the file holds d. */
	vma->vm_private_data = d;
	return 0;
}

static const struct file_operations rspt_fops = {
	.owner = THIS_MODULE,
	.open = rspt_open,
	.release = rspt_release,
	.read = rspt_read,
	.poll = rspt_poll,
	.unlocked_ioctl = rspt_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.mmap = rspt_mmap,
	/* No .llseek: stream_open() makes lseek fail with ESPIPE. */
};

/* ---- PCI ---------------------------------------------------------------- */

/*
 * Reads the region header once into a local copy and checks the copy: the
 * host may change the memory at any time, and nothing is read twice.
 */
static int rspt_check_header(struct pci_dev *pdev, const void *mem, resource_size_t bar_len,
			     struct rspt_region_header *out)
{
	struct rspt_region_header h;

	if (bar_len < sizeof(h)) {
		dev_err(&pdev->dev, "BAR2 is %llu bytes, too small for a region header\n",
			(unsigned long long)bar_len);
		return -ENODEV;
	}
	memcpy(&h, mem, sizeof(h));
	if (memcmp(h.magic, RSPT_REGION_MAGIC, sizeof(h.magic))) {
		dev_err(&pdev->dev, "bad magic %*phN at the start of BAR2: not a ringswitch region\n",
			(int)sizeof(h.magic), h.magic);
		return -ENODEV;
	}
	if (le32_to_cpu(h.version) != RSPT_REGION_VERSION) {
		dev_err(&pdev->dev, "region header version %u, this driver knows version %u\n",
			le32_to_cpu(h.version), RSPT_REGION_VERSION);
		return -ENODEV;
	}
	if (le64_to_cpu(h.size) > bar_len || le64_to_cpu(h.size) < sizeof(h)) {
		dev_err(&pdev->dev, "region size %llu bytes does not fit BAR2 of %llu bytes\n",
			le64_to_cpu(h.size), (unsigned long long)bar_len);
		return -ENODEV;
	}
	dev_info(&pdev->dev, "region of %llu bytes: %u end(s), %u+%u rings of %u+%u slots, %u buffers of %u bytes\n",
		 le64_to_cpu(h.size), le32_to_cpu(h.ends), le32_to_cpu(h.tx_rings),
		 le32_to_cpu(h.rx_rings), le32_to_cpu(h.tx_slots), le32_to_cpu(h.rx_slots),
		 le32_to_cpu(h.nbufs), le32_to_cpu(h.buf_size));
	*out = h;
	return 0;
}

static void rspt_free_irqs(struct rspt_dev *d, unsigned int n)
{
	while (n--)
		free_irq(pci_irq_vector(d->pdev, n), &d->vec[n]);
}

static int rspt_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct rspt_dev *d;
	resource_size_t bar_len;
	unsigned int i;
	int nvec, err;

	if (pdev->revision != 1) {
		dev_err(&pdev->dev, "ivshmem revision %u, need 1\n", pdev->revision);
		return -ENODEV;
	}
	if (!(pci_resource_flags(pdev, 0) & IORESOURCE_MEM) ||
	    pci_resource_len(pdev, 0) < RSPT_REGS_LEN ||
	    !(pci_resource_flags(pdev, 2) & IORESOURCE_MEM)) {
		dev_err(&pdev->dev, "BAR0 or BAR2 missing: not an ivshmem device\n");
		return -ENODEV;
	}
	nvec = pci_msix_vec_count(pdev);
	if (nvec <= 0 || nvec > RSPT_MAX_VECTORS) {
		dev_err(&pdev->dev, "%d MSI-X vectors: need 1 to %d (ivshmem-doorbell with vectors=N)\n",
			nvec, RSPT_MAX_VECTORS);
		return -ENODEV;
	}

	d = kzalloc(struct_size(d, vec, nvec), GFP_KERNEL);
	if (!d)
		return -ENOMEM;
	kref_init(&d->ref);
	init_rwsem(&d->state);
	mutex_init(&d->files_lock);
	spin_lock_init(&d->lock);
	INIT_LIST_HEAD(&d->files);
	init_waitqueue_head(&d->wq);
	d->pdev = pdev;
	d->vectors = nvec;

	err = pci_enable_device_mem(pdev);
	if (err)
		goto err_free;
	err = pci_request_regions(pdev, DRV_NAME);
	if (err)
		goto err_disable;
	d->regs = pci_iomap(pdev, 0, RSPT_REGS_LEN);
	if (!d->regs) {
		err = -ENOMEM;
		goto err_release;
	}
	d->mem_phys = pci_resource_start(pdev, 2);
	bar_len = pci_resource_len(pdev, 2);
	d->mem_len = bar_len;
	/* Write-back if the platform allows, as userspace maps it: see rspt_mmap(). */
	d->mem = memremap(d->mem_phys, bar_len, MEMREMAP_WB);
	if (!d->mem) {
		dev_err(&pdev->dev, "cannot map BAR2 (%llu bytes)\n", (unsigned long long)bar_len);
		err = -ENOMEM;
		goto err_iounmap;
	}
	err = rspt_check_header(pdev, d->mem, bar_len, &d->hdr);
	if (err)
		goto err_memunmap;
	d->ivposition = ioread32(d->regs + RSPT_REG_IVPOSITION);
	/* A guest booted on a migratable port answers at once (see rspt_resume_answer). */
	rspt_resume_answer(d);

	/* MSI-X messages are memory writes by the device: QEMU drops them without bus mastering. */
	pci_set_master(pdev);
	err = pci_alloc_irq_vectors(pdev, nvec, nvec, PCI_IRQ_MSIX);
	if (err < 0) {
		dev_err(&pdev->dev, "cannot enable %d MSI-X vectors: %d\n", nvec, err);
		goto err_master;
	}

	d->id = ida_alloc(&rspt_ida, GFP_KERNEL);
	if (d->id < 0) {
		err = d->id;
		goto err_vectors;
	}
	snprintf(d->name, sizeof(d->name), "rspt%d", d->id);
	pci_set_drvdata(pdev, d);
	if (ptnet) {
		err = ptnet_attach(d);
		if (err)
			goto err_ida;
		return 0;
	}
	for (i = 0; i < d->vectors; i++) {
		struct rspt_vector *v = &d->vec[i];

		v->dev = d;
		v->index = i;
		snprintf(v->name, sizeof(v->name), "%s-v%u", d->name, i);
		err = request_irq(pci_irq_vector(pdev, i), rspt_irq, 0, v->name, v);
		if (err) {
			dev_err(&pdev->dev, "cannot request the IRQ of vector %u: %d\n", i, err);
			rspt_free_irqs(d, i);
			goto err_ida;
		}
	}

	d->misc.minor = MISC_DYNAMIC_MINOR;
	d->misc.name = d->name;
	d->misc.fops = &rspt_fops;
	d->misc.parent = &pdev->dev;
	d->misc.mode = 0600;
	err = misc_register(&d->misc);
	if (err) {
		dev_err(&pdev->dev, "cannot register /dev/%s: %d\n", d->name, err);
		goto err_irqs;
	}
	dev_info(&pdev->dev, "/dev/%s: BAR2 of %llu bytes, peer id %u, %u MSI-X vectors\n",
		 d->name, (unsigned long long)bar_len, d->ivposition, d->vectors);
	return 0;

err_irqs:
	rspt_free_irqs(d, d->vectors);
err_ida:
	ida_free(&rspt_ida, d->id);
err_vectors:
	pci_free_irq_vectors(pdev);
err_master:
	pci_clear_master(pdev);
err_memunmap:
	memunmap(d->mem);
err_iounmap:
	pci_iounmap(pdev, d->regs);
err_release:
	pci_release_regions(pdev);
err_disable:
	pci_disable_device(pdev);
err_free:
	kfree(d);
	return err;
}

static void rspt_remove(struct pci_dev *pdev)
{
	struct rspt_dev *d = pci_get_drvdata(pdev);
	struct rspt_file *f;

	if (d->net) {
		/* The interface goes first: nothing touches the rings after. */
		ptnet_detach(d);
		down_write(&d->state);
		d->gone = true;
		up_write(&d->state);
		goto teardown;
	}
	/* No new opens; an open in progress has finished and is on the list. */
	misc_deregister(&d->misc);

	/* Waits for doorbell writes and faults in progress. */
	down_write(&d->state);
	spin_lock_irq(&d->lock);
	d->gone = true;
	spin_unlock_irq(&d->lock);
	up_write(&d->state);
	wake_up_interruptible_all(&d->wq);

	/*
	 * No fault inserts a PFN any more: zap those inserted before, so
	 * that userspace cannot reach BAR2 after the device is gone.
	 */
	mutex_lock(&d->files_lock);
	list_for_each_entry(f, &d->files, node)
		unmap_mapping_range(f->file->f_mapping, 0, 0, 1);
	mutex_unlock(&d->files_lock);

	rspt_free_irqs(d, d->vectors);
	dev_info(&pdev->dev, "/dev/%s removed\n", d->name);
teardown:
	pci_free_irq_vectors(pdev);
	pci_clear_master(pdev);
	memunmap(d->mem);
	pci_iounmap(pdev, d->regs);
	pci_release_regions(pdev);
	pci_disable_device(pdev);
	ida_free(&rspt_ida, d->id);
	kref_put(&d->ref, rspt_free);
}

static const struct pci_device_id rspt_ids[] = {
	{ PCI_DEVICE(0x1af4, 0x1110) }, /* ivshmem; rspt_check_header() decides */
	{ }
};
MODULE_DEVICE_TABLE(pci, rspt_ids);

static struct pci_driver rspt_driver = {
	.name = DRV_NAME,
	.id_table = rspt_ids,
	.probe = rspt_probe,
	.remove = rspt_remove,
};

static int __init rspt_init(void)
{
	return pci_register_driver(&rspt_driver);
}

static void __exit rspt_exit(void)
{
	pci_unregister_driver(&rspt_driver);
	ida_destroy(&rspt_ida);
}

module_init(rspt_init);
module_exit(rspt_exit);

MODULE_DESCRIPTION("ringswitch passthrough ports over ivshmem-doorbell");
MODULE_LICENSE("GPL");
