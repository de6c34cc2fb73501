/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* transport.c - back-end lookup and the connection private data codec. */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "wire/byteorder.h"
#include "transport/transport.h"

/* The structs in transport.h document the wire layouts the codecs below
 * write byte by byte; they must agree. */
static_assert(sizeof(struct sbr__connect_priv) == SBR__CONNECT_PRIV_PROBE_SIZE,
              "connect private data is 32 bytes with the probe target");
static_assert(offsetof(struct sbr__connect_priv, probe_addr) ==
                  SBR__CONNECT_PRIV_SIZE,
              "the probe target is appended after the first 16 bytes");
static_assert(SBR__CONNECT_PRIV_PROBE_SIZE <= 56,
              "rdma_cm carries at most 56 bytes from the active side");
static_assert(sizeof(struct sbr__accept_priv) == SBR__ACCEPT_PRIV_SIZE,
              "accept private data is 56 bytes");
static_assert(offsetof(struct sbr__accept_priv, refused_offset) ==
                  SBR__ACCEPT_PRIV_MIN_SIZE,
              "refused_offset is appended after the 48 bytes of older "
              "receivers");
static_assert(sizeof(struct sbr__reject_priv) == SBR__REJECT_PRIV_SIZE,
              "reject private data is 16 bytes");
static_assert(offsetof(struct sbr__reject_priv, receiver_value) == 8 &&
                  offsetof(struct sbr__reject_priv, sender_value) == 12,
              "reject private data values at 8 and 12");

const struct sbr__transport_ops *sbr__transport_get(enum sbr_backend backend)
{
  switch (backend) {
  case SBR_BACKEND_SHM:
    return &sbr__transport_shm;
  case SBR_BACKEND_VERBS:
#ifdef SBR_HAVE_VERBS
    return &sbr__transport_verbs;
#else
    return NULL;
#endif
  }
  return NULL;
}

void sbr__backend_missing_errf(char *buf, size_t len, enum sbr_backend backend)
{
  if (backend == SBR_BACKEND_VERBS)
    sbr__errf(buf, len,
              "the verbs back end is not built in: this libsbr was built "
              "without rdma-core (libibverbs, librdmacm); use the shm back "
              "end on one host, or rebuild with libibverbs-dev and "
              "librdmacm-dev installed");
  else
    sbr__errf(buf, len, "back end %s is not built in",
              sbr_backend_name(backend));
}

int sbr_backend_check(enum sbr_backend backend, char *errbuf, size_t errlen)
{
  const struct sbr__transport_ops *ops = sbr__transport_get(backend);
  if (errbuf && errlen)
    errbuf[0] = '\0';
  if (!ops) {
    sbr__backend_missing_errf(errbuf, errlen, backend);
    return -ENOTSUP;
  }
  return ops->check_host ? ops->check_host(errbuf, errlen) : 0;
}

void sbr__errf(char *buf, size_t len, const char *fmt, ...)
{
  if (!buf || len == 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, len, fmt, ap);
  va_end(ap);
}

/* Connect private data: magic u32 | version u8 | mechanism u8 | reserved u16
 * | block_size u32 | block_count u32  = 16 bytes. */
void sbr__connect_priv_encode(uint8_t out[SBR__CONNECT_PRIV_SIZE],
                              uint8_t mechanism, uint32_t block_size,
                              uint32_t block_count)
{
  memset(out, 0, SBR__CONNECT_PRIV_SIZE);
  sbr__put_le32(out + 0, SBR__PRIV_MAGIC);
  out[4] = SBR__PRIV_VERSION;
  out[5] = mechanism;
  sbr__put_le32(out + 8, block_size);
  sbr__put_le32(out + 12, block_count);
}

int sbr__priv_version(const void *data, size_t len)
{
  const uint8_t *p = data;
  if (!p || len < 5 || sbr__get_le32(p) != SBR__PRIV_MAGIC)
    return -1;
  return p[4];
}

/* Magic and version: -EPROTO for anything else, -EPROTONOSUPPORT for an sbr
 * peer of another version (a v1 peer knows no pause bitmap: a v1 sender
 * would ignore pauses, a v1 receiver publishes none). */
static int check_magic_version(const uint8_t *p)
{
  if (sbr__get_le32(p) != SBR__PRIV_MAGIC)
    return -EPROTO;
  if (p[4] != SBR__PRIV_VERSION)
    return -EPROTONOSUPPORT;
  return 0;
}

int sbr__connect_priv_decode(const void *data, size_t len, uint8_t *mechanism,
                             uint32_t *block_size, uint32_t *block_count)
{
  const uint8_t *p = data;
  if (!p || len < 5)
    return -EPROTO;
  int ret = check_magic_version(p);
  if (ret < 0)
    return ret;
  if (len < SBR__CONNECT_PRIV_SIZE)
    return -EPROTO;
  if (p[5] > SBR_MECH_SLIDING_WINDOW)
    return -EPROTO;
  *mechanism = p[5];
  *block_size = sbr__get_le32(p + 8);
  *block_count = sbr__get_le32(p + 12);
  return 0;
}

/* The probe target, appended: probe_addr u64 | probe_rkey u32 | probe_len
 * u32 at 16 = 32 bytes.  Optional, so no version change: an older receiver
 * reads 16 bytes and ignores the rest (it probes with a WRITE, as before),
 * and an older sender's 16 bytes, or IB CM's zero padding of them, mean
 * "no target" (probe_len 0), as do a sender's that offers none. */
void sbr__connect_priv_add_probe(uint8_t out[SBR__CONNECT_PRIV_PROBE_SIZE],
                                 const struct sbr__probe_target *t)
{
  sbr__put_le64(out + 16, t->addr);
  sbr__put_le32(out + 24, t->rkey);
  sbr__put_le32(out + 28, t->len);
}

