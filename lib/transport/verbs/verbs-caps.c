/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* verbs-caps.c - device capabilities and host limits (verbs-caps.h). */
#include <errno.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "transport/transport.h"
#include "transport/verbs/verbs-caps.h"
#include "util/log.h"

/* capabilities(7): CAP_IPC_LOCK lets a process pin past RLIMIT_MEMLOCK. */
#define VERBS_CAP_IPC_LOCK 14
/* What an engine asks for at most; larger requests step down to it. */
#define VERBS_INLINE_STEP 16
#define VERBS_INLINE_TOP 64

int sbr__verbs_mr_access(int sbr_access, enum ibv_transport_type t)
{
  int flags = IBV_ACCESS_LOCAL_WRITE;
  if (sbr_access & SBR__ACCESS_REMOTE_WRITE)
    flags |= IBV_ACCESS_REMOTE_WRITE;
  if (sbr_access & SBR__ACCESS_REMOTE_READ)
    flags |= IBV_ACCESS_REMOTE_READ;
  /* iWARP places a READ response as a tagged write into the sink's STag
   * (RFC 5040 4.4), which the NIC checks for remote write: without it the
   * first status READ errors the QP (perftest and the kernel's svcrdma
   * add it for the same reason).  reg_mr can't tell a READ sink from a
   * send buffer, and needn't: no key of these leaves the host. */
  if (t == IBV_TRANSPORT_IWARP)
    flags |= IBV_ACCESS_REMOTE_WRITE;
  return flags;
}

bool sbr__verbs_windows_usable(enum ibv_transport_type t, uint64_t cap_flags,
                               int max_mw)
{
  /* iWARP: a bind needs the QP in RTS, which it reaches only inside the
   * kernel's accept (iw_cm), after the keys had to be in the private data
   * already; binds posted before it never complete. */
  if (t != IBV_TRANSPORT_IB)
    return false;
  return (cap_flags &
          (IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B)) &&
         max_mw >= 2;
}

uint32_t sbr__verbs_inline_after(uint32_t tried)
{
  if (tried > VERBS_INLINE_TOP)
    return VERBS_INLINE_TOP;
  if (tried <= VERBS_INLINE_STEP)
    return 0;
  /* Round down to a step: 64 -> 48 -> 32 -> 16. */
  return (tried - 1) / VERBS_INLINE_STEP * VERBS_INLINE_STEP;
}

static uint32_t clamp_u32(uint32_t v, int max)
{
  if (max <= 0)
    return v; /* the device says nothing: keep what was asked */
  return v > (uint32_t)max ? (uint32_t)max : v;
}

void sbr__verbs_size_queues(uint32_t send_wr, uint32_t recv_wr,
                            uint32_t cq_slack, int max_qp_wr, int max_cqe,
                            struct sbr__verbs_queues *out)
{
  /* A QP needs at least one slot per queue even where the engine posts
   * nothing (the status-byte receiver posts no receives at all). */
  uint32_t want_send = send_wr ? send_wr : 1;
  uint32_t want_recv = recv_wr ? recv_wr : 1;
  out->send_wr = clamp_u32(want_send, max_qp_wr);
  out->recv_wr = clamp_u32(want_recv, max_qp_wr);
  /* Every WR that can complete has a CQ slot, so neither CQ can overrun;
   * where the device's CQs are smaller, the queue shrinks to fit. */
  if (max_cqe > 0 && (uint64_t)out->send_wr + cq_slack > (uint64_t)max_cqe)
    out->send_wr =
        (uint32_t)max_cqe > cq_slack ? (uint32_t)max_cqe - cq_slack : 1;
  if (max_cqe > 0 && (uint64_t)out->recv_wr + cq_slack > (uint64_t)max_cqe)
    out->recv_wr =
        (uint32_t)max_cqe > cq_slack ? (uint32_t)max_cqe - cq_slack : 1;
  out->send_cqe = (int)(out->send_wr + cq_slack);
  out->recv_cqe = (int)(out->recv_wr + cq_slack);
  out->clamped = out->send_wr < want_send || out->recv_wr < want_recv;
}

