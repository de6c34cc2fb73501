/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* test-block.c - the block format: round trip and every validation rule
 * (rule 3, rule 8). */
#include "wire/block.h"
#include "transport/transport.h"
#include "wire/byteorder.h"
#include "test.h"

#define BS 256
#define EPOCH 7

static uint8_t block[BS];

static struct sbr__header sample(void)
{
  return (struct sbr__header){
      .kind = SBR_KIND_DATA,
      .device = 11,
      .flags = SBR_FLAG_FIRST | SBR_FLAG_LAST | SBR_FLAG_DELTA,
      .packet = 65535,
      .epoch = EPOCH,
      .payload_len = 100,
      .seq = 0x0102030405060708ull,
      .pts = 40000000,
      .dts = SBR_TIME_NONE,
      .duration = 40000000,
      .capture_time = 1234567890123ull,
      .frame_offset = 0,
      .frame_size = 100,
  };
}

static void encode_sample(void)
{
  memset(block, 0xee, sizeof block);
  struct sbr__header h = sample();
  for (uint32_t i = 0; i < h.payload_len; i++)
    block[SBR__HEADER_SIZE + i] = (uint8_t)i;
  ASSERT_EQ(sbr__block_encode(block, BS, &h), SBR__BLOCK_OVERHEAD + 100);
}

static enum sbr__block_error decode(struct sbr__header *out)
{
  return sbr__block_decode(block, BS, NULL, EPOCH, out);
}

static void round_trip(void)
{
  encode_sample();
  struct sbr__header h, want = sample();
  ASSERT_EQ(decode(&h), SBR__BLOCK_OK);
  ASSERT_EQ(h.kind, want.kind);
  ASSERT_EQ(h.device, want.device);
  ASSERT_EQ(h.flags, want.flags);
  ASSERT_EQ(h.packet, want.packet);
  ASSERT_EQ(h.epoch, want.epoch);
  ASSERT_EQ(h.payload_len, want.payload_len);
  ASSERT(h.seq == want.seq);
  ASSERT(h.pts == want.pts);
  ASSERT(h.dts == want.dts);
  ASSERT(h.duration == want.duration);
  ASSERT(h.capture_time == want.capture_time);
  ASSERT_EQ(h.frame_offset, want.frame_offset);
  ASSERT_EQ(h.frame_size, want.frame_size);
  /* The wire is little-endian whatever the host is. */
  ASSERT_EQ(block[0], 'S');
  ASSERT_EQ(block[8], 0xff);
  ASSERT_EQ(block[16], 0x08);
  ASSERT_EQ(sbr__get_le64(block + SBR__HEADER_SIZE + 100), want.seq);
}

static void payload_too_large_is_not_encoded(void)
{
  struct sbr__header h = sample();
  h.payload_len = BS - SBR__BLOCK_OVERHEAD + 1;
  ASSERT_EQ(sbr__block_encode(block, BS, &h), 0);
}

static void rejects_bad_magic(void)
{
  encode_sample();
  block[1] ^= 0x40;
  struct sbr__header h;
  ASSERT_EQ(decode(&h), SBR__BLOCK_BAD_MAGIC);
}

static void rejects_wrong_version(void)
{
  encode_sample();
  block[4] = SBR__BLOCK_VERSION + 1;
  struct sbr__header h;
  ASSERT_EQ(decode(&h), SBR__BLOCK_BAD_VERSION);
}

static void rejects_unknown_kind(void)
{
  encode_sample();
  block[5] = 0x7f;
  struct sbr__header h;
  ASSERT_EQ(decode(&h), SBR__BLOCK_BAD_KIND);
  /* The newest kind is known, the next one not. */
  block[5] = SBR_KIND_EVENT + 1;
  ASSERT_EQ(decode(&h), SBR__BLOCK_BAD_KIND);
}

static void rejects_trailer_mismatch(void)
{
  encode_sample();
  block[SBR__HEADER_SIZE + 100] ^= 1; /* torn: trailer from another write */
  struct sbr__header h;
  ASSERT_EQ(decode(&h), SBR__BLOCK_BAD_TRAILER);
}

static void rejects_length_beyond_block(void)
{
  encode_sample();
  /* A length whose trailer would sit outside the block must be refused
   * before anything past the header is read. */
  sbr__put_le32(block + 12, BS - SBR__BLOCK_OVERHEAD + 1);
  struct sbr__header h;
  ASSERT_EQ(decode(&h), SBR__BLOCK_BAD_LENGTH);
  sbr__put_le32(block + 12, 0xffffffffu);
  ASSERT_EQ(decode(&h), SBR__BLOCK_BAD_LENGTH);
}

