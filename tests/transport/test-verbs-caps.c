/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-verbs-caps.c - the verbs back end's decisions about devices and
 * host limits (lib/transport/verbs/verbs-caps.h), on any host: they are
 * pure functions of what a device or the kernel reports, so the rules for
 * hardware the CI doesn't have (iWARP NICs, devices with less inline room
 * or smaller queues) are pinned down here, not by siw or rxe alone.
 */
#include <sys/mman.h>
#include <sys/resource.h>

#include "test.h"
#include "transport/transport.h"
#include "transport/verbs/verbs-caps.h"

/* The access each of the engines' registrations asks for (sender blocks
 * and READ sinks: local only; a receiver's lane regions: remote). */
static const int engine_access[] = {
    SBR__ACCESS_LOCAL_WRITE,
    SBR__ACCESS_LOCAL_WRITE | SBR__ACCESS_REMOTE_WRITE,
    SBR__ACCESS_LOCAL_WRITE | SBR__ACCESS_REMOTE_READ |
        SBR__ACCESS_REMOTE_WRITE,
};

static void iwarp_read_sinks_get_remote_write(void)
{
  /* The status READ's sink is registered LOCAL_WRITE only by the engine;
   * on iWARP the response is a tagged write into it, so the NIC must
   * find REMOTE_WRITE there or the QP errors on the first READ. */
  int f = sbr__verbs_mr_access(SBR__ACCESS_LOCAL_WRITE, IBV_TRANSPORT_IWARP);
  ASSERT(f & IBV_ACCESS_LOCAL_WRITE);
  ASSERT(f & IBV_ACCESS_REMOTE_WRITE);
  ASSERT(!(f & IBV_ACCESS_REMOTE_READ));
  for (size_t i = 0; i < sizeof engine_access / sizeof engine_access[0]; i++)
    ASSERT(sbr__verbs_mr_access(engine_access[i], IBV_TRANSPORT_IWARP) &
           IBV_ACCESS_REMOTE_WRITE);
}

