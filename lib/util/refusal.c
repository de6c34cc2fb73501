/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* refusal.c - refusal names, sentences and errnos (refusal.h, sbr.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/errors.h"
#include "util/refusal.h"

static const char *const refusal_names[] = {
    [SBR_REFUSAL_NONE] = "none",
    [SBR_REFUSAL_VERSION] = "version",
    [SBR_REFUSAL_MECHANISM] = "mechanism",
    [SBR_REFUSAL_GEOMETRY] = "geometry",
    [SBR_REFUSAL_MALFORMED] = "malformed-request",
    [SBR_REFUSAL_NOT_ALLOWED] = "not-allowed",
    [SBR_REFUSAL_LANES_FULL] = "lanes-full",
    [SBR_REFUSAL_RESOURCES] = "receiver-resources",
    [SBR_REFUSAL_BUSY] = "busy",
    [SBR_REFUSAL_MEMLOCK] = "receiver-memlock",
    [SBR_REFUSAL_DEVICE] = "device",
};

const char *sbr_refusal_name(enum sbr_refusal reason)
{
  if ((unsigned)reason < sizeof refusal_names / sizeof refusal_names[0])
    return refusal_names[reason];
  return "unknown";
}

bool sbr_refusal_retryable(enum sbr_refusal reason)
{
  return reason == SBR_REFUSAL_LANES_FULL || reason == SBR_REFUSAL_RESOURCES ||
         reason == SBR_REFUSAL_BUSY;
}

/* A mechanism number from the wire, named even when out of range. */
static const char *mech_text(uint32_t m, char *buf, size_t len)
{
  if (m <= SBR_MECH_SLIDING_WINDOW)
    return sbr_mechanism_name((enum sbr_mechanism)m);
  snprintf(buf, len, "unknown (%u)", m);
  return buf;
}

void sbr_refusal_describe(enum sbr_refusal reason, uint32_t receiver_value,
                          uint32_t sender_value, char *buf, size_t len)
{
  char a[24], b[24];
  if (!buf || len == 0)
    return;
  switch (reason) {
  case SBR_REFUSAL_VERSION:
    snprintf(buf, len,
             "the receiver speaks sbr protocol version %u, the sender %u",
             receiver_value, sender_value);
    break;
  case SBR_REFUSAL_MECHANISM:
    snprintf(buf, len, "the receiver runs the %s mechanism, the sender %s",
             mech_text(receiver_value, a, sizeof a),
             mech_text(sender_value, b, sizeof b));
    break;
  case SBR_REFUSAL_DEVICE:
    snprintf(buf, len,
             "the receiver's RDMA device is iWARP, which has no RDMA WRITE "
             "with immediate: the %s mechanism can't run on it (use "
             "status-byte)",
             mech_text(receiver_value, a, sizeof a));
    break;
  case SBR_REFUSAL_GEOMETRY:
    snprintf(buf, len,
             "the receiver's lanes have %u blocks, the sliding-window sender "
             "can acknowledge at most %u (raise its block count hint, or "
             "lower the receiver's block count)",
             receiver_value, sender_value);
    break;
  case SBR_REFUSAL_MALFORMED:
    snprintf(buf, len,
             "the receiver did not understand the connect request (%u bytes "
             "of private data; not an sbr sender?)",
             sender_value);
    break;
  case SBR_REFUSAL_NOT_ALLOWED:
    snprintf(buf, len,
             "the sender is not on the receiver's list of allowed senders");
    break;
  case SBR_REFUSAL_BUSY:
    snprintf(buf, len,
             "the receiver takes at most %u connection attempts a second "
             "and had more; try again",
             receiver_value);
    break;
  case SBR_REFUSAL_LANES_FULL:
    snprintf(buf, len, "all %u lanes of the receiver are in use",
             receiver_value);
    break;
  case SBR_REFUSAL_RESOURCES:
    snprintf(buf, len, "the receiver could not set up a lane: %s",
             receiver_value ? strerror((int)receiver_value) : "no resources");
    break;
  case SBR_REFUSAL_MEMLOCK:
    snprintf(buf, len,
             "the receiver may lock %u KiB of memory (RLIMIT_MEMLOCK) and a "
             "lane needs %u KiB: raise its limit (ulimit -l, systemd "
             "LimitMEMLOCK=, a container's IPC_LOCK capability)",
             receiver_value, sender_value);
    break;
  case SBR_REFUSAL_NONE:
  default:
    snprintf(buf, len,
             "the receiver refused for reason %u, unknown to this version "
             "(values %u, %u)",
             (unsigned)reason, receiver_value, sender_value);
    break;
  }
}

void sbr__refusal_set(struct sbr__refusal *r, enum sbr_refusal reason,
                      uint32_t receiver_value, uint32_t sender_value)
{
  r->reason = (uint8_t)reason;
  r->retryable = sbr_refusal_retryable(reason);
  r->receiver_value = receiver_value;
  r->sender_value = sender_value;
}

int sbr__refusal_errno(const struct sbr__refusal *r)
{
  switch (r->reason) {
  case SBR_REFUSAL_VERSION:
  case SBR_REFUSAL_MECHANISM:
  case SBR_REFUSAL_GEOMETRY:
  case SBR_REFUSAL_DEVICE:
    return -EPROTONOSUPPORT;
  case SBR_REFUSAL_MALFORMED:
    return -EPROTO;
  case SBR_REFUSAL_NOT_ALLOWED:
    return -EACCES;
  case SBR_REFUSAL_LANES_FULL:
  case SBR_REFUSAL_BUSY:
    return -EBUSY;
  case SBR_REFUSAL_RESOURCES:
    return -ECONNREFUSED;
  case SBR_REFUSAL_MEMLOCK:
    return -ENOMEM;
  default:
    /* A newer receiver's reason: its flag says whether to retry; one that
     * won't heal is most likely something this older sender lacks. */
    return r->retryable ? -ECONNREFUSED : -EPROTONOSUPPORT;
  }
}

void sbr__refusal_errf(char *buf, size_t len, const char *where,
                       const struct sbr__refusal *r)
{
  char why[256];
  sbr_refusal_describe((enum sbr_refusal)r->reason, r->receiver_value,
                       r->sender_value, why, sizeof why);
  sbr__errf(buf, len, "%s refused the connection: %s", where, why);
}
