/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* block.c - encode and validate blocks (format in block.h). */
#include "wire/block.h"
#include "wire/byteorder.h"

size_t sbr__block_encode(uint8_t *block, uint32_t block_size,
                         const struct sbr__header *h)
{
  if (h->payload_len > sbr__block_capacity(block_size))
    return 0;
  sbr__header_encode(block, h);
  sbr__put_le64(block + SBR__HEADER_SIZE + h->payload_len, h->seq);
  return SBR__BLOCK_OVERHEAD + (size_t)h->payload_len;
}

size_t sbr__block_encode_span(uint8_t *block, uint32_t block_size,
                              uint32_t max_blocks, const struct sbr__header *h)
{
  uint32_t k = sbr__span_blocks(block_size, h->payload_len);
  if (!(h->flags & SBR__FLAG_SPAN) || k < 2 || k > max_blocks)
    return 0;
  sbr__header_encode(block, h);
  sbr__put_le64(block + SBR__HEADER_SIZE + h->payload_len, h->seq);
  return SBR__BLOCK_OVERHEAD + (size_t)h->payload_len;
}

void sbr__header_encode(uint8_t block[SBR__HEADER_SIZE],
                        const struct sbr__header *h)
{
  sbr__put_le32(block + 0, SBR__BLOCK_MAGIC);
  block[4] = SBR__BLOCK_VERSION;
  block[5] = h->kind;
  block[6] = h->device;
  block[7] = h->flags;
  sbr__put_le16(block + 8, h->packet);
  sbr__put_le16(block + 10, h->epoch);
  sbr__put_le32(block + 12, h->payload_len);
  sbr__put_le64(block + 16, h->seq);
  sbr__put_le64(block + 24, h->pts);
  sbr__put_le64(block + 32, h->dts);
  sbr__put_le64(block + 40, h->duration);
  sbr__put_le64(block + 48, h->capture_time);
  sbr__put_le32(block + 56, h->frame_offset);
  sbr__put_le32(block + 60, h->frame_size);
}

const char *sbr__block_error_str(enum sbr__block_error e)
{
  switch (e) {
  case SBR__BLOCK_OK:
    return "ok";
  case SBR__BLOCK_BAD_MAGIC:
    return "bad magic";
  case SBR__BLOCK_BAD_VERSION:
    return "unsupported version";
  case SBR__BLOCK_BAD_KIND:
    return "unknown kind";
  case SBR__BLOCK_BAD_LENGTH:
    return "payload length beyond the block";
  case SBR__BLOCK_BAD_TRAILER:
    return "header and trailer sequence numbers differ";
  case SBR__BLOCK_BAD_FRAGMENT:
    return "fragment outside its frame";
  case SBR__BLOCK_UNKNOWN_DEVICE:
    return "device not accepted";
  case SBR__BLOCK_BAD_EPOCH:
    return "stale epoch";
  case SBR__BLOCK_FRAME_TOO_LARGE:
    return "frame larger than max_frame_size";
  case SBR__BLOCK_STALE:
    return "sequence number behind the lane's (the previous block's "
           "contents: its data never landed)";
  case SBR__BLOCK_BAD_SPAN:
    return "spanning block out of range or over blocks that are not its own";
  }
  return "?";
}

enum sbr__block_error sbr__block_decode(const uint8_t *block,
                                        uint32_t block_size,
                                        const uint8_t *device_mask,
                                        uint16_t epoch, struct sbr__header *out)
{
  return sbr__block_decode_span(block, block_size, 1, device_mask, epoch, out);
}

enum sbr__block_error
sbr__block_decode_span(const uint8_t *block, uint32_t block_size,
                       uint32_t max_blocks, const uint8_t *device_mask,
                       uint16_t epoch, struct sbr__header *out)
{
  out->span = 1;
  if (block_size < SBR__BLOCK_OVERHEAD || max_blocks == 0)
    return SBR__BLOCK_BAD_LENGTH;
  if (sbr__get_le32(block) != SBR__BLOCK_MAGIC)
    return SBR__BLOCK_BAD_MAGIC;
  if (block[4] != SBR__BLOCK_VERSION)
    return SBR__BLOCK_BAD_VERSION;
  out->kind = block[5];
  out->device = block[6];
  out->flags = block[7];
  out->packet = sbr__get_le16(block + 8);
  out->epoch = sbr__get_le16(block + 10);
  out->payload_len = sbr__get_le32(block + 12);
  out->seq = sbr__get_le64(block + 16);
  out->pts = sbr__get_le64(block + 24);
  out->dts = sbr__get_le64(block + 32);
  out->duration = sbr__get_le64(block + 40);
  out->capture_time = sbr__get_le64(block + 48);
  out->frame_offset = sbr__get_le32(block + 56);
  out->frame_size = sbr__get_le32(block + 60);

  if (out->kind < SBR_KIND_DATA || out->kind > SBR_KIND_EVENT)
    return SBR__BLOCK_BAD_KIND;
  /* Rule 8: the length decides where we read the trailer, so check it
   * against the block (the span) before touching anything past the
   * header.  A span is canonical: k >= 2 (a payload that fits one block
   * goes as one), a whole DATA frame, within the lane; k comes from the
   * length, so the two can't disagree. */
  if (out->flags & SBR__FLAG_SPAN) {
    uint32_t k = sbr__span_blocks(block_size, out->payload_len);
    if (k < 2 || k > max_blocks || out->kind != SBR_KIND_DATA ||
        (out->flags & (SBR_FLAG_FIRST | SBR_FLAG_LAST)) !=
            (SBR_FLAG_FIRST | SBR_FLAG_LAST))
      return SBR__BLOCK_BAD_SPAN;
    out->span = k;
  } else if (out->payload_len > sbr__block_capacity(block_size)) {
    return SBR__BLOCK_BAD_LENGTH;
  }
  if (sbr__get_le64(block + SBR__HEADER_SIZE + out->payload_len) != out->seq)
    return SBR__BLOCK_BAD_TRAILER;
  if (out->epoch != epoch)
    return SBR__BLOCK_BAD_EPOCH;
  if (device_mask &&
      !(device_mask[out->device / 8] & (1u << (out->device % 8))))
    return SBR__BLOCK_UNKNOWN_DEVICE;
  if (out->kind == SBR_KIND_DATA &&
      ((uint64_t)out->frame_offset + out->payload_len > out->frame_size ||
       ((out->flags & SBR_FLAG_FIRST) && out->frame_offset != 0) ||
       ((out->flags & SBR_FLAG_LAST) &&
        out->frame_offset + out->payload_len != out->frame_size)))
    return SBR__BLOCK_BAD_FRAGMENT;
  return SBR__BLOCK_OK;
}
