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
  gint lane_blocks;             /* of the lane's blocks it holds: 1, or a
                                   spanning block's k */
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

  /* Status 0: the sender may write the block (all its lane blocks) again. */
  sbr_block_release(hb->block);
  g_atomic_int_add(&hb->held->count, -hb->lane_blocks);
  g_atomic_int_add(hb->of_lane, -hb->lane_blocks);
  g_atomic_int_add(&hb->of_device->blocks, -hb->lane_blocks);
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

/* The frame's payload, to out (frame->size bytes). */
static void copy_payload(const struct sbr_frame *frame, guint8 *out)
{
  gsize off = 0;

  if (frame->n_blocks == 0) {
    memcpy(out, frame->copy, frame->size);
    return;
  }
  for (guint i = 0; i < frame->n_blocks; i++) {
    const struct sbr_block_info *bi = sbr_block_get_info(frame->blocks[i]);
    memcpy(out + off, bi->payload, bi->payload_len);
    off += bi->payload_len;
  }
}

GBytes *gst_rdma_frame_copy_bytes(const struct sbr_frame *frame)
{
  guint8 *data = g_malloc(frame->size ? frame->size : 1);

  copy_payload(frame, data);
  return g_bytes_new_take(data, frame->size);
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

    buf = gst_buffer_new_allocate(NULL, frame->size, NULL);
    gst_buffer_map(buf, &map, GST_MAP_WRITE);
    copy_payload(frame, map.data);
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
    /* A spanning block (a frame larger than one block, in one memory)
     * holds several of the lane's blocks: the budgets count those. */
    hb->lane_blocks = (gint)sbr_block_lane_blocks(b);
    hb->held = g_atomic_rc_box_acquire(held);
    hb->of_lane = g_atomic_rc_box_acquire(of_lane);
    hb->of_device = g_atomic_rc_box_acquire(of_device);
    g_atomic_int_add(&held->count, hb->lane_blocks);
    g_atomic_int_add(of_lane, hb->lane_blocks);
    g_atomic_int_add(&of_device->blocks, hb->lane_blocks);
    /* Status 2 while queued or downstream: the sender skips the block. */
    sbr_block_hold(b);
    gst_buffer_append_memory(
        buf, gst_memory_new_wrapped(GST_MEMORY_FLAG_READONLY,
                                    (gpointer)bi->payload, bi->payload_len, 0,
                                    bi->payload_len, hb, held_block_free));
  }
  *lane_blocks = gst_rdma_frame_lane_blocks(frame);
  return buf;
}

guint gst_rdma_frame_lane_blocks(const struct sbr_frame *frame)
{
  guint n = 0;

  for (guint i = 0; i < frame->n_blocks; i++)
    n += sbr_block_lane_blocks(frame->blocks[i]);
  return n;
}

void gst_rdma_time_map_init(GstRdmaTimeMap *map)
{
  memset(map, 0, sizeof *map);
  gst_rdma_skew_init(&map->skew);
  map->reset = TRUE;
  map->last_in = SBR_TIME_NONE;
  map->last_out = GST_CLOCK_TIME_NONE;
}

void gst_rdma_time_map_get_stats(const GstRdmaTimeMap *map,
                                 GstRdmaTimeStats *stats)
{
  stats->mode = map->mode;
  stats->rate_ppm = gst_rdma_skew_get_rate_ppm(&map->skew);
  stats->clock_offset = gst_rdma_skew_get_offset(&map->skew);
  stats->has_rate = gst_rdma_skew_has_rate(&map->skew);
  stats->capture_invalid = map->capture_invalid;
  gst_rdma_skew_get_stats(&map->skew, &stats->skew);
}

/* Starts the mapping again at this frame: another sender (lane, epoch),
 * another mode, the sender's timeline going back (its pipeline
 * restarted), or the caller's reset (a new stream, our own PAUSED ->
 * PLAYING).  The estimator's counters stay. */
