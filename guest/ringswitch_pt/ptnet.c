// SPDX-License-Identifier: GPL-2.0
/*
 * ptnet - a Linux network interface on a ringswitch passthrough port.
 *
 * The port's region is BAR2 of the ivshmem-doorbell device (rspt_main.c
 * binds it). Each ring pair of the port is one queue pair of the interface:
 * TX copies a frame into the TX ring's next slot and publishes head through
 * the CSB, ringing the doorbell only when the host side asked for a kick;
 * RX is NAPI, its MSI-X vector (the ring pair's) enabled only while the
 * rings are drained, by the CSB's appl_need_kick. The layouts and the sync
 * protocol are netmap's (shared memory written by the host daemon): see
 * docs/passthrough.md and crates/ring/src/sync.rs for the host side.
 *
 * The host side is trusted as much as the hypervisor is, but nothing read
 * from the region is used without a bounds check: a ring offset, a slot
 * count, a buffer index, a length or a tail out of range costs the frame
 * (counted in rx_errors / tx_errors and `ethtool -S`), never memory
 * outside BAR2.
 */

#include <linux/etherdevice.h>
#include <linux/if_vlan.h>
#include <linux/ethtool.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/netdevice.h>
#include <linux/pci.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/u64_stats_sync.h>
#include <linux/version.h>
#include <linux/virtio_net.h>
#include <linux/workqueue.h>

#include "rspt_dev.h"

/* netmap's layouts (shared/netmap-abi.md), little endian like the host. */
#define NM_RING_SLOTS 256	/* slots start here in a ring */
#define NM_RING_BUF_OFS 0	/* i64: buffer 0, relative to the ring */
#define NM_RING_NUM_SLOTS 8	/* u32 */
#define NM_RING_BUF_SIZE 12	/* u32 */
#define NM_IF_TX_RINGS 24	/* u32 */
#define NM_IF_RX_RINGS 28	/* u32 */
#define NM_IF_HOST_TX_RINGS 36	/* u32 */
#define NM_IF_RING_OFS 56	/* i64[], relative to the netmap_if */
#define NS_MOREFRAG 0x20
#define NM_RESERVED_BUFS 2	/* buffers 0 and 1 are never handed out */
#define NM_MAX_SLOTS 65536
#define NM_MAX_FRAGS 64		/* slots of one frame, at most */
/* The virtio-net header of a port made with --vnet-hdr (VIRTIO 1.x). */
#define PTNET_VNET_HDR_LEN sizeof(struct virtio_net_hdr_mrg_rxbuf)
static_assert(PTNET_VNET_HDR_LEN == 12);
/* The longest TSO frame the stack hands us (the legacy limit, which new
 * devices get; no BIG TCP here). */
#define PTNET_GSO_MAX 65536u

struct nm_slot {
	u32 buf_idx;
	u16 len;
	u16 flags;
	u64 ptr;
};

/* One CSB entry's halves, 64 bytes each (crates/ring/src/layout.rs). */
struct csb_atok {
	u32 head;
	u32 cur;
	u32 appl_need_kick;
	u32 sync_flags;
	u32 kick_cost_ns;	/* a hint for the host's worker; left 0 here */
	u32 pad[11];
};

struct csb_ktoa {
	u32 hwcur;
	u32 hwtail;
	u32 kern_need_kick;
	u32 kick_cost_ns;	/* the host's kick cost; unused here */
	u32 pad[12];
};

static_assert(sizeof(struct nm_slot) == 16);
static_assert(sizeof(struct csb_atok) == 64);
static_assert(sizeof(struct csb_ktoa) == 64);

/* The application's side of one ring, as crates/ring's AppRing keeps it. */
struct ptnet_ring {
	struct nm_slot *slots;
	u8 *bufs;		/* buffer 0 */
	struct csb_atok *atok;
	struct csb_ktoa *ktoa;
	u32 n;			/* slots */
	u32 head;		/* ours: [head, tail) */
	u32 tail;
};

struct ptnet_stats {
	struct u64_stats_sync syncp;
	u64 packets;
	u64 bytes;
	u64 errors;	/* a bad slot or tail from the host, or a frame too long */
	u64 dropped;	/* no memory, or a multi-slot frame (RX) */
	u64 kicks;	/* doorbells rung */
	u64 irqs;	/* interrupts taken */
};

struct ptnet_queue {
	struct ptnet *pn;
	unsigned int index;
	struct napi_struct napi;
	char irq_name[24];
	struct ptnet_ring tx;	/* under the netdev TX queue's lock */
	struct ptnet_ring rx;	/* under NAPI */
	/* RX: the slots of the frame being read (NAPI's). */
	struct {
		u32 idx;
		u32 len;
	} chain[NM_MAX_FRAGS];
	/* The host's TX hwcur at the last watch tick, and the ticks since it
	 * last moved while frames waited for it (ptnet_watch). */
	u32 watch_hwcur;
	unsigned int stalled_ticks;
	struct ptnet_stats txs;
	struct ptnet_stats rxs;
};

struct ptnet {
	struct net_device *ndev;
	struct rspt_dev *d;
	/* Bytes of virtio-net header in front of every frame: 0 or 12. */
	u32 hdr_len;
	/* Slots the longest frame we send takes: a queue stops below that. */
	u32 max_slots;
	/* The longest frame (header included) we take from the host: longer
	 * ones are refused before anything is allocated for them. */
	u32 frame_max;
	/* While the interface is up: whether the host side still takes frames. */
	struct delayed_work watch;
	u32 buf_size;
	u32 nbufs;
	u32 kick_peer;		/* the doorbell's target */
	unsigned int nq;
	struct ptnet_queue q[];
};

