/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* test-nic.c - the NIC's counters from sysfs (lib/transport/nic-counters.c),
 * against a stand-in tree: the counter's name, its absence, a malformed file.
 */
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/nic-counters.h"
#include "test.h"

static char root[] = "/tmp/sbr-nic-XXXXXX";

static void put(const char *dev, unsigned port, const char *name,
                const char *text)
{
  char path[512];
  snprintf(path, sizeof path, "%s/%s", root, dev);
  mkdir(path, 0700);
  snprintf(path, sizeof path, "%s/%s/ports", root, dev);
  mkdir(path, 0700);
  snprintf(path, sizeof path, "%s/%s/ports/%u", root, dev, port);
  mkdir(path, 0700);
  snprintf(path, sizeof path, "%s/%s/ports/%u/hw_counters", root, dev, port);
  mkdir(path, 0700);
  snprintf(path, sizeof path, "%s/%s/ports/%u/hw_counters/%s", root, dev, port,
           name);
  FILE *f = fopen(path, "w");
  ASSERT(f);
  fputs(text, f);
  fclose(f);
}

static void setup(void)
{
  memcpy(root + sizeof root - 7, "XXXXXX", 6); /* a fresh tree each time */
  ASSERT(mkdtemp(root));
  sbr__nic_sysfs_root = root;
}

static void cleanup(void)
{
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  ASSERT_EQ(system(cmd), 0);
}

/* mlx5's responder counter is read, per device and port. */
static void reads_the_responder_counter(void)
{
  setup();
  put("mlx5_0", 1, "resp_remote_access_errors", "7\n");
  put("mlx5_0", 2, "resp_remote_access_errors", "9\n");
  uint64_t v = 0;
  ASSERT_OK(sbr__nic_remote_access_errors("mlx5_0", 1, &v));
  ASSERT_EQ(v, 7);
  ASSERT_OK(sbr__nic_remote_access_errors("mlx5_0", 2, &v));
  ASSERT_EQ(v, 9);
  cleanup();
}

/* rxe's counters (6.1) have no such name: absent, not zero. */
static void rxe_counters_have_none(void)
{
  setup();
  static const char *const rxe[] = {"ack_deferred",
                                    "completer_retry_err",
                                    "duplicate_request",
                                    "lifespan",
                                    "link_downed",
                                    "out_of_seq_request",
                                    "rcvd_pkts",
                                    "rcvd_rnr_err",
                                    "rcvd_seq_err",
                                    "rdma_recvs",
                                    "rdma_sends",
                                    "retry_exceeded_err",
                                    "retry_rnr_exceeded_err",
                                    "send_err",
                                    "send_rnr_err",
                                    "sent_pkts"};
  for (unsigned i = 0; i < sizeof rxe / sizeof rxe[0]; i++)
    put("rxe0", 1, rxe[i], "3\n");
  uint64_t v = 5;
  ASSERT_EQ(sbr__nic_remote_access_errors("rxe0", 1, &v), -ENOENT);
  ASSERT_EQ(v, 5);
  ASSERT_EQ(sbr__nic_remote_access_errors("nodev", 1, &v), -ENOENT);
  cleanup();
}

/* A file that isn't one number is an error, not a value; a device name
 * can't climb out of the tree. */
static void malformed_is_an_error(void)
{
  setup();
  put("mlx5_0", 1, "resp_remote_access_errors", "lots\n");
  put("mlx5_1", 1, "resp_remote_access_errors", "12 13\n");
  uint64_t v = 0;
  ASSERT_EQ(sbr__nic_remote_access_errors("mlx5_0", 1, &v), -EIO);
  ASSERT_EQ(sbr__nic_remote_access_errors("mlx5_1", 1, &v), -EIO);
  ASSERT_EQ(sbr__nic_remote_access_errors("../mlx5_0", 1, &v), -EINVAL);
  ASSERT_EQ(sbr__nic_remote_access_errors("", 1, &v), -EINVAL);
  cleanup();
}

int main(int argc, char **argv)
{
  static const struct test_entry tests[] = {
      {"reads_the_responder_counter", reads_the_responder_counter, ANY_BACKEND},
      {"rxe_counters_have_none", rxe_counters_have_none, ANY_BACKEND},
      {"malformed_is_an_error", malformed_is_an_error, ANY_BACKEND},
      {NULL, NULL, ANY_BACKEND},
  };
  return test_main(tests, argc, argv);
}
