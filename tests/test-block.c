/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* test-block.c - the block format: round trip and every validation rule
 * (rule 3, rule 8). */
#include "block.h"
#include "transport.h"
#include "byteorder.h"
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

int main(int argc, char **argv)
{
  static const struct test_entry tests[] = {
      {"round_trip", round_trip},
      {"payload_too_large_is_not_encoded", payload_too_large_is_not_encoded},
      {"rejects_bad_magic", rejects_bad_magic},
      {"rejects_wrong_version", rejects_wrong_version},
      {"rejects_unknown_kind", rejects_unknown_kind},
      {"rejects_trailer_mismatch", rejects_trailer_mismatch},
      {"rejects_length_beyond_block", rejects_length_beyond_block},
      {"rejects_unknown_device", rejects_unknown_device},
      {"rejects_stale_epoch", rejects_stale_epoch},
      {"rejects_fragment_outside_frame", rejects_fragment_outside_frame},
      {"connect_private_data_round_trip", connect_private_data_round_trip},
      {"v1_private_data_is_refused", v1_private_data_is_refused},
      {"accept_private_data_rejects_bad_lane",
       accept_private_data_rejects_bad_lane},
      {NULL, NULL},
  };
  return test_main(tests, argc, argv);
}