static inline u32 ring_next(u32 i, u32 n)
{
	return i + 1 == n ? 0 : i + 1;
}

static inline u32 ring_dist(u32 from, u32 to, u32 n)
{
	return to >= from ? to - from : to + n - from;
}

/*
 * Whether the host may move our tail to hw: forward from tail, never onto
 * the slot before head (arith::tail_may_move on the host).
 */
static inline bool tail_may_move(u32 tail, u32 head, u32 hw, u32 n)
{
	u32 before_head = head == 0 ? n - 1 : head - 1;

	return hw < n && ring_dist(tail, hw, n) <= ring_dist(tail, before_head, n);
}

/* Reads hwtail (acquire: pairs with the host's release store) and adopts it if valid. */
static bool ptnet_refresh_tail(struct ptnet_ring *r, struct ptnet_stats *s)
{
	u32 hw = smp_load_acquire(&r->ktoa->hwtail);

	if (hw == r->tail)
		return false;
	if (!tail_may_move(r->tail, r->head, hw, r->n)) {
		s->errors++;
		return false;
	}
	r->tail = hw;
	return true;
}

/*
 * Publishes cur then head (release: the host that sees head sees every
 * slot and buffer written before), then, behind a full fence that pairs
 * with the host's before it sleeps, rings the doorbell if it asked.
 */
static void ptnet_publish(struct ptnet_queue *q, struct ptnet_ring *r, struct ptnet_stats *s)
{
	struct ptnet *pn = q->pn;

	WRITE_ONCE(r->atok->cur, r->head);
	smp_store_release(&r->atok->head, r->head);
	smp_mb();
	if (READ_ONCE(r->ktoa->kern_need_kick)) {
		iowrite32(RSPT_KICK(pn->kick_peer, q->index), pn->d->regs + RSPT_REG_DOORBELL);
		s->kicks++;
	}
}

/* The buffer of a slot, or NULL when its index or length is out of range. */
static u8 *ptnet_buf(struct ptnet *pn, struct ptnet_ring *r, u32 idx, u32 len)
{
	if (idx < NM_RESERVED_BUFS || idx >= pn->nbufs || len > pn->buf_size)
		return NULL;
	return r->bufs + (size_t)idx * pn->buf_size;
}

/* ---- TX ----------------------------------------------------------------- */

static inline u32 ring_space(const struct ptnet_ring *r)
{
	return ring_dist(r->head, r->tail, r->n);
}

/* UDP segmentation (USO) in the virtio-net header: VIRTIO 1.2's GSO type
 * 5. Kernels before 6.2 know neither the type nor how to read or write it,
 * so on those the two helpers below do for it what 6.2's
 * virtio_net_hdr_from_skb and virtio_net_hdr_to_skb do, with the same
 * checks; every other header goes to the kernel's own. */
#ifdef VIRTIO_NET_HDR_GSO_UDP_L4
#define PTNET_OWN_USO 0
#else
#define PTNET_OWN_USO 1
#define VIRTIO_NET_HDR_GSO_UDP_L4 5
#endif

static int ptnet_hdr_from_skb(const struct sk_buff *skb, struct virtio_net_hdr *h)
{
	if (!PTNET_OWN_USO || !skb_is_gso(skb) || !(skb_shinfo(skb)->gso_type & SKB_GSO_UDP_L4))
		return virtio_net_hdr_from_skb(skb, h, true, false, 0);
	if (skb->ip_summed != CHECKSUM_PARTIAL)
		return -EINVAL;
	memset(h, 0, sizeof(*h));
	h->flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
	h->gso_type = VIRTIO_NET_HDR_GSO_UDP_L4;
	h->hdr_len = cpu_to_le16(skb_headlen(skb));
	h->gso_size = cpu_to_le16(skb_shinfo(skb)->gso_size);
	h->csum_start = cpu_to_le16(skb_checksum_start_offset(skb));
	h->csum_offset = cpu_to_le16(skb->csum_offset);
	return 0;
}

static int ptnet_hdr_to_skb(struct sk_buff *skb, const struct virtio_net_hdr *h)
{
	u16 gso_size = le16_to_cpu(h->gso_size);
	u32 p_off;

	if (!PTNET_OWN_USO || h->gso_type != VIRTIO_NET_HDR_GSO_UDP_L4)
		return virtio_net_hdr_to_skb(skb, h, true);
	/* A UDP GSO frame: its checksum is partial, in a UDP header that
	 * lies in the skb's head. */
	if (!(h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) ||
	    le16_to_cpu(h->csum_offset) != offsetof(struct udphdr, check) ||
	    !skb_partial_csum_set(skb, le16_to_cpu(h->csum_start), le16_to_cpu(h->csum_offset)))
		return -EINVAL;
	p_off = skb_transport_offset(skb) + sizeof(struct udphdr);
	if (!pskb_may_pull(skb, p_off) || !gso_size || gso_size == GSO_BY_FRAGS ||
	    skb->len - p_off > (u32)gso_size * UDP_MAX_SEGMENTS)
		return -EINVAL;
	if (skb->len - p_off > gso_size) {
		/* Checked again by the stack (DODGY), which counts the segments. */
		skb_shinfo(skb)->gso_size = gso_size;
		skb_shinfo(skb)->gso_type = SKB_GSO_UDP_L4 | SKB_GSO_DODGY;
		skb_shinfo(skb)->gso_segs = 0;
	}
	return 0;
}

