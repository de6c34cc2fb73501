/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * receiver-status-byte.c - the passive half of the status-byte mechanism.
 *
 * Nothing is posted and nothing is sent: the receiver polls its own status
 * bytes.  1 means the sender's chained WRITEs have landed (rule 1 orders the
 * data before the byte); the receiver stores 2 while the application keeps a
 * block and 0 when it is done (rule 4).
 */
#include "engine/receiver-internal.h"

static int sb_start(struct sbr__lane *lane)
{
  (void)lane;
  return 0;
}

static void sb_stop(struct sbr__lane *lane)
{
  (void)lane;
}

static int sb_scan(struct sbr__lane *lane)
{
  volatile uint8_t *status = lane->mem.status;
  for (uint32_t i = 0; i < lane->desc.block_count; i++) {
    /* Most bytes are 0 (or 2): look at the contiguous status array first
     * and at the block's state only for a 1.  Rule 2: acquire load of the
     * byte, then a from-device barrier before the block is read. */
    if (__atomic_load_n(&status[i], __ATOMIC_ACQUIRE) != SBR__STATUS_DATA)
      continue;
    /* State, then status again: release stores the status 0 before the
     * state FREE, so a 1 read after seeing FREE is the sender's new block,
     * never the old block's 1 that a release in progress is clearing. */
    if (__atomic_load_n(&lane->blocks[i].state, __ATOMIC_ACQUIRE) !=
            SBR__RECV_FREE ||
        __atomic_load_n(&status[i], __ATOMIC_ACQUIRE) != SBR__STATUS_DATA)
      continue;
    sbr__from_device_barrier();
    sbr__lane_arrived(lane, i);
  }
  return 0;
}

static bool sb_landed(struct sbr__lane *lane)
{
  volatile uint8_t *status = lane->mem.status;
  /* sb_scan's test without its side effects; the acquire loads follow the
   * caller's full fence (shm-internal.h, struct shm_wake, says why).  A
   * block the backstop leaves at 1 (stale_since_ns) is no news: counting
   * it would keep the receiver from sleeping for up to the bound. */
  for (uint32_t i = 0; i < lane->desc.block_count; i++)
    if (__atomic_load_n(&status[i], __ATOMIC_ACQUIRE) == SBR__STATUS_DATA &&
        __atomic_load_n(&lane->blocks[i].state, __ATOMIC_ACQUIRE) ==
            SBR__RECV_FREE &&
        lane->blocks[i].stale_since_ns == 0)
      return true;
  return false;
}

/* The block's status bytes, a span's k of them.  Continuations first,
 * the head last: the scan looks at heads only (1s), and a sender's READ
 * that sees the head free sees the rest free too. */
static void store_status(struct sbr__lane *lane, uint32_t index, uint8_t v)
{
  uint32_t k = lane->blocks[index].span;
  for (uint32_t j = 1; j < k; j++)
    __atomic_store_n(&lane->mem.status[index + j], v, __ATOMIC_RELEASE);
  __atomic_store_n(&lane->mem.status[index], v, __ATOMIC_RELEASE);
}

static void sb_release(struct sbr__lane *lane, uint32_t index)
{
  /* Rule 4: 0 with release semantics once nothing reads the block. */
  store_status(lane, index, SBR__STATUS_EMPTY);
}

static void sb_hold(struct sbr__lane *lane, uint32_t index)
{
  store_status(lane, index, SBR__STATUS_HELD);
}

const struct sbr__receiver_engine sbr__receiver_status_byte = {
    .name = "status-byte",
    .start = sb_start,
    .stop = sb_stop,
    .scan = sb_scan,
    .release = sb_release,
    .hold = sb_hold,
    .looks_again = true,
    .landed = sb_landed,
};
