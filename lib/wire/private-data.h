/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * private-data.h - what a sender and a receiver tell each other while they
 * connect: the connect request's, the accept's and the reject's private
 * data (rdma_cm's private data over verbs, the setup messages' payload over
 * shm), and the host-endian lane description a sender writes into.
 * docs/protocol.md describes the exchange.
 */
#ifndef SBR_PRIVATE_DATA_H
#define SBR_PRIVATE_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbr.h"
#include "util/refusal.h"

/* Connect/accept private data, on the wire (little-endian).  rdma_cm allows at
 * most 56 bytes from the active side (the connect request) and 196 from the
 * passive side (the accept: 60 bytes).  Rule 8: the receiver never trusts these
 * numbers as pointers; the sender bounds-checks the lane against its own
 * limits before using it. */
#define SBR__PRIV_MAGIC 0x53425243u /* "CRBS" little-endian: "SBRC" */
/* 2: the lane carries the per-device pause bitmap (pause_offset). */
#define SBR__PRIV_VERSION 2
/* The pause bitmap: bit d (byte d / 8, bit d % 8) set = device d paused.
 * It follows the status bytes in the status region, at status_addr +
 * pause_offset, so the sender's status READ fetches both. */
#define SBR__PAUSE_BITMAP_SIZE (SBR_MAX_DEVICES / 8)
/* The refused bitmap, per lane: bit d set = this lane's frames of device d
 * are refused (another sender owns d).  Right after the pause bitmap, at
 * status_addr + refused_offset, read with it.  A lane announces it with a
 * nonzero refused_offset in the accept private data; a receiver that
 * predates it sends 48 bytes (or zero padding there, over verbs) and its
 * senders READ no further than the pause bitmap. */
#define SBR__REFUSED_BITMAP_SIZE (SBR_MAX_DEVICES / 8)
/* The accept's features word (bytes 52..55): what this lane carries beyond
 * the status bytes and bitmaps, one bit each.  A receiver that predates it
 * sends 0 there ("reserved, 0"), so a sender looks for nothing. */
/* The receiver takes spanning blocks: one block over several consecutive
 * receive blocks of the lane (docs/protocol.md, "Spanning blocks"). */
#define SBR__FEATURE_SPAN (1u << 0)
/* Key units asked for one-sidedly: the lane has the key-unit area at
 * status_addr + key_unit_offset (bytes 56..59 of the accept). */
#define SBR__FEATURE_KEY_UNIT (1u << 1)
/* The receiver takes EVENT blocks (kind 4); an older one rejects the kind. */
#define SBR__FEATURE_EVENTS (1u << 2)
/* The key-unit area, per lane: byte d is device d's request word, only the
 * receiver's to store.  Bits 0..6 count its key-unit requests (mod 128);
 * bit 7 says the newest one asks for all headers.  One byte per device, so
 * one store makes a request and its all-headers flag visible together: a
 * READ, which the NIC may perform in any byte order, can't see the one
 * without the other.  The sender asks its producer for a key unit once per
 * change it sees (docs/protocol.md, "Key units"). */
#define SBR__KEY_UNIT_AREA_SIZE SBR_MAX_DEVICES
#define SBR__KEY_UNIT_COUNT_MASK 0x7fu
#define SBR__KEY_UNIT_ALL_HEADERS 0x80u

struct sbr__connect_priv {
  uint32_t magic;       /* SBR__PRIV_MAGIC */
  uint8_t version;      /* SBR__PRIV_VERSION */
  uint8_t mechanism;    /* enum sbr_mechanism */
  uint16_t reserved;    /* zero */
  uint32_t block_size;  /* hint, 0 = receiver's choice */
  uint32_t block_count; /* hint, 0 = receiver's choice */
  /* Appended, optional (a sender over iWARP; absent or zero padding from
   * the others and from older senders): a few sender bytes the receiver
   * may READ as its liveness probe (receiver.c), granted REMOTE_READ
   * only and holding nothing (protocol.md, "Roles"). */
  uint64_t probe_addr; /* sender's address of them */
  uint32_t probe_rkey; /* their key */
  uint32_t probe_len;  /* bytes, 1..SBR__PROBE_MAX; 0 = no probe target */
};

/* What a READ probe reads at most: the receiver's sink is this big. */
#define SBR__PROBE_MAX 64