int sbr__verbs_memlock_read(struct sbr__verbs_memlock *m)
{
  memset(m, 0, sizeof *m);
  m->unlimited = true;
  struct rlimit rl;
  if (getrlimit(RLIMIT_MEMLOCK, &rl))
    return -errno;
  if (rl.rlim_cur == RLIM_INFINITY)
    return 0;

  FILE *f = fopen("/proc/self/status", "re");
  if (!f)
    return -errno;
  bool cap = false;
  uint64_t pin_kb = 0;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    unsigned long long v;
    if (sscanf(line, "CapEff: %llx", &v) == 1)
      cap = (v >> VERBS_CAP_IPC_LOCK) & 1;
    else if (sscanf(line, "VmPin: %llu kB", &v) == 1)
      pin_kb = v;
  }
  fclose(f);
  m->unlimited = cap;
  m->limit = rl.rlim_cur;
  m->pinned = pin_kb * 1024u;
  return 0;
}

uint64_t sbr__verbs_pinned_bytes(size_t len)
{
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  return ((uint64_t)len + page - 1) / page * page;
}

int sbr__verbs_memlock_check(const struct sbr__verbs_memlock *m, uint64_t need,
                             const char *what, char *errbuf, size_t errlen)
{
  if (m->unlimited || m->pinned + need <= m->limit)
    return 0;
  /* The kernel's own test (ib_umem_get): pinned pages after the
   * registration against the soft limit, unless CAP_IPC_LOCK. */
  sbr__errf(errbuf, errlen,
            "%s needs %" PRIu64 " KiB of locked memory, and this process may "
            "lock %" PRIu64 " KiB (RLIMIT_MEMLOCK), %" PRIu64
            " KiB of it in use: raise the limit (ulimit -l unlimited in the "
            "shell, LimitMEMLOCK=infinity in a systemd unit, --ulimit "
            "memlock=-1 or the IPC_LOCK capability for a container)",
            what, need / 1024, m->limit / 1024, m->pinned / 1024);
  return -ENOMEM;
}

void sbr__verbs_config_parse(const char *max_inline, const char *windows,
                             struct sbr__verbs_config *out)
{
  out->max_inline = -1;
  out->windows_off = false;
  if (max_inline && *max_inline) {
    char *end;
    long v = strtol(max_inline, &end, 10);
    if (*end == '\0' && v >= 0 && v <= 65536)
      out->max_inline = (int)v;
  }
  if (windows && (!strcmp(windows, "0") || !strcmp(windows, "off") ||
                  !strcmp(windows, "no")))
    out->windows_off = true;
}

_Atomic uint64_t sbr__verbs_bounced;

static struct sbr__verbs_config config;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;

static void config_read(void)
{
  sbr__verbs_config_parse(getenv("SBR_VERBS_MAX_INLINE"),
                          getenv("SBR_VERBS_WINDOWS"), &config);
  if (config.max_inline >= 0 || config.windows_off)
    SBR_INFO("verbs: configured: inline at most %d bytes, windows %s",
             config.max_inline, config.windows_off ? "off" : "where possible");
}

const struct sbr__verbs_config *sbr__verbs_config(void)
{
  pthread_once(&config_once, config_read);
  return &config;
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

bool sbr__verbs_fork_init_needed(enum ibv_fork_status status)
{
  /* Kernels since 5.13 copy pinned pages into a child (copy on fork for
   * DMA pages): nothing to do, and ibv_fork_init would only cost (an
   * madvise per registration).  ENABLED: someone did it already. */
  return status == IBV_FORK_DISABLED;
}

static void fork_setup(void)
{
  if (!sbr__verbs_fork_init_needed(ibv_is_fork_initialized()))
    return;
  /* Before: a child's first write splits a pinned page copy-on-write,
   * and the parent's NIC keeps writing the page the parent no longer
   * sees (Python's subprocess forks).  Fails only when verbs memory was
   * registered already, by someone else in this process. */
  int ret = ibv_fork_init();
  if (ret)
    SBR_WARN("verbs: ibv_fork_init failed: %s (memory was registered "
             "before the first sbr call; a fork() may corrupt lanes on "
             "this pre-5.13 kernel)",
             strerror(ret));
}

void sbr__verbs_fork_setup(void)
{
  pthread_once(&fork_once, fork_setup);
}

void *sbr__verbs_map(size_t len)
{
  /* Anonymous mappings start zeroed. */
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

void sbr__verbs_unmap(void *p, size_t len)
{
  if (p)
    munmap(p, len);
}
