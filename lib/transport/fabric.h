/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fabric.h - the fabric settings a connection is made with (traffic
 * class, ACK timeout and retries, completion vector) and where its lane
 * memory lives (NUMA node, huge pages): what sbr.h's configs say, checked
 * once and handed to the back ends through sbr__queue_caps.
 *
 * The choices are pure functions where they can be, so that
 * tests/transport/test-fabric.c pins them down on a host without RDMA or
 * NUMA (docs/hardware.md, "Fabric settings", says what they do on a NIC).
 *
 * Threads: any.  The counters are for tests.
 */
#ifndef SBR_FABRIC_H
#define SBR_FABRIC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Config values that mean "leave it to someone else". */
#define SBR__TOS_UNSET (-1)          /* rdma_cm's own traffic class */
#define SBR__COMP_VECTOR_SPREAD (-1) /* lanes spread over the vectors */
#define SBR__NUMA_DEVICE (-1)        /* the NIC's node (none: no binding) */
#define SBR__NUMA_NONE (-2)          /* never bind */
/* The verbs spec's ranges.  Retry count 7 is "retry forever" on IB and
 * rxe: a dead peer would never be found (the liveness probe needs a
 * finite budget), so 6 is the most a config may ask. */
#define SBR__ACK_TIMEOUT_MAX 31
#define SBR__RETRY_COUNT_MAX 6
/* Lane mappings this large or larger are advised to use huge pages (the
 * x86-64 and arm64 4K-granule PMD size). */
#define SBR__HUGE_PAGE_MIN (2u << 20)

struct sbr__fabric {
  int tos;             /* 0-255, or SBR__TOS_UNSET */
  uint8_t ack_timeout; /* exponent 1-31; 0: rdma_cm's own */
  uint8_t retry_count; /* transport retries, 0-6 */
  int comp_vector;     /* a vector, or SBR__COMP_VECTOR_SPREAD */
  uint32_t comp_index; /* this connection's place in the spread */
  int numa_node;       /* lane memory: a node, _DEVICE or _NONE */
  bool huge_pages;     /* lane memory: madvise(MADV_HUGEPAGE) */
};

/* What a connection gets when the caller gives no settings (the engines
 * always do; tests of the back ends may not): the defaults of sbr.h. */
void sbr__fabric_defaults(struct sbr__fabric *f);

/* 0, or -EINVAL with errbuf naming the setting, its value and its range
 * ("retry count 7 is out of range (0-6): 7 means retry forever on
 * InfiniBand and Soft-RoCE, and a dead peer would never be found"). */
int sbr__fabric_check(const struct sbr__fabric *f, char *errbuf, size_t errlen);

/* The completion vector of a connection's CQs: pinned (modulo the
 * device's count, so a pin past it still lands on a real one), or index
 * modulo the count to spread lanes over the vectors (their interrupts
 * then reach as many cores).  0 on a device with none or one. */
int sbr__fabric_comp_vector(int pinned, uint32_t index, int num_vectors);

/* The NUMA node of the NIC named ibdev, from
 * SYSFS_ROOT/class/infiniband/IBDEV/device/numa_node (sysfs_root "/sys",
 * or a fake tree for tests): -1 when the file is missing, unreadable or
 * says -1 (a host without NUMA, an emulated device). */
int sbr__fabric_device_node(const char *sysfs_root, const char *ibdev);

/* The node to bind lane memory to: configured when it names one, the
 * device's node for SBR__NUMA_DEVICE, -1 (no binding) for SBR__NUMA_NONE
 * or a device without a node. */
int sbr__fabric_numa_node(int configured, int device_node);

/* Advises huge pages (when asked and len >= SBR__HUGE_PAGE_MIN) and
 * prefers node (>= 0) for the mapping at p, before anything touches it:
 * the kernel places a page where the policy says at its first touch
 * (here: registration pins it).  MPOL_PREFERRED rather than MPOL_BIND:
 * a full node then falls back to another instead of failing the lane.
 * Both are hints: a failure is logged, never fatal.  Sets *advised and
 * *bound to what was applied (either may be NULL). */
void sbr__fabric_place(void *p, size_t len, bool huge_pages, int node,
                       const char *what, bool *advised, bool *bound);

/* Tests only: madvise(MADV_HUGEPAGE) and mbind calls that succeeded in
 * this process. */
extern _Atomic uint64_t sbr__fabric_hugepage_advised;
extern _Atomic uint64_t sbr__fabric_numa_bound;

#endif
