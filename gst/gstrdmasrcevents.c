/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasrcevents.c - rdmasrc's side of a sender's stream events and frame
 * extras (EVENT blocks, docs/protocol.md kind 4; gst/gstrdmasinkevents.c):
 *   - "rdma-stream-start" comes before a CAPS block and is kept per device
 *     (the device may have no pad yet): the stream that CAPS block opens
 *     takes its stream-id (under this pad's own, so two senders' ids never
 *     clash here), group-id and flags;
 *   - "rdma-tags" and "rdma-gap" go to the pad in their place among its
 *     frames (a gap's time mapped as its frames' are), "rdma-segment" as a
 *     segment whose applied rate says how fast the sender's stream was
 *     played;
 *   - "rdma-frame" waits for the frame that follows it and goes on that one
 *     only: the next packet number, same lane and epoch.
 * What doesn't parse or isn't known is dropped and counted
 * (events-dropped).  Receive thread only.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <string.h>

#include "gstrdmaextras.h"
#include "gstrdmasrcpriv.h"

#define GST_CAT_DEFAULT gst_rdma_src_debug

static void count(GstRdmaSrc *self, guint64 *counter, guint64 n)
{
  GST_OBJECT_LOCK(self);
  *counter += n;
  GST_OBJECT_UNLOCK(self);
}

/* The device's pad, if it can take an event: one with a stream (an
 * event before its stream-start would be misordered). */
static GstRdmaSrcPad *live_pad(GstRdmaSrcDevice *dev)
{
  return dev && dev->pad && !g_atomic_int_get(&dev->released) &&
                 gst_rdma_src_pad_has_stream(dev->pad)
             ? dev->pad
             : NULL;
}

static gboolean take_tags(GstRdmaSrc *self, GstRdmaSrcDevice *dev,
                          const GstStructure *s)
{
  const GValue *v = gst_structure_get_value(s, "taglist");
  GstRdmaSrcPad *pad = live_pad(dev);
  GstTagList *tags;

  if (!v || !G_VALUE_HOLDS(v, GST_TYPE_TAG_LIST) || !pad)
    return FALSE;
  tags = gst_tag_list_copy(g_value_get_boxed(v));
  gst_tag_list_set_scope(
      tags, g_strcmp0(gst_structure_get_string(s, "scope"), "global") == 0
                ? GST_TAG_SCOPE_GLOBAL
                : GST_TAG_SCOPE_STREAM);
  GST_DEBUG_OBJECT(self, "device %u: tags %" GST_PTR_FORMAT, dev->device, tags);
  gst_rdma_src_pad_queue_event(pad, gst_event_new_tag(tags));
  return TRUE;
}

static gboolean take_segment(GstRdmaSrc *self, GstRdmaSrcDevice *dev,
                             const GstStructure *s)
{
  GstRdmaSrcPad *pad = live_pad(dev);
  gdouble rate, applied;
  GstSegment segment;

  if (!pad || !gst_structure_get_double(s, "rate", &rate) ||
      !gst_structure_get_double(s, "applied-rate", &applied) ||
      !isnormal(rate * applied))
    return FALSE; /* 0, NaN, infinite or too small: no segment has it */
  /* Our segment is the one every stream opens with (running times), so
   * times are untouched: the sender's rates become what was applied. */
  gst_segment_init(&segment, GST_FORMAT_TIME);
  segment.applied_rate = rate * applied;
  GST_DEBUG_OBJECT(self, "device %u: applied rate %f", dev->device,
                   segment.applied_rate);
  gst_rdma_src_pad_queue_event(pad, gst_event_new_segment(&segment));
  return TRUE;
}

static gboolean take_gap(GstRdmaSrc *self, GstRdmaSrcDevice *dev,
                         const GstStructure *s, GstClockTime now)
{
  GstRdmaSrcPad *pad = live_pad(dev);
  guint64 rt, duration;
  GstClockTime ts;

  if (!pad || !gst_structure_get_uint64(s, "running-time", &rt) ||
      !gst_structure_get_uint64(s, "duration", &duration) ||
      !GST_CLOCK_TIME_IS_VALID(rt))
    return FALSE;
  ts = gst_rdma_time_map_peek(
      &dev->time_map,
      gst_rdma_src_pad_timestamp_mode(pad, self->timestamp_mode_now), rt, now);
  gst_rdma_src_pad_queue_event(pad, gst_event_new_gap(ts, duration));
  return TRUE;
}

/* Do a and b name the same upstream stream (its id and group)? */
static gboolean same_stream(const GstStructure *a, const GstStructure *b)
{
  guint ga = 0, gb = 0;

  gst_structure_get_uint(a, "group-id", &ga);
  gst_structure_get_uint(b, "group-id", &gb);
  return ga == gb && g_strcmp0(gst_structure_get_string(a, "stream-id"),
                               gst_structure_get_string(b, "stream-id")) == 0;
}

