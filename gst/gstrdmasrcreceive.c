/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasrcreceive.c - what the receive thread does for one rdmasrc: it
 * queues each frame of the element's devices on its device's pad (caps
 * open a pad or a stream, data becomes a buffer, EOS ends the stream),
 * pauses devices over budget, notices devices that left or fell silent,
 * and ends every stream on EOS or an error.  It never pushes downstream,
 * so no consumer can hold it up.  The thread is the shared receiver's
 * (gstrdmareceiver.c), which calls these for every member; the element
 * (gstrdmasrc.c) joins and leaves it.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstrdmasrcpriv.h"

#include "gstrdmakeyunit.h"

#include <errno.h>

#include "gstrdmasrcframe.h"
#include "gstrdmasrcstats.h"

#define GST_CAT_DEFAULT gst_rdma_src_debug

/* How often the receive thread looks for departed or silent devices. */
#define LIFE_CHECK_US (50 * G_TIME_SPAN_MILLISECOND)

/* A device's caps from lane: a pad for a new device, a new stream after
 * EOS or when new_stream (a new owner), else a caps change. */
static void gst_rdma_src_handle_caps(GstRdmaSrc *self, guint device,
                                     guint32 lane, const gchar *str,
                                     gboolean new_stream)
{
  GstRdmaSrcDevice *dev = self->devices[device];
  GstCaps *caps = gst_rdma_caps_from_wire(str);
  gboolean added = FALSE;
  /* Its sender's upstream began a new stream (stream-start, then caps). */
  gboolean upstream_new = gst_rdma_src_events_caps_from(self, device, lane);

  if (!caps || !gst_caps_is_fixed(caps)) {
    GST_ELEMENT_WARNING(self, STREAM, FORMAT,
                        ("Device %u sent caps that can't be used.", device),
                        ("\"%s\"", str));
    if (caps)
      gst_caps_unref(caps);
    return;
  }

  if (!dev) {
    dev = gst_rdma_src_add_pad(self, device, caps);
    added = dev != NULL;
    if (!dev) /* requested meanwhile: adopted by add_pad */
      dev = self->devices[device];
    gst_rdma_src_device_claim(dev, GST_ELEMENT(self), self->receiver, lane);
  }
  if (g_atomic_int_get(&dev->released)) {
    GST_LOG_OBJECT(self, "device %u: its pad was released", device);
    gst_caps_unref(caps);
    return;
  }
  GST_OBJECT_LOCK(self);
  if (!dev->shares_lane) {
    /* A requested pad's camera came: from now on it has a share. */
    dev->shares_lane = TRUE;
    self->n_pads++;
    if (self->shared)
      gst_rdma_receiver_add_pads(self->shared, 1);
  }
  /* Its lane (claimed above, or by the frame's owner check) counts it. */
  gst_rdma_src_device_recount(self, dev);
  GST_OBJECT_UNLOCK(self);
  if (added) {
    /* The pad was made with these caps. */
  } else if (new_stream || gst_rdma_src_pad_is_eos(dev->pad)) {
    /* The device's sender started a new stream after its EOS. */
    GstEvent *events[3];

    GST_INFO_OBJECT(self, "device %u: new stream", device);
    gst_rdma_src_pad_clear_eos(dev->pad);
    gst_rdma_src_stream_events(self, dev, caps, events);
    for (guint i = 0; i < G_N_ELEMENTS(events); i++)
      gst_rdma_src_pad_queue_event(dev->pad, events[i]);
  } else if (upstream_new && gst_rdma_src_pad_has_stream(dev->pad)) {
    /* The same sender, a new stream upstream (concat, a new file): its
     * stream-start, caps and segment, as a new stream has them. */
    GstEvent *events[3];

    GST_INFO_OBJECT(self, "device %u: new upstream stream", device);
    /* Its own segment too: the last stream's applied rate isn't its. */
    gst_rdma_src_stream_events(self, dev, caps, events);
    for (guint i = 0; i < G_N_ELEMENTS(events); i++)
      gst_rdma_src_pad_queue_event(dev->pad, events[i]);
  } else if (!dev->caps || !gst_caps_is_equal(caps, dev->caps)) {
    GST_INFO_OBJECT(self, "device %u: new caps %" GST_PTR_FORMAT, device, caps);
    gst_rdma_src_pad_queue_event(dev->pad, gst_event_new_caps(caps));
  }
  gst_caps_replace(&dev->caps, caps);
  {
    GstClockTime d = gst_rdma_src_caps_frame_duration(caps);
    /* The adaptive poll mode predicts from the second frame on. */
    if (GST_CLOCK_TIME_IS_VALID(d))
      sbr_receiver_set_device_period(self->receiver, (uint8_t)device, d);
    if (GST_CLOCK_TIME_IS_VALID(d) && d != dev->frame_duration) {
      GST_OBJECT_LOCK(self);
      dev->frame_duration = d;
      GST_OBJECT_UNLOCK(self);
      /* A new framerate changes what a LATENCY query answers. */
      gst_element_post_message(GST_ELEMENT(self),
                               gst_message_new_latency(GST_OBJECT(self)));
    }
  }
  gst_caps_unref(caps);
}

