/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz-block.c - libFuzzer target: the block decoder and its validation
 * (lib/wire/block.c), which reads what any peer holding the lane's rkey wrote.
 *
 * Input: one mode byte, then
 *   mode bit 0 clear: decode hostile bytes.  u16 epoch, a 32-byte device
 *     mask when mode bit 1 is set, and the rest is the block (block_size =
 *     its length, in a buffer of exactly that size so ASan sees any read
 *     past it).  A block that passes must satisfy every rule of
 *     docs/protocol.md, and encoding its header again must give back the
 *     same header and trailer bytes.
 *   mode bits 0 and 2: 4 (spans), hostile: u16 block size (72 and up),
 *     and the rest is a lane of as many whole blocks as it holds, decoded
 *     at its first block with the rest of the lane as the span's limit
 *     (sbr__block_decode_span, in a buffer of exactly that size): a block
 *     that passes stays within its k blocks and the lane; 5: a span round
 *     trip (sbr__block_encode_span, then decode).
 *   mode bit 0 set: round trip.  A header and a block size from the input
 *     are encoded and decoded again: what encode accepts decodes to the same
 *     header, unless its kind or fragment fields are invalid, and then the
 *     decoder says exactly that.
 */
#include "wire/block.h"
#include "wire/byteorder.h"
#include "fuzz-common.h"

#define MAX_BLOCK (1u << 16)

static bool header_eq(const struct sbr__header *a, const struct sbr__header *b)
{
  return a->kind == b->kind && a->device == b->device && a->flags == b->flags &&
         a->packet == b->packet && a->epoch == b->epoch &&
         a->payload_len == b->payload_len && a->seq == b->seq &&
         a->pts == b->pts && a->dts == b->dts && a->duration == b->duration &&
         a->capture_time == b->capture_time &&
         a->frame_offset == b->frame_offset && a->frame_size == b->frame_size;
}

static void check_rules(const uint8_t *block, uint32_t block_size,
                        const struct sbr__header *h, uint16_t epoch)
{
  FUZZ_CHECK(h->kind >= SBR_KIND_DATA && h->kind <= SBR_KIND_EVENT);
  FUZZ_CHECK(h->epoch == epoch);
  FUZZ_CHECK((uint64_t)h->payload_len + SBR__BLOCK_OVERHEAD <= block_size);
  FUZZ_CHECK(sbr__get_le64(block + SBR__HEADER_SIZE + h->payload_len) ==
             h->seq);
  if (h->kind == SBR_KIND_DATA) {
    FUZZ_CHECK((uint64_t)h->frame_offset + h->payload_len <= h->frame_size);
    if (h->flags & SBR_FLAG_FIRST)
      FUZZ_CHECK(h->frame_offset == 0);
    if (h->flags & SBR_FLAG_LAST)
      FUZZ_CHECK(h->frame_offset + h->payload_len == h->frame_size);
  }
}

static void decode_hostile(struct fuzz_in *in, uint8_t mode)
{
  uint16_t epoch = fuzz_u16(in);
  uint8_t mask[SBR_MAX_DEVICES / 8];
  bool use_mask = mode & 2;
  if (use_mask)
    fuzz_bytes(in, mask, sizeof mask);
  if (in->left > MAX_BLOCK)
    return;
  uint32_t block_size = (uint32_t)in->left;
  uint8_t *block = malloc(block_size ? block_size : 1);
  FUZZ_CHECK(block);
  fuzz_bytes(in, block, block_size);

  struct sbr__header h;
  memset(&h, 0, sizeof h);
  enum sbr__block_error err =
      sbr__block_decode(block, block_size, use_mask ? mask : NULL, epoch, &h);
  FUZZ_CHECK(sbr__block_error_str(err) != NULL);
  if (err == SBR__BLOCK_OK) {
    check_rules(block, block_size, &h, epoch);
    if (use_mask)
      FUZZ_CHECK(mask[h.device / 8] & (1u << (h.device % 8)));
    /* The decoder read every header field: encoding them again gives the
     * same bytes. */
    uint8_t *again = calloc(1, block_size);
    FUZZ_CHECK(again);
    FUZZ_CHECK(sbr__block_encode(again, block_size, &h) ==
               SBR__BLOCK_OVERHEAD + (size_t)h.payload_len);
    FUZZ_CHECK(memcmp(again, block, SBR__HEADER_SIZE) == 0);
    FUZZ_CHECK(memcmp(again + SBR__HEADER_SIZE + h.payload_len,
                      block + SBR__HEADER_SIZE + h.payload_len,
                      SBR__TRAILER_SIZE) == 0);
    free(again);
  }
  free(block);
}