static void rejects_unknown_device(void)
{
  encode_sample();
  uint8_t mask[SBR_MAX_DEVICES / 8] = {0};
  mask[0] = 0xff; /* devices 0-7 only; the sample is device 11 */
  struct sbr__header h;
  ASSERT_EQ(sbr__block_decode(block, BS, mask, EPOCH, &h),
            SBR__BLOCK_UNKNOWN_DEVICE);
  mask[1] = 0x08; /* now 11 too */
  ASSERT_EQ(sbr__block_decode(block, BS, mask, EPOCH, &h), SBR__BLOCK_OK);
}

static void rejects_stale_epoch(void)
{
  encode_sample();
  struct sbr__header h;
  ASSERT_EQ(sbr__block_decode(block, BS, NULL, EPOCH + 1, &h),
            SBR__BLOCK_BAD_EPOCH);
}

static void rejects_fragment_outside_frame(void)
{
  struct sbr__header h = sample();
  h.flags = SBR_FLAG_LAST;
  h.frame_offset = 50;
  h.frame_size = 120; /* 50 + 100 > 120 */
  sbr__block_encode(block, BS, &h);
  struct sbr__header out;
  ASSERT_EQ(decode(&out), SBR__BLOCK_BAD_FRAGMENT);
  h.frame_size = 150; /* fits, and LAST ends exactly at the frame's end */
  sbr__block_encode(block, BS, &h);
  ASSERT_EQ(decode(&out), SBR__BLOCK_OK);
  h.flags = SBR_FLAG_FIRST; /* FIRST must start at offset 0 */
  sbr__block_encode(block, BS, &h);
  ASSERT_EQ(decode(&out), SBR__BLOCK_BAD_FRAGMENT);
}

static void connect_private_data_round_trip(void)
{
  uint8_t priv[SBR__CONNECT_PRIV_SIZE];
  sbr__connect_priv_encode(priv, SBR_MECH_SLIDING_WINDOW, 4096, 32);
  uint8_t mech;
  uint32_t bs, bc;
  ASSERT_OK(sbr__connect_priv_decode(priv, sizeof priv, &mech, &bs, &bc));
  ASSERT_EQ(mech, SBR_MECH_SLIDING_WINDOW);
  ASSERT_EQ(bs, 4096);
  ASSERT_EQ(bc, 32);
  ASSERT_EQ(sbr__connect_priv_decode(priv, sizeof priv - 1, &mech, &bs, &bc),
            -EPROTO);
}

/* The probe target (iWARP senders) is optional: appended, it round-trips
 * and the first 16 bytes still decode as before (an older receiver reads
 * only those); without it (16 bytes, or zero padding, as IB CM pads)
 * there is none; a length over the receiver's sink is refused. */
static void connect_private_data_probe_target_is_optional(void)
{
  uint8_t priv[SBR__CONNECT_PRIV_PROBE_SIZE];
  memset(priv, 0xa5, sizeof priv);
  sbr__connect_priv_encode(priv, SBR_MECH_STATUS_BYTE, 4096, 32);
  struct sbr__probe_target t = {
      .addr = 0x0123456789abcdefull, .rkey = 0xfeedbeef, .len = 8};
  sbr__connect_priv_add_probe(priv, &t);
  uint8_t mech;
  uint32_t bs, bc;
  ASSERT_OK(sbr__connect_priv_decode(priv, sizeof priv, &mech, &bs, &bc));
  ASSERT_EQ(mech, SBR_MECH_STATUS_BYTE);
  ASSERT_EQ(bs, 4096);
  ASSERT_EQ(bc, 32);
  struct sbr__probe_target got;
  ASSERT_OK(sbr__connect_priv_probe(priv, sizeof priv, &got));
  ASSERT_EQ(got.addr, 0x0123456789abcdefull);
  ASSERT_EQ(got.rkey, 0xfeedbeefu);
  ASSERT_EQ(got.len, 8);

  /* An older sender's 16 bytes, or a cut one: no target. */
  got.len = 99;
  ASSERT_OK(sbr__connect_priv_probe(priv, SBR__CONNECT_PRIV_SIZE, &got));
  ASSERT_EQ(got.len, 0);
  ASSERT_OK(sbr__connect_priv_probe(priv, sizeof priv - 1, &got));
  ASSERT_EQ(got.len, 0);
  /* IB CM's zero padding after an older sender's 16 bytes: none. */
  uint8_t padded[56] = {0};
  sbr__connect_priv_encode(padded, SBR_MECH_STATUS_BYTE, 4096, 32);
  ASSERT_OK(sbr__connect_priv_probe(padded, sizeof padded, &got));
  ASSERT_EQ(got.len, 0);
  ASSERT_EQ(got.rkey, 0);

  /* Longer than the receiver's sink: refused, never READ. */
  t.len = SBR__PROBE_MAX + 1;
  sbr__connect_priv_add_probe(priv, &t);
  ASSERT_EQ(sbr__connect_priv_probe(priv, sizeof priv, &got), -EPROTO);
  t.len = SBR__PROBE_MAX;
  sbr__connect_priv_add_probe(priv, &t);
  ASSERT_OK(sbr__connect_priv_probe(priv, sizeof priv, &got));
  ASSERT_EQ(got.len, SBR__PROBE_MAX);
}

