/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sender-keyunit.c - key units the receiver asks for, one-sidedly
 * (docs/protocol.md, "Key units").
 *
 * The receiver keeps one request word per device in the lane's key-unit
 * area (a 7-bit count and an all-headers bit) and bumps it to ask; it
 * never clears anything and sends nothing.  Every status READ of such a
 * lane brings the area; a device whose word differs from what the
 * previous READ brought has been asked for a key unit since, once or
 * several times: one key unit answers them all, so it is one call of
 * on_key_unit.  A word the sender saw is remembered, so a request is never
 * repeated, and as the word only moves forward nothing is lost unless 128
 * requests of one device come between two READs (they would be one key
 * unit anyway).
 *
 * The READ completes on the sender thread with engine_lock held; the
 * callback runs later on the same thread with no lock held
 * (sbr__sender_deliver_key_units, from the thread's loop), so the
 * application may take its own locks there, and a slow callback delays
 * posting but never a producer's own post.
 */
#include <string.h>

#include "util/log.h"
#include "engine/sender-internal.h"

void sbr__sender_key_units_seen(struct sbr_sender *s, const uint8_t *area)
{
  pthread_mutex_lock(&s->lock);
  if (memcmp(area, s->key_seen, sizeof s->key_seen) == 0) {
    pthread_mutex_unlock(&s->lock); /* the usual case */
    return;
  }
  for (unsigned d = 0; d < SBR_MAX_DEVICES; d++) {
    uint8_t word = area[d];
    if (word == s->key_seen[d])
      continue;
    /* Only the count says "asked again": a word whose count is the same
     * is no request (nothing but a forger changes the bit alone). */
    bool asked = ((word ^ s->key_seen[d]) & SBR__KEY_UNIT_COUNT_MASK) != 0;
    s->key_seen[d] = word;
    if (!asked)
      continue;
    uint8_t bit = (uint8_t)(1u << (d % 8));
    s->key_pending[d / 8] |= bit;
    if (word & SBR__KEY_UNIT_ALL_HEADERS)
      s->key_pending_headers[d / 8] |= bit;
    __atomic_store_n(&s->key_pending_any, true, __ATOMIC_RELAXED);
    s->stats.key_units_seen++;
    s->dev_stats[d].key_units++;
    SBR_DEBUG("sender: the receiver asks for a key unit of device %u%s", d,
              (word & SBR__KEY_UNIT_ALL_HEADERS) ? " with all headers" : "");
  }
  pthread_mutex_unlock(&s->lock);
}

void sbr__sender_deliver_key_units(struct sbr_sender *s)
{
  uint8_t pending[SBR_MAX_DEVICES / 8], headers[SBR_MAX_DEVICES / 8];

  /* Read without the lock first: false nearly always, and a request
   * missed here is delivered on the next turn of the loop. */
  if (!__atomic_load_n(&s->key_pending_any, __ATOMIC_RELAXED))
    return;
  pthread_mutex_lock(&s->lock);
  memcpy(pending, s->key_pending, sizeof pending);
  memcpy(headers, s->key_pending_headers, sizeof headers);
  memset(s->key_pending, 0, sizeof s->key_pending);
  memset(s->key_pending_headers, 0, sizeof s->key_pending_headers);
  __atomic_store_n(&s->key_pending_any, false, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&s->lock);
  if (!s->cfg.on_key_unit)
    return;
  for (unsigned d = 0; d < SBR_MAX_DEVICES; d++) {
    uint8_t bit = (uint8_t)(1u << (d % 8));
    if (pending[d / 8] & bit)
      s->cfg.on_key_unit(s->cfg.key_unit_user_data, (uint8_t)d,
                         (headers[d / 8] & bit) != 0);
  }
}
