/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * shm-segment.c - the shm back end's lane segment: its layout, creating
 * it on the receiver, mapping and checking it on the sender.
 *
 * The segment (sealed against resizing, so a peer can't make us SIGBUS):
 *
 *   0             struct shm_ctrl, then the slots of both rings (pages)
 *   status_addr   block_count status bytes, padded to 64, then the 32-byte
 *                 pause bitmap (status_addr + pause_offset) and the 32-byte
 *                 refused bitmap (status_addr + refused_offset), then
 *                 the 256-byte key-unit area (status_addr +
 *                 key_unit_offset) where the lane has one
 *   blocks_addr   block_count * block_size bytes, page aligned
 *
 * Remote addresses are offsets into the segment; the two rkeys are random
 * per lane.  Everything the sender reads from the receiver (private data,
 * control header, ring counters) is bounds-checked before use, and the
 * layout is copied once so a later change by the peer can't move us.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"
#include "transport/shm/shm-internal.h"

static uint32_t shm_pow2_at_least(uint32_t n)
{
  uint32_t p = 1;
  while (p < n)
    p <<= 1;
  return p;
}

static uint64_t shm_round_up(uint64_t n, uint64_t to)
{
  return (n + to - 1) / to * to;
}

/* A nonzero key nobody can guess from the previous one: splitmix64 over
 * time, pid and a counter.  Keys catch stale or crossed lanes, they are not
 * a security boundary (the peer holds the whole segment anyway). */
static uint32_t shm_make_key(void)
{
  static atomic_uint_fast64_t counter;
  uint64_t x = shm_now_ns() ^ ((uint64_t)getpid() << 32) ^
               atomic_fetch_add(&counter, 0x9e3779b97f4a7c15ull);
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return (uint32_t)x ? (uint32_t)x : 1;
}

/* Does [off, +len) lie in [lo, hi)? */
static bool shm_span_ok(uint64_t off, uint64_t len, uint64_t lo, uint64_t hi)
{
  return off >= lo && off <= hi && len <= hi - off;
}

/* Maps the receiver's segment and checks, before trusting any of it, that
 * the control area, the rings and both regions lie inside it (rule 8).  The
 * layout is copied into c, never read back from the segment. */
int sbr__shm_map_lane(struct sbr__conn *c, int memfd,
                      const struct sbr__lane_desc *lane, char *errbuf,
                      size_t errlen)
{
  struct stat st;
  if (fstat(memfd, &st) < 0) {
    int err = -errno;
    sbr__errf(errbuf, errlen, "shm: fstat of the lane: %s", strerror(-err));
    return err;
  }
  /* Without these seals the receiver could shrink the file under us and
   * turn our next write into SIGBUS. */
  int seals = fcntl(memfd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
    sbr__errf(errbuf, errlen, "shm: the receiver's lane is not sealed");
    return -EPROTO;
  }
  if ((uint64_t)st.st_size < sizeof(struct shm_ctrl)) {
    sbr__errf(errbuf, errlen, "shm: the receiver's lane is too small");
    return -EPROTO;
  }
  uint64_t size = (uint64_t)st.st_size;
  void *map =
      mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (map == MAP_FAILED) {
    int err = -errno;
    sbr__errf(errbuf, errlen, "shm: mapping the lane (%" PRIu64 " bytes): %s",
              size, strerror(-err));
    return err;
  }
  const struct shm_ctrl *ctrl = map;
  uint32_t ctrl_size = ctrl->ctrl_size;
  uint32_t n_rx = ctrl->to_sender.slot_count;
  uint32_t n_tx = ctrl->to_receiver.slot_count;
  uint32_t off_rx = ctrl->to_sender.slot_offset;
  uint32_t off_tx = ctrl->to_receiver.slot_offset;
  uint64_t blocks_len = (uint64_t)lane->block_count * lane->block_size;
  uint64_t status_len = sbr__lane_status_len(lane);
  bool ok = ctrl->magic == SHM_CTRL_MAGIC &&
            ctrl->version == SHM_CTRL_VERSION && ctrl_size <= size && n_rx &&
            !(n_rx & (n_rx - 1)) && n_rx <= SHM_MAX_QUEUE && n_tx &&
            !(n_tx & (n_tx - 1)) && n_tx <= SHM_MAX_QUEUE &&
            off_rx % alignof(struct shm_msg) == 0 &&
            off_tx % alignof(struct shm_msg) == 0 &&
            shm_span_ok(off_rx, (uint64_t)n_rx * sizeof(struct shm_msg),
                        sizeof *ctrl, ctrl_size) &&
            shm_span_ok(off_tx, (uint64_t)n_tx * sizeof(struct shm_msg),
                        sizeof *ctrl, ctrl_size) &&
            shm_span_ok(lane->status_addr, status_len, ctrl_size, size) &&
            shm_span_ok(lane->blocks_addr, blocks_len, ctrl_size, size) &&
            (lane->blocks_addr >= lane->status_addr + status_len ||
             lane->status_addr >= lane->blocks_addr + blocks_len) &&
            lane->blocks_rkey != lane->status_rkey;
  if (!ok) {
    munmap(map, (size_t)size);
    sbr__errf(errbuf, errlen,
              "shm: the receiver's lane does not fit its "
              "segment; refusing it");
    return -EPROTO;
  }
  c->seg = map;
  c->seg_len = (size_t)size;
  struct shm_ctrl *wctrl = map;
  c->tx = &wctrl->to_receiver;
  c->tx_slots = (struct shm_msg *)(c->seg + off_tx);
  c->tx_mask = n_tx - 1;
  c->rx = &wctrl->to_sender;
  c->rx_slots = (struct shm_msg *)(c->seg + off_rx);
  c->rx_mask = n_rx - 1;
  c->rx_wake = &wctrl->rx_wake;
  /* Start from the counters as they are: fresh from accept, all zero. */
  c->tx_head = atomic_load(&c->tx->head);
  c->rx_tail = atomic_load(&c->rx->tail);
  c->blocks = (struct shm_region){.off = lane->blocks_addr,
                                  .len = blocks_len,
                                  .rkey = lane->blocks_rkey,
                                  .read_ok = false,
                                  .write_len = blocks_len,
                                  .status = false};
  c->status = (struct shm_region){.off = lane->status_addr,
                                  .len = status_len,
                                  .rkey = lane->status_rkey,
                                  .read_ok = true,
                                  .write_len = lane->block_count,
                                  .status = true};
  return 0;
}

/* Creates, sizes, seals and maps the segment and lays out the control area;
 * fills the lane's addresses and keys.  Returns the memfd (the caller sends
 * it and closes it) or negative errno. */
int sbr__shm_segment_create(struct sbr__conn *c,
                            const struct sbr__queue_caps *caps,
                            struct sbr__lane_desc *lane)
{
  uint32_t n_rx = shm_pow2_at_least(caps->max_recv_wr > SHM_RING_MIN_SLOTS
                                        ? caps->max_recv_wr
                                        : SHM_RING_MIN_SLOTS);
  uint32_t n_tx = SHM_TO_SENDER_SLOTS;
  uint64_t off_rx = shm_round_up(sizeof(struct shm_ctrl), 64);
  uint64_t off_tx = off_rx + (uint64_t)n_rx * sizeof(struct shm_msg);
  uint64_t ctrl_size =
      shm_round_up(off_tx + (uint64_t)n_tx * sizeof(struct shm_msg), SHM_PAGE);
  uint64_t status_off = ctrl_size;
  uint64_t blocks_off =
      shm_round_up(status_off + sbr__lane_status_len(lane), SHM_PAGE);
  uint64_t size = blocks_off + (uint64_t)lane->block_count * lane->block_size;

  int err;
  int fd = memfd_create("sbr-shm-lane", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return -errno;
  if (ftruncate(fd, (off_t)size) < 0)
    goto out_close_fd;
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
    goto out_close_fd;
  void *map =
      mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED)
    goto out_close_fd;
  c->seg = map;
  c->seg_len = (size_t)size;
  /* Before the first touch (the control area's, below): huge pages for a
   * large lane, and a NUMA node if the config names one (no NIC here to
   * take one from).  The policy belongs to the memfd's pages, so the
   * sender's own mappings of them follow it. */
  struct sbr__fabric defaults;
  const struct sbr__fabric *f = caps->fabric;
  if (!f) {
    sbr__fabric_defaults(&defaults);
    f = &defaults;
  }
  sbr__fabric_place(map, (size_t)size, f->huge_pages,
                    sbr__fabric_numa_node(f->numa_node, -1), "shm lane", NULL,
                    NULL);

  /* A fresh memfd reads as zeros: counters start at 0, status bytes empty. */
  struct shm_ctrl *ctrl = map;
  ctrl->magic = SHM_CTRL_MAGIC;
  ctrl->version = SHM_CTRL_VERSION;
  ctrl->ctrl_size = (uint32_t)ctrl_size;
  ctrl->to_receiver.slot_count = n_rx;
  ctrl->to_receiver.slot_offset = (uint32_t)off_rx;
  ctrl->to_sender.slot_count = n_tx;
  ctrl->to_sender.slot_offset = (uint32_t)off_tx;
  c->rx = &ctrl->to_receiver;
  c->rx_slots = (struct shm_msg *)(c->seg + off_rx);
  c->rx_mask = n_rx - 1;
  c->tx = &ctrl->to_sender;
  c->tx_slots = (struct shm_msg *)(c->seg + off_tx);
  c->tx_mask = n_tx - 1;
  c->rx_wake = &ctrl->rx_wake;

  lane->status_addr = status_off;
  lane->blocks_addr = blocks_off;
  lane->blocks_rkey = shm_make_key();
  do
    lane->status_rkey = shm_make_key();
  while (lane->status_rkey == lane->blocks_rkey);
  return fd;

out_close_fd:
  err = -errno;
  close(fd);
  return err;
}

/* A second mapping of the blocks region, the sender's own: a producer
 * holding a block of it may still write there after the conn closed (the
 * bytes land in a segment nobody reads), so it can't be a view into
 * c->seg, which close unmaps.  The region was checked to lie inside the
 * sealed segment (sbr__shm_map_lane), so no access through it can fault. */
int sbr__shm_map_blocks(struct sbr__conn *c, uint8_t **base, size_t *len)
{
  if (!c || !base || !len || c->role != SHM_SENDER || c->memfd < 0 ||
      c->blocks.len == 0)
    return -EINVAL;
  /* mmap wants an offset aligned to the system's page (which may be
   * larger than SHM_PAGE); a receiver may place the region anywhere. */
  uint64_t lead = c->blocks.off % (uint64_t)sysconf(_SC_PAGESIZE);
  size_t map_len = (size_t)(lead + c->blocks.len);
  void *map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, c->memfd,
                   (off_t)(c->blocks.off - lead));
  if (map == MAP_FAILED)
    return -errno;
  /* The sender's producers are often the first to touch a block: a
   * shmem page takes its size from the mapping it is first touched
   * through, so this one asks for huge pages too (a hint: the receiver's
   * huge_pages doesn't travel). */
  sbr__fabric_place(map, map_len, true, -1, "shm lane (sender)", NULL, NULL);
  *base = (uint8_t *)map + lead;
  *len = (size_t)c->blocks.len;
  return 0;
}

void sbr__shm_unmap_blocks(uint8_t *base, size_t len)
{
  if (!base)
    return;
  uintptr_t lead = (uintptr_t)base % (uintptr_t)sysconf(_SC_PAGESIZE);
  munmap(base - lead, len + lead);
}