/* Protocol version 2 added the pause bitmap: a v1 peer (same magic) is
 * refused as another version, not as garbage, so the log can say so. */
static void v1_private_data_is_refused(void)
{
  uint8_t priv[SBR__CONNECT_PRIV_SIZE];
  sbr__connect_priv_encode(priv, SBR_MECH_STATUS_BYTE, 4096, 32);
  ASSERT_EQ(sbr__priv_version(priv, sizeof priv), SBR__PRIV_VERSION);
  ASSERT_EQ(SBR__PRIV_VERSION, 2);
  priv[4] = 1;
  uint8_t mech;
  uint32_t bs, bc;
  ASSERT_EQ(sbr__connect_priv_decode(priv, sizeof priv, &mech, &bs, &bc),
            -EPROTONOSUPPORT);
  ASSERT_EQ(sbr__priv_version(priv, sizeof priv), 1);

  struct sbr__lane_desc lane = {
      .mechanism = SBR_MECH_STATUS_BYTE,
      .block_size = 4096,
      .block_count = 16,
      .pause_offset = sbr__pause_offset_for(16),
  };
  uint8_t apriv[SBR__ACCEPT_PRIV_SIZE];
  sbr__accept_priv_encode(apriv, &lane);
  apriv[4] = 1;
  apriv[44] = apriv[45] = apriv[46] = apriv[47] = 0; /* v1: reserved 0 */
  struct sbr__lane_desc got;
  ASSERT_EQ(sbr__accept_priv_decode(apriv, sizeof apriv, &got),
            -EPROTONOSUPPORT);
  ASSERT_EQ(sbr__priv_version(apriv, sizeof apriv), 1);
  /* Not sbr at all: no version to report. */
  apriv[0] ^= 0xff;
  ASSERT_EQ(sbr__accept_priv_decode(apriv, sizeof apriv, &got), -EPROTO);
  ASSERT_EQ(sbr__priv_version(apriv, sizeof apriv), -1);
}

static void accept_private_data_rejects_bad_lane(void)
{
  struct sbr__lane_desc lane = {
      .mechanism = SBR_MECH_STATUS_BYTE,
      .epoch = 3,
      .block_size = 65536,
      .block_count = 16,
      .blocks_addr = 0x7f0000001000ull,
      .status_addr = 0x7f0000800000ull,
      .blocks_rkey = 0x1234,
      .status_rkey = 0x5678,
      .lane_id = 9,
      .pause_offset = 64,
  };
  uint8_t priv[SBR__ACCEPT_PRIV_SIZE];
  sbr__accept_priv_encode(priv, &lane);
  struct sbr__lane_desc got;
  ASSERT_OK(sbr__accept_priv_decode(priv, sizeof priv, &got));
  ASSERT_EQ(got.epoch, 3);
  ASSERT_EQ(got.block_size, 65536);
  ASSERT_EQ(got.block_count, 16);
  ASSERT(got.blocks_addr == lane.blocks_addr);
  ASSERT(got.status_addr == lane.status_addr);
  ASSERT_EQ(got.blocks_rkey, 0x1234);
  ASSERT_EQ(got.status_rkey, 0x5678);
  ASSERT_EQ(got.lane_id, 9);
  ASSERT_EQ(got.pause_offset, 64);
  ASSERT_EQ(sbr__lane_status_len(&got), 64 + SBR__PAUSE_BITMAP_SIZE);
  /* The bitmap must follow the status bytes, within a cache line. */
  lane.pause_offset = 15;
  sbr__accept_priv_encode(priv, &lane);
  ASSERT_EQ(sbr__accept_priv_decode(priv, sizeof priv, &got), -EPROTO);
  lane.pause_offset = 65;
  sbr__accept_priv_encode(priv, &lane);
  ASSERT_EQ(sbr__accept_priv_decode(priv, sizeof priv, &got), -EPROTO);
  lane.pause_offset = 16;
  sbr__accept_priv_encode(priv, &lane);
  ASSERT_OK(sbr__accept_priv_decode(priv, sizeof priv, &got));
  lane.block_count = 0; /* a lane with no blocks is refused */
  sbr__accept_priv_encode(priv, &lane);
  ASSERT_EQ(sbr__accept_priv_decode(priv, sizeof priv, &got), -EPROTO);
}

