/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-rdmaframeset
 * @title: rdmaframeset
 * @see_also: rdmasrc, compositor
 *
 * rdmaframeset hands an application the frames of every camera captured
 * at one instant as one #GstBufferList: one buffer per camera that made
 * it, cameras that did not named as missing.  Each sink pad (`sink_%u`,
 * request pads) is a camera; the frames' PTS must say when they were
 * captured on this pipeline's timeline, which is what rdmasrc's
 * `timestamp-mode=capture` stamps (cameras on hosts whose wall clocks NTP
 * or PTP keep together then line up, whatever their senders' clocks).  It
 * has no RDMA in it: any live sources with such PTS will do.
 *
 * A set opens at the earliest frame waiting on any pad (its instant) and
 * takes, from each pad, the frame at the head of its queue if it was
 * captured less than #GstRdmaFrameSet:tolerance after the instant (by
 * default half the frame interval of the fastest camera's caps, 20 ms
 * when no caps say).  So a set's frames are never further apart than the
 * tolerance, and a camera gives a set at most one frame.  The set goes out
 * as soon as every pad has a frame queued (each pad's frames come in
 * order, so a pad whose next frame is later has none for this instant),
 * else when the pipeline's clock reaches the instant plus the tolerance
 * plus the latency: what upstream reports (rdmasrc's covers capture to
 * pad) and the aggregator's own #GstAggregator:latency, the time a set
 * waits for late cameras.  A camera without a frame for the set by then
 * is named missing and the set goes out without it: a camera that stalls
 * or never comes never holds the others.  Its frame, when it comes, is
 * later than a set already out: dropped and counted (late-drops), never
 * put in the next set, so frames of two instants never share a set.
 * Frames without a PTS are dropped and counted too (untimed-drops).  When
 * upstream is not live there is no deadline: sets wait for every camera,
 * as any aggregator does.  A tolerance above a frame interval would take
 * a camera's next frame as late; keep it below.
 *
 * Every buffer of a set is the camera's own (no copy: the same memories,
 * its own PTS, flags and metas) with a #GstCustomMeta "GstRdmaFrameMeta",
 * its structure "rdma-frame":
 *
 * - device-id (guint): the pad's #GstRdmaFrameSetPad:device-id, by default
 *   its number N (sink_N): link rdmasrc's src_N to sink_N;
 * - pad (string): the sink pad's name;
 * - caps (#GstCaps): the caps of the camera's stream for this frame;
 * - pts (guint64): the frame's running time (its capture instant);
 * - capture-time (guint64, when the frame has one): its "timestamp/x-unix"
 *   #GstReferenceTimestampMeta, ns since 1970 (rdmasrc puts the sender's);
 * - offset (gint64): pts minus the set's instant.
 *
 * The list's first buffer also has a #GstCustomMeta "GstRdmaFrameSetMeta",
 * structure "rdma-frame-set": sequence (guint64, from 0), pts (guint64,
 * the set's instant, running time), tolerance (guint64), cameras (guint,
 * sink pads), frames (guint), complete (gboolean), missing (#GstValueArray
 * of guint device ids, ascending), spread (guint64: max - min capture time
 * of its frames, by their capture-time when every frame has one, else by
 * pts), pts-spread (guint64, by pts).  Buffers come in device-id order.
 * The src pad's caps are "application/x-rdma-frame-set" (appsink takes
 * them; `sample.get_buffer_list()` in Python).
 *
 * The #GstRdmaFrameSet:stats structure "rdmaframeset-stats": sets,
 * sets-complete, sets-partial, frames, late-drops, untimed-drops,
 * tolerance (the one in use), last-spread and max-spread (spread as
 * above), and per camera a structure "camera-<device-id>" (device-id,
 * pad, frames, misses: sets it was missing from, late-drops,
 * untimed-drops).
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 rdmasrc transport=shm timestamp-mode=capture name=r
 *   r.src_0 ! fs.sink_0 r.src_1 ! fs.sink_1 r.src_2 ! fs.sink_2
 *   rdmaframeset name=fs latency=100000000 ! fakesink silent=false -v
 * ]| Three cameras' frames as sets, each waiting up to 100 ms past what
 * rdmasrc reports for a late camera.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstrdmaframeset.h"

