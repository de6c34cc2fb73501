/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasrcpadtable.c - rdmasrc's pads: which devices have one (asked for
 * by name, or added when a device nobody asked for sends caps), the events
 * that open and end their streams, and the latency each one reports.
 *
 * Threads: the receive thread alone writes the device table while it
 * runs; pads requested meanwhile wait in requested[] until it adopts them
 * (object lock).  Queries come from any thread (object lock).  The pads
 * are the element's children (GstChildProxy).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstrdmasrcpriv.h"

#include "gstrdmakeyunit.h"

#include <string.h>

#define GST_CAT_DEFAULT gst_rdma_src_debug

/* A device's share of its lane now (device-blocks), object lock held:
 * what the devices on its lane divide, unless device-blocks sets it.  Each
 * sender connection has a lane of `blocks` blocks of its own, so the
 * devices of other lanes take nothing from it; every rdmasrc on the
 * shared receiver counts its devices on the lane (the lane is theirs
 * too).  A device no lane owns yet (its camera hasn't come, or its
 * sender left and none took it over) gets what it would get if every
 * device with a share were on one lane: the least it could get on any,
 * so neither a latency nor a stat promises room it may not have. */
guint gst_rdma_src_budget(GstRdmaSrc *self, GstRdmaSrcDevice *dev)
{
  guint n;

  if (self->device_blocks_now > 0)
    return self->device_blocks_now;
  if (dev && dev->lane_counted)
    n = gst_rdma_receiver_add_lane_devices(self->shared, dev->counted_lane, 0);
  else
    n = self->shared ? gst_rdma_receiver_add_pads(self->shared, 0)
                     : self->n_pads;
  return MAX(1u, self->usable_blocks / MAX(1u, n));
}

/* Object lock held: the smallest share of our devices now (the stats'
 * element-wide device-blocks), or a new device's when there is none. */
guint gst_rdma_src_least_budget(GstRdmaSrc *self)
{
  guint least = G_MAXUINT;

  for (guint d = 0; d < SBR_MAX_DEVICES; d++)
    if (self->devices[d])
      least = MIN(least, gst_rdma_src_budget(self, self->devices[d]));
  return least != G_MAXUINT ? least : gst_rdma_src_budget(self, NULL);
}

/* Object lock held: dev counts among the devices of the lane that owns it
 * while it has a share and we are on the receiver; a new owner (its
 * sender reconnected: a new lane) moves it, a lane gone or a pad retired
 * takes it out. */
void gst_rdma_src_device_recount(GstRdmaSrc *self, GstRdmaSrcDevice *dev)
{
  gboolean on = self->shared && dev->shares_lane && dev->owned &&
                !g_atomic_int_get(&dev->released);

  if (dev->lane_counted && (!on || dev->counted_lane != dev->owner_lane)) {
    /* Set while counted: gst_rdma_src_uncount_lanes clears both at once. */
    g_assert(self->shared);
    gst_rdma_receiver_add_lane_devices(self->shared, dev->counted_lane, -1);
    dev->lane_counted = FALSE;
  }
  if (on && !dev->lane_counted) {
    dev->counted_lane = dev->owner_lane;
    dev->lane_counted = TRUE;
    gst_rdma_receiver_add_lane_devices(self->shared, dev->counted_lane, 1);
  }
}

/* Object lock held, leaving the shared receiver: our devices leave the
 * lanes' counts (the others' shares grow back). */
void gst_rdma_src_uncount_lanes(GstRdmaSrc *self)
{
  for (guint d = 0; d < SBR_MAX_DEVICES; d++) {
    GstRdmaSrcDevice *dev = self->devices[d];

    if (dev && dev->lane_counted) {
      gst_rdma_receiver_add_lane_devices(self->shared, dev->counted_lane, -1);
      dev->lane_counted = FALSE;
    }
  }
}

/* What a device's pad adds to the latency.  min: the latency property if
 * set, else what was measured (gst_rdma_src_pad_latency): the transport's
 * jitter with headroom, a few ms, not a whole frame; in the modes that
 * stamp the camera's instant (capture, sender) at least the latency the
 * sender said its frames have (an encoder's), which the measurement
 * would only find frame by frame.  The skew estimate takes a sender's
 * constant latency into its offset, and arrival mode stamps arrivals.  max: min
 * plus what the pad's queue can hold while downstream waits (its share of
 * frames under drop-oldest, max-queued under copy and pause) at the device's
 * frame rate; unknown rate, no bound. */
