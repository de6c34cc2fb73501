/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* names.c - the names of back ends, mechanisms and poll modes (sbr.h), one
 * spelling for the properties, the tools and the logs. */
#include <errno.h>
#include <string.h>

#include "sbr.h"

const char *sbr_backend_name(enum sbr_backend backend)
{
  return backend == SBR_BACKEND_SHM ? "shm" : "verbs";
}

const char *sbr_mechanism_name(enum sbr_mechanism mechanism)
{
  return mechanism == SBR_MECH_SLIDING_WINDOW ? "sliding-window"
                                              : "status-byte";
}

int sbr_backend_from_name(const char *name, enum sbr_backend *out)
{
  if (name && strcmp(name, "verbs") == 0)
    *out = SBR_BACKEND_VERBS;
  else if (name && strcmp(name, "shm") == 0)
    *out = SBR_BACKEND_SHM;
  else
    return -EINVAL;
  return 0;
}

int sbr_mechanism_from_name(const char *name, enum sbr_mechanism *out)
{
  if (name && strcmp(name, "status-byte") == 0)
    *out = SBR_MECH_STATUS_BYTE;
  else if (name && strcmp(name, "sliding-window") == 0)
    *out = SBR_MECH_SLIDING_WINDOW;
  else
    return -EINVAL;
  return 0;
}

const char *sbr_poll_mode_name(enum sbr_poll_mode mode)
{
  switch (mode) {
  case SBR_POLL_BUSY:
    return "busy";
  case SBR_POLL_BACKOFF:
    return "backoff";
  case SBR_POLL_ADAPTIVE:
  default:
    return "adaptive";
  }
}

int sbr_poll_mode_from_name(const char *name, enum sbr_poll_mode *out)
{
  if (name && strcmp(name, "adaptive") == 0)
    *out = SBR_POLL_ADAPTIVE;
  else if (name && strcmp(name, "busy") == 0)
    *out = SBR_POLL_BUSY;
  else if (name && strcmp(name, "backoff") == 0)
    *out = SBR_POLL_BACKOFF;
  else
    return -EINVAL;
  return 0;
}
