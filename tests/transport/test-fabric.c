/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-fabric.c - the fabric settings (lib/transport/fabric.h) on any
 * host: their ranges and the refusal of values out of them, the spread of
 * lanes over completion vectors, the NUMA node lane memory goes to (the
 * NIC's, from a fake sysfs tree), and the huge-page advice on lane
 * mappings, seen by the kernel (/proc/self/smaps "hg") on a shm lane.
 * What the settings do on a real QP is tests/transport/test-transport.c's
 * fabric_settings_reach_the_qp (verbs suite, in the VM).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine-fixture.h"
#include "test.h"
#include "transport/fabric.h"

static void defaults_are_the_documented_ones(void)
{
  struct sbr_sender_config sc;
  struct sbr_receiver_config rc;
  sbr_sender_config_init(&sc);
  sbr_receiver_config_init(&rc);
  ASSERT_EQ(sc.tos, -1);
  ASSERT_EQ(sc.ack_timeout, 15);
  ASSERT_EQ(sc.retry_count, 6);
  ASSERT_EQ(sc.comp_vector, -1);
  ASSERT_EQ(rc.tos, -1);
  ASSERT_EQ(rc.ack_timeout, 15);
  ASSERT_EQ(rc.comp_vector, -1);
  ASSERT_EQ(rc.numa_node, -1);
  ASSERT(rc.huge_pages);
}

static void ranges_are_checked_with_a_clear_error(void)
{
  struct sbr__fabric f;
  char err[256];
  sbr__fabric_defaults(&f);
  ASSERT_OK(sbr__fabric_check(&f, err, sizeof err));

  /* Every end of every range: accepted inside, refused one past it,
   * with the setting and the range named. */
  const struct {
    int field; /* 0 tos, 1 ack, 2 retry, 3 vector, 4 node */
    int value;
    bool ok;
    const char *says;
  } cases[] = {
      {0, 0, true, NULL},
      {0, 255, true, NULL},
      {0, -1, true, NULL},
      {0, 256, false, "tos 256 is out of range (0-255"},
      {0, -2, false, "tos -2"},
      {1, 0, true, NULL},
      {1, 31, true, NULL},
      {1, 32, false, "ACK timeout 32 is out of range (1-31"},
      {2, 0, true, NULL},
      {2, 6, true, NULL},
      {2, 7, false, "7 means retry forever"},
      {3, 0, true, NULL},
      {3, 1000, true, NULL},
      {3, -2, false, "completion vector -2"},
      {4, 0, true, NULL},
      {4, -2, true, NULL},
      {4, -3, false, "NUMA node -3 is out of range"},
      {4, 1024, false, "NUMA node 1024"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sbr__fabric_defaults(&f);
    switch (cases[i].field) {
    case 0:
      f.tos = cases[i].value;
      break;
    case 1:
      f.ack_timeout = (uint8_t)cases[i].value;
      break;
    case 2:
      f.retry_count = (uint8_t)cases[i].value;
      break;
    case 3:
      f.comp_vector = cases[i].value;
      break;
    default:
      f.numa_node = cases[i].value;
    }
    err[0] = '\0';
    int ret = sbr__fabric_check(&f, err, sizeof err);
    ASSERT_MSG(cases[i].ok ? ret == 0 : ret == -EINVAL,
               "case %zu (field %d = %d): %d %s", i, cases[i].field,
               cases[i].value, ret, err);
    if (cases[i].says)
      ASSERT_MSG(strstr(err, cases[i].says), "case %zu: \"%s\"", i, err);
  }
}

static void out_of_range_configs_are_refused_at_new(void)
{
  /* Refused before anything connects or listens: the port has nobody. */
  struct sbr_sender_config sc;
  sbr_sender *s = NULL;
  char err[256] = "";
  fixture_sender_config(&sc, fixture_port());
  sc.retry_count = 7;
  ASSERT_EQ(sbr_sender_new(&sc, &s, err, sizeof err), -EINVAL);
  ASSERT(s == NULL);
  ASSERT_MSG(strstr(err, "retry count 7") && strstr(err, "retry forever"), "%s",
             err);
  fixture_sender_config(&sc, fixture_port());
  sc.ack_timeout = 40;
  ASSERT_EQ(sbr_sender_new(&sc, &s, err, sizeof err), -EINVAL);
  ASSERT_MSG(strstr(err, "ACK timeout 40"), "%s", err);
  fixture_sender_config(&sc, fixture_port());
  sc.tos = 300;
  ASSERT_EQ(sbr_sender_new(&sc, &s, err, sizeof err), -EINVAL);
  ASSERT_MSG(strstr(err, "tos 300"), "%s", err);

  struct sbr_receiver_config rc;
  sbr_receiver *r = NULL;
  fixture_receiver_config(&rc, fixture_port(), 4, 4096);
  rc.numa_node = -5;
  ASSERT_EQ(sbr_receiver_new(&rc, &r, err, sizeof err), -EINVAL);
  ASSERT(r == NULL);
  ASSERT_MSG(strstr(err, "NUMA node -5"), "%s", err);
  fixture_receiver_config(&rc, fixture_port(), 4, 4096);
  rc.ack_timeout = 32;
  ASSERT_EQ(sbr_receiver_new(&rc, &r, err, sizeof err), -EINVAL);
  ASSERT_MSG(strstr(err, "ACK timeout 32"), "%s", err);
}

static void lanes_spread_over_completion_vectors(void)
{
  /* Lane ids 0..7 on a device with 4 vectors: each vector twice. */
  int seen[4] = {0};
  for (uint32_t lane = 0; lane < 8; lane++) {
    int v = sbr__fabric_comp_vector(SBR__COMP_VECTOR_SPREAD, lane, 4);
    ASSERT(v >= 0 && v < 4);
    seen[v]++;
  }
  for (int v = 0; v < 4; v++)
    ASSERT_EQ(seen[v], 2);
  ASSERT_EQ(sbr__fabric_comp_vector(SBR__COMP_VECTOR_SPREAD, 5, 4), 1);
  /* Pinned: every lane on that vector, a pin past the count wraps. */
  for (uint32_t lane = 0; lane < 8; lane++)
    ASSERT_EQ(sbr__fabric_comp_vector(2, lane, 4), 2);
  ASSERT_EQ(sbr__fabric_comp_vector(6, 0, 4), 2);
  /* A device with one vector (rxe, siw) or none: vector 0. */
  ASSERT_EQ(sbr__fabric_comp_vector(SBR__COMP_VECTOR_SPREAD, 7, 1), 0);
  ASSERT_EQ(sbr__fabric_comp_vector(3, 7, 1), 0);
  ASSERT_EQ(sbr__fabric_comp_vector(SBR__COMP_VECTOR_SPREAD, 7, 0), 0);
}

/* Writes ROOT/class/infiniband/DEV/device/numa_node with text. */
static void fake_numa_node(const char *root, const char *dev, const char *text)
{
  char path[512];
  const char *parts[] = {"class", "infiniband", dev, "device"};
  snprintf(path, sizeof path, "%s", root);
  for (size_t i = 0; i < 4; i++) {
    size_t n = strlen(path);
    snprintf(path + n, sizeof path - n, "/%s", parts[i]);
    mkdir(path, 0700);
  }
  size_t n = strlen(path);
  snprintf(path + n, sizeof path - n, "/numa_node");
  FILE *f = fopen(path, "w");
  ASSERT(f);
  fputs(text, f);
  fclose(f);
}

static void numa_node_follows_the_device_unless_told(void)
{
  char root[] = "/tmp/sbr-fake-sysfs-XXXXXX";
  ASSERT(mkdtemp(root));
  fake_numa_node(root, "mlx5_0", "1\n");
  fake_numa_node(root, "rxe0", "-1\n");
  ASSERT_EQ(sbr__fabric_device_node(root, "mlx5_0"), 1);
  ASSERT_EQ(sbr__fabric_device_node(root, "rxe0"), -1);     /* no NUMA */
  ASSERT_EQ(sbr__fabric_device_node(root, "bnxt_re0"), -1); /* no file */
  ASSERT_EQ(sbr__fabric_device_node(root, "../x"), -1);

  /* -1: the device's node, if it has one; -2: never; N: N. */
  ASSERT_EQ(sbr__fabric_numa_node(SBR__NUMA_DEVICE, 1), 1);
  ASSERT_EQ(sbr__fabric_numa_node(SBR__NUMA_DEVICE, -1), -1);
  ASSERT_EQ(sbr__fabric_numa_node(SBR__NUMA_NONE, 1), -1);
  ASSERT_EQ(sbr__fabric_numa_node(0, 1), 0);
  ASSERT_EQ(sbr__fabric_numa_node(3, -1), 3);

  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  ASSERT_EQ(system(cmd), 0);
}

/* Whether the kernel marks the mapping holding addr VM_HUGEPAGE (smaps
 * VmFlags "hg": madvise(MADV_HUGEPAGE) reached it, whatever the host's
 * THP setting then makes of it). */
static bool mapping_advised_huge(const void *addr)
{
  FILE *f = fopen("/proc/self/smaps", "re");
  ASSERT(f);
  char line[1024];
  bool in = false, found = false, huge = false;
  uintptr_t a = (uintptr_t)addr;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') &&
        line[strspn(line, "0123456789abcdef")] == '-') {
      in = a >= lo && a < hi;
      continue;
    }
    if (in && strncmp(line, "VmFlags:", 8) == 0) {
      found = true;
      huge = strstr(line, " hg") != NULL;
      in = false;
    }
  }
  fclose(f);
  ASSERT_MSG(found, "no mapping holds %p", addr);
  return huge;
}