static void gst_rdma_src_device_latency(GstRdmaSrc *self, GstRdmaSrcDevice *dev,
                                        GstClockTime *min, GstClockTime *max)
{
  GstRdmaTimestampMode mode;
  gboolean drops;
  guint frames;

  *min = 0;
  *max = GST_CLOCK_TIME_NONE;
  if (!dev)
    return;
  /* Measured first: it also records what was reported. */
  *min = gst_rdma_src_pad_latency(dev->pad);
  mode = gst_rdma_src_pad_timestamp_mode(dev->pad, self->timestamp_mode_now);
  drops =
      gst_rdma_src_pad_get_policy(dev->pad) == GST_RDMA_OVER_BUDGET_DROP_OLDEST;
  GST_OBJECT_LOCK(self);
  if (self->latency >= 0)
    *min = (GstClockTime)self->latency * GST_MSECOND;
  else if ((mode == GST_RDMA_TIMESTAMP_MODE_CAPTURE ||
            mode == GST_RDMA_TIMESTAMP_MODE_SENDER) &&
           GST_CLOCK_TIME_IS_VALID(dev->sender_latency) &&
           dev->sender_latency > *min)
    *min = dev->sender_latency;
  frames = drops ? gst_rdma_src_budget(self, dev) : self->max_queued_now;
  if (GST_CLOCK_TIME_IS_VALID(dev->frame_duration) && frames > 0)
    *max = *min + frames * dev->frame_duration;
  GST_OBJECT_UNLOCK(self);
}

static gboolean gst_rdma_src_pad_query(GstPad *pad, GstObject *parent,
                                       GstQuery *query)
{
  GstRdmaSrc *self = GST_RDMA_SRC(parent);

  if (GST_QUERY_TYPE(query) == GST_QUERY_LATENCY) {
    GstClockTime min, max;

    gst_rdma_src_device_latency(self, gst_pad_get_element_private(pad), &min,
                                &max);
    gst_query_set_latency(query, TRUE, min, max);
    GST_LOG_OBJECT(pad,
                   "latency: min %" GST_TIME_FORMAT " max %" GST_TIME_FORMAT,
                   GST_TIME_ARGS(min), GST_TIME_ARGS(max));
    return TRUE;
  }
  return gst_pad_query_default(pad, parent, query);
}

static gboolean gst_rdma_src_pad_event(GstPad *pad, GstObject *parent,
                                       GstEvent *event)
{
  switch (GST_EVENT_TYPE(event)) {
  case GST_EVENT_SEEK:
    /* Live: nothing to seek in. */
    gst_event_unref(event);
    return FALSE;
  case GST_EVENT_QOS:
  case GST_EVENT_RECONFIGURE:
  case GST_EVENT_LATENCY:
    gst_event_unref(event);
    return TRUE;
  case GST_EVENT_CUSTOM_UPSTREAM: {
    /* A force-key-unit goes to the device's sender (gstrdmakeyunit.c):
     * this pad has no internal link the default would send it on. */
    GstRdmaSrcDevice *dev = gst_pad_get_element_private(pad);

    if (dev &&
        gst_rdma_src_key_unit_event(GST_RDMA_SRC(parent), dev->device, event))
      return TRUE;
    return gst_pad_event_default(pad, parent, event);
  }
  default:
    return gst_pad_event_default(pad, parent, event);
  }
}

void gst_rdma_src_answer_latency(GstRdmaSrc *self, GstQuery *query)
{
  GstClockTime min = 0, max = GST_CLOCK_TIME_NONE;
  GstRdmaSrcDevice *devices[SBR_MAX_DEVICES];
  guint n = 0;

  GST_OBJECT_LOCK(self);
  for (guint d = 0; d < SBR_MAX_DEVICES; d++)
    if (self->devices[d])
      devices[n++] = self->devices[d];
  GST_OBJECT_UNLOCK(self);
  for (guint i = 0; i < n; i++) {
    GstClockTime dmin, dmax;

    gst_rdma_src_device_latency(self, devices[i], &dmin, &dmax);
    min = MAX(min, dmin);
    if (GST_CLOCK_TIME_IS_VALID(dmax))
      max = GST_CLOCK_TIME_IS_VALID(max) ? MIN(max, dmax) : dmax;
  }
  gst_query_set_latency(query, TRUE, min, max);
}

