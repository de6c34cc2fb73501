/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* private-data.c - the connect, accept and reject private data codecs
 * (private-data.h). */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "wire/byteorder.h"
#include "wire/private-data.h"

/* The structs in private-data.h document the wire layouts the codecs below
 * write byte by byte; they must agree. */
static_assert(sizeof(struct sbr__connect_priv) == SBR__CONNECT_PRIV_PROBE_SIZE,
              "connect private data is 32 bytes with the probe target");
static_assert(offsetof(struct sbr__connect_priv, probe_addr) ==
                  SBR__CONNECT_PRIV_SIZE,
              "the probe target is appended after the first 16 bytes");
static_assert(SBR__CONNECT_PRIV_PROBE_SIZE <= 56,
              "rdma_cm carries at most 56 bytes from the active side");
static_assert(offsetof(struct sbr__accept_priv, key_unit_offset) + 4 ==
                  SBR__ACCEPT_PRIV_SIZE,
              "accept private data is 60 bytes");
static_assert(offsetof(struct sbr__accept_priv, features) ==
                  SBR__ACCEPT_PRIV_FEATURES_SIZE - 4,
              "features at 52, where older receivers send reserved zeros");
static_assert(SBR__ACCEPT_PRIV_SIZE <= 196,
              "rdma_cm carries at most 196 bytes from the passive side");
static_assert(offsetof(struct sbr__accept_priv, refused_offset) ==
                  SBR__ACCEPT_PRIV_MIN_SIZE,
              "refused_offset is appended after the 48 bytes of older "
              "receivers");
static_assert(sizeof(struct sbr__reject_priv) == SBR__REJECT_PRIV_SIZE,
              "reject private data is 16 bytes");
static_assert(offsetof(struct sbr__reject_priv, receiver_value) == 8 &&
                  offsetof(struct sbr__reject_priv, sender_value) == 12,
              "reject private data values at 8 and 12");

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
 * refused_offset u32 | features u32 | key_unit_offset u32 = 60 (v1 had a
 * reserved zero where v2 has pause_offset; the first v2 receivers sent 48
 * bytes, no refused_offset; the next 56, with a reserved zero where the
 * features are, and no key_unit_offset). */
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
  sbr__put_le32(out + 52, lane->features);
  sbr__put_le32(out + 56, lane->key_unit_offset);
}

bool sbr__lane_desc_valid(const struct sbr__lane_desc *lane)
{
  /* The bitmap must follow the status bytes, at most one cache line of
   * padding on; the refused bitmap, when there, right after it, and the
   * key-unit area right after that (the READ's length depends on them:
   * one too long would fail on the remote side, taking the QP down). */
  if (lane->mechanism > SBR_MECH_SLIDING_WINDOW || lane->block_count == 0 ||
      lane->block_count > 65536 || lane->block_size < 128 ||
      lane->block_size > (64u << 20) ||
      lane->pause_offset < lane->block_count ||
      lane->pause_offset > sbr__pause_offset_for(lane->block_count) ||
      (lane->refused_offset != 0 &&
       lane->refused_offset != lane->pause_offset + SBR__PAUSE_BITMAP_SIZE))
    return false;
  if ((lane->features & SBR__FEATURE_KEY_UNIT) &&
      (lane->refused_offset == 0 ||
       lane->key_unit_offset !=
           lane->refused_offset + SBR__REFUSED_BITMAP_SIZE))
    return false;
  return true;
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
   * accept's private data): no refused bitmap, READ no further. */
  lane->refused_offset = len >= SBR__ACCEPT_PRIV_MIN_SIZE + 4
                             ? sbr__get_le32(p + SBR__ACCEPT_PRIV_MIN_SIZE)
                             : 0;
  /* The features word: an older receiver's reserved zero, or absent.
   * Bits this sender doesn't know are ignored (a feature the sender
   * doesn't use changes nothing it does); the ones it knows bring their
   * fields, which must then be there. */
  lane->features = len >= SBR__ACCEPT_PRIV_FEATURES_SIZE
                       ? sbr__get_le32(p + SBR__ACCEPT_PRIV_FEATURES_SIZE - 4)
                       : 0;
  lane->key_unit_offset = 0;
  if (lane->features & SBR__FEATURE_KEY_UNIT) {
    if (len < SBR__ACCEPT_PRIV_SIZE)
      return -EPROTO;
    lane->key_unit_offset = sbr__get_le32(p + 56);
  }
  /* Rule 8: a lane we would write outside of is refused here. */
  if (!sbr__lane_desc_valid(lane))
    return -EPROTO;
  return 0;
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
