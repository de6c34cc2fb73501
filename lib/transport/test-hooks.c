/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* test-hooks.c - fault injection, handed to the back end that takes it
 * (test-hooks.h). */
#include "transport/shm/shm-internal.h"
#include "transport/test-hooks.h"

void sbr__transport_inject_faults(const struct sbr__transport_ops *ops,
                                  struct sbr__conn *c,
                                  const struct sbr__fault_injection *faults)
{
  if (!faults || !c || ops != &sbr__transport_shm)
    return;
  sbr__shm_inject_faults(c, faults->delay_us, faults->fail_after_wrs,
                         faults->stall_after_wrs);
}