/* Frame duration from the caps' framerate, if any. */
GstClockTime gst_rdma_src_caps_frame_duration(GstCaps *caps)
{
  GstStructure *s = gst_caps_get_structure(caps, 0);
  gint n, d;

  if (s && gst_structure_get_fraction(s, "framerate", &n, &d) && n > 0 && d > 0)
    return gst_util_uint64_scale_int(GST_SECOND, d, n);
  return GST_CLOCK_TIME_NONE;
}

/* The events that open a stream: stream-start, caps, a TIME segment (buffers
 * carry running times, see the SECTION). */
/* The TIME segment every stream opens with (buffers carry running times). */
static GstEvent *time_segment_event(void)
{
  GstSegment segment;

  gst_segment_init(&segment, GST_FORMAT_TIME);
  return gst_event_new_segment(&segment);
}

GstEvent **gst_rdma_src_stream_events(GstRdmaSrc *self, GstRdmaSrcDevice *dev,
                                      GstCaps *caps, GstEvent *events[3])
{
  events[0] = gst_rdma_src_stream_start_event(self, dev);
  events[1] = gst_event_new_caps(caps);
  events[2] = time_segment_event();
  dev->time_map.reset = TRUE;
  return events;
}

/* Starts (PLAYING) or not a pad, in step with the state changes. */
void gst_rdma_src_sync_pad(GstRdmaSrc *self, GstRdmaSrcDevice *dev)
{
  if (g_atomic_int_get(&self->playing))
    gst_rdma_src_pad_start(dev->pad);
}

/* A device and its pad, not yet in the table nor on the element. */
static GstRdmaSrcDevice *gst_rdma_src_device_new(GstRdmaSrc *self, guint device,
                                                 GstPadTemplate *templ,
                                                 GstRdmaOverBudget policy,
                                                 gboolean wait_for_keyframe)
{
  GstRdmaSrcDevice *dev = g_new0(GstRdmaSrcDevice, 1);
  GstPad *pad;

  dev->device = device;
  dev->rebase_seen = g_atomic_int_get(&self->rebase_count);
  gst_rdma_time_map_init(&dev->time_map);
  gst_rdma_time_map_get_stats(&dev->time_map, &dev->time_stats);
  dev->frame_duration = GST_CLOCK_TIME_NONE;
  dev->sender_latency = GST_CLOCK_TIME_NONE;
  dev->pad = gst_rdma_src_pad_new(templ, device, policy, &self->flow);
  pad = GST_PAD(dev->pad);
  gst_rdma_src_pad_set_default_wait_for_keyframe(dev->pad, wait_for_keyframe);
  /* Ours until finalize, whether or not the element still has it. */
  gst_object_ref_sink(pad);
  gst_pad_set_element_private(pad, dev);
  gst_pad_set_query_function(pad, gst_rdma_src_pad_query);
  gst_pad_set_event_function(pad, gst_rdma_src_pad_event);
  gst_pad_use_fixed_caps(pad);
  g_mutex_lock(&self->flow.lock);
  gst_flow_combiner_add_pad(self->flow.combiner, pad);
  g_mutex_unlock(&self->flow.lock);
  return dev;
}

gboolean gst_rdma_src_has_device(GstElement *element, guint device)
{
  GstRdmaSrc *self = GST_RDMA_SRC(element);
  gboolean has;

  GST_OBJECT_LOCK(self);
  has = (self->devices[device] &&
         !g_atomic_int_get(&self->devices[device]->released)) ||
        self->requested[device];
  GST_OBJECT_UNLOCK(self);
  return has;
}

/* Receive thread (or with it stopped), state lock held: a released pad's
 * device leaves the table, so its name can be asked for again.  What we
 * told its sender is undone; buffers of it still downstream hold their
 * own references. */