int sbr__connect_priv_probe(const void *data, size_t len,
                            struct sbr__probe_target *t)
{
  const uint8_t *p = data;
  memset(t, 0, sizeof *t);
  if (!p || len < SBR__CONNECT_PRIV_PROBE_SIZE)
    return 0;
  uint32_t n = sbr__get_le32(p + 28);
  if (n == 0)
    return 0;
  /* The READ lands in the receiver's sink of SBR__PROBE_MAX bytes. */
  if (n > SBR__PROBE_MAX)
    return -EPROTO;
  t->addr = sbr__get_le64(p + 16);
  t->rkey = sbr__get_le32(p + 24);
  t->len = n;
  return 0;
}

/* Accept private data: magic u32 | version u8 | mechanism u8 | epoch u16 |
 * block_size u32 | block_count u32 | blocks_addr u64 | status_addr u64 |
 * blocks_rkey u32 | status_rkey u32 | lane_id u32 | pause_offset u32 |
 * refused_offset u32 | reserved u32 = 56 (v1 had a reserved zero where v2 has
 * pause_offset; the first v2 receivers sent 48 bytes, no refused_offset). */
void sbr__accept_priv_encode(uint8_t out[SBR__ACCEPT_PRIV_SIZE],
                             const struct sbr__lane_desc *lane)
{
  memset(out, 0, SBR__ACCEPT_PRIV_SIZE);
  sbr__put_le32(out + 0, SBR__PRIV_MAGIC);
  out[4] = SBR__PRIV_VERSION;
  out[5] = lane->mechanism;
  sbr__put_le16(out + 6, lane->epoch);
  sbr__put_le32(out + 8, lane->block_size);
  sbr__put_le32(out + 12, lane->block_count);
  sbr__put_le64(out + 16, lane->blocks_addr);
  sbr__put_le64(out + 24, lane->status_addr);
  sbr__put_le32(out + 32, lane->blocks_rkey);
  sbr__put_le32(out + 36, lane->status_rkey);
  sbr__put_le32(out + 40, lane->lane_id);
  sbr__put_le32(out + 44, lane->pause_offset);
  sbr__put_le32(out + 48, lane->refused_offset);
}

int sbr__accept_priv_decode(const void *data, size_t len,
                            struct sbr__lane_desc *lane)
{
  const uint8_t *p = data;
  if (!p || len < 5)
    return -EPROTO;
  int ret = check_magic_version(p);
  if (ret < 0)
    return ret;
  if (len < SBR__ACCEPT_PRIV_MIN_SIZE)
    return -EPROTO;
  lane->mechanism = p[5];
  lane->epoch = sbr__get_le16(p + 6);
  lane->block_size = sbr__get_le32(p + 8);
  lane->block_count = sbr__get_le32(p + 12);
  lane->blocks_addr = sbr__get_le64(p + 16);
  lane->status_addr = sbr__get_le64(p + 24);
  lane->blocks_rkey = sbr__get_le32(p + 32);
  lane->status_rkey = sbr__get_le32(p + 36);
  lane->lane_id = sbr__get_le32(p + 40);
  lane->pause_offset = sbr__get_le32(p + 44);
  /* An older receiver's 48 bytes, or its zero padding (verbs pads the
   * accept's private data): no refused bitmap, READ no further.  The
   * reserved word after it is ignored (a later field may use it). */
  lane->refused_offset = len >= SBR__ACCEPT_PRIV_MIN_SIZE + 4
                             ? sbr__get_le32(p + SBR__ACCEPT_PRIV_MIN_SIZE)
                             : 0;
  /* Rule 8: a lane we would write outside of is refused here.  The bitmap
   * must follow the status bytes, at most one cache line of padding on;
   * the refused bitmap, when there, right after it (the READ's length
   * depends on it: one too long would fail on the remote side). */
  if (lane->mechanism > SBR_MECH_SLIDING_WINDOW || lane->block_count == 0 ||
      lane->block_count > 65536 || lane->block_size < 128 ||
      lane->block_size > (64u << 20) ||
      lane->pause_offset < lane->block_count ||
      lane->pause_offset > sbr__pause_offset_for(lane->block_count) ||
      (lane->refused_offset != 0 &&
       lane->refused_offset != lane->pause_offset + SBR__PAUSE_BITMAP_SIZE))
    return -EPROTO;
  return 0;
}

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
/* ------------------------------------------------------------- refusals */

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

void sbr__reject_priv_encode(uint8_t out[SBR__REJECT_PRIV_SIZE],
                             const struct sbr__refusal *r)
{
  memset(out, 0, SBR__REJECT_PRIV_SIZE);
  sbr__put_le32(out + 0, SBR__REJECT_MAGIC);
  out[4] = SBR__REJECT_FORMAT;
  out[5] = r->reason;
  out[6] = r->retryable ? SBR__REJECT_RETRYABLE : 0;
  sbr__put_le32(out + 8, r->receiver_value);
  sbr__put_le32(out + 12, r->sender_value);
}

int sbr__reject_priv_decode(const void *data, size_t len,
                            struct sbr__refusal *r)
{
  const uint8_t *p = data;
  /* Any format: the first 16 bytes keep their meaning in every one. */
  if (!p || len < SBR__REJECT_PRIV_SIZE ||
      sbr__get_le32(p) != SBR__REJECT_MAGIC || p[4] == 0 || p[5] == 0)
    return -EPROTO;
  r->reason = p[5];
  r->retryable = p[6] & SBR__REJECT_RETRYABLE;
  r->receiver_value = sbr__get_le32(p + 8);
  r->sender_value = sbr__get_le32(p + 12);
  return 0;
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
