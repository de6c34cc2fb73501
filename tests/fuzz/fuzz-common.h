/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz-common.h - what the libFuzzer targets in tests/fuzz/ share: a check
 * that aborts (libFuzzer keeps the input that broke it) and a reader that
 * takes fields off the front of the input, zeros once it runs dry.
 */
#ifndef SBR_FUZZ_COMMON_H
#define SBR_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbr.h"

#define FUZZ_CHECK(cond)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                 \
    }                                                                          \
  } while (0)

struct fuzz_in {
  const uint8_t *p;
  size_t left;
};

static inline uint8_t fuzz_u8(struct fuzz_in *in)
{
  if (!in->left)
    return 0;
  in->left--;
  return *in->p++;
}

static inline uint16_t fuzz_u16(struct fuzz_in *in)
{
  uint16_t lo = fuzz_u8(in);
  return (uint16_t)(lo | fuzz_u8(in) << 8);
}

static inline uint32_t fuzz_u32(struct fuzz_in *in)
{
  uint32_t lo = fuzz_u16(in);
  return lo | (uint32_t)fuzz_u16(in) << 16;
}

static inline uint64_t fuzz_u64(struct fuzz_in *in)
{
  uint64_t lo = fuzz_u32(in);
  return lo | (uint64_t)fuzz_u32(in) << 32;
}

/* Up to n bytes off the front; returns how many there were. */
static inline size_t fuzz_bytes(struct fuzz_in *in, void *out, size_t n)
{
  size_t k = n < in->left ? n : in->left;
  memcpy(out, in->p, k);
  in->p += k;
  in->left -= k;
  return k;
}

/* The library's log messages are formatted (their arguments are part of
 * what is fuzzed) and dropped; SBR_FUZZ_LOG=1 prints them. */
static void fuzz_log(void *data, enum sbr_log_level level, const char *msg)
{
  (void)level;
  if (data)
    fprintf(stderr, "sbr: %s\n", msg);
}

static inline void fuzz_log_init(void)
{
  const char *v = getenv("SBR_FUZZ_LOG");
  sbr_set_log_handler(fuzz_log, v && *v == '1' ? (void *)1 : NULL);
}

#endif