static void gst_rdma_src_retire(GstRdmaSrc *self, GstRdmaSrcDevice *dev)
{
  GST_INFO_OBJECT(self, "device %u: released pad gone", dev->device);
  if (dev->pause_set) {
    if (self->receiver)
      sbr_receiver_pause_device(self->receiver, (uint8_t)dev->device, FALSE);
    self->n_paused--;
  }
  if (dev->owned && self->receiver)
    sbr_receiver_refuse_device(self->receiver, SBR_LANE_ALL,
                               (uint8_t)dev->device, FALSE);
  GST_OBJECT_LOCK(self);
  gst_rdma_src_device_recount(self, dev); /* released: out of its lane's */
  self->devices[dev->device] = NULL;
  if (dev->shares_lane) {
    self->n_pads--;
    if (self->shared)
      gst_rdma_receiver_add_pads(self->shared, -1);
  }
  GST_OBJECT_UNLOCK(self);
  gst_rdma_src_device_free(dev);
}

/* Receive thread: pads requested since its last turn become devices
 * (started if PLAYING), released ones leave.  Also called with the
 * thread stopped (open). */
void gst_rdma_src_adopt_requested(GstRdmaSrc *self)
{
  GstRdmaSrcDevice *adopted[SBR_MAX_DEVICES];
  guint n = 0;

  if (!g_atomic_int_get(&self->have_requested))
    return;
  g_mutex_lock(&self->state_lock);
  g_atomic_int_set(&self->have_requested, 0);
  for (guint d = 0; d < SBR_MAX_DEVICES; d++)
    if (self->devices[d] && g_atomic_int_get(&self->devices[d]->released) == 2)
      gst_rdma_src_retire(self, self->devices[d]);
  GST_OBJECT_LOCK(self);
  for (guint d = 0; d < SBR_MAX_DEVICES; d++) {
    if (!self->requested[d])
      continue;
    if (self->devices[d]) {
      /* Its released predecessor isn't out yet: next turn. */
      g_atomic_int_set(&self->have_requested, 1);
      continue;
    }
    adopted[n++] = self->devices[d] = self->requested[d];
    self->requested[d] = NULL;
  }
  GST_OBJECT_UNLOCK(self);
  for (guint i = 0; i < n; i++)
    gst_rdma_src_sync_pad(self, adopted[i]);
  g_mutex_unlock(&self->state_lock);
}

/* A thread of GStreamer's pool (gst_element_call_async): a sometimes pad
 * made by the receive thread goes on the element, then pushes. */
static void gst_rdma_src_expose_pad(GstElement *element, gpointer data)
{
  GstRdmaSrc *self = GST_RDMA_SRC(element);
  GstPad *pad = data;

  gst_element_add_pad(element, pad);
  /* The caps were set before the pad had a parent, so nothing up the
   * hierarchy heard of them: say it again (gst-launch -v shows src_N's
   * caps by this deep-notify). */
  g_object_notify(G_OBJECT(pad), "caps");
  /* gst-launch's "src_3::over-budget=pause" is set here, before the pad
   * pushes (frames that came meanwhile were queued by the default). */
  gst_child_proxy_child_added(GST_CHILD_PROXY(self), G_OBJECT(pad),
                              GST_OBJECT_NAME(pad));
  gst_rdma_src_pad_set_held(GST_RDMA_SRC_PAD(pad), FALSE);
  /* A new stream may raise the latency. */
  gst_element_post_message(element, gst_message_new_latency(GST_OBJECT(self)));
}

/* Receive thread: a device nobody asked for sends caps: its sometimes pad,
 * with the stream events on it before anyone can link it. */
