/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * block.h - the block format on the wire (docs/protocol.md, "Block format").
 *
 * A block is exactly block_size bytes in the receiver's lane:
 *
 *   offset  size  field
 *        0     4  magic         "SBRB" (0x42524253 little-endian)
 *        4     1  version       1
 *        5     1  kind          enum sbr_kind: DATA, CAPS, EOS
 *        6     1  device        0..255
 *        7     1  flags         enum sbr_flags: FIRST, LAST, DISCONT, DELTA
 *        8     2  packet        per-device packet number, wraps
 *       10     2  epoch         lane epoch from the accept private data
 *       12     4  payload_len   bytes of payload after the header
 *       16     8  seq           per-connection block sequence number
 *       24     8  pts           ns, UINT64_MAX = none
 *       32     8  dts           ns, UINT64_MAX = none
 *       40     8  duration      ns, UINT64_MAX = none
 *       48     8  capture_time  sender's wall clock (CLOCK_REALTIME) ns
 *       56     4  frame_offset  this fragment's offset in its frame
 *       60     4  frame_size    whole frame's payload size
 *       64     n  payload
 *     64+n     8  seq           trailer: must equal the header's seq
 *
 * All fields little-endian.  The trailer lets the receiver reject a torn or
 * forged block (rule 3): header and trailer were written by one chain of
 * WRITEs, so they agree unless the block is not what the sender wrote.
 *
 * A spanning block (flags SBR__FLAG_SPAN, only to a receiver whose accept
 * announced SBR__FEATURE_SPAN) is one whole frame laid over k consecutive
 * receive blocks of the lane, k = sbr__span_blocks(block_size,
 * payload_len) >= 2, never wrapping past the lane's last block: the header
 * at the start of the first, the payload contiguous across the block
 * boundaries (the blocks region is contiguous), the trailer right after
 * it.  Its status bytes are 1 for the first block and SBR__STATUS_SPAN for
 * the k-1 others.  k is not on the wire: it follows from payload_len, so a
 * header can't claim a span its length contradicts.
 */
#ifndef SBR_BLOCK_H
#define SBR_BLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbr.h"

#define SBR__BLOCK_MAGIC 0x42524253u
#define SBR__BLOCK_VERSION 1
#define SBR__HEADER_SIZE 64
#define SBR__TRAILER_SIZE 8
#define SBR__BLOCK_OVERHEAD (SBR__HEADER_SIZE + SBR__TRAILER_SIZE)

/* Status byte values (docs/protocol.md, "Status transitions"). */
enum {
  SBR__STATUS_EMPTY = 0,
  SBR__STATUS_DATA = 1,
  SBR__STATUS_HELD = 2,
  /* A continuation block of a spanning block: taken, not a block head.
   * The scan looks for 1s only, so it never decodes one as a header; a
   * sender's READ sees it as not free. */
  SBR__STATUS_SPAN = 3,
};

/* Header flag of a spanning block (beside enum sbr_flags, which an
 * application sets; this one only the sender engine does).  A receiver
 * that predates spans ignores unknown flags but rejects the length. */
#define SBR__FLAG_SPAN 0x20u

/* Receive blocks a spanning block of payload_len covers (also right for 1). */
static inline uint32_t sbr__span_blocks(uint32_t block_size,
                                        uint64_t payload_len)
{
  return (uint32_t)((payload_len + SBR__BLOCK_OVERHEAD + block_size - 1) /
                    block_size);
}

/* The decoded, host-order header. */
struct sbr__header {
  uint8_t kind, device, flags;
  uint16_t packet, epoch;
  uint32_t payload_len;
  uint64_t seq, pts, dts, duration, capture_time;
  uint32_t frame_offset, frame_size;
  /* Not on the wire: the receive blocks the block covers (decode: 1, or
   * the span's k). */
  uint32_t span;
};

/* The wire header, for size and offset checks only; encode/decode go field
 * by field through byteorder.h so host endianness never matters. */