/* The refused bitmap's offset is appended at byte 48: a receiver that
 * predates it sent 48 bytes (shm) or 48 and zero padding (verbs, 148 over
 * IB CM); its senders must READ no further than the pause bitmap.  A
 * present offset must sit right after the pause bitmap. */
/* Bytes 52..55 are the receiver's features: an older receiver sent a
 * reserved 0 there (or 48 bytes, or verbs' zero padding), so every such
 * accept says "no features", and bits a sender doesn't know survive. */
static void accept_private_data_features_are_optional(void)
{
  struct sbr__lane_desc lane = {
      .mechanism = SBR_MECH_STATUS_BYTE,
      .block_size = 4096,
      .block_count = 100,
      .pause_offset = sbr__pause_offset_for(100),
      .refused_offset = sbr__refused_offset_for(100),
      .features = SBR__FEATURE_SPAN,
  };
  uint8_t priv[148];
  memset(priv, 0, sizeof priv);
  sbr__accept_priv_encode(priv, &lane);
  ASSERT_EQ(priv[52], 1); /* little-endian u32 at 52, protocol.md */
  ASSERT_EQ(priv[53] | priv[54] | priv[55], 0);
  struct sbr__lane_desc got;
  ASSERT_OK(
      sbr__accept_priv_decode(priv, SBR__ACCEPT_PRIV_FEATURES_SIZE, &got));
  ASSERT_EQ(got.features, SBR__FEATURE_SPAN);
  ASSERT_OK(sbr__accept_priv_decode(priv, sizeof priv, &got));
  ASSERT_EQ(got.features, SBR__FEATURE_SPAN);
  /* A bit from a newer receiver is kept (and ignored by its users). */
  priv[53] = 0x80;
  ASSERT_OK(
      sbr__accept_priv_decode(priv, SBR__ACCEPT_PRIV_FEATURES_SIZE, &got));
  ASSERT_EQ(got.features, SBR__FEATURE_SPAN | (0x80u << 8));
  /* An older receiver: 0 there, or fewer bytes. */
  lane.features = 0;
  sbr__accept_priv_encode(priv, &lane);
  ASSERT_OK(sbr__accept_priv_decode(priv, sizeof priv, &got));
  ASSERT_EQ(got.features, 0);
  priv[52] = 1;
  ASSERT_OK(
      sbr__accept_priv_decode(priv, SBR__ACCEPT_PRIV_FEATURES_SIZE - 1, &got));
  ASSERT_EQ(got.features, 0);
  ASSERT_OK(sbr__accept_priv_decode(priv, SBR__ACCEPT_PRIV_MIN_SIZE, &got));
  ASSERT_EQ(got.features, 0);
}

