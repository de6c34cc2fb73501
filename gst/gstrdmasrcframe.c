/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasrcframe.c - a received frame as a GstBuffer (gstrdmasrcframe.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstrdmasrcframe.h"

#include <string.h>

#include "gstrdmacommon.h"

GST_DEBUG_CATEGORY_EXTERN(gst_rdma_src_debug);
#define GST_CAT_DEFAULT gst_rdma_src_debug

/* One wrapped receive block: counted in all and for its lane (max-held)
 * and for its device (device-blocks). */
typedef struct {
  sbr_block *block;
  GstRdmaHeldCounter *held;     /* referenced (g_atomic_rc_box) */
  gint *of_lane;                /* referenced (g_atomic_rc_box) */
  GstRdmaBlockCount *of_device; /* referenced (g_atomic_rc_box) */
} HeldBlock;

static void held_counter_clear(gpointer data)
{
  GstRdmaHeldCounter *held = data;

  g_hash_table_unref(held->lanes);
}

GstRdmaHeldCounter *gst_rdma_held_counter_new(void)
{
  GstRdmaHeldCounter *held = g_atomic_rc_box_new0(GstRdmaHeldCounter);

  held->lanes = g_hash_table_new_full(NULL, NULL, NULL,
                                      (GDestroyNotify)g_atomic_rc_box_release);
  return held;
}

void gst_rdma_held_counter_unref(GstRdmaHeldCounter *held)
{
  g_atomic_rc_box_release_full(held, held_counter_clear);
}

guint gst_rdma_held_counter_lane(GstRdmaHeldCounter *held, guint32 lane)
{
  gint *n = g_hash_table_lookup(held->lanes, GUINT_TO_POINTER(lane));

  return n ? (guint)g_atomic_int_get(n) : 0;
}

static gboolean lane_count_unused(gpointer key, gpointer value, gpointer data)
{
  (void)key;
  (void)data;
  return g_atomic_int_get((gint *)value) == 0;
}

/* Receive thread: lane's count, made when its first block goes out.  Only
 * this thread adds to a count, so one at 0 here stays 0: the counts of
 * lanes with nothing out go then (their memories hold none), which keeps
 * the table to the lanes with blocks out however many come and go. */
static gint *lane_count(GstRdmaHeldCounter *held, guint32 lane)
{
  gint *n = g_hash_table_lookup(held->lanes, GUINT_TO_POINTER(lane));

  if (!n) {
    g_hash_table_foreach_remove(held->lanes, lane_count_unused, NULL);
    n = g_atomic_rc_box_new0(gint);
    g_hash_table_insert(held->lanes, GUINT_TO_POINTER(lane), n);
  }
  return n;
}

static void held_block_free(gpointer data)
{
  HeldBlock *hb = data;

  /* Status 0: the sender may write the block again. */
  sbr_block_release(hb->block);
  g_atomic_int_add(&hb->held->count, -1);
  g_atomic_int_add(hb->of_lane, -1);
  g_atomic_int_add(&hb->of_device->blocks, -1);
  gst_rdma_held_counter_unref(hb->held);
  g_atomic_rc_box_release(hb->of_lane);
  g_atomic_rc_box_release(hb->of_device);
  g_free(hb);
}

static void copied_frame_free(gpointer data)
{
  struct sbr_frame *frame = data;

  sbr_frame_release(frame);
  g_free(frame);
}

GstBuffer *gst_rdma_frame_to_buffer(struct sbr_frame *frame, gboolean copy,
                                    GstRdmaHeldCounter *held,
                                    GstRdmaBlockCount *of_device,
                                    guint *lane_blocks)
{
  GstBuffer *buf;
  gint *of_lane;

  *lane_blocks = 0;
  if (frame->n_blocks == 0) {
    /* The library already reassembled it into a heap copy: wrap that. */
    struct sbr_frame *owned = g_memdup2(frame, sizeof *frame);
    return gst_buffer_new_wrapped_full(GST_MEMORY_FLAG_READONLY, owned->copy,
                                       owned->size, 0, owned->size, owned,
                                       copied_frame_free);
  }

  if (copy) {
    /* Out of the lane: the blocks go back to the sender now. */
    GstMapInfo map;
    gsize off = 0;

    buf = gst_buffer_new_allocate(NULL, frame->size, NULL);
    gst_buffer_map(buf, &map, GST_MAP_WRITE);
    for (guint i = 0; i < frame->n_blocks; i++) {
      const struct sbr_block_info *bi = sbr_block_get_info(frame->blocks[i]);
      memcpy(map.data + off, bi->payload, bi->payload_len);
      off += bi->payload_len;
    }
    gst_buffer_unmap(buf, &map);
    sbr_frame_release(frame);
    return buf;
  }

  buf = gst_buffer_new();
  of_lane = lane_count(held, frame->info.lane_id);
  for (guint i = 0; i < frame->n_blocks; i++) {
    sbr_block *b = frame->blocks[i];
    const struct sbr_block_info *bi = sbr_block_get_info(b);
    HeldBlock *hb = g_new(HeldBlock, 1);

    hb->block = b;
    hb->held = g_atomic_rc_box_acquire(held);
    hb->of_lane = g_atomic_rc_box_acquire(of_lane);
    hb->of_device = g_atomic_rc_box_acquire(of_device);
    g_atomic_int_inc(&held->count);
    g_atomic_int_inc(of_lane);
    g_atomic_int_inc(&of_device->blocks);
    /* Status 2 while queued or downstream: the sender skips the block. */
    sbr_block_hold(b);
    gst_buffer_append_memory(
        buf, gst_memory_new_wrapped(GST_MEMORY_FLAG_READONLY,
                                    (gpointer)bi->payload, bi->payload_len, 0,
                                    bi->payload_len, hb, held_block_free));
  }
  *lane_blocks = frame->n_blocks;
  return buf;
}

/* The sender's time t on our timeline. */
static GstClockTime map_time(const GstRdmaTimeMap *map, guint64 t)
{
  if (t == SBR_TIME_NONE)
    return GST_CLOCK_TIME_NONE;
  if (t >= map->base_in)
    return map->base_out + (t - map->base_in);
  return map->base_in - t > map->base_out ? 0
                                          : map->base_out - (map->base_in - t);
}

/* The sender's pipeline was paused: its capture clock (wall time) went on
 * while its running time stood still, and the next frame agrees.  Bursts
 * (capture times closer together than PTS) and jitter never come near the
 * threshold; a capture time that jumps back (another clock) is ignored. */
static gboolean sender_paused(GstRdmaTimeMap *map,
                              const struct sbr_block_info *info)
{
  gint64 off, jump;

  if (info->pts == SBR_TIME_NONE || info->capture_time == SBR_TIME_NONE)
    return FALSE;
  off = (gint64)info->capture_time - (gint64)info->pts;
  if (!map->have_offset) {
    map->have_offset = TRUE;
    map->offset = off;
    return FALSE;
  }
  jump = off - map->offset;
  if (jump > (gint64)GST_RDMA_SENDER_PAUSE_THRESHOLD) {
    if (map->jump_pending &&
        ABS(off - map->jump_offset) < (gint64)GST_RDMA_SENDER_PAUSE_THRESHOLD) {
      map->jump_pending = FALSE;
      map->offset = off;
      return TRUE;
    }
    map->jump_pending = TRUE;
    map->jump_offset = off;
    return FALSE;
  }
  map->jump_pending = FALSE;
  if (jump >= -(gint64)GST_RDMA_SENDER_PAUSE_THRESHOLD)
    map->offset = off; /* follow slow drift between the two clocks */
  return FALSE;
}

void gst_rdma_frame_stamp(GstRdmaTimeMap *map,
                          const struct sbr_block_info *info, GstClockTime now,
                          GstBuffer *buf)
{
  guint64 order = info->dts != SBR_TIME_NONE ? info->dts : info->pts;
  gboolean rebase;

  rebase = !map->have_base || map->lane_id != info->lane_id ||
           map->epoch != info->epoch ||
           ((info->flags & SBR_FLAG_DISCONT) && order != SBR_TIME_NONE &&
            map->last_in != SBR_TIME_NONE && order < map->last_in);
  if (!rebase && sender_paused(map, info)) {
    GST_DEBUG("device %u: the sender's pipeline paused", info->device);
    rebase = TRUE;
  }
  if (rebase && info->pts != SBR_TIME_NONE) {
    map->have_base = TRUE;
    map->lane_id = info->lane_id;
    map->epoch = info->epoch;
    map->base_in = info->pts;
    map->base_out = now;
    GST_DEBUG("device %u: sender time %" GST_TIME_FORMAT
              " is running time %" GST_TIME_FORMAT " here",
              info->device, GST_TIME_ARGS(map->base_in),
              GST_TIME_ARGS(map->base_out));
    GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_DISCONT);
  }
  map->last_in = order;

  if (map->have_base && info->pts != SBR_TIME_NONE)
    GST_BUFFER_PTS(buf) = map_time(map, info->pts);
  else
    GST_BUFFER_PTS(buf) = now;
  if (map->have_base)
    GST_BUFFER_DTS(buf) = map_time(map, info->dts);
  if (info->duration != SBR_TIME_NONE)
    GST_BUFFER_DURATION(buf) = info->duration;
  if (info->flags & SBR_FLAG_DISCONT)
    GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_DISCONT);
  if (info->flags & SBR_FLAG_DELTA)
    GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_DELTA_UNIT);
  if (info->capture_time != SBR_TIME_NONE) {
    GstCaps *unix_caps = gst_rdma_unix_timestamp_caps();
    gst_buffer_add_reference_timestamp_meta(buf, unix_caps, info->capture_time,
                                            GST_CLOCK_TIME_NONE);
    gst_caps_unref(unix_caps);
  }
}