static void place_advises_large_mappings_and_binds(void)
{
  size_t big = 4u << 20, small = 1u << 20;
  void *p = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  void *q = mmap(NULL, small, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT(p != MAP_FAILED && q != MAP_FAILED);
  ASSERT(!mapping_advised_huge(p));
  bool advised, bound;
  uint64_t before = atomic_load(&sbr__fabric_numa_bound);
  /* Node 0 exists on every Linux host. */
  sbr__fabric_place(p, big, true, 0, "test", &advised, &bound);
  ASSERT(advised);
  ASSERT(mapping_advised_huge(p));
  ASSERT(bound);
  ASSERT_EQ(atomic_load(&sbr__fabric_numa_bound), before + 1);
  /* Under 2 MiB, or not asked: no advice; no node: no binding. */
  sbr__fabric_place(q, small, true, -1, "test", &advised, &bound);
  ASSERT(!advised && !bound);
  ASSERT(!mapping_advised_huge(q));
  munmap(p, big);
  munmap(q, small);
}

/* A shm receiver whose lanes are 4 x 1 MiB: huge pages advised on its
 * lane mapping exactly when huge_pages says so. */
static bool shm_lane_advised(bool huge_pages)
{
  uint16_t port = fixture_port();
  struct sbr_receiver_config rc;
  fixture_receiver_config(&rc, port, 4, 1u << 20);
  rc.huge_pages = huge_pages;
  sbr_receiver *r = fixture_receiver_new(&rc);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  /* the payload pointer is then the receiver's map */
  struct sbr__sender_knobs knobs = {.copy_into_lane = true};
  sbr_sender *s = fixture_sender_knobs(r, &sc, &knobs);
  ASSERT_OK(fixture_send(s, 0, 0, 1000));
  sbr_block *b = NULL;
  for (int i = 0; i < 1000 && !b; i++)
    if (sbr_receiver_next(r, 10, &b) != 0)
      b = NULL;
  ASSERT_MSG(b, "no block arrived");
  bool advised = mapping_advised_huge(sbr_block_get_info(b)->payload);
  sbr_block_release(b);
  sbr_sender_free(s);
  sbr_receiver_free(r);
  return advised;
}

static void shm_lane_gets_huge_pages_unless_switched_off(void)
{
  ASSERT(shm_lane_advised(true));
  ASSERT(!shm_lane_advised(false));
}

int main(int argc, char **argv)
{
  static const struct test_entry tests[] = {
      {"defaults_are_the_documented_ones", defaults_are_the_documented_ones,
       ANY_BACKEND},
      {"ranges_are_checked_with_a_clear_error",
       ranges_are_checked_with_a_clear_error, ANY_BACKEND},
      {"out_of_range_configs_are_refused_at_new",
       out_of_range_configs_are_refused_at_new, ANY_BACKEND},
      {"lanes_spread_over_completion_vectors",
       lanes_spread_over_completion_vectors, ANY_BACKEND},
      {"numa_node_follows_the_device_unless_told",
       numa_node_follows_the_device_unless_told, ANY_BACKEND},
      {"place_advises_large_mappings_and_binds",
       place_advises_large_mappings_and_binds, ANY_BACKEND},
      {"shm_lane_gets_huge_pages_unless_switched_off",
       shm_lane_gets_huge_pages_unless_switched_off, ANY_BACKEND},
      {NULL, NULL, ANY_BACKEND},
  };
  return test_main(tests, argc, argv);
}