GstRdmaSrcDevice *gst_rdma_src_add_pad(GstRdmaSrc *self, guint device,
                                       GstCaps *caps)
{
  GstPadTemplate *templ =
      gst_element_class_get_pad_template(GST_ELEMENT_GET_CLASS(self), "src_%s");
  GstRdmaOverBudget policy;
  gboolean wait_for_keyframe;
  GstRdmaSrcDevice *dev;
  GstEvent *events[3];
  GstPad *pad;

  /* Requested just now, after this turn's adoption. */
  gst_rdma_src_adopt_requested(self);
  if (self->devices[device])
    return NULL;
  GST_OBJECT_LOCK(self);
  policy = self->over_budget;
  /* The device is ours now: an rdmasrc beside us that names its pads
   * can't take it (gst_rdma_receiver_device_taken). */
  if (self->shared)
    gst_rdma_receiver_route_pad(self->shared, &self->member, device, TRUE);
  wait_for_keyframe = self->wait_for_keyframe;
  GST_OBJECT_UNLOCK(self);
  dev = gst_rdma_src_device_new(self, device, templ, policy, wait_for_keyframe);
  pad = GST_PAD(dev->pad);
  /* Before the pad shows: the latency message below makes sinks ask. */
  dev->frame_duration = gst_rdma_src_caps_frame_duration(caps);
  gst_pad_set_active(pad, TRUE);
  /* Sticky events go on before the pad is exposed, so whoever links it in
   * pad-added finds the caps there; its task pushes them with the first
   * buffer.  Nothing here pushes: this is the receive thread. */
  gst_rdma_src_stream_events(self, dev, caps, events);
  for (guint i = 0; i < G_N_ELEMENTS(events); i++) {
    gst_pad_store_sticky_event(pad, events[i]);
    gst_event_unref(events[i]);
  }
  gst_rdma_src_pad_mark_stream(dev->pad);

  /* In the table first: a request for the same name made now is refused
   * rather than racing this pad onto the element.  Frames queue from now
   * on; the pad pushes nothing until it is on the element. */
  gst_rdma_src_pad_set_held(dev->pad, TRUE);
  g_mutex_lock(&self->state_lock);
  GST_OBJECT_LOCK(self);
  if (self->requested[device]) {
    /* Asked for by name since the adoption above (after a released pad of
     * it had left: ci1 made both a src_3): the request wins, this pad
     * never shows. */
    GST_OBJECT_UNLOCK(self);
    g_mutex_unlock(&self->state_lock);
    gst_pad_set_active(pad, FALSE);
    g_mutex_lock(&self->flow.lock);
    gst_flow_combiner_remove_pad(self->flow.combiner, pad);
    g_mutex_unlock(&self->flow.lock);
    gst_rdma_src_device_free(dev);
    gst_rdma_src_adopt_requested(self);
    return NULL;
  }
  self->devices[device] = dev;
  self->n_pads++;
  if (self->shared)
    gst_rdma_receiver_add_pads(self->shared, 1);
  dev->shares_lane = TRUE;
  GST_OBJECT_UNLOCK(self);
  gst_rdma_src_sync_pad(self, dev);
  g_mutex_unlock(&self->state_lock);
  GST_INFO_OBJECT(self, "device %u: adding pad with caps %" GST_PTR_FORMAT,
                  device, caps);
  /* pad-added, notify::caps and child-added run applications' handlers
   * (a Python app building a branch): not on the receive thread, which
   * every camera of every rdmasrc on the port waits for. */
  gst_element_call_async(GST_ELEMENT(self), gst_rdma_src_expose_pad,
                         gst_object_ref(pad), gst_object_unref);
  return dev;
}

/* Object lock held: has device a pad (not released), a request waiting,
 * or another rdmasrc's claim on the shared receiver?  device-id allows
 * only its own. */
static gboolean gst_rdma_src_device_busy(GstRdmaSrc *self, guint device)
{
  if ((self->devices[device] &&
       !g_atomic_int_get(&self->devices[device]->released)) ||
      self->requested[device])
    return TRUE;
  if (self->device_id >= 0 && device != (guint)self->device_id)
    return TRUE;
  return self->shared &&
         gst_rdma_receiver_device_taken(self->shared, &self->member, device);
}

void gst_rdma_src_device_free(GstRdmaSrcDevice *dev)
{
  gst_pad_set_element_private(GST_PAD(dev->pad), NULL);
  gst_object_unref(dev->pad);
  gst_caps_replace(&dev->caps, NULL);
  g_clear_pointer(&dev->refused_caps, g_free);
  g_clear_pointer(&dev->extras, gst_structure_free);
  g_free(dev);
}

/* A pad asked for by name, src_<device>, before (or after) its camera
 * comes.  Its stream starts with the camera's caps; EOS sent to the
 * element reaches it even if the camera never came. */