static void round_trip(struct fuzz_in *in)
{
  struct sbr__header h = {
      .kind = fuzz_u8(in),
      .device = fuzz_u8(in),
      .flags = fuzz_u8(in),
      .packet = fuzz_u16(in),
      .epoch = fuzz_u16(in),
  };
  uint32_t block_size = SBR__BLOCK_OVERHEAD + fuzz_u16(in);
  h.payload_len = fuzz_u32(in);
  h.seq = fuzz_u64(in);
  h.pts = fuzz_u64(in);
  h.dts = fuzz_u64(in);
  h.duration = fuzz_u64(in);
  h.capture_time = fuzz_u64(in);
  h.frame_offset = fuzz_u32(in);
  h.frame_size = fuzz_u32(in);

  uint8_t *block = malloc(block_size);
  FUZZ_CHECK(block);
  memset(block, 0xa5, block_size);
  size_t n = sbr__block_encode(block, block_size, &h);
  if (h.payload_len > block_size - SBR__BLOCK_OVERHEAD) {
    FUZZ_CHECK(n == 0);
    free(block);
    return;
  }
  FUZZ_CHECK(n == SBR__BLOCK_OVERHEAD + (size_t)h.payload_len);
  struct sbr__header out;
  memset(&out, 0, sizeof out);
  enum sbr__block_error err =
      sbr__block_decode(block, block_size, NULL, h.epoch, &out);
  bool kind_ok = h.kind >= SBR_KIND_DATA && h.kind <= SBR_KIND_EVENT;
  bool frag_ok = h.kind != SBR_KIND_DATA ||
                 ((uint64_t)h.frame_offset + h.payload_len <= h.frame_size &&
                  (!(h.flags & SBR_FLAG_FIRST) || h.frame_offset == 0) &&
                  (!(h.flags & SBR_FLAG_LAST) ||
                   (uint64_t)h.frame_offset + h.payload_len == h.frame_size));
  if (!kind_ok) {
    FUZZ_CHECK(err == SBR__BLOCK_BAD_KIND);
  } else if (h.flags & SBR__FLAG_SPAN) {
    /* The one-block decoder takes no span (it has one block). */
    FUZZ_CHECK(err == SBR__BLOCK_BAD_SPAN);
  } else if (!frag_ok) {
    FUZZ_CHECK(err == SBR__BLOCK_BAD_FRAGMENT);
  } else {
    FUZZ_CHECK(err == SBR__BLOCK_OK);
    FUZZ_CHECK(header_eq(&out, &h));
    check_rules(block, block_size, &out, h.epoch);
  }
  free(block);
}

/* A span's rules on top of a block's (check_rules over the k blocks). */
static void check_span(const uint8_t *lane, uint32_t bs, uint32_t n,
                       const struct sbr__header *h, uint16_t epoch)
{
  FUZZ_CHECK(h->span >= 1 && h->span <= n);
  check_rules(lane, h->span * bs, h, epoch);
  if (h->span > 1) {
    FUZZ_CHECK(h->flags & SBR__FLAG_SPAN);
    FUZZ_CHECK(h->kind == SBR_KIND_DATA);
    FUZZ_CHECK(h->span == sbr__span_blocks(bs, h->payload_len));
    FUZZ_CHECK(h->payload_len > bs - SBR__BLOCK_OVERHEAD);
  } else {
    FUZZ_CHECK(!(h->flags & SBR__FLAG_SPAN));
  }
}

static void spans(struct fuzz_in *in, uint8_t mode)
{
  uint32_t bs = SBR__BLOCK_OVERHEAD + fuzz_u16(in) % 4096;
  uint16_t epoch = fuzz_u16(in);
  if (mode & 1) {
    struct sbr__header h = {
        .kind = SBR_KIND_DATA,
        .device = fuzz_u8(in),
        .flags = (uint8_t)(fuzz_u8(in) | SBR__FLAG_SPAN | SBR_FLAG_FIRST |
                           SBR_FLAG_LAST),
        .epoch = epoch,
        .payload_len = fuzz_u32(in) % (1u << 20),
        .seq = fuzz_u64(in),
    };
    h.frame_size = h.payload_len;
    uint32_t n = 1 + fuzz_u8(in) % 64;
    if ((uint64_t)n * bs > (1u << 20))
      return;
    uint8_t *lane = malloc((size_t)n * bs);
    FUZZ_CHECK(lane);
    size_t len = sbr__block_encode_span(lane, bs, n, &h);
    uint32_t k = sbr__span_blocks(bs, h.payload_len);
    FUZZ_CHECK((len != 0) == (k >= 2 && k <= n));
    if (len) {
      struct sbr__header out;
      FUZZ_CHECK(sbr__block_decode_span(lane, bs, n, NULL, epoch, &out) ==
                 SBR__BLOCK_OK);
      FUZZ_CHECK(header_eq(&out, &h) && out.span == k);
      check_span(lane, bs, n, &out, epoch);
      /* One block short of it: refused before the trailer is read. */
      FUZZ_CHECK(sbr__block_decode_span(lane, bs, k - 1, NULL, epoch, &out) ==
                 SBR__BLOCK_BAD_SPAN);
    }
    free(lane);
    return;
  }
  uint32_t n = (uint32_t)(in->left / bs);
  if (n == 0 || in->left > MAX_BLOCK)
    return;
  uint8_t *lane = malloc((size_t)n * bs);
  FUZZ_CHECK(lane);
  fuzz_bytes(in, lane, (size_t)n * bs);
  struct sbr__header h;
  memset(&h, 0, sizeof h);
  enum sbr__block_error err =
      sbr__block_decode_span(lane, bs, n, NULL, epoch, &h);
  FUZZ_CHECK(sbr__block_error_str(err) != NULL);
  if (err == SBR__BLOCK_OK)
    check_span(lane, bs, n, &h, epoch);
  free(lane);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct fuzz_in in = {data, size};
  uint8_t mode = fuzz_u8(&in);
  if (mode & 4)
    spans(&in, mode);
  else if (mode & 1)
    round_trip(&in);
  else
    decode_hostile(&in, mode);
  return 0;
}