/* Our running time now, and in *wall our wall clock at the same instant
 * (capture mode relates the two): the wall clock read either side of the
 * running time, again when something came between the readings (this
 * thread preempted), so the pair is off by well under a millisecond. */
static GstClockTime gst_rdma_src_running_time(GstRdmaSrc *self, guint64 *wall)
{
  GstClock *clock = gst_element_get_clock(GST_ELEMENT(self));
  GstClockTime now = 0, base;
  guint64 before = 0, after = 0;

  base = gst_element_get_base_time(GST_ELEMENT(self));
  for (guint tries = 0; tries < 3; tries++) {
    before = gst_rdma_realtime_ns();
    now = clock ? gst_clock_get_time(clock) : 0;
    after = gst_rdma_realtime_ns();
    if (after >= before && after - before < 200 * GST_USECOND)
      break;
  }
  *wall = before + (after > before ? (after - before) / 2 : 0);
  if (!clock)
    return 0;
  gst_object_unref(clock);
  return now > base ? now - base : 0;
}

/* The pause policy: tell dev's sender to stop, or to go on. */
static void gst_rdma_src_set_device_paused(GstRdmaSrc *self,
                                           GstRdmaSrcDevice *dev,
                                           gboolean paused)
{
  if (dev->pause_set == paused)
    return;
  dev->pause_set = paused;
  if (paused)
    self->n_paused++;
  else
    self->n_paused--;
  gst_rdma_src_pad_set_paused(dev->pad, paused);
  GST_INFO_OBJECT(dev->pad, "%s the sender", paused ? "pausing" : "resuming");
  sbr_receiver_pause_device(self->receiver, (uint8_t)dev->device, paused);
}

/* Paused devices whose share has room again (half of it free) resume. */
static gboolean gst_rdma_src_check_pauses(GstRdmaSrc *self)
{
  gboolean any = FALSE;

  /* Every turn of the shared thread, for every member: mostly nothing. */
  if (self->n_paused == 0)
    return FALSE;
  for (guint d = 0; d < SBR_MAX_DEVICES; d++) {
    GstRdmaSrcDevice *dev = self->devices[d];
    guint budget;

    if (!dev || !dev->pause_set)
      continue;
    GST_OBJECT_LOCK(self);
    budget = gst_rdma_src_budget(self, dev);
    GST_OBJECT_UNLOCK(self);
    if (gst_rdma_src_pad_usage(dev->pad) <= budget / 2 ||
        gst_rdma_src_pad_get_policy(dev->pad) != GST_RDMA_OVER_BUDGET_PAUSE)
      gst_rdma_src_set_device_paused(self, dev, FALSE);
    else
      any = TRUE;
  }
  return any;
}