static void accept_private_data_refused_offset_is_optional(void)
{
  struct sbr__lane_desc lane = {
      .mechanism = SBR_MECH_STATUS_BYTE,
      .block_size = 4096,
      .block_count = 100,
      .pause_offset = sbr__pause_offset_for(100),
      .refused_offset = sbr__refused_offset_for(100),
  };
  ASSERT_EQ(lane.pause_offset, 128);
  ASSERT_EQ(lane.refused_offset, 128 + SBR__PAUSE_BITMAP_SIZE);
  uint8_t priv[148];
  memset(priv, 0, sizeof priv);
  sbr__accept_priv_encode(priv, &lane);
  ASSERT_EQ(priv[48], 160); /* little-endian u32 at 48, protocol.md */
  ASSERT_EQ(priv[49] | priv[50] | priv[51], 0);
  struct sbr__lane_desc got;
  ASSERT_OK(sbr__accept_priv_decode(priv, SBR__ACCEPT_PRIV_SIZE, &got));
  ASSERT_EQ(got.refused_offset, 160);
  ASSERT_EQ(sbr__lane_status_len(&got), 160 + SBR__REFUSED_BITMAP_SIZE);
  /* A newer receiver's longer data (verbs padding included) decodes. */
  ASSERT_OK(sbr__accept_priv_decode(priv, sizeof priv, &got));
  ASSERT_EQ(got.refused_offset, 160);

  /* An older receiver: 48 bytes, or 48 and zeros. */
  lane.refused_offset = 0;
  sbr__accept_priv_encode(priv, &lane);
  ASSERT_OK(sbr__accept_priv_decode(priv, SBR__ACCEPT_PRIV_MIN_SIZE, &got));
  ASSERT_EQ(got.refused_offset, 0);
  ASSERT_EQ(sbr__lane_status_len(&got), 128 + SBR__PAUSE_BITMAP_SIZE);
  ASSERT_OK(sbr__accept_priv_decode(priv, sizeof priv, &got));
  ASSERT_EQ(got.refused_offset, 0);
  ASSERT_EQ(sbr__lane_status_len(&got), 128 + SBR__PAUSE_BITMAP_SIZE);
  /* 48 bytes carry a refused offset only when all four are there. */
  priv[48] = 160;
  ASSERT_OK(sbr__accept_priv_decode(priv, SBR__ACCEPT_PRIV_MIN_SIZE + 3, &got));
  ASSERT_EQ(got.refused_offset, 0);
  ASSERT_EQ(sbr__accept_priv_decode(priv, SBR__ACCEPT_PRIV_MIN_SIZE - 1, &got),
            -EPROTO);

  /* Anywhere else the READ could run past the receiver's region. */
  lane.refused_offset = 161;
  sbr__accept_priv_encode(priv, &lane);
  ASSERT_EQ(sbr__accept_priv_decode(priv, sizeof priv, &got), -EPROTO);
  lane.refused_offset = 128;
  sbr__accept_priv_encode(priv, &lane);
  ASSERT_EQ(sbr__accept_priv_decode(priv, sizeof priv, &got), -EPROTO);
}

/* Reject private data: what goes out comes back, bytes where protocol.md
 * says. */
/* The features word at 52 (an older receiver's reserved zero) and, with
 * SBR__FEATURE_KEY_UNIT, the key-unit area's offset at 56: the sender
 * READs the area only when the bit says it is there, and only where the
 * rule puts it (K = R + 32); anything else could run its READ past the
 * receiver's region. */
