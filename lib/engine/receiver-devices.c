/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * receiver-devices.c - what the application says about devices and lanes,
 * from any thread: pausing a device on every lane, refusing one on a lane,
 * a device's frame period (a hint to the adaptive poll), and which sender
 * a lane is, and asking a sender for a key unit.  Pause and refusal are
 * bitmaps in the lane's memory that the sender READs with the status bytes
 * (docs/protocol.md, "Pause"); key-unit requests are counters there
 * ("Key units").
 */
#include <errno.h>
#include <stdio.h>

#include "engine/receiver-internal.h"

/* The lane's copy of the pause bitmap.  Byte stores with release
 * semantics: the NIC (or the shm NIC thread) reads them with the status
 * bytes at any time; a byte is only ever this receiver's to write. */
void sbr__lane_store_pause_locked(struct sbr_receiver *r,
                                  struct sbr__lane *lane)
{
  volatile uint8_t *bitmap = lane->mem.status + lane->desc.pause_offset;
  for (unsigned i = 0; i < sizeof r->paused; i++)
    __atomic_store_n(&bitmap[i], r->paused[i], __ATOMIC_RELEASE);
}

int sbr_receiver_pause_device(sbr_receiver *r, uint8_t device, bool paused)
{
  if (!r)
    return -EINVAL;
  /* The sliding window has no region the sender reads: nowhere to say it. */
  if (r->cfg.mechanism != SBR_MECH_STATUS_BYTE)
    return -ENOTSUP;
  uint8_t bit = (uint8_t)(1u << (device % 8));
  pthread_mutex_lock(&r->stats_lock);
  uint8_t *byte = &r->paused[device / 8];
  *byte = paused ? (uint8_t)(*byte | bit) : (uint8_t)(*byte & ~bit);
  for (struct sbr__lane *l = r->lanes; l; l = l->next)
    __atomic_store_n(&l->mem.status[l->desc.pause_offset + device / 8], *byte,
                     __ATOMIC_RELEASE);
  pthread_mutex_unlock(&r->stats_lock);
  return 0;
}

/* The refused bitmap is per lane: its bytes live only in the lane's
 * memory, stored (release) by this receiver under stats_lock, read by the
 * NIC with the status bytes. */
static void lane_store_refused_locked(struct sbr__lane *lane, uint8_t device,
                                      bool refused)
{
  volatile uint8_t *byte =
      &lane->mem.status[lane->desc.refused_offset + device / 8];
  uint8_t bit = (uint8_t)(1u << (device % 8));
  uint8_t old = __atomic_load_n(byte, __ATOMIC_RELAXED);
  uint8_t now = refused ? (uint8_t)(old | bit) : (uint8_t)(old & ~bit);
  if (now != old)
    __atomic_store_n(byte, now, __ATOMIC_RELEASE);
}

int sbr_receiver_refuse_device(sbr_receiver *r, uint32_t lane_id,
                               uint8_t device, bool refused)
{
  if (!r)
    return -EINVAL;
  if (r->cfg.mechanism != SBR_MECH_STATUS_BYTE)
    return -ENOTSUP;
  int ret = lane_id == SBR_LANE_ALL ? 0 : -ENOENT;
  pthread_mutex_lock(&r->stats_lock); /* guards the list for other threads */
  for (struct sbr__lane *l = r->lanes; l; l = l->next) {
    if (lane_id != SBR_LANE_ALL && l->id != lane_id)
      continue;
    lane_store_refused_locked(l, device, refused);
    ret = 0;
  }
  pthread_mutex_unlock(&r->stats_lock);
  return ret;
}

/* A plain request within this long of an all-headers one keeps asking for
 * all headers: a sender that saw neither yet sees only the newest word,
 * and an upgrade costs a few header bytes where a lost all-headers costs
 * a stream that can't decode.  A second outlasts any READ interval. */
#define KEY_UNIT_HEADERS_HOLD_NS (1000ull * 1000u * 1000u)

/* One request on one lane: the device's count goes up by one, with the
 * all-headers bit, in one byte store (release: the NIC may READ it at
 * any time; only this receiver writes the area).  stats_lock held. */
static void lane_request_key_unit_locked(struct sbr__lane *lane, uint8_t device,
                                         bool all_headers, uint64_t now)
{
  volatile uint8_t *word =
      &lane->mem.status[lane->desc.key_unit_offset + device];
  uint8_t old = __atomic_load_n(word, __ATOMIC_RELAXED);
  if (all_headers)
    lane->key_headers_ns[device] = now;
  else if (lane->key_headers_ns[device] &&
           now - lane->key_headers_ns[device] < KEY_UNIT_HEADERS_HOLD_NS)
    all_headers = true;
  uint8_t count = (uint8_t)((old + 1u) & SBR__KEY_UNIT_COUNT_MASK);
  uint8_t now_word =
      (uint8_t)(count | (all_headers ? SBR__KEY_UNIT_ALL_HEADERS : 0));
  __atomic_store_n(word, now_word, __ATOMIC_RELEASE);
}

int sbr_receiver_request_key_unit(sbr_receiver *r, uint32_t lane_id,
                                  uint8_t device, bool all_headers)
{
  if (!r)
    return -EINVAL;
  /* No region the sender reads, so nowhere to ask (its lanes don't offer
   * the feature either). */
  if (r->cfg.mechanism != SBR_MECH_STATUS_BYTE)
    return -ENOTSUP;
  int ret = -ENOENT;
  uint64_t now = sbr__now_ns();
  pthread_mutex_lock(&r->stats_lock); /* guards the list for other threads */
  for (struct sbr__lane *l = r->lanes; l; l = l->next) {
    if (lane_id != SBR_LANE_ALL && l->id != lane_id)
      continue;
    if (!(l->desc.features & SBR__FEATURE_KEY_UNIT))
      continue;
    lane_request_key_unit_locked(l, device, all_headers, now);
    ret = 0;
  }
  if (ret == 0) {
    r->stats.key_units_requested++;
    r->dev_stats[device].key_units++;
  }
  pthread_mutex_unlock(&r->stats_lock);
  return ret;
}

bool sbr_receiver_device_paused(sbr_receiver *r, uint8_t device)
{
  pthread_mutex_lock(&r->stats_lock);
  bool paused = r->paused[device / 8] & (1u << (device % 8));
  pthread_mutex_unlock(&r->stats_lock);
  return paused;
}

int sbr_receiver_lane_peer(sbr_receiver *r, uint32_t lane_id, char *peer,
                           size_t len)
{
  int ret = -ENOENT;

  pthread_mutex_lock(&r->stats_lock); /* guards the list for other threads */
  for (struct sbr__lane *l = r->lanes; l; l = l->next) {
    if (l->id == lane_id) {
      if (peer && len)
        snprintf(peer, len, "%s", l->peer);
      ret = 0;
      break;
    }
  }
  pthread_mutex_unlock(&r->stats_lock);
  return ret;
}

int sbr_receiver_set_device_period(sbr_receiver *r, uint8_t device,
                                   uint64_t period_ns)
{
  if (!r)
    return -EINVAL;
  __atomic_store_n(&r->period_hint[device], period_ns, __ATOMIC_RELAXED);
  return 0;
}