/* Queues a data frame on its device's pad; takes the frame. */
static void gst_rdma_src_handle_data(GstRdmaSrc *self, struct sbr_frame *frame)
{
  GstRdmaSrcDevice *dev = self->devices[frame->info.device];
  struct sbr_block_info info = frame->info;
  gboolean over = FALSE, copy = FALSE;
  guint lane_blocks, budget;
  GstClockTime now;
  guint64 wall_now;
  GstBuffer *buf;

  if (!dev || gst_rdma_src_pad_is_eos(dev->pad)) {
    /* No caps yet (we joined mid-stream and the sender hasn't reconnected)
     * or data after EOS: nothing downstream could interpret it. */
    GST_LOG_OBJECT(self, "device %u: no stream, frame dropped", info.device);
    if (dev) /* extras are for this frame or none: never a later one */
      gst_rdma_src_clear_extras(dev);
    sbr_frame_release(frame);
    GST_OBJECT_LOCK(self);
    self->no_caps_drops++;
    GST_OBJECT_UNLOCK(self);
    return;
  }
  if (!g_atomic_int_get(&self->playing)) {
    /* A live source produces nothing while PAUSED. */
    gst_rdma_src_clear_extras(dev);
    sbr_frame_release(frame);
    gst_rdma_src_pad_count_drop(dev->pad, GST_RDMA_DROP_NOT_PLAYING);
    return;
  }

  /* Every frame, also one the library already copied (the lane was nearly
   * full: a slow consumer), meets the share and the queue bound. */
  GST_OBJECT_LOCK(self);
  budget = gst_rdma_src_budget(self, dev);
  GST_OBJECT_UNLOCK(self);
  lane_blocks = gst_rdma_frame_lane_blocks(frame);
  copy = gst_rdma_src_pad_admit(dev->pad, lane_blocks, budget,
                                self->max_queued_now,
                                &over) == GST_RDMA_ADMIT_COPY &&
         frame->n_blocks > 0;
  if (over && self->can_pause &&
      gst_rdma_src_pad_get_policy(dev->pad) == GST_RDMA_OVER_BUDGET_PAUSE)
    gst_rdma_src_set_device_paused(self, dev, TRUE);

  /* Over its lane's max-held too: copy.  Per lane, as each sender has
   * its own: blocks another sender's consumer holds take nothing from
   * this one's lane. */
  if (frame->n_blocks > 0 &&
      gst_rdma_held_counter_lane(self->held, info.lane_id) + lane_blocks >
          self->max_held_now)
    copy = TRUE;
  if (copy && frame->n_blocks > 0) {
    GST_OBJECT_LOCK(self);
    self->copies++;
    GST_OBJECT_UNLOCK(self);
  }
  buf = gst_rdma_frame_to_buffer(frame, copy, self->held,
                                 gst_rdma_src_pad_block_count(dev->pad),
                                 &lane_blocks);
  if (dev->rebase_seen != g_atomic_int_get(&self->rebase_count)) {
    /* Our running time skipped our pause: no mapping holds across it. */
    dev->rebase_seen = g_atomic_int_get(&self->rebase_count);
    dev->time_map.reset = TRUE;
  }
  now = gst_rdma_src_running_time(self, &wall_now);
  gst_rdma_frame_stamp(
      &dev->time_map,
      gst_rdma_src_pad_timestamp_mode(dev->pad, self->timestamp_mode_now),
      &info, now, wall_now, buf);
  if (!gst_rdma_src_apply_extras(self, dev, &info, buf)) {
    gst_buffer_unref(buf);
    gst_rdma_src_pad_count_drop(dev->pad, GST_RDMA_DROP_NO_LAYOUT);
    return;
  }
  if (GST_BUFFER_PTS_IS_VALID(buf) && now > GST_BUFFER_PTS(buf) &&
      now - GST_BUFFER_PTS(buf) > GST_RDMA_SRC_OUTAGE_LATENESS) {
    /* Not jitter: frames queued at a sender that stalled (stopped,
     * swapped out, its link down) coming all at once.  Raising every
     * camera's latency to seconds for them would make the pipeline wait
     * that long for good, or fail to configure its latency at all (the
     * other cameras can't hold that much); sinks with a max-lateness drop them
     * instead, as for any live source. */
    GST_INFO_OBJECT(dev->pad,
                    "a frame came %" GST_TIME_FORMAT " late: an outage, "
                    "latency kept",
                    GST_TIME_ARGS(now - GST_BUFFER_PTS(buf)));
  } else if (GST_BUFFER_PTS_IS_VALID(buf) && now > GST_BUFFER_PTS(buf) &&
             gst_rdma_src_pad_note_lateness(dev->pad,
                                            now - GST_BUFFER_PTS(buf))) {
    GST_INFO_OBJECT(dev->pad,
                    "a frame came %" GST_TIME_FORMAT " late: "
                    "latency up",
                    GST_TIME_ARGS(now - GST_BUFFER_PTS(buf)));
    gst_element_post_message(GST_ELEMENT(self),
                             gst_message_new_latency(GST_OBJECT(self)));
  }
  GST_OBJECT_LOCK(self);
  if (info.duration != SBR_TIME_NONE &&
      !GST_CLOCK_TIME_IS_VALID(dev->frame_duration))
    dev->frame_duration = info.duration;
  /* The estimator is this thread's; the stats read this copy. */
  gst_rdma_time_map_get_stats(&dev->time_map, &dev->time_stats);
  GST_OBJECT_UNLOCK(self);
  /* The sender's numbering (see the SECTION). */
  GST_BUFFER_OFFSET(buf) = info.packet;
  GST_BUFFER_OFFSET_END(buf) = GST_BUFFER_OFFSET_NONE;
  /* Stamped (DISCONT, DELTA_UNIT): it may answer a key-unit request, or
   * call for one. */
  gst_rdma_src_key_unit_frame(self, dev->device, buf);
  GST_LOG_OBJECT(dev->pad, "queueing %" GST_PTR_FORMAT, buf);
  gst_rdma_src_pad_queue_buffer(dev->pad, buf, lane_blocks, copy);
  /* Whatever made the pad wait for a key frame (a gap, its own drops),
   * the sender's encoder can end the wait sooner than its GOP would. */
  if (gst_rdma_src_pad_waiting_for_key(dev->pad))
    gst_rdma_src_request_key_unit(self, dev->device, GST_RDMA_KEY_UNIT_GAP,
                                  TRUE);
}

