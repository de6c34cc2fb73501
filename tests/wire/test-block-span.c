/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* test-block-span.c - spanning blocks: one frame over several consecutive
 * receive blocks (docs/protocol.md, "Spanning blocks"): encode, decode,
 * and every way a span can be out of range (rule 3, rule 8). */
#include "wire/block.h"
#include "wire/byteorder.h"
#include "test.h"

#define BS 256
#define LANE 8 /* blocks */
#define EPOCH 7
#define CAP (BS - SBR__BLOCK_OVERHEAD)

static uint8_t lane[LANE * BS];

static struct sbr__header span_header(uint32_t len)
{
  return (struct sbr__header){
      .kind = SBR_KIND_DATA,
      .device = 4,
      .flags = SBR_FLAG_FIRST | SBR_FLAG_LAST | SBR__FLAG_SPAN,
      .packet = 9,
      .epoch = EPOCH,
      .payload_len = len,
      .seq = 77,
      .pts = SBR_TIME_NONE,
      .dts = SBR_TIME_NONE,
      .duration = SBR_TIME_NONE,
      .capture_time = SBR_TIME_NONE,
      .frame_offset = 0,
      .frame_size = len,
  };
}

/* A span of len bytes at block `at` of the lane, payload bytes i & 0xff. */
static size_t put_span(uint32_t at, uint32_t len)
{
  memset(lane, 0xee, sizeof lane);
  uint8_t *b = lane + (size_t)at * BS;
  for (uint32_t i = 0; i < len && SBR__HEADER_SIZE + i < (LANE - at) * BS; i++)
    b[SBR__HEADER_SIZE + i] = (uint8_t)i;
  struct sbr__header h = span_header(len);
  return sbr__block_encode_span(b, BS, LANE - at, &h);
}

static enum sbr__block_error decode_at(uint32_t at, struct sbr__header *out)
{
  return sbr__block_decode_span(lane + (size_t)at * BS, BS, LANE - at, NULL,
                                EPOCH, out);
}

static void span_blocks_follow_the_length(void)
{
  ASSERT_EQ(sbr__span_blocks(BS, 0), 1);
  ASSERT_EQ(sbr__span_blocks(BS, CAP), 1);
  ASSERT_EQ(sbr__span_blocks(BS, CAP + 1), 2);
  ASSERT_EQ(sbr__span_blocks(BS, 2 * BS - SBR__BLOCK_OVERHEAD), 2);
  ASSERT_EQ(sbr__span_blocks(BS, 2 * BS - SBR__BLOCK_OVERHEAD + 1), 3);
  /* 1080p and 4K NV12 at the default 1 MiB blocks. */
  ASSERT_EQ(sbr__span_blocks(1u << 20, 1920 * 1080 * 3 / 2), 3);
  ASSERT_EQ(sbr__span_blocks(1u << 20, 3840 * 2160 * 3 / 2), 12);
}

static void span_round_trip(void)
{
  uint32_t len = 3 * BS - SBR__BLOCK_OVERHEAD; /* exactly three blocks */
  ASSERT_EQ(put_span(2, len), SBR__BLOCK_OVERHEAD + len);
  struct sbr__header h;
  ASSERT_EQ(decode_at(2, &h), SBR__BLOCK_OK);
  ASSERT_EQ(h.span, 3);
  ASSERT_EQ(h.payload_len, len);
  ASSERT_EQ(h.frame_size, len);
  ASSERT(h.seq == 77);
  /* The payload runs on across the block boundaries, the trailer after it
   * is the last 8 bytes of the third block. */
  const uint8_t *p = lane + 2 * BS + SBR__HEADER_SIZE;
  for (uint32_t i = 0; i < len; i++)
    ASSERT_EQ(p[i], (uint8_t)i);
  ASSERT(sbr__get_le64(lane + 5 * BS - 8) == 77);
  /* The block after the span is untouched. */
  ASSERT_EQ(lane[5 * BS], 0xee);
}

static void span_may_end_at_the_lane_end(void)
{
  uint32_t len = 2 * BS - SBR__BLOCK_OVERHEAD;
  ASSERT(put_span(LANE - 2, len) > 0);
  struct sbr__header h;
  ASSERT_EQ(decode_at(LANE - 2, &h), SBR__BLOCK_OK);
  ASSERT_EQ(h.span, 2);
}

static void encoder_refuses_what_is_no_span(void)
{
  struct sbr__header h = span_header(CAP); /* fits one block */
  ASSERT_EQ(sbr__block_encode_span(lane, BS, LANE, &h), 0);
  h = span_header(2 * BS);
  ASSERT_EQ(sbr__block_encode_span(lane, BS, 2, &h), 0); /* needs 3 */
  h.flags &= (uint8_t)~SBR__FLAG_SPAN;
  ASSERT_EQ(sbr__block_encode_span(lane, BS, LANE, &h), 0);
  /* And the one-block encoder refuses a span's length, as before. */
  ASSERT_EQ(sbr__block_encode(lane, BS, &h), 0);
}

