/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasinkevents.c - rdmasink's stream events and frame extras across
 * the link, each an EVENT block (docs/protocol.md, kind 4) whose payload
 * is a structure serialized:
 *   - "rdma-stream-start": the upstream stream-id, group-id and stream
 *     flags, right before every CAPS block (a new stream, a new lane), so
 *     that the receiver opens the stream with them;
 *   - "rdma-tags" (the newest TAG event of each scope) and "rdma-segment"
 *     (the segment's rate and applied rate, when not 1): before the next
 *     frame after they change, and again after the caps on every new lane,
 *     as the caps and headers go: a receiver that starts mid-stream gets
 *     them too;
 *   - "rdma-gap": a GAP event, in its place, once;
 *   - "rdma-frame": a frame's extras (gstrdmaextras.h), right before it.
 *
 * A receiver of an older version doesn't take EVENT blocks (libsbr says
 * -ENOTSUP): all this stays on this side, said once.  What doesn't fit one
 * block (an image tag) is left out, said once.  Streaming thread only.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>

#include "gstrdmaextras.h"
#include "gstrdmasinkpriv.h"

#define GST_CAT_DEFAULT gst_rdma_sink_debug

static GstStructure *tags_structure(GstEvent *event)
{
  GstTagList *tags = NULL;

  gst_event_parse_tag(event, &tags);
  return gst_structure_new("rdma-tags", "scope", G_TYPE_STRING,
                           gst_tag_list_get_scope(tags) == GST_TAG_SCOPE_GLOBAL
                               ? "global"
                               : "stream",
                           "taglist", GST_TYPE_TAG_LIST, tags, NULL);
}

void gst_rdma_sink_events_tag(GstRdmaSink *self, GstEvent *event)
{
  GstTagList *tags = NULL;
  GstStructure **slot;

  gst_event_parse_tag(event, &tags);
  slot = gst_tag_list_get_scope(tags) == GST_TAG_SCOPE_GLOBAL
             ? &self->stream_events[GST_RDMA_SINK_EVENT_TAGS_GLOBAL]
             : &self->stream_events[GST_RDMA_SINK_EVENT_TAGS_STREAM];
  g_clear_pointer(slot, gst_structure_free);
  *slot = tags_structure(event);
  self->events_pending = TRUE;
}

void gst_rdma_sink_events_stream_start(GstRdmaSink *self, GstEvent *event)
{
  const gchar *stream_id = NULL;
  GstStreamFlags flags = GST_STREAM_FLAG_NONE;
  guint group_id;
  GstStructure *s;

  /* A new stream: its own tags, its own segment. */
  g_clear_pointer(&self->stream_events[GST_RDMA_SINK_EVENT_TAGS_STREAM],
                  gst_structure_free);
  g_clear_pointer(&self->stream_events[GST_RDMA_SINK_EVENT_SEGMENT],
                  gst_structure_free);
  gst_event_parse_stream_start(event, &stream_id);
  gst_event_parse_stream_flags(event, &flags);
  s = gst_structure_new("rdma-stream-start", "stream-id", G_TYPE_STRING,
                        stream_id ? stream_id : "", "flags", G_TYPE_UINT,
                        (guint)flags, NULL);
  if (gst_event_parse_group_id(event, &group_id))
    gst_structure_set(s, "group-id", G_TYPE_UINT, group_id, NULL);
  g_clear_pointer(&self->stream_start, gst_structure_free);
  self->stream_start = s;
  /* The receiver opens its stream with the CAPS block: that goes again,
   * after this. */
  self->caps_pending = self->caps_str != NULL;
}