static void time_map_restart(GstRdmaTimeMap *map, GstRdmaTimestampMode mode,
                             const struct sbr_block_info *info)
{
  if (map->started)
    gst_rdma_skew_reset(&map->skew);
  map->reset = FALSE;
  map->started = FALSE;
  map->mode = mode;
  map->lane_id = info->lane_id;
  map->epoch = info->epoch;
  map->last_out = GST_CLOCK_TIME_NONE;
}

/* The capture instant on our running timeline: now minus the age of the
 * frame by the wall clocks (the sender's at capture, ours at arrival), so
 * frames captured together on hosts whose wall clocks agree get the same
 * time, whatever their senders' running times or the way here.
 * GST_CLOCK_TIME_NONE for a capture time no live frame has. */
static GstClockTime capture_running_time(guint64 capture, GstClockTime now,
                                         guint64 wall_now)
{
  gint64 age;

  if (capture == SBR_TIME_NONE || capture > G_MAXINT64 || wall_now > G_MAXINT64)
    return GST_CLOCK_TIME_NONE;
  age = (gint64)wall_now - (gint64)capture;
  if (age > (gint64)GST_RDMA_CAPTURE_MAX_AGE ||
      age < -(gint64)GST_RDMA_CAPTURE_MAX_AHEAD)
    return GST_CLOCK_TIME_NONE;
  if (age > 0 && (guint64)age > now)
    return 0; /* captured before our running time began */
  return (GstClockTime)((gint64)now - age);
}

GstClockTime gst_rdma_time_map_peek(const GstRdmaTimeMap *map,
                                    GstRdmaTimestampMode mode,
                                    guint64 sender_time, GstClockTime now)
{
  gint64 out;

  if (mode == GST_RDMA_TIMESTAMP_MODE_SENDER)
    return sender_time;
  if (!map->started || map->last_in == SBR_TIME_NONE ||
      !GST_CLOCK_TIME_IS_VALID(map->last_out) || sender_time > G_MAXINT64 ||
      map->last_in > G_MAXINT64 || map->last_out > G_MAXINT64)
    return now;
  out = (gint64)sender_time - (gint64)map->last_in;
  if (out > 0 && (gint64)map->last_out > G_MAXINT64 - out)
    return now; /* a time no frame of this stream comes near */
  out += (gint64)map->last_out;
  return out > 0 ? (GstClockTime)out : 0;
}