static void gst_rdma_src_check_timeout(GstRdmaSrc *self)
{
  gint64 now = g_get_monotonic_time();

  if (self->timeout_now == 0 || self->timeout_posted ||
      now - self->last_activity <
          (gint64)self->timeout_now * G_TIME_SPAN_MILLISECOND)
    return;
  self->timeout_posted = TRUE;
  gst_element_post_message(
      GST_ELEMENT(self),
      gst_message_new_element(
          GST_OBJECT(self),
          gst_structure_new("rdmasrc-timeout", "timeout", G_TYPE_UINT64,
                            (guint64)self->timeout_now * GST_MSECOND, NULL)));
}

/* Ownership of frame's device (gstrdmasrcdevice.c): FALSE when another
 * sender owns it.  A refused sender's caps are kept, so that when it takes
 * the device over (the owner left) its stream starts with them. */
static gboolean gst_rdma_src_owner_check(GstRdmaSrc *self,
                                         const struct sbr_frame *frame)
{
  GstRdmaSrcDevice *dev = self->devices[frame->info.device];
  guint32 lane = frame->info.lane_id;
  gboolean takeover;

  if (!dev)
    return TRUE;
  takeover = dev->owned && dev->owner_lane != lane;
  if (!gst_rdma_src_device_claim(dev, GST_ELEMENT(self), self->receiver,
                                 lane)) {
    if (frame->info.kind == SBR_KIND_CAPS) {
      g_free(dev->refused_caps);
      dev->refused_caps = g_strndup((const gchar *)frame->info.payload,
                                    frame->info.payload_len);
      dev->refused_caps_lane = lane;
    }
    return FALSE;
  }
  /* A new owner is a new lane: the device's share is that lane's now.
   * Every frame comes here, mostly from the lane it is counted on: that
   * check needs no lock, as only this thread puts a device on a lane
   * (leaving takes it off, which at worst sends us to the lock). */
  if (!dev->lane_counted || dev->counted_lane != dev->owner_lane) {
    GST_OBJECT_LOCK(self);
    gst_rdma_src_device_recount(self, dev);
    GST_OBJECT_UNLOCK(self);
  }
  if (takeover || (!dev->owned && dev->refused_caps))
    GST_INFO_OBJECT(self, "device %u: taken over by lane %u", dev->device,
                    lane);
  if (dev->refused_caps && dev->refused_caps_lane == lane) {
    /* The new owner's stream, with the caps it sent while refused (unless
     * this frame brings caps itself). */
    if (frame->info.kind != SBR_KIND_CAPS)
      gst_rdma_src_handle_caps(self, dev->device, lane, dev->refused_caps,
                               TRUE);
    g_clear_pointer(&dev->refused_caps, g_free);
  }
  return TRUE;
}