#include <stdio.h>

#include "gstrdmaelements.h"

enum { PROP_0, PROP_TOLERANCE, PROP_STATS, N_PROPERTIES };

enum { PAD_PROP_0, PAD_PROP_DEVICE_ID, N_PAD_PROPERTIES };

/* 0: half the fastest camera's frame interval, or FALLBACK_TOLERANCE. */
#define DEFAULT_TOLERANCE 0
#define FALLBACK_TOLERANCE (20 * GST_MSECOND)
#define DEFAULT_DEVICE_ID (-1)

GST_DEBUG_CATEGORY_STATIC(gst_rdma_frame_set_debug);
#define GST_CAT_DEFAULT gst_rdma_frame_set_debug

#define FRAME_SET_CAPS "application/x-rdma-frame-set"

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE(
    "sink_%u", GST_PAD_SINK, GST_PAD_REQUEST, GST_STATIC_CAPS_ANY);
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE(
    "src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS(FRAME_SET_CAPS));

struct _GstRdmaFrameSetPad {
  GstAggregatorPad parent;
  guint number;   /* N of sink_N */
  gint device_id; /* property, under the pad's object lock */
  /* The src pad's thread (serialized events are handled there, in
   * step with the buffers behind them). */
  GstCaps *caps;         /* of the frame at the head of the queue */
  GstClockTime interval; /* frame interval by those caps, or NONE */
  /* Stats, under the element's object lock. */
  guint64 frames, misses, late, untimed;
};

struct _GstRdmaFrameSet {
  GstAggregator parent;
  GstClockTime tolerance; /* property (object lock); 0: from the caps */
  /* The src pad's thread. */
  GstClockTime last_end;   /* frames before it belong to sets already out */
  GstClockTime waited_for; /* what get_next_time last returned */
  gboolean caps_set;
  /* Stats, under the object lock. */
  GstClockTime tolerance_used;
  guint64 sets, complete, partial, frames;
  GstClockTime last_spread, max_spread;
};

static GParamSpec *properties[N_PROPERTIES];
static GParamSpec *pad_properties[N_PAD_PROPERTIES];

G_DEFINE_TYPE(GstRdmaFrameSetPad, gst_rdma_frame_set_pad,
              GST_TYPE_AGGREGATOR_PAD);

#define gst_rdma_frame_set_parent_class parent_class
G_DEFINE_TYPE(GstRdmaFrameSet, gst_rdma_frame_set, GST_TYPE_AGGREGATOR);
GST_ELEMENT_REGISTER_DEFINE(rdmaframeset, "rdmaframeset", GST_RANK_NONE,
                            GST_TYPE_RDMA_FRAME_SET);

static const GstMetaInfo *frame_meta_info;
static const GstMetaInfo *set_meta_info;
static GstCaps *unix_caps;

/* ---------------------------------------------------------------- pad */

static guint pad_device_id(GstRdmaFrameSetPad *pad)
{
  gint id;

  GST_OBJECT_LOCK(pad);
  id = pad->device_id;
  GST_OBJECT_UNLOCK(pad);
  return id >= 0 ? (guint)id : pad->number;
}

static void gst_rdma_frame_set_pad_constructed(GObject *object)
{
  GstRdmaFrameSetPad *pad = GST_RDMA_FRAME_SET_PAD(object);
  const gchar *name;

  G_OBJECT_CLASS(gst_rdma_frame_set_pad_parent_class)->constructed(object);
  name = GST_PAD_NAME(pad);
  if (!name || sscanf(name, "sink_%u", &pad->number) != 1)
    pad->number = 0;
}

static void gst_rdma_frame_set_pad_finalize(GObject *object)
{
  GstRdmaFrameSetPad *pad = GST_RDMA_FRAME_SET_PAD(object);

  gst_caps_replace(&pad->caps, NULL);
  G_OBJECT_CLASS(gst_rdma_frame_set_pad_parent_class)->finalize(object);
}

static void gst_rdma_frame_set_pad_set_property(GObject *object, guint prop_id,
                                                const GValue *value,
                                                GParamSpec *pspec)
{
  GstRdmaFrameSetPad *pad = GST_RDMA_FRAME_SET_PAD(object);

  switch (prop_id) {
  case PAD_PROP_DEVICE_ID:
    GST_OBJECT_LOCK(pad);
    pad->device_id = g_value_get_int(value);
    GST_OBJECT_UNLOCK(pad);
    break;
  default:
    G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    break;
  }
}

static void gst_rdma_frame_set_pad_get_property(GObject *object, guint prop_id,
                                                GValue *value,
                                                GParamSpec *pspec)
{
  GstRdmaFrameSetPad *pad = GST_RDMA_FRAME_SET_PAD(object);

  switch (prop_id) {
  case PAD_PROP_DEVICE_ID:
    GST_OBJECT_LOCK(pad);
    g_value_set_int(value, pad->device_id);
    GST_OBJECT_UNLOCK(pad);
    break;
  default:
    G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    break;
  }
}

static void gst_rdma_frame_set_pad_class_init(GstRdmaFrameSetPadClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);

  gobject_class->constructed = gst_rdma_frame_set_pad_constructed;
  gobject_class->finalize = gst_rdma_frame_set_pad_finalize;
  gobject_class->set_property = gst_rdma_frame_set_pad_set_property;
  gobject_class->get_property = gst_rdma_frame_set_pad_get_property;

  pad_properties[PAD_PROP_DEVICE_ID] = g_param_spec_int(
      "device-id", "Device ID",
      "The camera's id in the frames' metas and the stats; -1: the pad's "
      "number N (sink_N)",
      -1, G_MAXINT, DEFAULT_DEVICE_ID,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties(gobject_class, N_PAD_PROPERTIES,
                                    pad_properties);
}

static void gst_rdma_frame_set_pad_init(GstRdmaFrameSetPad *pad)
{
  pad->device_id = DEFAULT_DEVICE_ID;
  pad->interval = GST_CLOCK_TIME_NONE;
}

/* ------------------------------------------------------------- metas */

static gboolean custom_meta_init(void)
{
  static gsize done = 0;

  if (g_once_init_enter(&done)) {
    /* No tags: elements that copy the metas they don't know (queue,
     * tee, most transforms) keep them. */
    static const gchar *tags[] = {NULL};

    frame_meta_info = gst_meta_register_custom(GST_RDMA_FRAME_META_NAME, tags,
                                               NULL, NULL, NULL);
    set_meta_info = gst_meta_register_custom(GST_RDMA_FRAME_SET_META_NAME, tags,
                                             NULL, NULL, NULL);
    unix_caps = gst_caps_new_empty_simple("timestamp/x-unix");
    GST_MINI_OBJECT_FLAG_SET(unix_caps, GST_MINI_OBJECT_FLAG_MAY_BE_LEAKED);
    g_once_init_leave(&done, 1);
  }
  return frame_meta_info != NULL && set_meta_info != NULL;
}

static GstStructure *add_custom_meta(GstBuffer *buf, const gchar *meta_name)
{
  GstCustomMeta *meta = gst_buffer_add_custom_meta(buf, meta_name);

  return meta ? gst_custom_meta_get_structure(meta) : NULL;
}

/* ---------------------------------------------------------- the sets */

/* The sink pads, referenced, in device-id order (the order of a set's
 * buffers and of its missing list). */
static gint compare_pads(gconstpointer a, gconstpointer b)
{
  guint x = pad_device_id(*(GstRdmaFrameSetPad *const *)a);
  guint y = pad_device_id(*(GstRdmaFrameSetPad *const *)b);

  return x < y ? -1 : x > y;
}

static GPtrArray *sink_pads(GstRdmaFrameSet *self)
{
  GPtrArray *pads = g_ptr_array_new_with_free_func(gst_object_unref);

  GST_OBJECT_LOCK(self);
  for (GList *l = GST_ELEMENT(self)->sinkpads; l; l = l->next)
    g_ptr_array_add(pads, gst_object_ref(l->data));
  GST_OBJECT_UNLOCK(self);
  g_ptr_array_sort(pads, compare_pads);
  return pads;
}

/* A buffer's running time on its pad, NONE without a PTS. */
static GstClockTime running_time(GstAggregatorPad *pad, GstBuffer *buf)
{
  GstClockTime rt;

  if (!GST_BUFFER_PTS_IS_VALID(buf))
    return GST_CLOCK_TIME_NONE;
  GST_OBJECT_LOCK(pad);
  rt = gst_segment_to_running_time(&pad->segment, GST_FORMAT_TIME,
                                   GST_BUFFER_PTS(buf));
  GST_OBJECT_UNLOCK(pad);
  return rt;
}

/* The tolerance in use: the property, else half the shortest frame
 * interval the pads' caps give, else FALLBACK_TOLERANCE. */
static GstClockTime effective_tolerance(GstRdmaFrameSet *self, GPtrArray *pads)
{
  GstClockTime tol, shortest = GST_CLOCK_TIME_NONE;

  GST_OBJECT_LOCK(self);
  tol = self->tolerance;
  GST_OBJECT_UNLOCK(self);
  if (tol > 0)
    return tol;
  for (guint i = 0; i < pads->len; i++) {
    GstRdmaFrameSetPad *pad = g_ptr_array_index(pads, i);

    if (GST_CLOCK_TIME_IS_VALID(pad->interval) &&
        (!GST_CLOCK_TIME_IS_VALID(shortest) || pad->interval < shortest))
      shortest = pad->interval;
  }
  return GST_CLOCK_TIME_IS_VALID(shortest) ? shortest / 2 : FALLBACK_TOLERANCE;
}

/* The instant the next set closes at (plus the latency: the aggregator
 * waits for the clock to reach that): the earliest frame queued plus the
 * tolerance.  A frame already late or without a PTS: now (0), so that
 * aggregate drops it at once rather than after a deadline. */
static GstClockTime gst_rdma_frame_set_get_next_time(GstAggregator *agg)
{
  GstRdmaFrameSet *self = GST_RDMA_FRAME_SET(agg);
  GPtrArray *pads = sink_pads(self);
  GstClockTime earliest = GST_CLOCK_TIME_NONE, next;

  for (guint i = 0; i < pads->len; i++) {
    GstAggregatorPad *pad = g_ptr_array_index(pads, i);
    GstBuffer *buf = gst_aggregator_pad_peek_buffer(pad);
    GstClockTime rt;

    if (!buf)
      continue;
    rt = running_time(pad, buf);
    gst_buffer_unref(buf);
    if (!GST_CLOCK_TIME_IS_VALID(rt) ||
        (GST_CLOCK_TIME_IS_VALID(self->last_end) && rt < self->last_end))
      rt = 0;
    if (!GST_CLOCK_TIME_IS_VALID(earliest) || rt < earliest)
      earliest = rt;
  }
  next = GST_CLOCK_TIME_IS_VALID(earliest)
             ? earliest + effective_tolerance(self, pads)
             : GST_CLOCK_TIME_NONE;
  g_ptr_array_unref(pads);
  self->waited_for = next;
  return next;
}

/* Drops the frames at the head of pad that belong to sets already out
 * (or have no PTS), counting them; returns the running time of the frame
 * left at the head, NONE when there is none. */
static GstClockTime drop_late(GstRdmaFrameSet *self, GstRdmaFrameSetPad *pad)
{
  GstAggregatorPad *aggpad = GST_AGGREGATOR_PAD(pad);
  GstBuffer *buf;

  while ((buf = gst_aggregator_pad_peek_buffer(aggpad))) {
    GstClockTime rt = running_time(aggpad, buf);
    gboolean untimed = !GST_CLOCK_TIME_IS_VALID(rt);

    gst_buffer_unref(buf);
    if (!untimed &&
        (!GST_CLOCK_TIME_IS_VALID(self->last_end) || rt >= self->last_end))
      return rt;
    GST_LOG_OBJECT(pad, "dropping a frame at %" GST_TIME_FORMAT ": %s",
                   GST_TIME_ARGS(rt), untimed ? "no PTS" : "its set went out");
    gst_aggregator_pad_drop_buffer(aggpad);
    GST_OBJECT_LOCK(self);
    if (untimed)
      pad->untimed++;
    else
      pad->late++;
    GST_OBJECT_UNLOCK(self);
  }
  return GST_CLOCK_TIME_NONE;
}

/* Takes the frame at the head of pad into the set: its meta, the set's
 * bounds.  Returns the buffer (writable, with the meta). */
static GstBuffer *take_frame(GstRdmaFrameSet *self, GstRdmaFrameSetPad *pad,
                             GstClockTime rt, GstClockTime instant,
                             guint64 *capture)
{
  GstBuffer *buf = gst_aggregator_pad_pop_buffer(GST_AGGREGATOR_PAD(pad));
  GstReferenceTimestampMeta *ts;
  GstStructure *s;

  (void)self;
  /* Writable for the meta: a new GstBuffer over the same memories when
   * someone else (a tee) holds it too, never a copy of the frame. */
  buf = gst_buffer_make_writable(buf);
  ts = gst_buffer_get_reference_timestamp_meta(buf, unix_caps);
  *capture = ts ? ts->timestamp : GST_CLOCK_TIME_NONE;
  s = add_custom_meta(buf, GST_RDMA_FRAME_META_NAME);
  if (s) {
    gst_structure_set_name(s, "rdma-frame");
    gst_structure_set(s, "device-id", G_TYPE_UINT, pad_device_id(pad), "pad",
                      G_TYPE_STRING, GST_PAD_NAME(pad), "caps", GST_TYPE_CAPS,
                      pad->caps, "pts", G_TYPE_UINT64, rt, "offset",
                      G_TYPE_INT64, GST_CLOCK_DIFF(instant, rt), NULL);
    if (ts)
      gst_structure_set(s, "capture-time", G_TYPE_UINT64, ts->timestamp, NULL);
  }
  return buf;
}

typedef struct {
  GstClockTime min_rt, max_rt;
  guint64 min_cap, max_cap;
  gboolean all_captured;
} Bounds;

static void bounds_add(Bounds *b, GstClockTime rt, guint64 capture)
{
  b->min_rt = MIN(b->min_rt, rt);
  b->max_rt = MAX(b->max_rt, rt);
  if (capture == GST_CLOCK_TIME_NONE) {
    b->all_captured = FALSE;
    return;
  }
  b->min_cap = MIN(b->min_cap, capture);
  b->max_cap = MAX(b->max_cap, capture);
}

static void set_meta(GstBufferList *list, guint64 sequence,
                     GstClockTime instant, GstClockTime tol, guint cameras,
                     GArray *missing, GstClockTime spread,
                     GstClockTime rt_spread)
{
  GstBuffer *first = gst_buffer_list_get_writable(list, 0);
  GstStructure *s = add_custom_meta(first, GST_RDMA_FRAME_SET_META_NAME);
  GValue array = G_VALUE_INIT, v = G_VALUE_INIT;

  if (!s)
    return;
  gst_structure_set_name(s, "rdma-frame-set");
  g_value_init(&array, GST_TYPE_ARRAY);
  g_value_init(&v, G_TYPE_UINT);
  for (guint i = 0; i < missing->len; i++) {
    g_value_set_uint(&v, g_array_index(missing, guint, i));
    gst_value_array_append_value(&array, &v);
  }
  gst_structure_set(s, "sequence", G_TYPE_UINT64, sequence, "pts",
                    G_TYPE_UINT64, instant, "tolerance", G_TYPE_UINT64, tol,
                    "cameras", G_TYPE_UINT, cameras, "frames", G_TYPE_UINT,
                    gst_buffer_list_length(list), "complete", G_TYPE_BOOLEAN,
                    missing->len == 0, NULL);
  gst_structure_take_value(s, "missing", &array);
  gst_structure_set(s, "spread", G_TYPE_UINT64, spread, "pts-spread",
                    G_TYPE_UINT64, rt_spread, NULL);
  g_value_unset(&v);
}

static GstFlowReturn gst_rdma_frame_set_aggregate(GstAggregator *agg,
                                                  gboolean timeout)
{
  GstRdmaFrameSet *self = GST_RDMA_FRAME_SET(agg);
  GPtrArray *pads = sink_pads(self);
  GArray *heads =
      g_array_sized_new(FALSE, FALSE, sizeof(GstClockTime), pads->len);
  GArray *missing = g_array_new(FALSE, FALSE, sizeof(guint));
  GstClockTime instant = GST_CLOCK_TIME_NONE, tol, end, spread;
  Bounds b = {G_MAXUINT64, 0, G_MAXUINT64, 0, TRUE};
  gboolean waiting = FALSE, all_eos = TRUE;
  GstBufferList *list;
  GstFlowReturn ret;
  guint64 sequence;

  for (guint i = 0; i < pads->len; i++) {
    GstRdmaFrameSetPad *pad = g_ptr_array_index(pads, i);
    GstClockTime rt = drop_late(self, pad);
    gboolean eos = gst_aggregator_pad_is_eos(GST_AGGREGATOR_PAD(pad));

    g_array_append_val(heads, rt);
    if (GST_CLOCK_TIME_IS_VALID(rt)) {
      all_eos = FALSE;
      if (!GST_CLOCK_TIME_IS_VALID(instant) || rt < instant)
        instant = rt;
    } else if (!eos) {
      all_eos = FALSE;
      waiting = TRUE; /* a live camera with nothing queued */
    }
  }
  tol = effective_tolerance(self, pads);
  if (!GST_CLOCK_TIME_IS_VALID(instant)) {
    ret = all_eos ? GST_FLOW_EOS : GST_AGGREGATOR_FLOW_NEED_DATA;
    goto done;
  }
  end = instant + tol;
  /* Before its deadline a set goes out only when every live camera has a
   * frame queued (dropping late ones may have emptied a pad); a timeout
   * was for the instant of the earliest frame then, which may have been
   * dropped since: this set's deadline may be still to come. */
  if ((!timeout && waiting) || (timeout && waiting &&
                                (!GST_CLOCK_TIME_IS_VALID(self->waited_for) ||
                                 self->waited_for < end))) {
    ret = GST_AGGREGATOR_FLOW_NEED_DATA;
    goto done;
  }

  list = gst_buffer_list_new_sized(pads->len);
  for (guint i = 0; i < pads->len; i++) {
    GstRdmaFrameSetPad *pad = g_ptr_array_index(pads, i);
    GstClockTime rt = g_array_index(heads, GstClockTime, i);
    guint64 capture;

    if (GST_CLOCK_TIME_IS_VALID(rt) && rt < end) {
      gst_buffer_list_add(list, take_frame(self, pad, rt, instant, &capture));
      bounds_add(&b, rt, capture);
    } else {
      guint id = pad_device_id(pad);
      g_array_append_val(missing, id);
    }
  }
  spread = b.all_captured ? b.max_cap - b.min_cap : b.max_rt - b.min_rt;

  GST_OBJECT_LOCK(self);
  sequence = self->sets++;
  if (missing->len == 0)
    self->complete++;
  else
    self->partial++;
  self->frames += gst_buffer_list_length(list);
  self->tolerance_used = tol;
  self->last_spread = spread;
  self->max_spread = MAX(self->max_spread, spread);
  for (guint i = 0, m = 0; i < pads->len; i++) {
    GstRdmaFrameSetPad *pad = g_ptr_array_index(pads, i);

    if (m < missing->len &&
        g_array_index(missing, guint, m) == pad_device_id(pad)) {
      pad->misses++;
      m++;
    } else {
      pad->frames++;
    }
  }
  GST_AGGREGATOR_PAD(agg->srcpad)->segment.position = end;
  GST_OBJECT_UNLOCK(self);

  set_meta(list, sequence, instant, tol, pads->len, missing, spread,
           b.max_rt - b.min_rt);
  self->last_end = end;
  GST_LOG_OBJECT(self,
                 "set %" G_GUINT64_FORMAT " at %" GST_TIME_FORMAT
                 ": %u frames, %u missing, spread %" GST_TIME_FORMAT "%s",
                 sequence, GST_TIME_ARGS(instant), gst_buffer_list_length(list),
                 missing->len, GST_TIME_ARGS(spread),
                 timeout ? " (deadline)" : "");

  if (!self->caps_set) {
    GstCaps *caps = gst_static_pad_template_get_caps(&src_template);

    gst_aggregator_set_src_caps(agg, caps);
    gst_caps_unref(caps);
    self->caps_set = TRUE;
  }
  gst_aggregator_selected_samples(agg, instant, GST_CLOCK_TIME_NONE, tol, NULL);
  ret = gst_aggregator_finish_buffer_list(agg, list);

done:
  g_array_unref(missing);
  g_array_unref(heads);
  g_ptr_array_unref(pads);
  return ret;
}

/* A camera's caps: what its next frames' metas carry, and its frame
 * interval for the default tolerance. */
static gboolean gst_rdma_frame_set_sink_event(GstAggregator *agg,
                                              GstAggregatorPad *aggpad,
                                              GstEvent *event)
{
  GstRdmaFrameSetPad *pad = GST_RDMA_FRAME_SET_PAD(aggpad);

  if (GST_EVENT_TYPE(event) == GST_EVENT_CAPS) {
    GstCaps *caps;
    const GstStructure *s;
    gint n, d;

    gst_event_parse_caps(event, &caps);
    gst_caps_replace(&pad->caps, caps);
    s = gst_caps_get_size(caps) > 0 ? gst_caps_get_structure(caps, 0) : NULL;
    pad->interval = GST_CLOCK_TIME_NONE;
    if (s && gst_structure_get_fraction(s, "framerate", &n, &d) && n > 0 &&
        d > 0)
      pad->interval = gst_util_uint64_scale_int(GST_SECOND, d, n);
    /* The src pad's caps are ours, whatever the cameras send. */
    gst_event_unref(event);
    return TRUE;
  }
  return GST_AGGREGATOR_CLASS(parent_class)->sink_event(agg, aggpad, event);
}

static GstFlowReturn gst_rdma_frame_set_update_src_caps(GstAggregator *agg,
                                                        GstCaps *downstream,
                                                        GstCaps **ret)
{
  GstCaps *caps = gst_static_pad_template_get_caps(&src_template);

  (void)agg;
  *ret = gst_caps_intersect(caps, downstream);
  gst_caps_unref(caps);
  return gst_caps_is_empty(*ret) ? GST_FLOW_NOT_NEGOTIATED : GST_FLOW_OK;
}

static void reset_stream(GstRdmaFrameSet *self)
{
  self->last_end = GST_CLOCK_TIME_NONE;
  self->waited_for = GST_CLOCK_TIME_NONE;
}

static gboolean gst_rdma_frame_set_start(GstAggregator *agg)
{
  GstRdmaFrameSet *self = GST_RDMA_FRAME_SET(agg);

  reset_stream(self);
  self->caps_set = FALSE;
  return TRUE;
}

static GstFlowReturn gst_rdma_frame_set_flush(GstAggregator *agg)
{
  reset_stream(GST_RDMA_FRAME_SET(agg));
  return GST_FLOW_OK;
}

/* -------------------------------------------------------------- stats */

static GstStructure *gst_rdma_frame_set_get_stats(GstRdmaFrameSet *self)
{
  GstStructure *s = gst_structure_new_empty("rdmaframeset-stats");
  GPtrArray *pads = sink_pads(self);

  GST_OBJECT_LOCK(self);
  gst_structure_set(
      s, "sets", G_TYPE_UINT64, self->sets, "sets-complete", G_TYPE_UINT64,
      self->complete, "sets-partial", G_TYPE_UINT64, self->partial, "frames",
      G_TYPE_UINT64, self->frames, "tolerance", G_TYPE_UINT64,
      self->tolerance_used, "last-spread", G_TYPE_UINT64, self->last_spread,
      "max-spread", G_TYPE_UINT64, self->max_spread, NULL);
  {
    guint64 late = 0, untimed = 0;

    for (guint i = 0; i < pads->len; i++) {
      GstRdmaFrameSetPad *pad = g_ptr_array_index(pads, i);
      late += pad->late;
      untimed += pad->untimed;
    }
    gst_structure_set(s, "late-drops", G_TYPE_UINT64, late, "untimed-drops",
                      G_TYPE_UINT64, untimed, NULL);
  }
  GST_OBJECT_UNLOCK(self);
  for (guint i = 0; i < pads->len; i++) {
    GstRdmaFrameSetPad *pad = g_ptr_array_index(pads, i);
    guint id = pad_device_id(pad);
    gchar name[32];
    GstStructure *cs;

    GST_OBJECT_LOCK(self);
    cs = gst_structure_new(
        "rdmaframeset-camera-stats", "device-id", G_TYPE_UINT, id, "pad",
        G_TYPE_STRING, GST_PAD_NAME(pad), "frames", G_TYPE_UINT64, pad->frames,
        "misses", G_TYPE_UINT64, pad->misses, "late-drops", G_TYPE_UINT64,
        pad->late, "untimed-drops", G_TYPE_UINT64, pad->untimed, NULL);
    GST_OBJECT_UNLOCK(self);
    g_snprintf(name, sizeof name, "camera-%u", id);
    gst_structure_set(s, name, GST_TYPE_STRUCTURE, cs, NULL);
    gst_structure_free(cs);
  }
  g_ptr_array_unref(pads);
  return s;
}

/* ---------------------------------------------------------- element */

static void gst_rdma_frame_set_set_property(GObject *object, guint prop_id,
                                            const GValue *value,
                                            GParamSpec *pspec)
{
  GstRdmaFrameSet *self = GST_RDMA_FRAME_SET(object);

  switch (prop_id) {
  case PROP_TOLERANCE:
    GST_OBJECT_LOCK(self);
    self->tolerance = g_value_get_uint64(value);
    GST_OBJECT_UNLOCK(self);
    break;
  default:
    G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    break;
  }
}

static void gst_rdma_frame_set_get_property(GObject *object, guint prop_id,
                                            GValue *value, GParamSpec *pspec)
{
  GstRdmaFrameSet *self = GST_RDMA_FRAME_SET(object);

  switch (prop_id) {
  case PROP_TOLERANCE:
    GST_OBJECT_LOCK(self);
    g_value_set_uint64(value, self->tolerance);
    GST_OBJECT_UNLOCK(self);
    break;
  case PROP_STATS:
    g_value_take_boxed(value, gst_rdma_frame_set_get_stats(self));
    break;
  default:
    G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    break;
  }
}

static void gst_rdma_frame_set_class_init(GstRdmaFrameSetClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstAggregatorClass *agg_class = GST_AGGREGATOR_CLASS(klass);

  GST_DEBUG_CATEGORY_INIT(gst_rdma_frame_set_debug, "rdmaframeset", 0,
                          "Capture-instant frame sets");
  custom_meta_init();

  gobject_class->set_property = gst_rdma_frame_set_set_property;
  gobject_class->get_property = gst_rdma_frame_set_get_property;

  properties[PROP_TOLERANCE] = g_param_spec_uint64(
      "tolerance", "Tolerance",
      "How far after a set's first frame (ns) another camera's frame may be "
      "captured and join it; 0: half the fastest camera's frame interval",
      0, G_MAXUINT64, DEFAULT_TOLERANCE,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING);
  properties[PROP_STATS] = g_param_spec_boxed(
      "stats", "Statistics",
      "Sets complete and partial, spread, per camera frames and misses "
      "(rdmaframeset-stats: the element docs list the fields)",
      GST_TYPE_STRUCTURE, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties(gobject_class, N_PROPERTIES, properties);

  gst_element_class_add_static_pad_template_with_gtype(
      element_class, &sink_template, GST_TYPE_RDMA_FRAME_SET_PAD);
  gst_element_class_add_static_pad_template_with_gtype(
      element_class, &src_template, GST_TYPE_AGGREGATOR_PAD);
  gst_element_class_set_static_metadata(
      element_class, "Capture-instant frame sets", "Generic/Aggregator",
      "Gathers the frames of every camera captured at one instant into one "
      "buffer list, naming the cameras that missed it",
      GST_RDMA_ELEMENT_AUTHOR);

  agg_class->aggregate = gst_rdma_frame_set_aggregate;
  agg_class->get_next_time = gst_rdma_frame_set_get_next_time;
  agg_class->sink_event = gst_rdma_frame_set_sink_event;
  agg_class->update_src_caps = gst_rdma_frame_set_update_src_caps;
  agg_class->start = gst_rdma_frame_set_start;
  agg_class->flush = gst_rdma_frame_set_flush;

  gst_type_mark_as_plugin_api(GST_TYPE_RDMA_FRAME_SET_PAD, 0);
}

static void gst_rdma_frame_set_init(GstRdmaFrameSet *self)
{
  self->tolerance = DEFAULT_TOLERANCE;
  self->tolerance_used = FALLBACK_TOLERANCE;
  reset_stream(self);
}