static netdev_tx_t ptnet_xmit(struct sk_buff *skb, struct net_device *ndev)
{
	struct ptnet *pn = netdev_priv(ndev);
	u16 qi = skb_get_queue_mapping(skb);
	struct ptnet_queue *q = &pn->q[qi < pn->nq ? qi : 0];
	struct netdev_queue *txq = netdev_get_tx_queue(ndev, q->index);
	struct ptnet_ring *r = &q->tx;
	struct virtio_net_hdr_mrg_rxbuf vh = {};
	u32 len, bytes, need, k, off = 0;

	/* The switch takes no frame under the Ethernet minimum. */
	if (eth_skb_pad(skb)) {
		q->txs.dropped++;
		goto publish;
	}
	if (pn->hdr_len) {
		/* Checksum and segmentation go to the host in the header. */
		if (ptnet_hdr_from_skb(skb, &vh.hdr))
			goto error;
		vh.num_buffers = cpu_to_le16(1);
	} else if (skb->ip_summed == CHECKSUM_PARTIAL && skb_checksum_help(skb)) {
		goto drop;
	}
	len = skb->len;
	bytes = pn->hdr_len + len;
	need = DIV_ROUND_UP(bytes, pn->buf_size);
	if (need > NM_MAX_FRAGS)
		goto error;
	if (ring_space(r) < need)
		ptnet_refresh_tail(r, &q->txs);
	if (ring_space(r) < need) {
		/* Stopped below before the ring gets this full: not expected. */
		netif_tx_stop_queue(txq);
		return NETDEV_TX_BUSY;
	}
	/* Every slot's buffer first: nothing is written for a bad one. */
	for (k = 0; k < need; k++) {
		struct nm_slot *slot = &r->slots[(r->head + k) % r->n];

		if (!ptnet_buf(pn, r, READ_ONCE(slot->buf_idx), 0))
			goto error;
	}
	for (k = 0; k < need; k++) {
		struct nm_slot *slot = &r->slots[r->head];
		u8 *buf = ptnet_buf(pn, r, READ_ONCE(slot->buf_idx), 0);
		u32 room = pn->buf_size, at = 0, n;

		if (!buf)
			goto error; /* changed under us: the host's doing */
		if (k == 0 && pn->hdr_len) {
			memcpy(buf, &vh, pn->hdr_len);
			at = pn->hdr_len;
			room -= pn->hdr_len;
		}
		n = min(room, len - off);
		skb_copy_bits(skb, off, buf + at, n);
		off += n;
		WRITE_ONCE(slot->len, at + n);
		WRITE_ONCE(slot->flags, k + 1 < need ? NS_MOREFRAG : 0);
		r->head = ring_next(r->head, r->n);
	}
	u64_stats_update_begin(&q->txs.syncp);
	q->txs.packets++;
	q->txs.bytes += len;
	u64_stats_update_end(&q->txs.syncp);
	dev_consume_skb_any(skb);

	if (ring_space(r) < pn->max_slots && !ptnet_refresh_tail(r, &q->txs)) {
		/*
		 * No room for the longest frame: stop, ask the host for an
		 * interrupt when it frees slots, and look once more (the double
		 * check: the fence pairs with the host's after it publishes
		 * hwtail).
		 */
		netif_tx_stop_queue(txq);
		WRITE_ONCE(r->atok->appl_need_kick, 1);
		smp_mb();
		if (ptnet_refresh_tail(r, &q->txs) && ring_space(r) >= pn->max_slots) {
			WRITE_ONCE(r->atok->appl_need_kick, 0);
			netif_tx_start_queue(txq);
		}
	}
publish:
	if (!netdev_xmit_more() || netif_xmit_stopped(txq))
		ptnet_publish(q, r, &q->txs);
	return NETDEV_TX_OK;
error:
	q->txs.errors++;
	dev_kfree_skb_any(skb);
	goto publish;
drop:
	q->txs.dropped++;
	dev_kfree_skb_any(skb);
	goto publish;
}

/* From NAPI: wakes a stopped TX queue once the host freed slots. */
static void ptnet_tx_wake(struct ptnet_queue *q)
{
	struct netdev_queue *txq = netdev_get_tx_queue(q->pn->ndev, q->index);

	if (!netif_tx_queue_stopped(txq))
		return;
	__netif_tx_lock(txq, smp_processor_id());
	ptnet_refresh_tail(&q->tx, &q->txs);
	if (ring_space(&q->tx) >= q->pn->max_slots) {
		WRITE_ONCE(q->tx.atok->appl_need_kick, 0);
		netif_tx_wake_queue(txq);
	}
	__netif_tx_unlock(txq);
}

/* ---- RX ----------------------------------------------------------------- */

/* Frames up to PTNET_RX_LINEAR bytes are copied into the skb's head; a
 * longer one (a TSO frame, or one on a large MTU) gets its first
 * PTNET_RX_HEAD bytes there (every header the stack and the checksum
 * offsets need) and the rest in pages, so no frame needs more than an
 * order-0 allocation. */
#define PTNET_RX_LINEAR 2048
#define PTNET_RX_HEAD 256

/* Appends len bytes at src to skb: into its head up to head bytes, then
 * into page fragments. False when out of pages or fragments. */