struct sbr__wire_header {
  uint32_t magic;
  uint8_t version, kind, device, flags;
  uint16_t packet, epoch;
  uint32_t payload_len;
  uint64_t seq, pts, dts, duration, capture_time;
  uint32_t frame_offset, frame_size;
};
_Static_assert(sizeof(struct sbr__wire_header) == SBR__HEADER_SIZE,
               "block header must be 64 bytes");
_Static_assert(offsetof(struct sbr__wire_header, seq) == 16, "seq at 16");
_Static_assert(offsetof(struct sbr__wire_header, frame_size) == 60,
               "frame_size at 60");

static inline size_t sbr__block_capacity(uint32_t block_size)
{
  return block_size > SBR__BLOCK_OVERHEAD ? block_size - SBR__BLOCK_OVERHEAD
                                          : 0;
}

/* Writes header and trailer around a payload that is already in place at
 * block + SBR__HEADER_SIZE.  Returns the bytes to WRITE (header + payload +
 * trailer), or 0 if payload_len does not fit block_size. */
size_t sbr__block_encode(uint8_t *block, uint32_t block_size,
                         const struct sbr__header *h);
/* The 64 header bytes alone (the sender's spans, whose trailer lies in
 * another send block: sender-thread.c). */
void sbr__header_encode(uint8_t out[SBR__HEADER_SIZE],
                        const struct sbr__header *h);
/* A spanning block over max_blocks contiguous blocks at block (tests and
 * the fuzzers; h->flags must have SBR__FLAG_SPAN): 0 when it would not be
 * one (payload fits one block) or needs more than max_blocks. */
size_t sbr__block_encode_span(uint8_t *block, uint32_t block_size,
                              uint32_t max_blocks, const struct sbr__header *h);

/* Why a block was rejected, for counters and logs. */
enum sbr__block_error {
  SBR__BLOCK_OK = 0,
  SBR__BLOCK_BAD_MAGIC,
  SBR__BLOCK_BAD_VERSION,
  SBR__BLOCK_BAD_KIND,
  SBR__BLOCK_BAD_LENGTH,
  SBR__BLOCK_BAD_TRAILER,
  SBR__BLOCK_BAD_FRAGMENT,
  SBR__BLOCK_UNKNOWN_DEVICE,
  SBR__BLOCK_BAD_EPOCH,
  /* Not sbr__block_decode's: the receiver's max_frame_size. */
  SBR__BLOCK_FRAME_TOO_LARGE,
  /* Not sbr__block_decode's either: the receiver's backstop.  A valid
   * block whose seq is behind the lane's next, still so after the bound
   * (docs/protocol.md, "Placement order"). */
  SBR__BLOCK_STALE,
  /* A spanning block that can't be one: it fits one block, isn't a whole
   * DATA frame, runs past the lane's last block (sbr__block_decode_span),
   * or (the receiver's check) a continuation block is not this span's:
   * its status byte is not SBR__STATUS_SPAN or the receiver has it. */
  SBR__BLOCK_BAD_SPAN,
};
/* The last of enum sbr__block_error, for tables indexed by it. */
#define SBR__BLOCK_ERROR_LAST SBR__BLOCK_BAD_SPAN
const char *sbr__block_error_str(enum sbr__block_error e);

/* Validates a received block (rule 3, rule 8): every field in range, the
 * payload inside the block, the trailer equal to the header's seq, the
 * device accepted by device_mask (NULL = all), the epoch the lane's.
 * Reads the block only within block_size. */
enum sbr__block_error sbr__block_decode(const uint8_t *block,
                                        uint32_t block_size,
                                        const uint8_t *device_mask,
                                        uint16_t epoch,
                                        struct sbr__header *out);
/* The same for a receive block followed by max_blocks - 1 more in the
 * lane (max_blocks >= 1): a spanning block may cover up to max_blocks
 * (out->span says how many), and is read only within max_blocks *
 * block_size.  Whether the continuation blocks are the span's is the
 * receiver's to check (their status bytes). */
enum sbr__block_error
sbr__block_decode_span(const uint8_t *block, uint32_t block_size,
                       uint32_t max_blocks, const uint8_t *device_mask,
                       uint16_t epoch, struct sbr__header *out);

#endif
