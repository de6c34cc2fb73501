/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* byteorder.h - explicit little-endian loads and stores for wire formats.
 * Byte by byte so they are alignment-safe and host-order independent; the
 * compiler turns them into single moves on little-endian hosts. */
#ifndef SBR_BYTEORDER_H
#define SBR_BYTEORDER_H

#include <stdint.h>

static inline void sbr__put_le16(uint8_t *p, uint16_t v)
{
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static inline void sbr__put_le32(uint8_t *p, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static inline void sbr__put_le64(uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t sbr__get_le16(const uint8_t *p)
{
  return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t sbr__get_le32(const uint8_t *p)
{
  uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v |= (uint32_t)p[i] << (8 * i);
  return v;
}

static inline uint64_t sbr__get_le64(const uint8_t *p)
{
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

#endif
