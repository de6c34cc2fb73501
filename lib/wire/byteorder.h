/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* byteorder.h - explicit little-endian loads and stores for wire formats.
 * memcpy keeps them alignment-safe, htole/letoh host-order independent; on
 * little-endian hosts each is one move (GCC 12 left the byte loops as loops:
 * block encode fell from ~400 to ~65 instructions). */
#ifndef SBR_BYTEORDER_H
#define SBR_BYTEORDER_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline void sbr__put_le16(uint8_t *p, uint16_t v)
{
  v = htole16(v);
  memcpy(p, &v, sizeof v);
}

static inline void sbr__put_le32(uint8_t *p, uint32_t v)
{
  v = htole32(v);
  memcpy(p, &v, sizeof v);
}

static inline void sbr__put_le64(uint8_t *p, uint64_t v)
{
  v = htole64(v);
  memcpy(p, &v, sizeof v);
}

static inline uint16_t sbr__get_le16(const uint8_t *p)
{
  uint16_t v;
  memcpy(&v, p, sizeof v);
  return le16toh(v);
}

static inline uint32_t sbr__get_le32(const uint8_t *p)
{
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return le32toh(v);
}

static inline uint64_t sbr__get_le64(const uint8_t *p)
{
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return le64toh(v);
}

#endif