static void ib_and_roce_grant_only_what_is_asked(void)
{
  /* RoCE reports IBV_TRANSPORT_IB too.  Rule 8: nothing remote that the
   * engine didn't ask for; LOCAL_WRITE always (verbs wants it with
   * REMOTE_WRITE, READ responses land through it). */
  int f = sbr__verbs_mr_access(SBR__ACCESS_LOCAL_WRITE, IBV_TRANSPORT_IB);
  ASSERT_EQ(f, IBV_ACCESS_LOCAL_WRITE);
  f = sbr__verbs_mr_access(SBR__ACCESS_REMOTE_WRITE, IBV_TRANSPORT_IB);
  ASSERT_EQ(f, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  f = sbr__verbs_mr_access(SBR__ACCESS_REMOTE_READ | SBR__ACCESS_REMOTE_WRITE,
                           IBV_TRANSPORT_IB);
  ASSERT_EQ(f, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                   IBV_ACCESS_REMOTE_READ);
  /* Never relaxed ordering (rule 1), on any transport. */
  for (size_t i = 0; i < sizeof engine_access / sizeof engine_access[0]; i++) {
    ASSERT(!(sbr__verbs_mr_access(engine_access[i], IBV_TRANSPORT_IB) &
             IBV_ACCESS_RELAXED_ORDERING));
    ASSERT(!(sbr__verbs_mr_access(engine_access[i], IBV_TRANSPORT_IWARP) &
             IBV_ACCESS_RELAXED_ORDERING));
  }
}

static void never_windows_on_iwarp(void)
{
  const uint64_t both =
      IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
  /* An iWARP device that advertises type-2 windows (irdma in iWARP mode,
   * cxgb4) still gets MRs. */
  ASSERT(!sbr__verbs_windows_usable(IBV_TRANSPORT_IWARP, both, 1 << 20));
  ASSERT(sbr__verbs_windows_usable(IBV_TRANSPORT_IB, both, 1 << 20));
  ASSERT(sbr__verbs_windows_usable(IBV_TRANSPORT_IB,
                                   IBV_DEVICE_MEM_WINDOW_TYPE_2B, 2));
  ASSERT(sbr__verbs_windows_usable(IBV_TRANSPORT_IB,
                                   IBV_DEVICE_MEM_WINDOW_TYPE_2A, 2));
  /* Type 1 only, too few windows, or another transport: MRs. */
  ASSERT(!sbr__verbs_windows_usable(IBV_TRANSPORT_IB, IBV_DEVICE_MEM_WINDOW,
                                    1 << 20));
  ASSERT(!sbr__verbs_windows_usable(IBV_TRANSPORT_IB, both, 1));
  ASSERT(!sbr__verbs_windows_usable(IBV_TRANSPORT_USNIC, both, 1 << 20));
}

static void inline_steps_down_to_zero(void)
{
  /* 64 (what the engines ask), 48 (X722), 32, 16, 0: each a size some
   * device takes; 0 always ends the walk. */
  uint32_t seen[8], n = 0;
  for (uint32_t v = 64;; v = sbr__verbs_inline_after(v)) {
    ASSERT(n < 8);
    seen[n++] = v;
    if (v == 0)
      break;
  }
  ASSERT_EQ(n, 5);
  ASSERT_EQ(seen[1], 48);
  ASSERT_EQ(seen[2], 32);
  ASSERT_EQ(seen[3], 16);
  ASSERT_EQ(sbr__verbs_inline_after(0), 0);
  ASSERT_EQ(sbr__verbs_inline_after(512), 64);
  ASSERT_EQ(sbr__verbs_inline_after(40), 32);
  ASSERT_EQ(sbr__verbs_inline_after(8), 0);
}

static void queues_are_clamped_to_the_device(void)
{
  struct sbr__verbs_queues q;
  /* Room enough: what the engine asked, CQs with slack. */
  sbr__verbs_size_queues(100, 0, 4, 16384, 65536, &q);
  ASSERT_EQ(q.send_wr, 100);
  ASSERT_EQ(q.recv_wr, 1); /* a QP needs a slot even where none is posted */
  ASSERT_EQ(q.send_cqe, 104);
  ASSERT_EQ(q.recv_cqe, 5);
  ASSERT(!q.clamped);
  /* max_qp_wr smaller than asked. */
  sbr__verbs_size_queues(5000, 5000, 4, 1024, 65536, &q);
  ASSERT_EQ(q.send_wr, 1024);
  ASSERT_EQ(q.recv_wr, 1024);
  ASSERT(q.clamped);
  /* max_cqe smaller than the queue plus slack: the queue shrinks so its
   * CQ can't overrun. */
  sbr__verbs_size_queues(5000, 10, 4, 1 << 20, 4096, &q);
  ASSERT_EQ(q.send_wr, 4092);
  ASSERT_EQ(q.send_cqe, 4096);
  ASSERT_EQ(q.recv_wr, 10);
  ASSERT(q.clamped);
  /* A device reporting nothing (0) is not taken for "no room". */
  sbr__verbs_size_queues(64, 64, 4, 0, 0, &q);
  ASSERT_EQ(q.send_wr, 64);
  ASSERT_EQ(q.recv_cqe, 68);
  ASSERT(!q.clamped);
}

static void memlock_below_a_lane_is_named_with_its_fixes(void)
{
  /* The default 8 MiB against one lane of 16 x 1 MiB. */
  struct sbr__verbs_memlock m = {
      .unlimited = false, .limit = 8u << 20, .pinned = 0};
  uint64_t lane =
      sbr__verbs_pinned_bytes(16u << 20) + sbr__verbs_pinned_bytes(64 + 64);
  char err[512] = "";
  ASSERT_EQ(sbr__verbs_memlock_check(&m, lane, "a lane", err, sizeof err),
            -ENOMEM);
  ASSERT_MSG(strstr(err, "RLIMIT_MEMLOCK"), "%s", err);
  ASSERT_MSG(strstr(err, "8192 KiB"), "%s", err);
  ASSERT_MSG(strstr(err, "ulimit -l"), "%s", err);
  ASSERT_MSG(strstr(err, "LimitMEMLOCK="), "%s", err);
  ASSERT_MSG(strstr(err, "IPC_LOCK"), "%s", err);
  /* What is pinned already counts: the second lane is the one refused. */
  m.limit = 40u << 20;
  ASSERT_EQ(sbr__verbs_memlock_check(&m, lane, "a lane", err, sizeof err), 0);
  m.pinned = lane;
  ASSERT_EQ(sbr__verbs_memlock_check(&m, lane, "a lane", err, sizeof err), 0);
  m.pinned = 2 * lane;
  ASSERT_EQ(sbr__verbs_memlock_check(&m, lane, "a lane", err, sizeof err),
            -ENOMEM);
  /* Unlimited, or CAP_IPC_LOCK (read as unlimited): always fits. */
  m.unlimited = true;
  ASSERT_EQ(sbr__verbs_memlock_check(&m, lane, "a lane", err, sizeof err), 0);
  /* Registration pins whole pages. */
  long page = sysconf(_SC_PAGESIZE);
  ASSERT_EQ(sbr__verbs_pinned_bytes(1), page);
  ASSERT_EQ(sbr__verbs_pinned_bytes((size_t)page), page);
  ASSERT_EQ(sbr__verbs_pinned_bytes((size_t)page + 1), 2 * page);
}

static void memlock_read_sees_this_process_limit(void)
{
  /* Lowering the soft limit is allowed to anyone; this process then reads
   * it back, unless it holds CAP_IPC_LOCK (root in the VM), which the
   * kernel lets pin past it. */
  struct rlimit old;
  ASSERT_OK(getrlimit(RLIMIT_MEMLOCK, &old) ? -errno : 0);
  struct rlimit low = {.rlim_cur = 8u << 20, .rlim_max = old.rlim_max};
  if (old.rlim_max != RLIM_INFINITY && old.rlim_max < low.rlim_cur)
    low.rlim_cur = old.rlim_max;
  ASSERT_OK(setrlimit(RLIMIT_MEMLOCK, &low) ? -errno : 0);
  struct sbr__verbs_memlock m;
  ASSERT_OK(sbr__verbs_memlock_read(&m));
  if (!m.unlimited)
    ASSERT_EQ(m.limit, low.rlim_cur);
  else
    fprintf(stderr, "  CAP_IPC_LOCK held: the limit does not apply\n");
  ASSERT_OK(setrlimit(RLIMIT_MEMLOCK, &old) ? -errno : 0);
}

static void configuration_forces_capabilities_down(void)
{
  struct sbr__verbs_config c;
  sbr__verbs_config_parse(NULL, NULL, &c);
  ASSERT_EQ(c.max_inline, -1);
  ASSERT(!c.windows_off);
  sbr__verbs_config_parse("0", "0", &c);
  ASSERT_EQ(c.max_inline, 0);
  ASSERT(c.windows_off);
  sbr__verbs_config_parse("48", "off", &c);
  ASSERT_EQ(c.max_inline, 48);
  ASSERT(c.windows_off);
  sbr__verbs_config_parse("", "1", &c);
  ASSERT_EQ(c.max_inline, -1);
  ASSERT(!c.windows_off);
  /* Nonsense is ignored, not taken for 0. */
  sbr__verbs_config_parse("lots", "maybe", &c);
  ASSERT_EQ(c.max_inline, -1);
  ASSERT(!c.windows_off);
  sbr__verbs_config_parse("-3", NULL, &c);
  ASSERT_EQ(c.max_inline, -1);
}

static void fork_init_only_where_the_kernel_needs_it(void)
{
  ASSERT(sbr__verbs_fork_init_needed(IBV_FORK_DISABLED));
  ASSERT(!sbr__verbs_fork_init_needed(IBV_FORK_ENABLED));
  ASSERT(!sbr__verbs_fork_init_needed(IBV_FORK_UNNEEDED));
}

static void lane_memory_is_mapped_pages(void)
{
  /* Whole pages of their own (so DONTFORK hides nothing else), zeroed. */
  size_t len = 3 * (size_t)sysconf(_SC_PAGESIZE) + 100;
  uint8_t *p = sbr__verbs_map(len);
  ASSERT(p);
  ASSERT_EQ((uintptr_t)p % (uintptr_t)sysconf(_SC_PAGESIZE), 0);
  for (size_t i = 0; i < len; i++)
    ASSERT_EQ(p[i], 0);
  sbr__verbs_unmap(p, len);
}

int main(int argc, char **argv)
{
  static const struct test_entry tests[] = {
      {"iwarp_read_sinks_get_remote_write", iwarp_read_sinks_get_remote_write,
       ANY_BACKEND},
      {"ib_and_roce_grant_only_what_is_asked",
       ib_and_roce_grant_only_what_is_asked, ANY_BACKEND},
      {"never_windows_on_iwarp", never_windows_on_iwarp, ANY_BACKEND},
      {"inline_steps_down_to_zero", inline_steps_down_to_zero, ANY_BACKEND},
      {"queues_are_clamped_to_the_device", queues_are_clamped_to_the_device,
       ANY_BACKEND},
      {"memlock_below_a_lane_is_named_with_its_fixes",
       memlock_below_a_lane_is_named_with_its_fixes, ANY_BACKEND},
      {"memlock_read_sees_this_process_limit",
       memlock_read_sees_this_process_limit, ANY_BACKEND},
      {"configuration_forces_capabilities_down",
       configuration_forces_capabilities_down, ANY_BACKEND},
      {"fork_init_only_where_the_kernel_needs_it",
       fork_init_only_where_the_kernel_needs_it, ANY_BACKEND},
      {"lane_memory_is_mapped_pages", lane_memory_is_mapped_pages, ANY_BACKEND},
      {NULL, NULL, ANY_BACKEND},
  };
  return test_main(tests, argc, argv);
}
