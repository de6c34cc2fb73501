/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * verbs-caps.h - what the device and the host allow the verbs back end, and
 * the choices that follow from it, as pure functions where they can be
 * (tests/transport/test-verbs-caps.c checks them on a host without RDMA).
 *
 *   registration flags   per transport type: iWARP needs REMOTE_WRITE on
 *                        the sink of an RDMA READ (the READ response is a
 *                        tagged write into it, RFC 5040), IB/RoCE do not.
 *   memory windows       never on iWARP (QPs reach RTS only inside the
 *                        kernel's accept, so a bind before it never
 *                        completes), else where the device says type 2.
 *   inline size          stepped down until the device creates the QP,
 *                        to 0 if need be (verbs-datapath.c then copies an
 *                        "inline" WR into a registered bounce slot).
 *   queue depths         clamped to max_qp_wr and max_cqe.
 *   RLIMIT_MEMLOCK       checked before registering a lane, so a host with
 *                        the default 8 MiB says so at once.
 *   fork                 ibv_fork_init unless the kernel copies DMA pages
 *                        on fork (5.13+: IBV_FORK_UNNEEDED).
 *
 * Configuration (for tests, and for forcing a capability off on a device
 * that advertises more than it does), read once from the environment:
 *   SBR_VERBS_MAX_INLINE=N   never ask for more than N inline bytes
 *   SBR_VERBS_WINDOWS=0      memory regions, never windows
 *
 * Threads: any; sbr__verbs_config and sbr__verbs_fork_setup run their work
 * once.
 */
#ifndef SBR_VERBS_CAPS_H
#define SBR_VERBS_CAPS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

/* IBV_ACCESS_* flags for an MR that reg_mr registers with SBR__ACCESS_*
 * access on a device of transport t.  LOCAL_WRITE always (verbs wants it
 * with REMOTE_WRITE, and READ responses and receives land through it).
 * On iWARP a LOCAL_WRITE buffer may be a READ's sink and so also gets
 * REMOTE_WRITE; its key never leaves this host (only a receiver's lane
 * keys travel), so no peer can use that right.  Never relaxed ordering. */
int sbr__verbs_mr_access(int sbr_access, enum ibv_transport_type t);

/* Whether lanes on this device may use type-2 windows: not on iWARP, and
 * only where the device advertises type 2A or 2B and two windows. */
bool sbr__verbs_windows_usable(enum ibv_transport_type t, uint64_t cap_flags,
                               int max_mw);

/* The inline size to ask for after `tried` was refused by rdma_create_qp:
 * 64, 48, 32, 16, then 0 (X722 takes 48; some devices none). */
uint32_t sbr__verbs_inline_after(uint32_t tried);

/* Queue depths for one QP.  wanted_* are the engine's maxima (at least 1
 * each); the CQs get slack beyond them.  Clamped to the device: the send
 * queue keeps `reserved` slots (window binds) on top of the engine's. */
struct sbr__verbs_queues {
  uint32_t send_wr;
  uint32_t recv_wr;
  int send_cqe;
  int recv_cqe;
  bool clamped; /* some depth is less than wanted */
};
void sbr__verbs_size_queues(uint32_t send_wr, uint32_t recv_wr,
                            uint32_t cq_slack, int max_qp_wr, int max_cqe,
                            struct sbr__verbs_queues *out);

/* The memory-locking limit as the kernel applies it to ibv_reg_mr. */
struct sbr__verbs_memlock {
  bool unlimited;  /* RLIM_INFINITY, or CAP_IPC_LOCK (ignores it) */
  uint64_t limit;  /* RLIMIT_MEMLOCK soft limit, bytes */
  uint64_t pinned; /* already pinned by this process (VmPin), bytes */
};
/* Reads getrlimit and /proc/self/status.  0, or -errno (then *m says
 * unlimited: a check we can't make must not refuse a lane). */
int sbr__verbs_memlock_read(struct sbr__verbs_memlock *m);
/* Bytes ibv_reg_mr pins for len bytes at a page-aligned start. */
uint64_t sbr__verbs_pinned_bytes(size_t len);
/* 0 when `need` more pinned bytes fit under the limit, else -ENOMEM and
 * errbuf says what the limit is, what is needed and how to raise it. */
int sbr__verbs_memlock_check(const struct sbr__verbs_memlock *m, uint64_t need,
                             const char *what, char *errbuf, size_t errlen);

/* The environment's settings (see above), read once. */
struct sbr__verbs_config {
  int max_inline; /* -1: no cap */
  bool windows_off;
};
const struct sbr__verbs_config *sbr__verbs_config(void);
/* Parses the two variables' values (NULL = unset); for tests. */
void sbr__verbs_config_parse(const char *max_inline, const char *windows,
                             struct sbr__verbs_config *out);

/* Tests only: WRs posted from a bounce slot (an "inline" WR the QP had no
 * inline room for), in this process. */
extern _Atomic uint64_t sbr__verbs_bounced;

/* Whether ibv_fork_init is wanted, given ibv_is_fork_initialized: only
 * when fork support is off and the kernel doesn't copy DMA pages on fork
 * (IBV_FORK_UNNEEDED, 5.13+). */
bool sbr__verbs_fork_init_needed(enum ibv_fork_status status);
/* ibv_fork_init once per process, before the first registration, when
 * needed; logs and carries on if it fails. */
void sbr__verbs_fork_setup(void);

/* Page-aligned, zeroed memory from mmap for lane and status regions: it
 * shares no page with the heap, so fork support's madvise(DONTFORK) on it
 * hides nothing else from a child.  NULL with errno on failure. */
void *sbr__verbs_map(size_t len);
void sbr__verbs_unmap(void *p, size_t len);

#endif