static void accept_private_data_key_unit_area_is_negotiated(void)
{
  struct sbr__lane_desc lane = {
      .mechanism = SBR_MECH_STATUS_BYTE,
      .block_size = 4096,
      .block_count = 100,
      .pause_offset = sbr__pause_offset_for(100),
      .refused_offset = sbr__refused_offset_for(100),
      .features = SBR__FEATURE_KEY_UNIT,
      .key_unit_offset = sbr__key_unit_offset_for(100),
  };
  ASSERT_EQ(lane.key_unit_offset, 160 + SBR__REFUSED_BITMAP_SIZE);
  uint8_t priv[148];
  memset(priv, 0, sizeof priv);
  sbr__accept_priv_encode(priv, &lane);
  ASSERT_EQ(SBR__ACCEPT_PRIV_SIZE, 60);
  ASSERT_EQ(priv[52], SBR__FEATURE_KEY_UNIT); /* LE u32 at 52 */
  ASSERT_EQ(priv[53] | priv[54] | priv[55], 0);
  ASSERT_EQ(priv[56], 192); /* LE u32 at 56 */
  ASSERT_EQ(priv[57] | priv[58] | priv[59], 0);
  struct sbr__lane_desc got;
  ASSERT_OK(sbr__accept_priv_decode(priv, SBR__ACCEPT_PRIV_SIZE, &got));
  ASSERT_EQ(got.features, SBR__FEATURE_KEY_UNIT);
  ASSERT_EQ(got.key_unit_offset, 192);
  ASSERT_EQ(sbr__lane_status_len(&got), 192 + SBR__KEY_UNIT_AREA_SIZE);
  /* Verbs' zero padding after it changes nothing. */
  ASSERT_OK(sbr__accept_priv_decode(priv, sizeof priv, &got));
  ASSERT_EQ(sbr__lane_status_len(&got), 192 + SBR__KEY_UNIT_AREA_SIZE);

  /* An older receiver: 56 bytes with a reserved zero at 52, or 48. */
  uint8_t old[148];
  memset(old, 0, sizeof old);
  lane.features = 0;
  lane.key_unit_offset = 0;
  sbr__accept_priv_encode(old, &lane);
  ASSERT_OK(sbr__accept_priv_decode(old, 56, &got));
  ASSERT_EQ(got.features, 0);
  ASSERT_EQ(sbr__lane_status_len(&got), 160 + SBR__REFUSED_BITMAP_SIZE);
  ASSERT_OK(sbr__accept_priv_decode(old, sizeof old, &got));
  ASSERT_EQ(sbr__lane_status_len(&got), 160 + SBR__REFUSED_BITMAP_SIZE);
  ASSERT_OK(sbr__accept_priv_decode(old, SBR__ACCEPT_PRIV_MIN_SIZE, &got));
  ASSERT_EQ(got.features, 0);
  /* Without the feature bit the offset's bytes mean nothing. */
  old[56] = 7;
  ASSERT_OK(sbr__accept_priv_decode(old, sizeof old, &got));
  ASSERT_EQ(got.key_unit_offset, 0);
  ASSERT_EQ(sbr__lane_status_len(&got), 160 + SBR__REFUSED_BITMAP_SIZE);
  /* Bits this sender doesn't know, bit 0 (spanning blocks) among them,
   * change nothing it READs. */
  old[52] = 0x01 | 0x80;
  ASSERT_OK(sbr__accept_priv_decode(old, sizeof old, &got));
  ASSERT_EQ(sbr__lane_status_len(&got), 160 + SBR__REFUSED_BITMAP_SIZE);

  /* The bit without the offset's four bytes: refused. */
  ASSERT_EQ(sbr__accept_priv_decode(priv, SBR__ACCEPT_PRIV_SIZE - 1, &got),
            -EPROTO);
  ASSERT_EQ(sbr__accept_priv_decode(priv, 56, &got), -EPROTO);
  /* A forged K, anywhere but right after the refused bitmap: refused. */
  lane.features = SBR__FEATURE_KEY_UNIT;
  uint32_t forged[] = {0, 191, 193, 160, 4096, UINT32_MAX - 100};
  for (unsigned i = 0; i < sizeof forged / sizeof forged[0]; i++) {
    lane.key_unit_offset = forged[i];
    sbr__accept_priv_encode(priv, &lane);
    ASSERT_MSG(sbr__accept_priv_decode(priv, sizeof priv, &got) == -EPROTO,
               "K = %u was taken", forged[i]);
  }
  /* The area needs the refused bitmap before it (R = 0 has none). */
  lane.refused_offset = 0;
  lane.key_unit_offset = 128 + SBR__PAUSE_BITMAP_SIZE;
  sbr__accept_priv_encode(priv, &lane);
  ASSERT_EQ(sbr__accept_priv_decode(priv, sizeof priv, &got), -EPROTO);
  /* What the receiver itself checks before it accepts, the same rule. */
  lane.refused_offset = sbr__refused_offset_for(100);
  lane.key_unit_offset = sbr__key_unit_offset_for(100);
  ASSERT(sbr__lane_desc_valid(&lane));
  lane.key_unit_offset++;
  ASSERT(!sbr__lane_desc_valid(&lane));
}

static void reject_private_data_round_trip(void)
{
  uint8_t priv[SBR__REJECT_PRIV_SIZE];
  struct sbr__refusal why, got;
  sbr__refusal_set(&why, SBR_REFUSAL_MECHANISM, SBR_MECH_STATUS_BYTE,
                   SBR_MECH_SLIDING_WINDOW);
  ASSERT(!why.retryable);
  sbr__reject_priv_encode(priv, &why);
  ASSERT_EQ(sbr__get_le32(priv), 0x52524253u);
  ASSERT_EQ(priv[4], 1);
  ASSERT_EQ(priv[5], SBR_REFUSAL_MECHANISM);
  ASSERT_EQ(priv[6], 0);
  ASSERT_EQ(sbr__get_le32(priv + 12), SBR_MECH_SLIDING_WINDOW);
  ASSERT_OK(sbr__reject_priv_decode(priv, sizeof priv, &got));
  ASSERT_EQ(got.reason, SBR_REFUSAL_MECHANISM);
  ASSERT(!got.retryable);
  ASSERT_EQ(got.receiver_value, SBR_MECH_STATUS_BYTE);
  ASSERT_EQ(got.sender_value, SBR_MECH_SLIDING_WINDOW);
  ASSERT_EQ(sbr__refusal_errno(&got), -EPROTONOSUPPORT);

  sbr__refusal_set(&why, SBR_REFUSAL_LANES_FULL, 8, 0);
  sbr__reject_priv_encode(priv, &why);
  ASSERT_EQ(priv[6], SBR__REJECT_RETRYABLE);
  ASSERT_OK(sbr__reject_priv_decode(priv, sizeof priv, &got));
  ASSERT(got.retryable);
  ASSERT_EQ(got.receiver_value, 8);
  ASSERT_EQ(sbr__refusal_errno(&got), -EBUSY);
}