static bool ptnet_rx_put(struct sk_buff *skb, const u8 *src, u32 len, u32 head)
{
	struct skb_shared_info *si = skb_shinfo(skb);

	if (skb_headlen(skb) < head) {
		u32 n = min(len, head - skb_headlen(skb));

		skb_put_data(skb, src, n);
		src += n;
		len -= n;
	}
	while (len) {
		skb_frag_t *f = si->nr_frags ? &si->frags[si->nr_frags - 1] : NULL;
		u32 off = f ? skb_frag_off(f) + skb_frag_size(f) : PAGE_SIZE;
		u32 n;

		if (off == PAGE_SIZE) {
			struct page *page;

			if (si->nr_frags == MAX_SKB_FRAGS)
				return false;
			page = dev_alloc_page();
			if (!page)
				return false;
			skb_add_rx_frag(skb, si->nr_frags, page, 0, 0, PAGE_SIZE);
			f = &si->frags[si->nr_frags - 1];
			off = 0;
		}
		n = min_t(u32, len, PAGE_SIZE - off);
		memcpy(page_address(skb_frag_page(f)) + off, src, n);
		skb_coalesce_rx_frag(skb, si->nr_frags - 1, n, 0);
		src += n;
		len -= n;
	}
	return true;
}

static int ptnet_poll(struct napi_struct *napi, int budget)
{
	struct ptnet_queue *q = container_of(napi, struct ptnet_queue, napi);
	struct ptnet *pn = q->pn;
	struct ptnet_ring *r = &q->rx;
	u64 packets = 0, bytes = 0;
	bool waiting = false;
	int work = 0;

	ptnet_tx_wake(q);
	ptnet_refresh_tail(r, &q->rxs);
	while (work < budget && r->head != r->tail) {
		u32 avail = ring_dist(r->head, r->tail, r->n);
		struct virtio_net_hdr_mrg_rxbuf vh = {};
		u32 nfr = 0, total = 0, k, skip, head;
		bool bad = false, complete = false;
		struct sk_buff *skb;

		/* The frame's chain, each slot read once. */
		while (nfr < avail && nfr < NM_MAX_FRAGS) {
			struct nm_slot *slot = &r->slots[(r->head + nfr) % r->n];
			u16 flags = READ_ONCE(slot->flags);

			q->chain[nfr].idx = READ_ONCE(slot->buf_idx);
			q->chain[nfr].len = READ_ONCE(slot->len);
			if (!ptnet_buf(pn, r, q->chain[nfr].idx, q->chain[nfr].len))
				bad = true;
			total += q->chain[nfr].len;
			nfr++;
			if (!(flags & NS_MOREFRAG)) {
				complete = true;
				break;
			}
		}
		if (!complete) {
			if (nfr < NM_MAX_FRAGS) {
				/* Its last slot is not published yet: the host's
				 * next publish (and interrupt) brings it. */
				waiting = true;
				break;
			}
			bad = true; /* longer than any frame: dropped whole */
		}
		r->head = (r->head + nfr) % r->n;
		if (bad || q->chain[0].len < pn->hdr_len || total < pn->hdr_len + ETH_HLEN ||
		    total > pn->frame_max) {
			q->rxs.errors++;
			continue;
		}
		head = total - pn->hdr_len <= PTNET_RX_LINEAR ? total - pn->hdr_len : PTNET_RX_HEAD;
		skb = napi_alloc_skb(napi, head);
		if (!skb) {
			q->rxs.dropped++;
			continue;
		}
		/* One copy out of shared memory; only the copy is parsed. */
		for (k = 0; k < nfr && skb; k++) {
			u8 *buf = ptnet_buf(pn, r, q->chain[k].idx, q->chain[k].len);

			skip = 0;
			if (k == 0 && pn->hdr_len) {
				memcpy(&vh, buf, pn->hdr_len);
				skip = pn->hdr_len;
			}
			if (!ptnet_rx_put(skb, buf + skip, q->chain[k].len - skip, head)) {
				dev_kfree_skb_any(skb);
				skb = NULL;
			}
		}
		if (!skb) {
			q->rxs.dropped++;
			continue;
		}
		if (pn->hdr_len) {
			if (vh.hdr.flags & VIRTIO_NET_HDR_F_DATA_VALID)
				skb->ip_summed = CHECKSUM_UNNECESSARY;
			/* Checked by the kernel: offsets within the frame, known types. */
			if (ptnet_hdr_to_skb(skb, &vh.hdr)) {
				q->rxs.errors++;
				dev_kfree_skb_any(skb);
				continue;
			}
		}
		skb->protocol = eth_type_trans(skb, pn->ndev);
		packets++;
		bytes += skb->len + ETH_HLEN;
		napi_gro_receive(napi, skb);
		work++;
	}
	u64_stats_update_begin(&q->rxs.syncp);
	q->rxs.packets += packets;
	q->rxs.bytes += bytes;
	u64_stats_update_end(&q->rxs.syncp);
	/* The slots read go back to the host. */
	if (READ_ONCE(r->atok->head) != r->head)
		ptnet_publish(q, r, &q->rxs);

	if (work < budget && napi_complete_done(napi, work)) {
		/* Drained: interrupts on, and the double check. */
		WRITE_ONCE(r->atok->appl_need_kick, 1);
		smp_mb();
		if (ptnet_refresh_tail(r, &q->rxs) || (r->head != r->tail && !waiting)) {
			WRITE_ONCE(r->atok->appl_need_kick, 0);
			napi_schedule(napi);
		}
	}
	return work;
}