/* A stream that isn't live (a file, a transcode: its sender said so with
 * its caps) is held back rather than dropped: GStreamer's answer for data
 * nobody waits for in real time is backpressure.  Its pad's default
 * policy is pause where the mechanism lets a sender be paused (copy
 * elsewhere), and frames over its share stay in the lane, neither copied
 * nor dropped: the frames its sender had on their way when the pause
 * reached it, or with the sliding window all of them, hold the lane until
 * the consumer takes them, which stops the sender.  A live stream keeps
 * drop-oldest.  An over-budget the application set, on the element or on
 * the pad, wins, with its own semantics. */
/* The latency the device's sender said its frames come with (an
 * encoder's, a live source's), from its CAPS block: a change asks the
 * pipeline to query again.  NONE from a sender that doesn't say. */
static void gst_rdma_src_set_sender_latency(GstRdmaSrc *self, guint device,
                                            guint64 latency)
{
  GstRdmaSrcDevice *dev = self->devices[device];
  GstClockTime t = latency == SBR_TIME_NONE ? GST_CLOCK_TIME_NONE : latency;
  gboolean changed;

  if (!dev)
    return;
  GST_OBJECT_LOCK(self);
  changed = dev->sender_latency != t;
  dev->sender_latency = t;
  GST_OBJECT_UNLOCK(self);
  if (changed) {
    GST_INFO_OBJECT(self,
                    "device %u: its sender's latency is %" GST_TIME_FORMAT,
                    device, GST_TIME_ARGS(t));
    gst_element_post_message(GST_ELEMENT(self),
                             gst_message_new_latency(GST_OBJECT(self)));
  }
}

static void gst_rdma_src_apply_liveness(GstRdmaSrc *self, guint device,
                                        gboolean live)
{
  GstRdmaSrcDevice *dev = self->devices[device];
  GstRdmaOverBudget policy;
  gboolean hold_back;

  if (!dev || !dev->pad)
    return;
  GST_OBJECT_LOCK(self);
  if (self->over_budget_set)
    policy = self->over_budget;
  else if (live)
    policy = GST_RDMA_OVER_BUDGET_DROP_OLDEST;
  else
    policy = self->can_pause ? GST_RDMA_OVER_BUDGET_PAUSE
                             : GST_RDMA_OVER_BUDGET_COPY;
  hold_back = !live && !self->over_budget_set;
  GST_OBJECT_UNLOCK(self);
  gst_rdma_src_pad_set_default_policy(dev->pad, policy, hold_back);
}

