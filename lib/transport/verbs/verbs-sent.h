/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * verbs-sent.h - the verbs back end's ring of send WRs in flight, and how a
 * send completion retires them.  Pure bookkeeping (no verbs calls), in a
 * header of its own so that a unit test can feed it completions in any
 * order without a device.
 *
 * A send completion names only its wr_id, and verbs reports WRITE and
 * WRITE WITH IMMEDIATE alike (IBV_WC_RDMA_WRITE) and leaves wc.opcode
 * undefined on error and flush completions; the ring, in post order, gives
 * every send completion its exact opcode.  It also mirrors the send queue's
 * occupancy: an unsignaled WR holds its slot until a later completion
 * retires it, a signaled one until its own completion is polled.
 *
 * Completion order.  InfiniBand and RoCE complete an RC send queue in post
 * order (the IB spec's rule for an RC send queue; rxe and the hardware
 * providers keep it).  iWARP devices need not: siw
 * completes a WRITE once it is handed to TCP but a READ only when its
 * response has arrived, so WRITEs posted after a READ complete before it.
 * So a completion retires its own WR and the unsignaled WRs before it (on
 * every transport a later completion means those ran), but never a
 * signaled WR before it: that one's own completion is still to come and
 * must find its entry (its opcode), and its slot stays counted until then.
 * In order (IB, RoCE) no signaled WR is ever found before the match, and
 * the ring is popped from its head exactly as a plain FIFO.
 *
 * Threads: the caller's (the connection's post/poll lock).
 */
#ifndef SBR_VERBS_SENT_H
#define SBR_VERBS_SENT_H

#include <stdbool.h>
#include <stdint.h>

/* A send WR in flight. */
struct verbs_sent {
  uint64_t wr_id;
  uint8_t opcode; /* enum sbr__opcode */
  bool signaled;
};

static inline uint32_t verbs_sent_next(uint32_t idx, uint32_t cap)
{
  return idx + 1 == cap ? 0 : idx + 1;
}

static inline uint32_t verbs_sent_prev(uint32_t idx, uint32_t cap)
{
  return idx == 0 ? cap - 1 : idx - 1;
}

/* Finds the in-flight WR a send completion (wr_id, success) belongs to and
 * retires it with the unsignaled WRs before it.  A successful completion
 * belongs to the oldest signaled WR with that wr_id; an error or flush
 * completion to the oldest WR with that wr_id, signaled or not (from the
 * failed WR on, each one gets its own completion).  Signaled WRs before
 * the match stay in flight, in order, moved up against the WRs after the
 * match so that the ring stays one contiguous run from *head.  false (ring
 * untouched) when no WR matches, which would be a bug. */
static inline bool verbs_sent_retire(struct verbs_sent *ring, uint32_t cap,
                                     uint32_t *head, uint32_t *count,
                                     uint64_t wr_id, bool success,
                                     uint8_t *opcode)
{
  uint32_t idx = *head;
  uint32_t pending = 0; /* signaled WRs before the match */
  for (uint32_t k = 0; k < *count; k++) {
    const struct verbs_sent *s = &ring[idx];
    if (s->wr_id == wr_id && (s->signaled || !success)) {
      *opcode = s->opcode;
      uint32_t dst = idx; /* the matched slot is the first one reused */
      if (pending) {
        /* Out of order (iWARP's READ): walk back over the k WRs before
         * the match, keeping the signaled ones, newest nearest the match.
         * dst never falls behind the entry being read, so nothing unread
         * is overwritten. */
        uint32_t src = idx;
        for (uint32_t j = 0; j < k; j++) {
          src = verbs_sent_prev(src, cap);
          if (ring[src].signaled) {
            ring[dst] = ring[src];
            dst = verbs_sent_prev(dst, cap);
          }
        }
      }
      *head = verbs_sent_next(dst, cap);
      *count -= k + 1 - pending;
      return true;
    }
    pending += s->signaled;
    idx = verbs_sent_next(idx, cap);
  }
  return false;
}

#endif