static irqreturn_t ptnet_irq(int irq, void *data)
{
	struct ptnet_queue *q = data;

	rspt_resume_answer(q->pn->d);
	q->rxs.irqs++;
	/* No more interrupts while NAPI runs: it turns them on when drained. */
	WRITE_ONCE(q->rx.atok->appl_need_kick, 0);
	napi_schedule_irqoff(&q->napi);
	return IRQ_HANDLED;
}

/* ---- carrier -------------------------------------------------------------- */

/*
 * Nothing in the device says that the host side is gone (a daemon killed
 * with -9 leaves the region mapped and the doorbell writable), so the
 * carrier follows what can be seen: frames published on a TX ring that the
 * host has not taken (its hwcur has not moved) for PTNET_STALL_TICKS ticks
 * mean carrier off; hwcur moving again means carrier on. An idle interface
 * keeps its carrier: with nothing sent, there is nothing to go by.
 */
#define PTNET_WATCH_PERIOD (HZ / 2)
#define PTNET_STALL_TICKS 4

static void ptnet_watch(struct work_struct *work)
{
	struct ptnet *pn = container_of(to_delayed_work(work), struct ptnet, watch);
	bool stalled = false;
	unsigned int i;

	for (i = 0; i < pn->nq; i++) {
		struct ptnet_queue *q = &pn->q[i];
		u32 hwcur = READ_ONCE(q->tx.ktoa->hwcur);
		bool waiting = READ_ONCE(q->tx.atok->head) != hwcur;

		if (waiting && hwcur == q->watch_hwcur)
			q->stalled_ticks++;
		else
			q->stalled_ticks = 0;
		q->watch_hwcur = hwcur;
		if (q->stalled_ticks >= PTNET_STALL_TICKS)
			stalled = true;
	}
	if (stalled && netif_carrier_ok(pn->ndev)) {
		netdev_warn(pn->ndev, "the host side has taken no frame for %u ms: carrier off\n",
			    jiffies_to_msecs(PTNET_STALL_TICKS * PTNET_WATCH_PERIOD));
		netif_carrier_off(pn->ndev);
	} else if (!stalled && !netif_carrier_ok(pn->ndev)) {
		netdev_info(pn->ndev, "the host side takes frames again: carrier on\n");
		netif_carrier_on(pn->ndev);
	}
	schedule_delayed_work(&pn->watch, PTNET_WATCH_PERIOD);
}

/* ---- the interface ------------------------------------------------------ */

/*
 * Picks up head and tail from the CSB (the port keeps them across guests
 * and driver loads). The head we published last stays ours if it lies
 * between the host's hwcur and hwtail (slots published before an unload
 * that the host has not taken yet are not taken back); else hwcur.
 */
static void ptnet_ring_start(struct ptnet_ring *r, bool tx)
{
	u32 hwcur = READ_ONCE(r->ktoa->hwcur);
	u32 hwtail = smp_load_acquire(&r->ktoa->hwtail);
	u32 head = READ_ONCE(r->atok->head);

	if (hwcur < r->n && hwtail < r->n) {
		bool ours = head < r->n && ring_dist(hwcur, head, r->n) <= ring_dist(hwcur, hwtail, r->n);

		r->head = ours ? head : hwcur;
		r->tail = hwtail;
	} else {
		r->head = 0;
		r->tail = tx ? r->n - 1 : 0;
	}
	WRITE_ONCE(r->atok->cur, r->head);
	smp_store_release(&r->atok->head, r->head);
}

static int ptnet_open(struct net_device *ndev)
{
	struct ptnet *pn = netdev_priv(ndev);
	unsigned int i;

	for (i = 0; i < pn->nq; i++) {
		struct ptnet_queue *q = &pn->q[i];

		ptnet_ring_start(&q->tx, true);
		ptnet_ring_start(&q->rx, false);
		WRITE_ONCE(q->tx.atok->appl_need_kick, 0);
		WRITE_ONCE(q->rx.atok->appl_need_kick, 1);
		napi_enable(&q->napi);
		/* Frames that came while the interface was down. */
		napi_schedule(&q->napi);
	}
	netif_tx_start_all_queues(ndev);
	netif_carrier_on(ndev);
	for (i = 0; i < pn->nq; i++) {
		pn->q[i].watch_hwcur = READ_ONCE(pn->q[i].tx.ktoa->hwcur);
		pn->q[i].stalled_ticks = 0;
	}
	schedule_delayed_work(&pn->watch, PTNET_WATCH_PERIOD);
	return 0;
}

static int ptnet_stop(struct net_device *ndev)
{
	struct ptnet *pn = netdev_priv(ndev);
	unsigned int i;

	cancel_delayed_work_sync(&pn->watch);
	netif_carrier_off(ndev);
	netif_tx_disable(ndev);
	for (i = 0; i < pn->nq; i++) {
		struct ptnet_queue *q = &pn->q[i];

		WRITE_ONCE(q->rx.atok->appl_need_kick, 0);
		WRITE_ONCE(q->tx.atok->appl_need_kick, 0);
		napi_disable(&q->napi);
	}
	return 0;
}

static void ptnet_stats_read(struct ptnet_stats *s, u64 *packets, u64 *bytes)
{
	unsigned int start;

	do {
		start = u64_stats_fetch_begin(&s->syncp);
		*packets = s->packets;
		*bytes = s->bytes;
	} while (u64_stats_fetch_retry(&s->syncp, start));
}