void gst_rdma_sink_events_segment(GstRdmaSink *self, const GstSegment *segment)
{
  GstStructure **slot = &self->stream_events[GST_RDMA_SINK_EVENT_SEGMENT];
  gdouble rate = segment->rate, applied = segment->applied_rate;
  gdouble old_rate = 1.0, old_applied = 1.0;

  if (*slot) {
    gst_structure_get_double(*slot, "rate", &old_rate);
    gst_structure_get_double(*slot, "applied-rate", &old_applied);
  }
  if (rate == old_rate && applied == old_applied)
    return;
  g_clear_pointer(slot, gst_structure_free);
  /* Buffers cross as running times, so what the receiver can use of a
   * segment is its rate: the stream is played (rate) or was already
   * changed (applied rate) that fast.  Back to 1 is a change too. */
  *slot = gst_structure_new("rdma-segment", "rate", G_TYPE_DOUBLE, rate,
                            "applied-rate", G_TYPE_DOUBLE, applied, NULL);
  self->events_pending = TRUE;
}

void gst_rdma_sink_events_free(GstRdmaSink *self)
{
  for (guint i = 0; i < GST_RDMA_SINK_N_EVENTS; i++)
    g_clear_pointer(&self->stream_events[i], gst_structure_free);
  g_clear_pointer(&self->stream_start, gst_structure_free);
  self->events_pending = self->extras_unused = FALSE;
}

gboolean gst_rdma_sink_events_any(GstRdmaSink *self)
{
  for (guint i = 0; i < GST_RDMA_SINK_N_EVENTS; i++)
    if (self->stream_events[i])
      return TRUE;
  return FALSE;
}

static void warn_once(GstRdmaSink *self, int ret)
{
  if (self->events_warned)
    return;
  self->events_warned = TRUE;
  GST_WARNING_OBJECT(self, "stream events not sent: %s",
                     ret == -ENOTSUP ? "the receiver predates events"
                                     : "one doesn't fit a block");
}

/* s as an EVENT block: 0, or libsbr's error (-ENOTSUP and -EMSGSIZE
 * already said). */
static int send_structure(GstRdmaSink *self, sbr_sender *sender,
                          const GstStructure *s)
{
  struct sbr_block_meta meta;
  gchar *str = gst_structure_to_string(s);
  int ret;

  sbr_block_meta_init(&meta, self->device);
  meta.kind = SBR_KIND_EVENT;
  ret = gst_rdma_sink_send(self, sender, &meta, str, strlen(str));
  GST_LOG_OBJECT(self, "event %s: %s", str,
                 ret == 0 ? "sent" : g_strerror(-ret));
  g_free(str);
  if (ret == -ENOTSUP || ret == -EMSGSIZE)
    warn_once(self, ret);
  else if (ret == 0) {
    GST_OBJECT_LOCK(self);
    self->events_sent++;
    GST_OBJECT_UNLOCK(self);
  }
  return ret;
}

/* What a send_structure result means for what comes after it: *went
 * when the block went, or never will (a receiver without events, one
 * that doesn't fit a block: said once); else it didn't (no free block, a
 * refusal, an outage), and neither may what it comes before: the flow
 * the frame's render returns. */
static GstFlowReturn event_flow(GstRdmaSink *self, int ret, sbr_sender *sender,
                                guint generation, gboolean *went)
{
  *went = ret == 0 || ret == -ENOTSUP || ret == -EMSGSIZE;
  if (*went)
    return GST_FLOW_OK;
  return gst_rdma_sink_handle_result(self, ret, 0, sender, generation);
}

GstFlowReturn gst_rdma_sink_events_send_stream_start(GstRdmaSink *self,
                                                     sbr_sender *sender,
                                                     guint generation,
                                                     gboolean *went)
{
  *went = TRUE;
  if (!self->stream_start)
    return GST_FLOW_OK;
  return event_flow(self, send_structure(self, sender, self->stream_start),
                    sender, generation, went);
}

GstFlowReturn gst_rdma_sink_events_send(GstRdmaSink *self, sbr_sender *sender,
                                        guint generation, gboolean *went)
{
  *went = TRUE;
  if (!self->events_pending)
    return GST_FLOW_OK;
  for (guint i = 0; i < GST_RDMA_SINK_N_EVENTS; i++) {
    GstFlowReturn flow;

    if (!self->stream_events[i])
      continue;
    flow =
        event_flow(self, send_structure(self, sender, self->stream_events[i]),
                   sender, generation, went);
    if (!*went)
      return flow; /* pending still: they go before the next frame */
  }
  self->events_pending = FALSE;
  return GST_FLOW_OK;
}

