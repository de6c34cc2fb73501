/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* transport.c - back-end lookup and the connection private data codec. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "byteorder.h"
#include "transport.h"

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

/* Accept private data: magic u32 | version u8 | mechanism u8 | epoch u16 |
 * block_size u32 | block_count u32 | blocks_addr u64 | status_addr u64 |
 * blocks_rkey u32 | status_rkey u32 | lane_id u32 | pause_offset u32 = 48
 * (v1 had a reserved zero where v2 has pause_offset). */
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
  if (len < SBR__ACCEPT_PRIV_SIZE)
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
  /* Rule 8: a lane we would write outside of is refused here.  The bitmap
   * must follow the status bytes, at most one cache line of padding on. */
  if (lane->mechanism > SBR_MECH_SLIDING_WINDOW || lane->block_count == 0 ||
      lane->block_count > 65536 || lane->block_size < 128 ||
      lane->block_size > (64u << 20) ||
      lane->pause_offset < lane->block_count ||
      lane->pause_offset > sbr__pause_offset_for(lane->block_count))
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