/* A sender's probe target, host-endian; len 0 = none offered. */
struct sbr__probe_target {
  uint64_t addr;
  uint32_t rkey;
  uint32_t len;
};

struct sbr__accept_priv {
  uint32_t magic;        /* SBR__PRIV_MAGIC */
  uint8_t version;       /* SBR__PRIV_VERSION */
  uint8_t mechanism;     /* echoed, must equal the request */
  uint16_t epoch;        /* lane epoch, written into every block header */
  uint32_t block_size;   /* bytes per receive block, header+payload+trailer */
  uint32_t block_count;  /* N */
  uint64_t blocks_addr;  /* remote address of block 0 */
  uint64_t status_addr;  /* remote address of the N status bytes */
  uint32_t blocks_rkey;  /* REMOTE_WRITE only (rule 8) */
  uint32_t status_rkey;  /* REMOTE_READ | REMOTE_WRITE */
  uint32_t lane_id;      /* receiver's lane number, for logs and stats */
  uint32_t pause_offset; /* v2: pause bitmap at status_addr + this */
  /* Appended in v2 (absent, or 0, from older v2 receivers): the refused
   * bitmap at status_addr + this, which is pause_offset + 32. */
  uint32_t refused_offset;
  /* Appended (0 from receivers that predate it: their "reserved, 0"):
   * SBR__FEATURE_* bits. */
  uint32_t features;
  /* With SBR__FEATURE_KEY_UNIT: the key-unit area at status_addr + this,
   * which is refused_offset + 32 (absent otherwise). */
  uint32_t key_unit_offset;
  uint32_t pad; /* not on the wire: keeps the struct 8-byte aligned */
};

/* Host-endian view of the lane a sender writes into. */
struct sbr__lane_desc {
  uint8_t mechanism;
  uint16_t epoch;
  uint32_t block_size;
  uint32_t block_count;
  uint64_t blocks_addr;
  uint64_t status_addr;
  uint32_t blocks_rkey;
  uint32_t status_rkey;
  uint32_t lane_id;
  /* The pause bitmap's offset from status_addr: at least block_count, at
   * most block_count rounded up to 64 (the receiver sets it before accept;
   * the status region is pause_offset + SBR__PAUSE_BITMAP_SIZE bytes). */
  uint32_t pause_offset;
  /* The refused bitmap's offset from status_addr: pause_offset +
   * SBR__PAUSE_BITMAP_SIZE, or 0 when the receiver has none (older). */
  uint32_t refused_offset;
  /* SBR__FEATURE_* bits the lane has (0 from an older receiver). */
  uint32_t features;
  /* The key-unit area's offset from status_addr: refused_offset +
   * SBR__REFUSED_BITMAP_SIZE with SBR__FEATURE_KEY_UNIT, else 0. */
  uint32_t key_unit_offset;
};

/* Where a receiver puts the bitmap: its own cache line after the status
 * bytes, so the NIC's status WRITEs and the receiver's bitmap stores don't
 * share one. */
static inline uint32_t sbr__pause_offset_for(uint32_t block_count)
{
  return (block_count + 63u) & ~63u;
}

/* Where a receiver puts the refused bitmap: right after the pause bitmap,
 * in the same cache line (both are only the receiver's to store). */
static inline uint32_t sbr__refused_offset_for(uint32_t block_count)
{
  return sbr__pause_offset_for(block_count) + SBR__PAUSE_BITMAP_SIZE;
}

/* Where a receiver puts the key-unit area: right after the refused bitmap
 * (only the receiver stores there too, so it may share their line). */
static inline uint32_t sbr__key_unit_offset_for(uint32_t block_count)
{
  return sbr__refused_offset_for(block_count) + SBR__REFUSED_BITMAP_SIZE;
}

/* Bytes of the status region: status bytes, padding, pause bitmap and,
 * when the lane has them, the refused bitmap and the key-unit area.  The
 * sender READs all of it (never past it: an older receiver registered no
 * more) and WRITEs only the first block_count bytes. */
static inline uint32_t sbr__lane_status_len(const struct sbr__lane_desc *lane)
{
  if (lane->features & SBR__FEATURE_KEY_UNIT)
    return lane->key_unit_offset + SBR__KEY_UNIT_AREA_SIZE;
  if (lane->refused_offset)
    return lane->refused_offset + SBR__REFUSED_BITMAP_SIZE;
  return lane->pause_offset + SBR__PAUSE_BITMAP_SIZE;
}