static void ptnet_get_stats64(struct net_device *ndev, struct rtnl_link_stats64 *st)
{
	struct ptnet *pn = netdev_priv(ndev);
	unsigned int i;

	for (i = 0; i < pn->nq; i++) {
		struct ptnet_queue *q = &pn->q[i];
		u64 p, b;

		ptnet_stats_read(&q->txs, &p, &b);
		st->tx_packets += p;
		st->tx_bytes += b;
		ptnet_stats_read(&q->rxs, &p, &b);
		st->rx_packets += p;
		st->rx_bytes += b;
		/* Plain reads of counters only their own context writes. */
		st->tx_errors += READ_ONCE(q->txs.errors);
		st->tx_dropped += READ_ONCE(q->txs.dropped);
		st->rx_errors += READ_ONCE(q->rxs.errors);
		st->rx_dropped += READ_ONCE(q->rxs.dropped);
	}
}

static const struct net_device_ops ptnet_ops = {
	.ndo_open = ptnet_open,
	.ndo_stop = ptnet_stop,
	.ndo_start_xmit = ptnet_xmit,
	.ndo_get_stats64 = ptnet_get_stats64,
	.ndo_set_mac_address = eth_mac_addr,
	.ndo_validate_addr = eth_validate_addr,
};

/* ---- ethtool ------------------------------------------------------------ */

static const char ptnet_stat_names[][ETH_GSTRING_LEN] = {
	"tx_packets", "tx_bytes", "tx_errors", "tx_dropped", "tx_kicks", "tx_head", "tx_tail",
	"rx_packets", "rx_bytes", "rx_errors", "rx_dropped", "rx_kicks", "rx_irqs", "rx_head",
	"rx_tail",
};

#define PTNET_QSTATS ARRAY_SIZE(ptnet_stat_names)

static void ptnet_get_drvinfo(struct net_device *ndev, struct ethtool_drvinfo *info)
{
	struct ptnet *pn = netdev_priv(ndev);

	strscpy(info->driver, DRV_NAME, sizeof(info->driver));
	strscpy(info->bus_info, pci_name(pn->d->pdev), sizeof(info->bus_info));
}

static int ptnet_get_sset_count(struct net_device *ndev, int sset)
{
	struct ptnet *pn = netdev_priv(ndev);

	return sset == ETH_SS_STATS ? pn->nq * PTNET_QSTATS : -EOPNOTSUPP;
}

static void ptnet_get_strings(struct net_device *ndev, u32 sset, u8 *data)
{
	struct ptnet *pn = netdev_priv(ndev);
	unsigned int i, k;

	if (sset != ETH_SS_STATS)
		return;
	for (i = 0; i < pn->nq; i++)
		for (k = 0; k < PTNET_QSTATS; k++) {
			snprintf(data, ETH_GSTRING_LEN, "ring%u_%s", i, ptnet_stat_names[k]);
			data += ETH_GSTRING_LEN;
		}
}

static void ptnet_get_ethtool_stats(struct net_device *ndev, struct ethtool_stats *es, u64 *data)
{
	struct ptnet *pn = netdev_priv(ndev);
	unsigned int i;

	for (i = 0; i < pn->nq; i++) {
		struct ptnet_queue *q = &pn->q[i];
		u64 p, b;

		ptnet_stats_read(&q->txs, &p, &b);
		*data++ = p;
		*data++ = b;
		*data++ = READ_ONCE(q->txs.errors);
		*data++ = READ_ONCE(q->txs.dropped);
		*data++ = READ_ONCE(q->txs.kicks);
		*data++ = READ_ONCE(q->tx.head);
		*data++ = READ_ONCE(q->tx.tail);
		ptnet_stats_read(&q->rxs, &p, &b);
		*data++ = p;
		*data++ = b;
		*data++ = READ_ONCE(q->rxs.errors);
		*data++ = READ_ONCE(q->rxs.dropped);
		*data++ = READ_ONCE(q->rxs.kicks);
		*data++ = READ_ONCE(q->rxs.irqs);
		*data++ = READ_ONCE(q->rx.head);
		*data++ = READ_ONCE(q->rx.tail);
	}
}

static const struct ethtool_ops ptnet_ethtool_ops = {
	.get_drvinfo = ptnet_get_drvinfo,
	.get_link = ethtool_op_get_link,
	.get_sset_count = ptnet_get_sset_count,
	.get_strings = ptnet_get_strings,
	.get_ethtool_stats = ptnet_get_ethtool_stats,
};

/* ---- attach and detach -------------------------------------------------- */

static u32 rd32(const u8 *p)
{
	return le32_to_cpu(*(const __le32 *)p);
}

static s64 rd64(const u8 *p)
{
	return (s64)le64_to_cpu(*(const __le64 *)p);
}

/*
 * Finds ring i of the guest's end (tx: the i-th TX ring, else the i-th RX
 * ring) and its CSB entry, checking that its header, slots, buffers and
 * CSB lie within the region. Returns 0 or -EINVAL with a line saying why.
 */
static int ptnet_find_ring(struct ptnet *pn, unsigned int end, bool tx, unsigned int i,
			   struct ptnet_ring *r)
{
	struct rspt_dev *d = pn->d;
	const struct rspt_region_header *h = &d->hdr;
	u8 *mem = d->mem;
	u64 size = le64_to_cpu(h->size);
	u64 nifp = le64_to_cpu(h->nifp_ofs[end]);
	u64 csb = le64_to_cpu(h->csb_ofs[end]);
	u32 ntx, nrx, nhtx, entries, at;
	s64 ring_rel, buf_rel;
	u64 ring, slots_end, bufs, bufs_end;

