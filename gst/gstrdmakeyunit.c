/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmakeyunit.c - rdmasrc asking for key units (gstrdmakeyunit.h).
 *
 * Why here: an upstream GstForceKeyUnit from a decoder (after a loss), a
 * splitmuxsink or an app used to reach gst_pad_event_default on a pad
 * with no internal links, which drops it: the sender's encoder never
 * heard of it, and a stream with rare key frames stayed broken for the
 * rest of its GOP.  The receiver sends nothing, but the sender READs its
 * status region, so the request is a counter there
 * (sbr_receiver_request_key_unit) and the sender's rdmasink pushes the
 * event upstream into its encoder.
 *
 * Rate: one request outstanding per device, until a key frame of the
 * device arrives or GST_RDMA_KEY_UNIT_TIMEOUT passes.  A decoder asks
 * for every broken frame it meets, and every one of those is answered
 * by the same key frame; asking again only makes the encoder spend
 * bits on more key frames.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstrdmakeyunit.h"

#include <gst/video/video.h>

#include "gstrdmasrcpriv.h"

#define GST_CAT_DEFAULT gst_rdma_src_debug

static const gchar *reason_nick(GstRdmaKeyUnitReason reason)
{
  return reason == GST_RDMA_KEY_UNIT_GAP ? "a gap" : "upstream";
}

gboolean gst_rdma_src_request_key_unit(GstRdmaSrc *self, guint device,
                                       GstRdmaKeyUnitReason reason,
                                       gboolean all_headers)
{
  gint64 now = g_get_monotonic_time();
  GstRdmaSrcDevice *dev;
  guint32 lane;
  gint ret;

  g_return_val_if_fail(device < SBR_MAX_DEVICES, FALSE);
  GST_OBJECT_LOCK(self);
  dev = self->devices[device];
  if (!dev || !self->shared || !self->receiver ||
      (reason == GST_RDMA_KEY_UNIT_GAP && !self->request_keyframe)) {
    GST_OBJECT_UNLOCK(self);
    return FALSE;
  }
  if (dev->key_units.asked_us &&
      now - dev->key_units.asked_us <
          (gint64)(GST_RDMA_KEY_UNIT_TIMEOUT / GST_USECOND)) {
    dev->key_units.merged++;
    GST_OBJECT_UNLOCK(self);
    GST_LOG_OBJECT(self, "device %u: a key unit is asked for already (%s)",
                   device, reason_nick(reason));
    return TRUE;
  }
  /* The owner is the sender whose frames we push; the others' are refused
   * anyway, and their encoders needn't spend a key frame on nothing. */
  lane = dev->owned ? dev->owner_lane : SBR_LANE_ALL;
  /* Under the object lock: the receiver stays ours while shared is set. */
  ret = sbr_receiver_request_key_unit(self->receiver, lane, (uint8_t)device,
                                      all_headers);
  if (ret == -ENOENT && lane != SBR_LANE_ALL)
    ret = sbr_receiver_request_key_unit(self->receiver, SBR_LANE_ALL,
                                        (uint8_t)device, all_headers);
  if (ret == 0) {
    __atomic_store_n(&dev->key_units.asked_us, now, __ATOMIC_RELAXED);
    dev->key_units.requests++;
    if (reason == GST_RDMA_KEY_UNIT_GAP)
      dev->key_units.gaps++;
    else
      dev->key_units.upstream++;
  }
  GST_OBJECT_UNLOCK(self);
  if (ret < 0) {
    GST_DEBUG_OBJECT(self, "device %u: no sender to ask for a key unit: %s",
                     device, g_strerror(-ret));
    return FALSE;
  }
  GST_DEBUG_OBJECT(self, "device %u: key unit asked for (%s%s)", device,
                   reason_nick(reason), all_headers ? ", all headers" : "");
  return TRUE;
}

gboolean gst_rdma_src_key_unit_event(GstRdmaSrc *self, guint device,
                                     GstEvent *event)
{
  GstClockTime running_time;
  gboolean all_headers;
  guint count;

  if (!gst_video_event_is_force_key_unit(event) ||
      !gst_video_event_parse_upstream_force_key_unit(event, &running_time,
                                                     &all_headers, &count))
    return FALSE;
  /* The running time can't be honoured across the link (the sender's
   * running time is another pipeline's): the next frame it encodes is the
   * key unit, which is what a decoder after a loss wants. */
  GST_DEBUG_OBJECT(self,
                   "device %u: upstream force-key-unit, running time "
                   "%" GST_TIME_FORMAT ", all-headers %d, count %u",
                   device, GST_TIME_ARGS(running_time), all_headers, count);
  gst_rdma_src_request_key_unit(self, device, GST_RDMA_KEY_UNIT_UPSTREAM,
                                all_headers);
  gst_event_unref(event);
  return TRUE;
}

void gst_rdma_src_key_unit_frame(GstRdmaSrc *self, guint device, GstBuffer *buf)
{
  GstRdmaSrcDevice *dev = self->devices[device];
  GstClockTime took = GST_CLOCK_TIME_NONE;
  gint64 asked;

  if (!dev)
    return;
  if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_DELTA_UNIT)) {
    /* A delta frame right after a gap (or as a stream's first, joining
     * mid-GOP) can't be decoded until the next key frame: ask for it
     * rather than wait out the GOP.  Only streams with delta frames do
     * this: raw video and audio never carry the flag. */
    if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_DISCONT))
      gst_rdma_src_request_key_unit(self, device, GST_RDMA_KEY_UNIT_GAP, TRUE);
    return;
  }
  asked = __atomic_load_n(&dev->key_units.asked_us, __ATOMIC_RELAXED);
  if (!asked)
    return;
  GST_OBJECT_LOCK(self);
  if (dev->key_units.asked_us) {
    dev->key_units.last_round_trip =
        (GstClockTime)(g_get_monotonic_time() - dev->key_units.asked_us) *
        GST_USECOND;
    dev->key_units.answered++;
    took = dev->key_units.last_round_trip;
    __atomic_store_n(&dev->key_units.asked_us, 0, __ATOMIC_RELAXED);
  }
  GST_OBJECT_UNLOCK(self);
  GST_DEBUG_OBJECT(
      self, "device %u: a key frame, %" GST_TIME_FORMAT " after the request",
      device, GST_TIME_ARGS(took));
}

void gst_rdma_src_key_unit_add_stats(const GstRdmaSrcDevice *dev,
                                     GstStructure *s)
{
  gst_structure_set(
      s, "key-units-requested", G_TYPE_UINT64, dev->key_units.requests,
      "key-units-upstream", G_TYPE_UINT64, dev->key_units.upstream,
      "key-units-after-gaps", G_TYPE_UINT64, dev->key_units.gaps,
      "key-units-merged", G_TYPE_UINT64, dev->key_units.merged,
      "key-units-answered", G_TYPE_UINT64, dev->key_units.answered,
      "key-unit-round-trip", G_TYPE_UINT64,
      (guint64)dev->key_units.last_round_trip, NULL);
}