void gst_rdma_frame_stamp(GstRdmaTimeMap *map, GstRdmaTimestampMode mode,
                          const struct sbr_block_info *info, GstClockTime now,
                          guint64 wall_now, GstBuffer *buf)
{
  /* The time the frame is observed by: DTS when there is one (it only
   * goes forward, PTS of reordered frames does not), else PTS.  Every
   * mode computes order_out, its time on our timeline, and PTS keeps its
   * distance from it (pts_delta), so DTS and PTS go through one mapping. */
  guint64 order = info->dts != SBR_TIME_NONE ? info->dts : info->pts;
  gboolean has_dts = info->dts != SBR_TIME_NONE && info->pts != SBR_TIME_NONE;
  GstClockTimeDiff pts_delta = 0;
  GstClockTime order_out, capture_out;
  GstRdmaSkewFlags flags = GST_RDMA_SKEW_FLAG_NONE;
  GstClockTime skew_out;
  gboolean discont;

  if (map->reset || !map->started || map->mode != mode ||
      map->lane_id != info->lane_id || map->epoch != info->epoch ||
      ((info->flags & SBR_FLAG_DISCONT) && order != SBR_TIME_NONE &&
       map->last_in != SBR_TIME_NONE && order < map->last_in))
    time_map_restart(map, mode, info);
  if (order != SBR_TIME_NONE)
    map->last_in = order;
  discont = !map->started;

  /* In every mode, for the stats (a NONE or absurd time is counted there
   * and stamped with its arrival). */
  skew_out = gst_rdma_skew_observe(&map->skew, order, now, &flags);
  if (has_dts && info->pts > info->dts)
    pts_delta = (GstClockTimeDiff)(info->pts - info->dts);

  switch (mode) {
  case GST_RDMA_TIMESTAMP_MODE_SENDER:
    /* As it is: the pipelines share a clock and a base time. */
    order_out = order != SBR_TIME_NONE ? order : now;
    break;
  case GST_RDMA_TIMESTAMP_MODE_ARRIVAL:
    order_out = now;
    break;
  case GST_RDMA_TIMESTAMP_MODE_CAPTURE:
    /* The capture time is the frame's, so PTS's instant. */
    capture_out = capture_running_time(info->capture_time, now, wall_now);
    if (!GST_CLOCK_TIME_IS_VALID(capture_out)) {
      map->capture_invalid++;
      capture_out = now;
    }
    order_out = capture_out > (GstClockTime)pts_delta
                    ? capture_out - (GstClockTime)pts_delta
                    : 0;
    break;
  case GST_RDMA_TIMESTAMP_MODE_SKEW:
  default:
    order_out = skew_out;
    discont = (flags & GST_RDMA_SKEW_FLAG_DISCONT) != 0;
    if (has_dts && pts_delta > 0 && !(flags & GST_RDMA_SKEW_FLAG_OFF_MAPPING)) {
      /* PTS through the same mapping (its rate), not the sender's
       * distance as it is. */
      GstClockTime p = gst_rdma_skew_map(&map->skew, info->pts);
      GstClockTime d = gst_rdma_skew_map(&map->skew, info->dts);

      if (GST_CLOCK_TIME_IS_VALID(p) && GST_CLOCK_TIME_IS_VALID(d) && p >= d)
        pts_delta = (GstClockTimeDiff)(p - d);
    }
    break;
  }
  /* Never back (the estimator has its own guard; sender's times are the
   * sender's): a capture time or arrival a little behind the last one
   * (two wall clock readings, a frame overtaken) holds at the last. */
  if ((mode == GST_RDMA_TIMESTAMP_MODE_CAPTURE ||
       mode == GST_RDMA_TIMESTAMP_MODE_ARRIVAL) &&
      GST_CLOCK_TIME_IS_VALID(map->last_out) && order_out < map->last_out)
    order_out = map->last_out;
  map->last_out = order_out;
  if (discont)
    GST_DEBUG("device %u (%s): sender time %" GST_TIME_FORMAT
              " is running time %" GST_TIME_FORMAT " here (DISCONT)",
              info->device, gst_rdma_timestamp_mode_nick(mode),
              GST_TIME_ARGS(order), GST_TIME_ARGS(order_out));
  map->started = TRUE;

  if (info->pts != SBR_TIME_NONE || mode != GST_RDMA_TIMESTAMP_MODE_SENDER)
    GST_BUFFER_PTS(buf) = order_out + (GstClockTime)pts_delta;
  else
    GST_BUFFER_PTS(buf) = GST_CLOCK_TIME_NONE;
  /* A frame with a DTS and no PTS keeps its DTS (order_out is it). */
  GST_BUFFER_DTS(buf) =
      info->dts != SBR_TIME_NONE ? order_out : GST_CLOCK_TIME_NONE;
  if (discont)
    GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_DISCONT);
  if (info->duration != SBR_TIME_NONE)
    GST_BUFFER_DURATION(buf) = info->duration;
  if (info->flags & SBR_FLAG_DISCONT)
    GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_DISCONT);
  if (info->flags & SBR_FLAG_DELTA)
    GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_DELTA_UNIT);
  if (info->flags & SBR_FLAG_HEADER)
    GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_HEADER);
  if (info->flags & SBR_FLAG_MARKER)
    GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_MARKER);
  if (info->capture_time != SBR_TIME_NONE) {
    GstCaps *unix_caps = gst_rdma_unix_timestamp_caps();
    gst_buffer_add_reference_timestamp_meta(buf, unix_caps, info->capture_time,
                                            GST_CLOCK_TIME_NONE);
    gst_caps_unref(unix_caps);
  }
}