	if (nifp > size || size - nifp < NM_IF_RING_OFS)
		goto bad;
	ntx = rd32(mem + nifp + NM_IF_TX_RINGS);
	nrx = rd32(mem + nifp + NM_IF_RX_RINGS);
	nhtx = rd32(mem + nifp + NM_IF_HOST_TX_RINGS);
	if (ntx > 64 || nrx > 64 || nhtx > 64 || i >= (tx ? ntx : nrx))
		goto bad;
	at = tx ? i : ntx + nhtx + i;
	if ((size - nifp - NM_IF_RING_OFS) / 8 <= at)
		goto bad;
	ring_rel = rd64(mem + nifp + NM_IF_RING_OFS + 8 * at);
	if (ring_rel <= 0 || (u64)ring_rel > size - nifp)
		goto bad;
	ring = nifp + ring_rel;
	if (size - ring < NM_RING_SLOTS)
		goto bad;
	r->n = rd32(mem + ring + NM_RING_NUM_SLOTS);
	if (r->n < 2 || r->n > NM_MAX_SLOTS || rd32(mem + ring + NM_RING_BUF_SIZE) != pn->buf_size)
		goto bad;
	slots_end = ring + NM_RING_SLOTS + (u64)r->n * sizeof(struct nm_slot);
	if (slots_end > size)
		goto bad;
	buf_rel = rd64(mem + ring + NM_RING_BUF_OFS);
	if (buf_rel < -(s64)ring || buf_rel > (s64)size)
		goto bad;
	bufs = ring + buf_rel;
	bufs_end = bufs + (u64)pn->nbufs * pn->buf_size;
	if (bufs > size || bufs_end > size)
		goto bad;
	entries = le32_to_cpu(h->tx_rings) + le32_to_cpu(h->rx_rings);
	if (csb > size || (size - csb) / (2 * 64) < entries)
		goto bad;
	at = tx ? i : le32_to_cpu(h->tx_rings) + i;
	if (at >= entries)
		goto bad;
	r->slots = (struct nm_slot *)(mem + ring + NM_RING_SLOTS);
	r->bufs = mem + bufs;
	r->atok = (struct csb_atok *)(mem + csb) + at;
	r->ktoa = (struct csb_ktoa *)(mem + csb + (u64)entries * 64) + at;
	return 0;
bad:
	dev_err(&d->pdev->dev, "%s ring %u of end %u is not laid out within the region\n",
		tx ? "TX" : "RX", i, end);
	return -EINVAL;
}

static void ptnet_free_irqs(struct ptnet *pn, unsigned int n)
{
	while (n--) {
		unsigned int irq = pci_irq_vector(pn->d->pdev, n);

		irq_update_affinity_hint(irq, NULL);
		free_irq(irq, &pn->q[n]);
	}
}

/* Queue pair i belongs to one CPU, spread over the device's node as NIC
 * drivers do: its interrupt is steered there (a hint irqbalance follows)
 * and that CPU's sockets send on it (XPS), so a flow stays on one queue
 * and a queue's lock stays on one CPU. More queues than CPUs share CPUs. */
static void ptnet_spread(struct ptnet *pn)
{
	int node = dev_to_node(&pn->d->pdev->dev);
	unsigned int i;

	for (i = 0; i < pn->nq; i++) {
		const struct cpumask *cpu = cpumask_of(cpumask_local_spread(i, node));

		irq_set_affinity_and_hint(pci_irq_vector(pn->d->pdev, i), cpu);
		netif_set_xps_queue(pn->ndev, cpu, i);
	}
}