/* A header that claims more blocks than the lane has after it: rejected
 * before its trailer is read (it would lie past the lane). */
static void rejects_span_past_the_lane_end(void)
{
  ASSERT(put_span(0, 3 * BS - SBR__BLOCK_OVERHEAD) > 0);
  memmove(lane + (LANE - 2) * BS, lane, 2 * BS); /* header near the end */
  struct sbr__header h;
  ASSERT_EQ(decode_at(LANE - 2, &h), SBR__BLOCK_BAD_SPAN);
  ASSERT_EQ(decode_at(LANE - 1, &h), SBR__BLOCK_BAD_MAGIC);
  /* A length up to 4 GiB is no overflow either. */
  ASSERT(put_span(0, 2 * BS - SBR__BLOCK_OVERHEAD) > 0);
  sbr__put_le32(lane + 12, UINT32_MAX);
  ASSERT_EQ(decode_at(0, &h), SBR__BLOCK_BAD_SPAN);
}

/* The one-block decoder (a receiver without spans, or max_blocks 1)
 * rejects every span, and a block without the flag keeps today's rule. */
static void one_block_decoder_rejects_spans(void)
{
  ASSERT(put_span(0, 2 * BS - SBR__BLOCK_OVERHEAD) > 0);
  struct sbr__header h;
  ASSERT_EQ(sbr__block_decode(lane, BS, NULL, EPOCH, &h), SBR__BLOCK_BAD_SPAN);
  lane[7] &= (uint8_t)~SBR__FLAG_SPAN;
  ASSERT_EQ(decode_at(0, &h), SBR__BLOCK_BAD_LENGTH);
}

static void rejects_span_that_fits_one_block(void)
{
  memset(lane, 0, sizeof lane);
  struct sbr__header h = span_header(CAP);
  h.flags &= (uint8_t)~SBR__FLAG_SPAN;
  ASSERT(sbr__block_encode(lane, BS, &h) > 0);
  lane[7] |= SBR__FLAG_SPAN;
  ASSERT_EQ(decode_at(0, &h), SBR__BLOCK_BAD_SPAN);
}

static void rejects_span_that_is_no_whole_frame(void)
{
  uint32_t len = 2 * BS - SBR__BLOCK_OVERHEAD;
  struct sbr__header h;
  ASSERT(put_span(0, len) > 0);
  lane[7] &= (uint8_t)~SBR_FLAG_LAST;
  ASSERT_EQ(decode_at(0, &h), SBR__BLOCK_BAD_SPAN);
  ASSERT(put_span(0, len) > 0);
  lane[5] = SBR_KIND_CAPS;
  ASSERT_EQ(decode_at(0, &h), SBR__BLOCK_BAD_SPAN);
  /* frame_size must be the payload, frame_offset 0: the fragment rule. */
  ASSERT(put_span(0, len) > 0);
  sbr__put_le32(lane + 60, len + 1);
  ASSERT_EQ(decode_at(0, &h), SBR__BLOCK_BAD_FRAGMENT);
}

/* Torn: the trailer is where the length says, or the span is dropped. */
static void rejects_torn_span(void)
{
  uint32_t len = 2 * BS - SBR__BLOCK_OVERHEAD - 10;
  ASSERT(put_span(1, len) > 0);
  struct sbr__header h;
  sbr__put_le32(lane + BS + 12, len - 8); /* still two blocks */
  ASSERT_EQ(decode_at(1, &h), SBR__BLOCK_BAD_TRAILER);
  ASSERT(put_span(1, len) > 0);
  lane[BS + SBR__HEADER_SIZE + len] ^= 1;
  ASSERT_EQ(decode_at(1, &h), SBR__BLOCK_BAD_TRAILER);
}

int main(int argc, char **argv)
{
  static const struct test_entry tests[] = {
      {"span_blocks_follow_the_length", span_blocks_follow_the_length,
       ANY_BACKEND},
      {"span_round_trip", span_round_trip, ANY_BACKEND},
      {"span_may_end_at_the_lane_end", span_may_end_at_the_lane_end,
       ANY_BACKEND},
      {"encoder_refuses_what_is_no_span", encoder_refuses_what_is_no_span,
       ANY_BACKEND},
      {"rejects_span_past_the_lane_end", rejects_span_past_the_lane_end,
       ANY_BACKEND},
      {"one_block_decoder_rejects_spans", one_block_decoder_rejects_spans,
       ANY_BACKEND},
      {"rejects_span_that_fits_one_block", rejects_span_that_fits_one_block,
       ANY_BACKEND},
      {"rejects_span_that_is_no_whole_frame",
       rejects_span_that_is_no_whole_frame, ANY_BACKEND},
      {"rejects_torn_span", rejects_torn_span, ANY_BACKEND},
      {NULL, NULL, ANY_BACKEND},
  };
  return test_main(tests, argc, argv);
}