/* Every CAPS block comes after one (a renegotiation, a reconnect): only
 * another upstream stream than the one the device's stream started with
 * is a new stream. */
static gboolean take_stream_start(GstRdmaSrc *self, guint device, guint32 lane,
                                  const GstStructure *s)
{
  GstStructure *started = self->upstream[device].started;

  if (!gst_structure_get_string(s, "stream-id"))
    return FALSE;
  g_clear_pointer(&self->upstream[device].stream, gst_structure_free);
  self->upstream[device].stream = gst_structure_copy(s);
  self->upstream[device].lane = lane;
  self->upstream[device].fresh = !started || !same_stream(started, s);
  return TRUE;
}

/* A sender's group-id here: group-ids are counters of each process, so
 * two senders' (and ours) would clash; each (lane, group) gets one of
 * this process's. */
static guint local_group(GstRdmaSrc *self, guint32 lane, guint group)
{
  guint64 key = ((guint64)lane << 32) | group;
  gpointer local;

  if (!self->groups)
    self->groups =
        g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  local = g_hash_table_lookup(self->groups, &key);
  if (!local) {
    local = GUINT_TO_POINTER(gst_util_group_id_next());
    g_hash_table_insert(self->groups, g_memdup2(&key, sizeof key), local);
  }
  return GPOINTER_TO_UINT(local);
}

/* s NULL: the frame's extras came but can't be used. */
static gboolean take_extras(GstRdmaSrcDevice *dev,
                            const struct sbr_frame *frame,
                            const GstStructure *s)
{
  if (!dev)
    return FALSE;
  g_clear_pointer(&dev->extras, gst_structure_free);
  dev->extras = s ? gst_structure_copy(s) : NULL;
  dev->extras_lost = !s;
  dev->extras_lane = frame->info.lane_id;
  dev->extras_epoch = frame->info.epoch;
  dev->extras_packet = (guint16)(frame->info.packet + 1);
  return TRUE;
}

void gst_rdma_src_handle_event(GstRdmaSrc *self, const struct sbr_frame *frame,
                               GstClockTime now)
{
  static const gchar extras[] = "rdma-frame";
  GstRdmaSrcDevice *dev = self->devices[frame->info.device];
  const gchar *text = (const gchar *)frame->info.payload;
  gsize len = frame->n_blocks <= 1 ? frame->info.payload_len : 0;
  GstStructure *s = NULL;
  gboolean taken = FALSE, frame_extras;
  guint max_meta_size;

  GST_OBJECT_LOCK(self);
  max_meta_size = self->max_meta_size;
  GST_OBJECT_UNLOCK(self);
  /* A frame's extras come with every frame that has any: a sender's
   * oversized ones are not even parsed (tags, which may hold an image,
   * are not bounded here). */
  frame_extras =
      len >= sizeof extras - 1 && !memcmp(text, extras, sizeof extras - 1);
  if (frame_extras && len > max_meta_size)
    GST_DEBUG_OBJECT(self,
                     "device %u: extras of %" G_GSIZE_FORMAT
                     " bytes, over max-meta-size",
                     frame->info.device, len);
  else if (len)
    s = gst_rdma_event_parse(text, len);
  if (!s)
    ;
  else if (gst_structure_has_name(s, "rdma-frame"))
    taken = take_extras(dev, frame, s);
  else if (gst_structure_has_name(s, "rdma-tags"))
    taken = take_tags(self, dev, s);
  else if (gst_structure_has_name(s, "rdma-stream-start"))
    taken = take_stream_start(self, frame->info.device, frame->info.lane_id, s);
  else if (gst_structure_has_name(s, "rdma-segment"))
    taken = take_segment(self, dev, s);
  else if (gst_structure_has_name(s, "rdma-gap"))
    taken = take_gap(self, dev, s, now);
  if (!taken)
    GST_DEBUG_OBJECT(self, "device %u: event block not taken",
                     frame->info.device);
  if (!taken && frame_extras)
    take_extras(dev, frame, NULL); /* the frame must know */
  count(self, taken ? &self->events_received : &self->events_dropped, 1);
  if (s)
    gst_structure_free(s);
}

/* The application's reader of a meta its sender's application wrote. */
static gboolean deserialize_meta(GstBuffer *buf, const gchar *api,
                                 const GstStructure *fields, gpointer data)
{
  gboolean restored = FALSE;

  g_signal_emit(data, gst_rdma_src_deserialize_meta_signal, 0, buf, api, fields,
                &restored);
  return restored;
}

/* A raw video frame whose size isn't its caps' default can only be read
 * through the layout it came with. */
