/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz-priv.c - libFuzzer target: the connect, accept and reject private
 * data decoders (lib/wire/private-data.c), which read what an
 * unauthenticated peer sent through rdma_cm or the shm setup socket.
 *
 * Input: one byte choosing the decoder (0 connect, 1 accept, 2 reject),
 * the rest is the private data, in a buffer of exactly its size.  What a
 * decoder accepts must encode back to the same bytes (reserved ones aside)
 * and describe a lane inside the limits the peers promise each other (rule
 * 8); what it refuses as another version must say which version that is.
 * A reject (any reason number, known or not) must turn into an errno and a
 * message the sender can print.
 */
#include <errno.h>

#include "fuzz-common.h"
#include "transport/transport.h"

static void check_version(const uint8_t *p, size_t len, int ret)
{
  int v = sbr__priv_version(p, len);
  if (ret == -EPROTONOSUPPORT)
    FUZZ_CHECK(v >= 0 && v != SBR__PRIV_VERSION);
  if (ret == 0)
    FUZZ_CHECK(v == SBR__PRIV_VERSION);
  FUZZ_CHECK(ret == 0 || ret == -EPROTO || ret == -EPROTONOSUPPORT);
}

static void fuzz_connect(const uint8_t *p, size_t len)
{
  uint8_t mech = 0xee;
  uint32_t size = 0, count = 0;
  int ret = sbr__connect_priv_decode(p, len, &mech, &size, &count);
  check_version(p, len, ret);
  if (ret < 0)
    return;
  FUZZ_CHECK(len >= SBR__CONNECT_PRIV_SIZE);
  FUZZ_CHECK(mech <= SBR_MECH_SLIDING_WINDOW);
  uint8_t again[SBR__CONNECT_PRIV_SIZE];
  sbr__connect_priv_encode(again, mech, size, count);
  /* Bytes 6-7 are reserved: sent as zero, ignored when read. */
  FUZZ_CHECK(memcmp(again, p, 6) == 0);
  FUZZ_CHECK(memcmp(again + 8, p + 8, SBR__CONNECT_PRIV_SIZE - 8) == 0);
  /* The probe target: none in a short one, never longer than the sink. */
  struct sbr__probe_target t;
  ret = sbr__connect_priv_probe(p, len, &t);
  FUZZ_CHECK(ret == 0 || ret == -EPROTO);
  FUZZ_CHECK(ret < 0 || t.len <= SBR__PROBE_MAX);
  FUZZ_CHECK(len >= SBR__CONNECT_PRIV_PROBE_SIZE || (ret == 0 && t.len == 0));
}

static void fuzz_accept(const uint8_t *p, size_t len)
{
  struct sbr__lane_desc lane;
  memset(&lane, 0, sizeof lane);
  int ret = sbr__accept_priv_decode(p, len, &lane);
  check_version(p, len, ret);
  if (ret < 0)
    return;
  FUZZ_CHECK(len >= SBR__ACCEPT_PRIV_MIN_SIZE);
  /* The refused bitmap, when announced, right after the pause bitmap. */
  FUZZ_CHECK(lane.refused_offset == 0 ||
             lane.refused_offset == lane.pause_offset + SBR__PAUSE_BITMAP_SIZE);
  FUZZ_CHECK(lane.mechanism <= SBR_MECH_SLIDING_WINDOW);
  FUZZ_CHECK(lane.block_count >= 1 && lane.block_count <= 65536);
  FUZZ_CHECK(lane.block_size >= 128 && lane.block_size <= (64u << 20));
  FUZZ_CHECK(lane.pause_offset >= lane.block_count);
  FUZZ_CHECK(lane.pause_offset <= sbr__pause_offset_for(lane.block_count));
  /* The key-unit area only where the feature says, right after the
   * refused bitmap (the READ's length depends on it). */
  if (lane.features & SBR__FEATURE_KEY_UNIT)
    FUZZ_CHECK(len >= SBR__ACCEPT_PRIV_SIZE && lane.refused_offset != 0 &&
               lane.key_unit_offset ==
                   lane.refused_offset + SBR__REFUSED_BITMAP_SIZE);
  else
    FUZZ_CHECK(lane.key_unit_offset == 0);
  /* What the sender sizes from it can't overflow. */
  FUZZ_CHECK(sbr__lane_status_len(&lane) > lane.block_count);
  FUZZ_CHECK((uint64_t)lane.block_count * lane.block_size <=
             (uint64_t)65536 * (64u << 20));
  uint8_t again[SBR__ACCEPT_PRIV_SIZE];
  sbr__accept_priv_encode(again, &lane);
  /* An older receiver's 48 bytes, then refused_offset when present;
   * the reserved word after it is ignored when read. */
  FUZZ_CHECK(memcmp(again, p, SBR__ACCEPT_PRIV_MIN_SIZE) == 0);
  if (len >= SBR__ACCEPT_PRIV_MIN_SIZE + 4)
    FUZZ_CHECK(memcmp(again + SBR__ACCEPT_PRIV_MIN_SIZE,
                      p + SBR__ACCEPT_PRIV_MIN_SIZE, 4) == 0);
  if (len >= SBR__ACCEPT_PRIV_FEATURES_SIZE)
    FUZZ_CHECK(memcmp(again + 52, p + 52, 4) == 0);
  if (lane.features & SBR__FEATURE_KEY_UNIT)
    FUZZ_CHECK(memcmp(again + 56, p + 56, 4) == 0);
}

static void fuzz_reject(const uint8_t *p, size_t len)
{
  struct sbr__refusal r;
  memset(&r, 0, sizeof r);
  int ret = sbr__reject_priv_decode(p, len, &r);
  FUZZ_CHECK(ret == 0 || ret == -EPROTO);
  if (ret < 0)
    return;
  FUZZ_CHECK(len >= SBR__REJECT_PRIV_SIZE && r.reason != 0);
  FUZZ_CHECK(sbr__refusal_errno(&r) < 0);
  char msg[512];
  memset(msg, 'x', sizeof msg);
  sbr__refusal_errf(msg, sizeof msg, "fuzz:1", &r);
  FUZZ_CHECK(memchr(msg, 0, sizeof msg) != NULL);
  /* Whatever the format number, the first 16 bytes mean the same. */
  uint8_t again[SBR__REJECT_PRIV_SIZE];
  sbr__reject_priv_encode(again, &r);
  FUZZ_CHECK(memcmp(again, p, 4) == 0);
  FUZZ_CHECK(again[5] == p[5]);
  FUZZ_CHECK(again[6] == (p[6] & SBR__REJECT_RETRYABLE));
  FUZZ_CHECK(memcmp(again + 8, p + 8, 8) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1 || size > 512)
    return 0;
  size_t len = size - 1;
  /* An exact-size copy: a read past the private data is an ASan error. */
  uint8_t *p = malloc(len ? len : 1);
  FUZZ_CHECK(p);
  memcpy(p, data + 1, len);
  switch (data[0] % 3) {
  case 0:
    fuzz_connect(p, len);
    break;
  case 1:
    fuzz_accept(p, len);
    break;
  default:
    fuzz_reject(p, len);
    break;
  }
  free(p);
  return 0;
}