/* Short, foreign or empty data is not a refusal: the sender treats it as
 * an old receiver's bare reject (retry), never as a reason. */
static void reject_private_data_short_or_garbage_is_not_a_reason(void)
{
  uint8_t priv[SBR__REJECT_PRIV_SIZE];
  struct sbr__refusal why, got;
  sbr__refusal_set(&why, SBR_REFUSAL_VERSION, 2, 1);
  sbr__reject_priv_encode(priv, &why);
  ASSERT_EQ(sbr__reject_priv_decode(priv, sizeof priv - 1, &got), -EPROTO);
  ASSERT_EQ(sbr__reject_priv_decode(NULL, 0, &got), -EPROTO);
  uint8_t zeros[148] = {0}; /* an IB CM REJ without private data */
  ASSERT_EQ(sbr__reject_priv_decode(zeros, sizeof zeros, &got), -EPROTO);
  uint8_t connect[SBR__CONNECT_PRIV_SIZE];
  sbr__connect_priv_encode(connect, SBR_MECH_STATUS_BYTE, 0, 0);
  ASSERT_EQ(sbr__reject_priv_decode(connect, sizeof connect, &got), -EPROTO);
  priv[5] = 0; /* reason "none" is no refusal */
  ASSERT_EQ(sbr__reject_priv_decode(priv, sizeof priv, &got), -EPROTO);
}

/* A later format (or a padded REJ) still tells an old sender why, and a
 * reason it does not know follows the retryable flag. */
static void reject_of_another_format_is_still_decoded(void)
{
  uint8_t priv[148] = {0};
  struct sbr__refusal why, got;
  sbr__refusal_set(&why, SBR_REFUSAL_VERSION, 3, 2);
  sbr__reject_priv_encode(priv, &why);
  priv[4] = 7;    /* format 7 */
  priv[40] = 0xa; /* with fields we don't know */
  ASSERT_OK(sbr__reject_priv_decode(priv, sizeof priv, &got));
  ASSERT_EQ(got.reason, SBR_REFUSAL_VERSION);
  ASSERT_EQ(got.receiver_value, 3);
  ASSERT_EQ(got.sender_value, 2);

  priv[5] = 200; /* a reason from the future */
  priv[6] = 0;
  ASSERT_OK(sbr__reject_priv_decode(priv, sizeof priv, &got));
  ASSERT_EQ(sbr__refusal_errno(&got), -EPROTONOSUPPORT);
  priv[6] = SBR__REJECT_RETRYABLE;
  ASSERT_OK(sbr__reject_priv_decode(priv, sizeof priv, &got));
  ASSERT_EQ(sbr__refusal_errno(&got), -ECONNREFUSED);
  char text[200];
  sbr_refusal_describe(200, 1, 2, text, sizeof text);
  ASSERT_MSG(strstr(text, "reason 200"), "%s", text);
  ASSERT(strcmp(sbr_refusal_name(200), "unknown") == 0);
}

/* The sentences name what differs, and the errors map as sbr.h says. */
static void refusal_sentences_name_the_mismatch(void)
{
  char text[256];
  sbr_refusal_describe(SBR_REFUSAL_MECHANISM, SBR_MECH_STATUS_BYTE,
                       SBR_MECH_SLIDING_WINDOW, text, sizeof text);
  ASSERT_MSG(strcmp(text, "the receiver runs the status-byte mechanism, the "
                          "sender sliding-window") == 0,
             "%s", text);
  sbr_refusal_describe(SBR_REFUSAL_VERSION, 2, 1, text, sizeof text);
  ASSERT_MSG(strstr(text, "version 2, the sender 1"), "%s", text);
  sbr_refusal_describe(SBR_REFUSAL_GEOMETRY, 16, 8, text, sizeof text);
  ASSERT_MSG(strstr(text, "16 blocks") && strstr(text, "at most 8"), "%s",
             text);
  sbr_refusal_describe(SBR_REFUSAL_MECHANISM, 9, 0, text, sizeof text);
  ASSERT_MSG(strstr(text, "unknown (9)"), "%s", text);
  struct sbr__refusal r;
  sbr__refusal_set(&r, SBR_REFUSAL_NOT_ALLOWED, 0, 0);
  ASSERT_EQ(sbr__refusal_errno(&r), -EACCES);
  sbr__refusal_set(&r, SBR_REFUSAL_MALFORMED, 0, 3);
  ASSERT_EQ(sbr__refusal_errno(&r), -EPROTO);
  sbr__refusal_set(&r, SBR_REFUSAL_RESOURCES, ENOMEM, 0);
  ASSERT(r.retryable);
  ASSERT_EQ(sbr__refusal_errno(&r), -ECONNREFUSED);
  char small[8];
  sbr_refusal_describe(SBR_REFUSAL_MECHANISM, 0, 1, small, sizeof small);
  ASSERT_EQ(strlen(small), sizeof small - 1);
}

