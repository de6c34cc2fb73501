/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nic-counters.c - NIC error counters from sysfs (nic-counters.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/nic-counters.h"

const char *sbr__nic_sysfs_root = SBR__SYSFS_INFINIBAND;

/* Responder-side remote access errors, by the names drivers give them.
 * Add a driver's name here when one is known to count them. */
static const char *const remote_access_names[] = {
    "resp_remote_access_errors", /* mlx5 */
};

static int read_u64(const char *path, uint64_t *value)
{
  FILE *f = fopen(path, "re");
  if (!f)
    return errno == ENOENT ? -ENOENT : -(errno ? errno : EIO);
  char line[64];
  int ret = -EIO;
  if (fgets(line, sizeof line, f)) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(line, &end, 10);
    if (errno == 0 && end != line && (*end == '\n' || *end == '\0')) {
      *value = v;
      ret = 0;
    }
  }
  fclose(f);
  return ret;
}

int sbr__nic_remote_access_errors(const char *device, unsigned port,
                                  uint64_t *value)
{
  if (!device || !*device || strchr(device, '/') || !value)
    return -EINVAL;
  for (size_t i = 0;
       i < sizeof remote_access_names / sizeof remote_access_names[0]; i++) {
    char path[512];
    int n = snprintf(path, sizeof path, "%s/%s/ports/%u/hw_counters/%s",
                     sbr__nic_sysfs_root, device, port, remote_access_names[i]);
    if (n < 0 || (size_t)n >= sizeof path)
      return -ENAMETOOLONG;
    int ret = read_u64(path, value);
    if (ret != -ENOENT)
      return ret;
  }
  return -ENOENT;
}