/* Departed and silent devices: events on the bus (and EOS if asked). */
static void gst_rdma_src_check_lives(GstRdmaSrc *self)
{
  gint64 now = g_get_monotonic_time();

  if (now - self->last_life_check < LIFE_CHECK_US)
    return;
  self->last_life_check = now;
  for (guint d = 0; d < SBR_MAX_DEVICES; d++) {
    GstRdmaSrcDevice *dev = self->devices[d];

    if (!dev)
      continue;
    gboolean lost =
        gst_rdma_src_device_check_lane(dev, GST_ELEMENT(self), self->receiver);

    /* A lane gone (the device is nobody's) no longer counts it. */
    GST_OBJECT_LOCK(self);
    gst_rdma_src_device_recount(self, dev);
    GST_OBJECT_UNLOCK(self);
    if (lost && self->device_lost_eos_now)
      gst_rdma_src_device_eos(self, dev);
    gst_rdma_src_device_check_idle(dev, GST_ELEMENT(self), self->timeout_now,
                                   now);
  }
}

/* Every pad's stream ends after what its pad has queued. */
static void gst_rdma_src_eos_all(GstRdmaSrc *self)
{
  for (guint d = 0; d < SBR_MAX_DEVICES; d++)
    if (self->devices[d])
      gst_rdma_src_device_eos(self, self->devices[d]);
}

/* Before each wait of the receive thread: requested pads join, EOS asked
 * for by the application, departed and silent devices, and whether any
 * device is paused (the thread then waits less, to resume it in time). */
gboolean gst_rdma_src_turn(GstElement *element)
{
  GstRdmaSrc *self = GST_RDMA_SRC(element);

  gst_rdma_src_adopt_requested(self);
  if (g_atomic_int_compare_and_exchange(&self->eos_requested, 1, 0)) {
    gst_rdma_src_eos_all(self);
    self->eos_done = TRUE;
  }
  gst_rdma_src_check_lives(self);
  /* Per element: other members' cameras may flow while ours are silent. */
  gst_rdma_src_check_timeout(self);
  return gst_rdma_src_check_pauses(self);
}

/* Frames of the device lost on the way (the packet number jumped): its
 * next frame queued says so (DISCONT). */
static void gst_rdma_src_check_packets(GstRdmaSrc *self,
                                       const struct sbr_frame *frame)
{
  GstRdmaSrcDevice *dev = self->devices[frame->info.device];
  guint block_payload = 0;

  if (!dev)
    return;
  if (frame->n_blocks == 0) {
    /* Copied: counted by its size.  Blocks are a 64-byte header, the
     * payload and an 8-byte trailer (sbr.h), of the receiver's size. */
    GST_OBJECT_LOCK(self);
    block_payload = self->block_size > 72 ? self->block_size - 72 : 0;
    GST_OBJECT_UNLOCK(self);
  }
  if (gst_rdma_src_device_packet_gap(dev, frame, block_payload))
    gst_rdma_src_pad_note_gap(dev->pad);
}

/* A late join: the stream's headers went by before we joined.  They go to
 * the pad after its caps and before this frame, unstamped, as HEADER
 * buffers, the first DISCONT (a stream starts here). */
static void gst_rdma_src_push_known_headers(GstRdmaSrc *self,
                                            const struct sbr_frame *frame,
                                            GPtrArray *known_headers)
{
  GstRdmaSrcDevice *dev = self->devices[frame->info.device];
  guint n = known_headers ? known_headers->len : 0;

  if (!dev || !dev->pad || g_atomic_int_get(&dev->released))
    return;
  for (guint i = 0; i < n; i++) {
    GstBuffer *buf =
        gst_buffer_new_wrapped_bytes(g_ptr_array_index(known_headers, i));

    GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_HEADER);
    if (i == 0)
      GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_DISCONT);
    gst_rdma_src_pad_queue_buffer(dev->pad, buf, 0, TRUE);
  }
  if (n > 0)
    GST_INFO_OBJECT(self, "device %u: its %u header(s) came before us",
                    frame->info.device, n);
}

/* A frame of one of our devices, in per-device packet order.  known_caps:
 * what its device last sent on its lane, for a device whose caps came
 * before we joined (another rdmasrc's turn on the shared receiver, or
 * nobody's), known_live whether their CAPS block said the source is
 * live (a late joiner holds a non-live stream back too), and known_headers
 * the stream headers it sent after them. */