static gboolean needs_its_layout(const GstVideoInfo *vinfo, GstBuffer *buf)
{
  return GST_VIDEO_INFO_FORMAT(vinfo) != GST_VIDEO_FORMAT_ENCODED &&
         gst_buffer_get_size(buf) != GST_VIDEO_INFO_SIZE(vinfo) &&
         !gst_buffer_get_video_meta(buf);
}

void gst_rdma_src_clear_extras(GstRdmaSrcDevice *dev)
{
  g_clear_pointer(&dev->extras, gst_structure_free);
  dev->extras_lost = FALSE;
}

gboolean gst_rdma_src_apply_extras(GstRdmaSrc *self, GstRdmaSrcDevice *dev,
                                   const struct sbr_block_info *info,
                                   GstBuffer *buf)
{
  GstVideoInfo vinfo;
  gboolean video, layout_lost = FALSE;
  guint failed;

  if (!dev->extras && !dev->extras_lost)
    return TRUE;
  if (dev->extras_packet != info->packet || dev->extras_lane != info->lane_id ||
      dev->extras_epoch != info->epoch) {
    /* Not this frame's: its frame was lost on the way. */
    GST_DEBUG_OBJECT(self, "device %u: extras for packet %u, not %u",
                     dev->device, dev->extras_packet, info->packet);
    if (dev->extras)
      count(self, &self->extras_dropped, 1);
    gst_rdma_src_clear_extras(dev);
    return TRUE;
  }
  video = dev->caps && gst_video_info_from_caps(&vinfo, dev->caps);
  if (dev->extras_lost) {
    layout_lost = video && needs_its_layout(&vinfo, buf);
  } else {
    gboolean reader = g_signal_has_handler_pending(
        self, gst_rdma_src_deserialize_meta_signal, 0, FALSE);

    if ((failed =
             gst_rdma_extras_apply(dev->extras, buf, video ? &vinfo : NULL,
                                   reader ? deserialize_meta : NULL, self)) > 0)
      count(self, &self->metas_not_restored, failed);
    /* Its layout came but didn't fit the caps (counted above). */
    layout_lost = video && gst_rdma_extras_has_layout(dev->extras) &&
                  needs_its_layout(&vinfo, buf);
  }
  gst_rdma_src_clear_extras(dev);
  if (layout_lost)
    GST_DEBUG_OBJECT(self, "device %u: packet %u's padded layout was lost",
                     dev->device, info->packet);
  return !layout_lost;
}

GstEvent *gst_rdma_src_stream_start_event(GstRdmaSrc *self,
                                          GstRdmaSrcDevice *dev)
{
  const GstStructure *up = self->upstream[dev->device].stream;
  const gchar *upstream_id =
      up ? gst_structure_get_string(up, "stream-id") : NULL;
  guint group_id = self->group_id, flags = GST_STREAM_FLAG_NONE;
  gchar *stream_id;
  GstEvent *start;

  if (upstream_id && *upstream_id)
    stream_id = gst_pad_create_stream_id_printf(
        GST_PAD(dev->pad), GST_ELEMENT(self), "device-%u/%s", dev->device,
        upstream_id);
  else
    stream_id = gst_pad_create_stream_id_printf(
        GST_PAD(dev->pad), GST_ELEMENT(self), "device-%u", dev->device);
  if (up) {
    guint group;

    if (gst_structure_get_uint(up, "group-id", &group))
      group_id = local_group(self, self->upstream[dev->device].lane, group);
    gst_structure_get_uint(up, "flags", &flags);
    g_clear_pointer(&self->upstream[dev->device].started, gst_structure_free);
    self->upstream[dev->device].started = gst_structure_copy(up);
  }
  self->upstream[dev->device].fresh = FALSE;
  start = gst_event_new_stream_start(stream_id);
  g_free(stream_id);
  gst_event_set_group_id(start, group_id);
  gst_event_set_stream_flags(start, (GstStreamFlags)flags);
  return start;
}

gboolean gst_rdma_src_events_caps_from(GstRdmaSrc *self, guint device,
                                       guint32 lane)
{
  if (self->upstream[device].stream && self->upstream[device].lane != lane) {
    /* Another sender's (one that left): not this stream's. */
    g_clear_pointer(&self->upstream[device].stream, gst_structure_free);
    self->upstream[device].fresh = FALSE;
  }
  return self->upstream[device].fresh;
}

void gst_rdma_src_events_free(GstRdmaSrc *self)
{
  for (guint d = 0; d < SBR_MAX_DEVICES; d++) {
    g_clear_pointer(&self->upstream[d].stream, gst_structure_free);
    g_clear_pointer(&self->upstream[d].started, gst_structure_free);
    self->upstream[d].fresh = FALSE;
  }
  g_clear_pointer(&self->groups, g_hash_table_unref);
}
