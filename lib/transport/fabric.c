/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fabric.c - fabric settings and lane memory placement (fabric.h).
 */
#include "transport/fabric.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/mempolicy.h>

#include "transport/transport.h"
#include "util/log.h"

/* Nodes a binding may name: the kernel's own limit is larger, but a
 * node number past this is a typo, not a machine. */
#define FABRIC_MAX_NODE 1023

_Atomic uint64_t sbr__fabric_hugepage_advised;
_Atomic uint64_t sbr__fabric_numa_bound;

void sbr__fabric_defaults(struct sbr__fabric *f)
{
  memset(f, 0, sizeof *f);
  f->tos = SBR__TOS_UNSET;
  f->ack_timeout = 15;
  f->retry_count = SBR__RETRY_COUNT_MAX;
  f->comp_vector = SBR__COMP_VECTOR_SPREAD;
  f->numa_node = SBR__NUMA_DEVICE;
  f->huge_pages = true;
}

int sbr__fabric_check(const struct sbr__fabric *f, char *errbuf, size_t errlen)
{
  if (f->tos < SBR__TOS_UNSET || f->tos > 255) {
    sbr__errf(errbuf, errlen,
              "tos %d is out of range (0-255, or -1 for rdma_cm's default)",
              f->tos);
    return -EINVAL;
  }
  if (f->ack_timeout > SBR__ACK_TIMEOUT_MAX) {
    sbr__errf(errbuf, errlen,
              "ACK timeout %u is out of range (1-%d, an exponent: 4.096 us x "
              "2^n a try; 0 for rdma_cm's default)",
              f->ack_timeout, SBR__ACK_TIMEOUT_MAX);
    return -EINVAL;
  }
  if (f->retry_count > SBR__RETRY_COUNT_MAX) {
    sbr__errf(errbuf, errlen,
              "retry count %u is out of range (0-%d): 7 means retry forever "
              "on InfiniBand and Soft-RoCE, and a dead peer would never be "
              "found",
              f->retry_count, SBR__RETRY_COUNT_MAX);
    return -EINVAL;
  }
  if (f->comp_vector < SBR__COMP_VECTOR_SPREAD) {
    sbr__errf(errbuf, errlen,
              "completion vector %d is out of range (a vector, or -1 to "
              "spread lanes over them)",
              f->comp_vector);
    return -EINVAL;
  }
  if (f->numa_node < SBR__NUMA_NONE || f->numa_node > FABRIC_MAX_NODE) {
    sbr__errf(errbuf, errlen,
              "NUMA node %d is out of range (0-%d, -1 for the RDMA device's "
              "node, -2 for no binding)",
              f->numa_node, FABRIC_MAX_NODE);
    return -EINVAL;
  }
  return 0;
}

int sbr__fabric_comp_vector(int pinned, uint32_t index, int num_vectors)
{
  if (num_vectors <= 1)
    return 0;
  if (pinned >= 0)
    return pinned % num_vectors;
  return (int)(index % (uint32_t)num_vectors);
}

int sbr__fabric_device_node(const char *sysfs_root, const char *ibdev)
{
  char path[512];
  if (!sysfs_root || !ibdev || strchr(ibdev, '/'))
    return -1;
  snprintf(path, sizeof path, "%s/class/infiniband/%s/device/numa_node",
           sysfs_root, ibdev);
  FILE *f = fopen(path, "re");
  if (!f)
    return -1;
  int node = -1;
  if (fscanf(f, "%d", &node) != 1 || node < 0 || node > FABRIC_MAX_NODE)
    node = -1;
  fclose(f);
  return node;
}

int sbr__fabric_numa_node(int configured, int device_node)
{
  if (configured >= 0)
    return configured;
  if (configured == SBR__NUMA_DEVICE && device_node >= 0)
    return device_node;
  return -1;
}

void sbr__fabric_place(void *p, size_t len, bool huge_pages, int node,
                       const char *what, bool *advised, bool *bound)
{
  if (advised)
    *advised = false;
  if (bound)
    *bound = false;
  if (!p || len == 0)
    return;
  /* Transparent huge pages where the host allows them on request
   * (enabled=madvise, the common default): a MiB-sized lane then costs
   * the NIC and the CPU a few translations instead of hundreds.  shm's
   * memfd lanes need shmem_enabled=advise for it to take effect. */
  if (huge_pages && len >= SBR__HUGE_PAGE_MIN) {
    if (madvise(p, len, MADV_HUGEPAGE) == 0) {
      atomic_fetch_add(&sbr__fabric_hugepage_advised, 1);
      if (advised)
        *advised = true;
    } else {
      SBR_DEBUG("%s: no huge pages (madvise: %s)", what, strerror(errno));
    }
  }
  if (node < 0 || node > FABRIC_MAX_NODE)
    return;
  /* The raw system call, as libnuma's mbind() is: no library to depend
   * on for one call. */
  unsigned long mask[FABRIC_MAX_NODE / (8 * sizeof(unsigned long)) + 1];
  memset(mask, 0, sizeof mask);
  mask[node / (8 * sizeof(unsigned long))] =
      1ul << (node % (8 * sizeof(unsigned long)));
  /* maxnode counts one past the last bit the kernel reads. */
  if (syscall(SYS_mbind, p, len, MPOL_PREFERRED, mask,
              (unsigned long)(8 * sizeof mask + 1), 0ul) == 0) {
    atomic_fetch_add(&sbr__fabric_numa_bound, 1);
    if (bound)
      *bound = true;
  } else {
    SBR_DEBUG("%s: not placed on NUMA node %d (mbind: %s)", what, node,
              strerror(errno));
  }
}