void gst_rdma_src_frame(GstElement *element, struct sbr_frame *frame,
                        const gchar *known_caps, gboolean known_live,
                        GPtrArray *known_headers)
{
  GstRdmaSrc *self = GST_RDMA_SRC(element);
  GstRdmaSrcDevice *dev = self->devices[frame->info.device];

  if (self->eos_done) {
    /* The application ended the streams: the rest goes back at once. */
    sbr_frame_release(frame);
    return;
  }
  if (!gst_rdma_src_owner_check(self, frame)) {
    sbr_frame_release(frame);
    return;
  }
  if (frame->info.kind == SBR_KIND_DATA && known_caps &&
      (!dev || (!dev->caps && !g_atomic_int_get(&dev->released)))) {
    GST_INFO_OBJECT(self, "device %u: its caps came before us",
                    frame->info.device);
    gst_rdma_src_handle_caps(self, frame->info.device, frame->info.lane_id,
                             known_caps, FALSE);
    gst_rdma_src_apply_liveness(self, frame->info.device, known_live);
    gst_rdma_src_push_known_headers(self, frame, known_headers);
  }
  gst_rdma_src_check_packets(self, frame);
  self->last_activity = g_get_monotonic_time();
  self->timeout_posted = FALSE;
  GST_LOG_OBJECT(self,
                 "lane %u seq %" G_GUINT64_FORMAT ": device %u kind %u packet "
                 "%u, %u bytes in %u block(s)",
                 frame->info.lane_id, (guint64)frame->info.seq,
                 frame->info.device, frame->info.kind, frame->info.packet,
                 frame->size, frame->n_blocks);

  switch (frame->info.kind) {
  case SBR_KIND_CAPS: {
    gchar *str =
        g_strndup((const gchar *)frame->info.payload, frame->info.payload_len);
    gst_rdma_src_handle_caps(self, frame->info.device, frame->info.lane_id, str,
                             FALSE);
    gst_rdma_src_apply_liveness(self, frame->info.device,
                                !(frame->info.flags & SBR_FLAG_NOT_LIVE));
    gst_rdma_src_set_sender_latency(self, frame->info.device,
                                    frame->info.duration);
    g_free(str);
    sbr_frame_release(frame);
    break;
  }
  case SBR_KIND_EOS:
    if (self->devices[frame->info.device])
      gst_rdma_src_device_eos(self, self->devices[frame->info.device]);
    sbr_frame_release(frame);
    break;
  case SBR_KIND_DATA:
    gst_rdma_src_handle_data(self, frame);
    break;
  case SBR_KIND_EVENT: {
    guint64 wall_now;

    gst_rdma_src_handle_event(self, frame,
                              gst_rdma_src_running_time(self, &wall_now));
    sbr_frame_release(frame);
    break;
  }
  default:
    sbr_frame_release(frame);
    break;
  }
}

/* The receiver failed for good: every stream ends after what it has. */
void gst_rdma_src_failed(GstElement *element, gint err)
{
  GstRdmaSrc *self = GST_RDMA_SRC(element);

  GST_ELEMENT_ERROR(self, RESOURCE, READ, ("Receiving failed."),
                    ("sbr_receiver_next_frame: %s", g_strerror(-err)));
  gst_rdma_src_eos_all(self);
}

/* We leave the shared receiver, which may stay open for other rdmasrcs:
 * senders we paused go on, and senders we refused a device may send it
 * again (to whoever takes it next). */
void gst_rdma_src_leaving(GstElement *element)
{
  GstRdmaSrc *self = GST_RDMA_SRC(element);

  for (guint d = 0; d < SBR_MAX_DEVICES; d++) {
    GstRdmaSrcDevice *dev = self->devices[d];

    if (!dev)
      continue;
    if (dev->pause_set)
      gst_rdma_src_set_device_paused(self, dev, FALSE);
    if (dev->owned)
      sbr_receiver_refuse_device(self->receiver, SBR_LANE_ALL, (uint8_t)d,
                                 FALSE);
  }
}
