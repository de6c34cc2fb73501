/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * verbs-device.h - what a verbs test needs to know about the RDMA device
 * it runs on, for the few behaviours where NIC families differ by design
 * (the VM runs the suite over Soft-RoCE and over soft-iWARP:
 * tests/softroce/run-in-vm.sh --family rxe|siw).
 *
 *   - iWARP completes an RDMA WRITE once the data is handed to the
 *     transport (TCP): a WRITE the peer refuses (bad key, out of bounds)
 *     completes with success, and the peer then ends the connection with a
 *     Terminate message (RFC 5040), which moves the QP to error, so the
 *     next work request fails instead.  InfiniBand and RoCE complete the WRITE
 *     itself in error (its ACK is a NAK).  Tests that expect a refused
 *     WRITE post a READ of the lane's own status behind it over iWARP.
 *   - iWARP has no RDMA WRITE with immediate data (rdma-core's siw
 *     provider refuses the opcode; the sliding-window mechanism uses it, so
 *     a receiver refuses that mechanism there: refusal "device").
 *   - siw (Linux 6.1) serves a READ from memory registered without
 *     REMOTE_READ: siw_qp_sq_proc_tx() checks a READ response's source
 *     with no permission at all ("w/o checking access").  Hardware refuses
 *     such a READ, so the tests of that rule skip over siw.
 *
 * The device is SBR_RDMA_DEV (the VM sets it), else the first one.
 * Tests that can't run on the device call test_verbs_skip(), which exits
 * 77: meson counts a skip, never a pass.
 */
#ifndef SBR_TEST_VERBS_DEVICE_H
#define SBR_TEST_VERBS_DEVICE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

/* siw's vendor_id, ASCII "bmt" (drivers/infiniband/sw/siw/siw.h). */
#define TEST_SIW_VENDOR_ID 0x626d74u

struct test_verbs_device {
  char name[IBV_SYSFS_NAME_MAX];
  enum ibv_transport_type transport;
  uint32_t vendor_id;
};

/* Fills dev from the test's device; false if there is none. */
static inline bool test_verbs_device(struct test_verbs_device *dev)
{
  const char *want = getenv("SBR_RDMA_DEV");
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list)
    return false;
  struct ibv_device *found = n > 0 ? list[0] : NULL;
  for (int i = 0; want && i < n; i++)
    if (strcmp(ibv_get_device_name(list[i]), want) == 0)
      found = list[i];
  bool ok = false;
  struct ibv_context *ctx = found ? ibv_open_device(found) : NULL;
  struct ibv_device_attr attr;
  if (ctx && ibv_query_device(ctx, &attr) == 0) {
    snprintf(dev->name, sizeof dev->name, "%s", ibv_get_device_name(found));
    dev->transport = found->transport_type;
    dev->vendor_id = attr.vendor_id;
    ok = true;
  }
  if (ctx)
    ibv_close_device(ctx);
  ibv_free_device_list(list);
  return ok;
}

static inline bool test_verbs_is_iwarp(void)
{
  struct test_verbs_device dev;
  return test_verbs_device(&dev) && dev.transport == IBV_TRANSPORT_IWARP;
}

static inline bool test_verbs_is_siw(void)
{
  struct test_verbs_device dev;
  return test_verbs_device(&dev) && dev.vendor_id == TEST_SIW_VENDOR_ID;
}

/* Ends the test as skipped (meson: exit status 77), saying why. */
static inline void test_verbs_skip(const char *why)
{
  struct test_verbs_device dev;
  fprintf(stderr, "SKIP on %s: %s\n",
          test_verbs_device(&dev) ? dev.name : "this device", why);
  exit(77);
}

#endif