int ptnet_attach(struct rspt_dev *d)
{
	const struct rspt_region_header *h = &d->hdr;
	u32 ends = le32_to_cpu(h->ends);
	/* Peer 0 is end 0 of a migratable switch port (rspt.h). */
	u32 end = d->ivposition ? d->ivposition - 1 : 0;
	unsigned int nq, i;
	struct net_device *ndev;
	struct ptnet *pn;
	int err;

	if (ends < 1 || ends > 2 || end >= ends || (ends == 2 && !d->ivposition)) {
		dev_err(&d->pdev->dev, "peer id %u is no end of a region with %u end(s)\n",
			d->ivposition, ends);
		return -ENODEV;
	}
	nq = min3(le32_to_cpu(h->tx_rings), le32_to_cpu(h->rx_rings), d->vectors);
	if (nq < 1) {
		dev_err(&d->pdev->dev, "the region has no ring pair for an interface\n");
		return -ENODEV;
	}
	ndev = alloc_etherdev_mqs(struct_size(pn, q, nq), nq, nq);
	if (!ndev)
		return -ENOMEM;
	SET_NETDEV_DEV(ndev, &d->pdev->dev);
	pn = netdev_priv(ndev);
	pn->ndev = ndev;
	pn->d = d;
	pn->nq = nq;
	INIT_DELAYED_WORK(&pn->watch, ptnet_watch);
	pn->buf_size = le32_to_cpu(h->buf_size);
	pn->nbufs = le32_to_cpu(h->nbufs);
	/* A switch port's doorbell goes to the daemon; a pipe end's to the other end. */
	pn->kick_peer = ends == 2 ? 1 + (1 - end) :
		d->ivposition ? RSPT_PEER_HOST : RSPT_PEER_HOST_MIGRATABLE;
	if (pn->buf_size < ETH_ZLEN || pn->buf_size > 65536) {
		dev_err(&d->pdev->dev, "buffers of %u bytes cannot carry frames\n", pn->buf_size);
		err = -ENODEV;
		goto err_free;
	}
	pn->hdr_len = le32_to_cpu(h->vnet_hdr_len);
	if (pn->hdr_len != 0 && pn->hdr_len != PTNET_VNET_HDR_LEN) {
		dev_err(&d->pdev->dev, "frames with a %u-byte header: this driver knows 0 or %zu\n",
			pn->hdr_len, PTNET_VNET_HDR_LEN);
		err = -ENODEV;
		goto err_free;
	}
	for (i = 0; i < nq; i++) {
		struct ptnet_queue *q = &pn->q[i];

		q->pn = pn;
		q->index = i;
		u64_stats_init(&q->txs.syncp);
		u64_stats_init(&q->rxs.syncp);
		err = ptnet_find_ring(pn, end, true, i, &q->tx);
		if (!err)
			err = ptnet_find_ring(pn, end, false, i, &q->rx);
		if (err)
			goto err_free;
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 1, 0)
		netif_napi_add(ndev, &q->napi, ptnet_poll);
#else
		netif_napi_add(ndev, &q->napi, ptnet_poll, NAPI_POLL_WEIGHT);
#endif
	}

	strscpy(ndev->name, "ptnet%d", sizeof(ndev->name));
	ndev->netdev_ops = &ptnet_ops;
	ndev->ethtool_ops = &ptnet_ethtool_ops;
	ndev->min_mtu = ETH_MIN_MTU;
	/* A frame is a chain of at most NM_MAX_FRAGS slots. */
	ndev->max_mtu = min_t(u64, (u64)NM_MAX_FRAGS * pn->buf_size - pn->hdr_len,
			      ETH_MAX_MTU + ETH_HLEN) - ETH_HLEN - VLAN_HLEN;
	ndev->mtu = min_t(u32, ETH_DATA_LEN, ndev->max_mtu);
	ndev->features = NETIF_F_SG;
	if (pn->hdr_len) {
		/* Checksums and TCP and UDP segmentation travel in the header. */
		ndev->features |= NETIF_F_HW_CSUM | NETIF_F_RXCSUM;
		if ((u64)NM_MAX_FRAGS * pn->buf_size >= pn->hdr_len + PTNET_GSO_MAX + ETH_HLEN + VLAN_HLEN)
			ndev->features |= NETIF_F_TSO | NETIF_F_TSO6 | NETIF_F_TSO_ECN |
					  NETIF_F_GSO_UDP_L4;
	}
#if LINUX_VERSION_CODE >= KERNEL_VERSION(5, 19, 0)
	netif_set_tso_max_size(ndev, PTNET_GSO_MAX);
#endif
	ndev->hw_features = ndev->features;
	/* The longest frame either way: TSO's (a GSO frame from the host on a
	 * --vnet-hdr port, too), or the largest MTU's. */
	pn->frame_max = pn->hdr_len + max_t(u32, pn->hdr_len ? PTNET_GSO_MAX : 0, ndev->max_mtu) +
			ETH_HLEN + VLAN_HLEN;
	pn->max_slots = DIV_ROUND_UP(pn->hdr_len + max_t(u32, ndev->features & NETIF_F_TSO ?
							  PTNET_GSO_MAX : 0, ndev->max_mtu) +
				     ETH_HLEN + VLAN_HLEN, pn->buf_size);
	ndev->priv_flags |= IFF_LIVE_ADDR_CHANGE;
	eth_hw_addr_random(ndev);
	netif_carrier_off(ndev);

	for (i = 0; i < nq; i++) {
		struct ptnet_queue *q = &pn->q[i];

		snprintf(q->irq_name, sizeof(q->irq_name), "%s-q%u", d->name, i);
		err = request_irq(pci_irq_vector(d->pdev, i), ptnet_irq, 0, q->irq_name, q);
		if (err) {
			dev_err(&d->pdev->dev, "cannot request the IRQ of vector %u: %d\n", i, err);
			ptnet_free_irqs(pn, i);
			goto err_napi;
		}
	}
	d->net = pn;
	err = register_netdev(ndev);
	if (err) {
		dev_err(&d->pdev->dev, "cannot register the interface: %d\n", err);
		d->net = NULL;
		goto err_irqs;
	}
	ptnet_spread(pn);
	dev_info(&d->pdev->dev, "%s: %u queue pair(s) on the rings of peer id %u, MTU up to %u, %s\n",
		 ndev->name, nq, d->ivposition, ndev->max_mtu,
		 pn->hdr_len ? "checksum, TSO and USO offloads in a virtio-net header" : "no offloads");
	return 0;

err_irqs:
	ptnet_free_irqs(pn, nq);
err_napi:
err_free:
	for (i = 0; i < nq; i++)
		if (pn->q[i].napi.poll)
			netif_napi_del(&pn->q[i].napi);
	free_netdev(ndev);
	return err;
}

void ptnet_detach(struct rspt_dev *d)
{
	struct ptnet *pn = d->net;
	struct net_device *ndev = pn->ndev;
	unsigned int i;

	/* Stops the interface (ptnet_stop): no xmit, no NAPI after this. */
	unregister_netdev(ndev);
	ptnet_free_irqs(pn, pn->nq);
	for (i = 0; i < pn->nq; i++)
		netif_napi_del(&pn->q[i].napi);
	d->net = NULL;
	free_netdev(ndev);
}