GstPad *gst_rdma_src_request_new_pad(GstElement *element, GstPadTemplate *templ,
                                     const gchar *name, const GstCaps *caps)
{
  GstRdmaSrc *self = GST_RDMA_SRC(element);
  GstRdmaSrcDevice *dev;
  gchar *end = NULL;
  guint64 device = G_MAXUINT64;
  gboolean active;
  GstPad *pad;

  (void)caps;
  GST_OBJECT_LOCK(self);
  if (!name || !strcmp(name, "src_%u")) {
    /* As tee and compositor: the lowest device without a pad.  (An
     * unnamed link, `rdmasrc ! sink`, never gets here: GstParse finds the
     * sometimes template first and waits for the first camera.) */
    for (guint d = 0; d < SBR_MAX_DEVICES && device == G_MAXUINT64; d++)
      if (!gst_rdma_src_device_busy(self, d))
        device = d;
    end = (gchar *)"";
  } else if (g_str_has_prefix(name, "src_") && g_ascii_isdigit(name[4])) {
    device = g_ascii_strtoull(name + 4, &end, 10);
  }
  if (device >= SBR_MAX_DEVICES || !end || *end) {
    GST_OBJECT_UNLOCK(self);
    GST_DEBUG_OBJECT(self, "not a device pad name, or no device free: %s",
                     GST_STR_NULL(name));
    return NULL;
  }
  if ((self->devices[device] &&
       !g_atomic_int_get(&self->devices[device]->released)) ||
      self->requested[device]) {
    GST_OBJECT_UNLOCK(self);
    GST_WARNING_OBJECT(self, "pad src_%u exists already", (guint)device);
    return NULL;
  }
  if (self->device_id >= 0 && device != (guint64)self->device_id) {
    gint device_id = self->device_id;

    GST_OBJECT_UNLOCK(self);
    GST_WARNING_OBJECT(self, "device-id=%d: no pad for device %u", device_id,
                       (guint)device);
    return NULL;
  }
  if (self->shared && gst_rdma_receiver_device_taken(
                          self->shared, &self->member, (guint)device)) {
    /* Its frames go to the rdmasrc that asked for it with device-id. */
    GST_OBJECT_UNLOCK(self);
    GST_WARNING_OBJECT(self, "device %u is another rdmasrc's (device-id)",
                       (guint)device);
    return NULL;
  }
  dev = gst_rdma_src_device_new(self, (guint)device, templ, self->over_budget,
                                self->wait_for_keyframe);
  /* No stream until its camera's caps (a new stream after "EOS"). */
  gst_rdma_src_pad_end_stream(dev->pad);
  self->requested[device] = dev;
  g_atomic_int_set(&self->have_requested, 1);
  active = GST_STATE(self) >= GST_STATE_PAUSED ||
           GST_STATE_TARGET(self) >= GST_STATE_PAUSED;
  if (self->shared) {
    /* Beside an rdmasrc that takes every device, this device's frames
     * come to us from now on. */
    gst_rdma_receiver_route_pad(self->shared, &self->member, (guint)device,
                                TRUE);
    sbr_receiver_wakeup(self->receiver);
  }
  GST_OBJECT_UNLOCK(self);

  pad = GST_PAD(dev->pad);
  if (active)
    gst_pad_set_active(pad, TRUE);
  GST_INFO_OBJECT(self, "device %" G_GUINT64_FORMAT ": pad requested", device);
  gst_element_add_pad(element, pad);
  gst_child_proxy_child_added(GST_CHILD_PROXY(self), G_OBJECT(pad),
                              GST_OBJECT_NAME(pad));
  return pad;
}

/* Releasing a pad (or disposing of the element) ends its device here: its
 * task stops, its frames are dropped from now on (counted as no-caps
 * drops), and the receive thread takes it out of the table at its next
 * turn (at once, woken): its name can be asked for again. */
void gst_rdma_src_release_pad(GstElement *element, GstPad *pad)
{
  GstRdmaSrc *self = GST_RDMA_SRC(element);
  GstRdmaSrcDevice *dev = gst_pad_get_element_private(pad);
  gboolean free_now = FALSE;

  GST_INFO_OBJECT(self, "releasing %s:%s", GST_DEBUG_PAD_NAME(pad));
  if (dev) {
    g_mutex_lock(&self->state_lock);
    g_atomic_int_set(&dev->released, 1);
    gst_rdma_src_pad_stop(dev->pad);
    gst_rdma_src_pad_end_stream(dev->pad);
    g_mutex_unlock(&self->state_lock);
    g_mutex_lock(&self->flow.lock);
    gst_flow_combiner_remove_pad(self->flow.combiner, pad);
    g_mutex_unlock(&self->flow.lock);
    GST_OBJECT_LOCK(self);
    if (self->shared)
      gst_rdma_receiver_route_pad(self->shared, &self->member, dev->device,
                                  FALSE);
    if (self->requested[dev->device] == dev) {
      /* Never adopted: nobody else knows it. */
      self->requested[dev->device] = NULL;
      free_now = TRUE;
    } else {
      /* Done with it here: the receive thread may take it out. */
      g_atomic_int_set(&dev->released, 2);
      g_atomic_int_set(&self->have_requested, 1);
      if (self->shared)
        sbr_receiver_wakeup(self->receiver);
    }
    GST_OBJECT_UNLOCK(self);
  }
  gst_child_proxy_child_removed(GST_CHILD_PROXY(self), G_OBJECT(pad),
                                GST_OBJECT_NAME(pad));
  gst_pad_set_active(pad, FALSE);
  gst_element_remove_pad(element, pad);
  if (free_now)
    gst_rdma_src_device_free(dev);
}