/* Sliding-window asked of an iWARP device: refused for good, with a
 * sentence that names the cause and the way out, through the wire. */
static void device_refusal_is_final_and_says_why(void)
{
  char text[256];
  sbr_refusal_describe(SBR_REFUSAL_DEVICE, SBR_MECH_SLIDING_WINDOW, 0, text,
                       sizeof text);
  ASSERT_MSG(strstr(text, "iWARP") && strstr(text, "WRITE with immediate") &&
                 strstr(text, "sliding-window") &&
                 strstr(text, "use status-byte"),
             "%s", text);
  ASSERT(strcmp(sbr_refusal_name(SBR_REFUSAL_DEVICE), "device") == 0);
  ASSERT(!sbr_refusal_retryable(SBR_REFUSAL_DEVICE));
  uint8_t priv[SBR__REJECT_PRIV_SIZE];
  struct sbr__refusal why, got;
  sbr__refusal_set(&why, SBR_REFUSAL_DEVICE, SBR_MECH_SLIDING_WINDOW, 0);
  sbr__reject_priv_encode(priv, &why);
  ASSERT_OK(sbr__reject_priv_decode(priv, sizeof priv, &got));
  ASSERT_EQ(got.reason, SBR_REFUSAL_DEVICE);
  ASSERT(!got.retryable);
  ASSERT_EQ(sbr__refusal_errno(&got), -EPROTONOSUPPORT);
}

int main(int argc, char **argv)
{
  static const struct test_entry tests[] = {
      {"round_trip", round_trip, ANY_BACKEND},
      {"device_refusal_is_final_and_says_why",
       device_refusal_is_final_and_says_why, ANY_BACKEND},
      {"payload_too_large_is_not_encoded", payload_too_large_is_not_encoded,
       ANY_BACKEND},
      {"rejects_bad_magic", rejects_bad_magic, ANY_BACKEND},
      {"rejects_wrong_version", rejects_wrong_version, ANY_BACKEND},
      {"rejects_unknown_kind", rejects_unknown_kind, ANY_BACKEND},
      {"rejects_trailer_mismatch", rejects_trailer_mismatch, ANY_BACKEND},
      {"rejects_length_beyond_block", rejects_length_beyond_block, ANY_BACKEND},
      {"rejects_unknown_device", rejects_unknown_device, ANY_BACKEND},
      {"rejects_stale_epoch", rejects_stale_epoch, ANY_BACKEND},
      {"rejects_fragment_outside_frame", rejects_fragment_outside_frame,
       ANY_BACKEND},
      {"connect_private_data_round_trip", connect_private_data_round_trip,
       ANY_BACKEND},
      {"connect_private_data_probe_target_is_optional",
       connect_private_data_probe_target_is_optional, ANY_BACKEND},
      {"v1_private_data_is_refused", v1_private_data_is_refused, ANY_BACKEND},
      {"accept_private_data_rejects_bad_lane",
       accept_private_data_rejects_bad_lane, ANY_BACKEND},
      {"accept_private_data_refused_offset_is_optional",
       accept_private_data_refused_offset_is_optional, ANY_BACKEND},
      {"accept_private_data_key_unit_area_is_negotiated",
       accept_private_data_key_unit_area_is_negotiated, ANY_BACKEND},
      {"accept_private_data_features_are_optional",
       accept_private_data_features_are_optional, ANY_BACKEND},
      {"reject_private_data_round_trip", reject_private_data_round_trip,
       ANY_BACKEND},
      {"reject_private_data_short_or_garbage_is_not_a_reason",
       reject_private_data_short_or_garbage_is_not_a_reason, ANY_BACKEND},
      {"reject_of_another_format_is_still_decoded",
       reject_of_another_format_is_still_decoded, ANY_BACKEND},
      {"refusal_sentences_name_the_mismatch",
       refusal_sentences_name_the_mismatch, ANY_BACKEND},
      {NULL, NULL, ANY_BACKEND},
  };
  return test_main(tests, argc, argv);
}