/* The application's writer of a meta nobody else writes out. */
static GstStructure *serialize_meta(GstBuffer *buf, GstMeta *meta,
                                    gpointer data)
{
  GstStructure *fields = NULL;

  g_signal_emit(data, gst_rdma_sink_serialize_meta_signal, 0, buf, meta,
                &fields);
  return fields;
}

GstFlowReturn gst_rdma_sink_events_send_frame(GstRdmaSink *self,
                                              sbr_sender *sender,
                                              guint generation, GstBuffer *buf,
                                              gboolean *went,
                                              GstBuffer **laid_out)
{
  const GstVideoInfo *info = self->has_video_info ? &self->video_info : NULL;
  guint not_carried = 0;
  GstStructure *s = gst_rdma_extras_from_buffer(
      buf, info,
      g_signal_has_handler_pending(self, gst_rdma_sink_serialize_meta_signal, 0,
                                   FALSE)
          ? serialize_meta
          : NULL,
      self, &not_carried);
  GstFlowReturn flow;
  guint max_meta_size;
  int ret;

  GST_OBJECT_LOCK(self);
  max_meta_size = self->max_meta_size;
  GST_OBJECT_UNLOCK(self);
  /* An EVENT block is one block: a set larger than its payload would not
   * go at all (-EMSGSIZE), every meta of it lost uncounted. */
  if (s)
    not_carried += gst_rdma_extras_fit(
        &s, MIN((gsize)max_meta_size, sbr_sender_block_payload_size(sender)));
  *went = TRUE;
  *laid_out = NULL;
  if (not_carried > 0) {
    GST_OBJECT_LOCK(self);
    self->metas_not_carried += not_carried;
    GST_OBJECT_UNLOCK(self);
  }
  if (!s && !self->extras_unused)
    return GST_FLOW_OK;
  /* Extras sent for a frame that then didn't go would be taken by the
   * next one (it gets the packet number that frame would have had): an
   * empty set clears them. */
  if (!s)
    s = gst_structure_new("rdma-frame", "flags", G_TYPE_UINT, 0, NULL);
  ret = send_structure(self, sender, s);
  gst_structure_free(s);
  flow = event_flow(self, ret, sender, generation, went);
  if (ret == 0)
    self->extras_unused = TRUE; /* until the frame goes */
  if ((ret == -ENOTSUP || ret == -EMSGSIZE) &&
      gst_rdma_extras_layout_differs(buf, info)) {
    /* Padded planes whose layout can't go with them would be garbage
     * over there: the frame goes in the caps' layout instead. */
    GstBuffer *copy =
        gst_rdma_extras_to_default_layout(gst_buffer_ref(buf), info);

    if (copy != buf)
      *laid_out = copy;
    else
      gst_buffer_unref(copy);
  }
  return flow;
}

void gst_rdma_sink_events_gap(GstRdmaSink *self, GstEvent *event,
                              sbr_sender *sender)
{
  GstSegment *segment = &GST_BASE_SINK(self)->segment;
  GstClockTime ts, duration;
  guint64 rt;
  GstStructure *s;

  gst_event_parse_gap(event, &ts, &duration);
  if (!GST_CLOCK_TIME_IS_VALID(ts) || segment->format != GST_FORMAT_TIME)
    return;
  rt = gst_segment_to_running_time(segment, GST_FORMAT_TIME, ts);
  if (!GST_CLOCK_TIME_IS_VALID(rt))
    return;
  s = gst_structure_new(
      "rdma-gap", "running-time", G_TYPE_UINT64, rt, "duration", G_TYPE_UINT64,
      GST_CLOCK_TIME_IS_VALID(duration) ? duration : GST_CLOCK_TIME_NONE, NULL);
  if (send_structure(self, sender, s) != 0)
    GST_DEBUG_OBJECT(self, "gap at %" GST_TIME_FORMAT " not sent",
                     GST_TIME_ARGS(rt));
  gst_structure_free(s);
}
