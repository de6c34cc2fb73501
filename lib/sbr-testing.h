/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sbr-testing.h - knobs for tests and benchmarks, not part of the API.
 *
 * Not installed: what is here may change in any release, so applications
 * must not see it, and sbr.h keeps only what they set.  Programs that use
 * it (tests/, tools/sbr-perf) link the static archive sbr-internal, since
 * libsbr.so exports none of these symbols (lib/libsbr.map).
 *
 * A sender built with sbr__sender_new_knobs behaves as one built with
 * sbr_sender_new, except for what the knobs change; reconnects keep them.
 */
#ifndef SBR_TESTING_H
#define SBR_TESTING_H

#include "sbr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fault injection, honoured by the shm back end only (tests, studies):
 * real hardware injects its own. */
struct sbr__fault_injection {
  uint32_t delay_us;       /* added round-trip time per work request */
  uint32_t fail_after_wrs; /* 0 = never; else the Nth WR completes in error */
  /* 0 = never; else from the Nth WR on nothing executes or completes: a
   * NIC that took work and went silent (rxe after a bond failover) */
  uint32_t stall_after_wrs;
};

/* What sbr_sender_new takes as all false/zero. */
struct sbr__sender_knobs {
  struct sbr__fault_injection faults;
  /* Status-byte: a producer posts the blocks it queued itself when the
   * sender thread is idle (one thread wake-up less between a frame and its
   * WRITE; counted in producer_posts).  true = always leave posting to the
   * sender thread, as before (for comparison). */
  bool sender_thread_posts;
  /* Same host (shm), status-byte: a block from sbr_sender_acquire is a
   * receive block of the lane itself (direct placement, counted in
   * direct_blocks).  true = always copy into the lane, as before (for
   * comparison). */
  bool copy_into_lane;
  /* Behave as a sender older than the accept's features word: bytes
   * 52..59 of the accept are ignored, so the status READ ends at the
   * refused bitmap and key-unit requests are never seen. */
  bool ignore_features;
  /* The completion deadline (sender-status-byte.c) in ms on any back end;
   * 0: as sbr_sender_new, verbs only, from the NIC's retry budget. */
  uint32_t completion_deadline_ms;
};

/* sbr_sender_new with knobs (NULL: none). */
int sbr__sender_new_knobs(const struct sbr_sender_config *cfg,
                          const struct sbr__sender_knobs *knobs,
                          sbr_sender **out, char *errbuf, size_t errlen);

/* Is ptr inside this sender's registered send blocks? */
bool sbr__sender_owns(const sbr_sender *s, const void *ptr);
/* The send block whose payload starts at ptr, or NULL. */
sbr_send_block *sbr__sender_block_from_payload(sbr_sender *s, void *ptr);

/* TEST ONLY: what lanes accepted from now on announce in their accept
 * (SBR__FEATURE_* bits, lib/wire/private-data.h; masked by what the
 * lane's mechanism takes).  All of them by default; tests clear bits to
 * play a receiver that predates them: 0 is one older than the features
 * word (no key-unit area, a status region ending at the refused bitmap),
 * SBR__FEATURE_KEY_UNIT alone one without spans (frames larger than a
 * block go as fragments). */
extern _Atomic uint32_t sbr__receiver_features;

/* How sbr_sender_new and sbr_receiver_new read the application's config:
 * its struct_size bytes over the defaults into *out (this library's
 * layout), refusing a size below min_size (theirs: the first released
 * layout, util/sized.h) or beyond this library's (-EINVAL). */
int sbr__sender_config_read(const struct sbr_sender_config *app,
                            size_t min_size, struct sbr_sender_config *out,
                            char *errbuf, size_t errlen);
int sbr__receiver_config_read(const struct sbr_receiver_config *app,
                              size_t min_size, struct sbr_receiver_config *out,
                              char *errbuf, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* SBR_TESTING_H */