/* Encoding helpers (private-data.c): fixed little-endian layout, checked. */
#define SBR__CONNECT_PRIV_SIZE 16
/* With the probe target appended (sbr__connect_priv_add_probe). */
#define SBR__CONNECT_PRIV_PROBE_SIZE 32
#define SBR__ACCEPT_PRIV_SIZE 60
/* What an older v2 receiver sends (no refused_offset); the decoder takes
 * any length from this on and reads refused_offset only when present. */
#define SBR__ACCEPT_PRIV_MIN_SIZE 48
/* With refused_offset and the features word (0 there, or absent: none). */
#define SBR__ACCEPT_PRIV_FEATURES_SIZE 56
void sbr__connect_priv_encode(uint8_t out[SBR__CONNECT_PRIV_SIZE],
                              uint8_t mechanism, uint32_t block_size,
                              uint32_t block_count);
int sbr__connect_priv_decode(const void *data, size_t len, uint8_t *mechanism,
                             uint32_t *block_size, uint32_t *block_count);
/* Writes the probe target into bytes 16..31 of out, whose first 16 bytes
 * sbr__connect_priv_encode wrote. */
void sbr__connect_priv_add_probe(uint8_t out[SBR__CONNECT_PRIV_PROBE_SIZE],
                                 const struct sbr__probe_target *t);
/* The probe target of connect private data sbr__connect_priv_decode took:
 * 0 and t->len 0 when there is none (16 bytes, or zeros there), -EPROTO
 * when its length is over SBR__PROBE_MAX. */
int sbr__connect_priv_probe(const void *data, size_t len,
                            struct sbr__probe_target *t);
void sbr__accept_priv_encode(uint8_t out[SBR__ACCEPT_PRIV_SIZE],
                             const struct sbr__lane_desc *lane);
int sbr__accept_priv_decode(const void *data, size_t len,
                            struct sbr__lane_desc *lane);
/* Rule 8: can a sender write into, and READ, this lane without going
 * outside it?  Both sides check (the receiver before it accepts). */
bool sbr__lane_desc_valid(const struct sbr__lane_desc *lane);
/* Both decoders return -EPROTONOSUPPORT for an sbr peer of another protocol
 * version (magic right, version not ours).  sbr__priv_version says which
 * version the peer speaks, for a clear message: -1 when data is not sbr
 * private data at all. */
int sbr__priv_version(const void *data, size_t len);

/* Reject private data: why a receiver refused (rdma_reject's private data
 * over verbs, the payload of the 'R' setup message over shm), 16 bytes,
 * little-endian:
 *
 *   magic u32 (SBR__REJECT_MAGIC) | format u8 (1) | reason u8
 *   (enum sbr_refusal) | flags u8 (SBR__REJECT_RETRYABLE) | reserved u8 (0)
 *   | receiver_value u32 | sender_value u32
 *
 * It has its own magic and format number, not the protocol version: a
 * receiver must be able to tell a sender of ANY protocol version why it
 * refuses it, so these 16 bytes never change meaning.  A later format may
 * append fields (a decoder reads the first 16 bytes of a longer one and
 * ignores the rest; verbs over IB CM delivers 148 bytes, zero padded).
 * The retryable flag lets a sender act right on a reason it doesn't know. */
#define SBR__REJECT_MAGIC 0x52524253u /* "SBRR" */
#define SBR__REJECT_FORMAT 1
#define SBR__REJECT_PRIV_SIZE 16
#define SBR__REJECT_RETRYABLE 0x01

struct sbr__reject_priv {
  uint32_t magic;          /* SBR__REJECT_MAGIC */
  uint8_t format;          /* SBR__REJECT_FORMAT */
  uint8_t reason;          /* enum sbr_refusal */
  uint8_t flags;           /* SBR__REJECT_RETRYABLE */
  uint8_t reserved;        /* zero */
  uint32_t receiver_value; /* what the receiver has */
  uint32_t sender_value;   /* what the sender asked for */
};

void sbr__reject_priv_encode(uint8_t out[SBR__REJECT_PRIV_SIZE],
                             const struct sbr__refusal *r);
/* 0, or -EPROTO when data is not an sbr reject (too short, other magic,
 * reason 0): an old receiver's bare reject, or someone else's. */
int sbr__reject_priv_decode(const void *data, size_t len,
                            struct sbr__refusal *r);

#endif
