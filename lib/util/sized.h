/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sized.h - reading and writing the application's public structs at the
 * size it was built with (sbr.h, "Growing structs").
 *
 * An application built against an older sbr.h passes a shorter config or
 * stats struct than this library's.  Configs are read over a copy holding
 * the defaults, so fields the application predates keep them; stats are
 * written only as far as the caller's struct reaches.
 */
#ifndef SBR_SIZED_H
#define SBR_SIZED_H

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "sbr.h"

/* The first released layout of each config: up to and including its last
 * field at 0.1 (nothing was released before it, so today's whole layout).
 * Smaller is no layout this library ever had. */
#define SBR__SENDER_CONFIG_MIN_SIZE                                            \
  (offsetof(struct sbr_sender_config, comp_vector) + sizeof(int))
#define SBR__RECEIVER_CONFIG_MIN_SIZE                                          \
  (offsetof(struct sbr_receiver_config, huge_pages) + sizeof(bool))

/* Copies the application's app_size bytes over dst, which holds the
 * defaults and is dst_size long.  -EINVAL when app_size is below the first
 * released layout (min_size) or beyond this library's own: a field the
 * library doesn't know would be silently ignored, and a setting ignored
 * (a traffic class, a timeout) is worse than a refusal at start. */
static inline int sbr__sized_read(void *dst, size_t dst_size, const void *app,
                                  size_t app_size, size_t min_size)
{
  if (app_size < min_size || app_size > dst_size)
    return -EINVAL;
  memcpy(dst, app, app_size);
  return 0;
}

/* Writes src (src_size long) into the application's app_size bytes at
 * app: truncated for an older application; for a newer one the fields
 * this library predates read 0. */
static inline void sbr__sized_write(void *app, size_t app_size, const void *src,
                                    size_t src_size)
{
  memcpy(app, src, app_size < src_size ? app_size : src_size);
  if (app_size > src_size)
    memset((char *)app + src_size, 0, app_size - src_size);
}

#endif /* SBR_SIZED_H */
