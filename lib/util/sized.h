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
#include <stdint.h>
#include <stdio.h>
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

/* Every config opens with its struct_size: the helpers below set and read
 * it through a void pointer, for the sender's and the receiver's alike. */
_Static_assert(offsetof(struct sbr_sender_config, struct_size) == 0,
               "struct_size first");
_Static_assert(offsetof(struct sbr_receiver_config, struct_size) == 0,
               "struct_size first");

/* sbr_*_config_init_sized: the defaults in dflt (dflt_size long, this
 * library's layout) written into the application's app_size bytes, with
 * struct_size saying how far its struct reaches. */
static inline void sbr__sized_config_init(void *app, size_t app_size,
                                          void *dflt, size_t dflt_size)
{
  uint32_t size = (uint32_t)app_size;
  memcpy(dflt, &size, sizeof size);
  sbr__sized_write(app, app_size, dflt, dflt_size);
}

/* sbr__*_config_read: the application's config (as far as its
 * struct_size) over cfg, which holds the defaults and is cfg_size long.
 * On a size this library can't take, -EINVAL and errbuf says why, naming
 * the struct (name).  On success cfg's struct_size is this library's. */
static inline int sbr__sized_config_read(void *cfg, size_t cfg_size,
                                         const void *app, size_t min_size,
                                         const char *name, char *errbuf,
                                         size_t errlen)
{
  uint32_t app_size;
  memcpy(&app_size, app, sizeof app_size);
  if (sbr__sized_read(cfg, cfg_size, app, app_size, min_size) < 0) {
    if (errbuf && errlen)
      snprintf(errbuf, errlen,
               "%s of %u bytes: this libsbr takes %zu to %zu (not set up "
               "with %s_init, or built against a newer sbr.h)",
               name, app_size, min_size, cfg_size, name);
    return -EINVAL;
  }
  uint32_t size = (uint32_t)cfg_size;
  memcpy(cfg, &size, sizeof size);
  return 0;
}

#endif /* SBR_SIZED_H */