/* PAUSED->READY, with the receive thread and the pad tasks stopped.  The
 * pads stay (a launch line's links to them keep working across NULL, as
 * with any element's always pads); each device's stream is over, and
 * when its sender sends caps again, a new stream starts on the same pad. */
void gst_rdma_src_end_streams(GstRdmaSrc *self)
{
  for (guint d = 0; d < SBR_MAX_DEVICES; d++) {
    GstRdmaSrcDevice *dev = self->devices[d];

    if (!dev)
      continue;
    gst_rdma_src_pad_end_stream(dev->pad);
    gst_caps_replace(&dev->caps, NULL);
    g_clear_pointer(&dev->refused_caps, g_free);
    dev->time_map.reset = TRUE;
    dev->pause_set = FALSE;
    /* Lanes of the next receiver are new: nobody owns the device. */
    GST_OBJECT_LOCK(self);
    dev->owned = FALSE;
    GST_OBJECT_UNLOCK(self);
    dev->idle_posted = FALSE;
  }
}

/* Ends dev's stream: its pad task pushes EOS after what is queued.  A pad
 * whose camera hasn't come (requested, or kept across READY) gets a
 * stream of its own first, stream-start and segment, so that whatever is
 * linked to it sees EOS too (gst-launch -e ends). */
void gst_rdma_src_device_eos(GstRdmaSrc *self, GstRdmaSrcDevice *dev)
{
  if (g_atomic_int_get(&dev->released))
    return;
  if (!gst_rdma_src_pad_has_stream(dev->pad)) {
    GST_INFO_OBJECT(self, "device %u: EOS before any stream", dev->device);
    gst_rdma_src_pad_clear_eos(dev->pad);
    gst_rdma_src_pad_queue_event(dev->pad,
                                 gst_rdma_src_stream_start_event(self, dev));
    gst_rdma_src_pad_queue_event(dev->pad, time_segment_event());
  } else if (gst_rdma_src_pad_is_eos(dev->pad))
    return;
  GST_INFO_OBJECT(self, "device %u: EOS", dev->device);
  gst_rdma_src_pad_queue_event(dev->pad, gst_event_new_eos());
}

/* ------------------------------------------------------ child proxy */

/* rdmasrc's pads are its children, so a launch line can set a pad property
 * before the pad exists: rdmasrc name=r src_3::over-budget=pause. */
static GObject *gst_rdma_src_child_by_index(GstChildProxy *proxy, guint index)
{
  GstElement *element = GST_ELEMENT(proxy);
  GObject *child = NULL;

  GST_OBJECT_LOCK(element);
  child = g_list_nth_data(element->srcpads, index);
  if (child)
    gst_object_ref(child);
  GST_OBJECT_UNLOCK(element);
  return child;
}

static GObject *gst_rdma_src_child_by_name(GstChildProxy *proxy,
                                           const gchar *name)
{
  return G_OBJECT(gst_element_get_static_pad(GST_ELEMENT(proxy), name));
}

static guint gst_rdma_src_children_count(GstChildProxy *proxy)
{
  GstElement *element = GST_ELEMENT(proxy);
  guint count;

  GST_OBJECT_LOCK(element);
  count = element->numsrcpads;
  GST_OBJECT_UNLOCK(element);
  return count;
}

void gst_rdma_src_child_proxy_init(gpointer g_iface, gpointer data)
{
  GstChildProxyInterface *iface = g_iface;

  (void)data;
  iface->get_child_by_index = gst_rdma_src_child_by_index;
  iface->get_child_by_name = gst_rdma_src_child_by_name;
  iface->get_children_count = gst_rdma_src_children_count;
}
