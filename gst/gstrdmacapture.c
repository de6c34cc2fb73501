/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmacapture.c - the capture instant rdmasink sends (gstrdmacapture.h).
 *
 * rdmasrc's capture mode aligns cameras of several hosts by this instant,
 * so it must be when the camera saw the frame, not when it reached the
 * sink: an encoder between the two holds frames for tens of milliseconds,
 * and an encoded camera would land that far behind a raw one captured
 * with it.  In order of trust:
 *   1. an upstream reference timestamp: timestamp/x-unix as it is,
 *      timestamp/x-ntp (RFC 7273 sources, rtpjitterbuffer) and
 *      timestamp/x-ptp (PTP-aware sources: TAI) converted to the Unix
 *      epoch;
 *   2. the wall clock now minus the frame's age on the pipeline clock
 *      (running time now - the frame's running time): a live source
 *      stamps a frame with the running time of its capture;
 *   3. the wall clock now, where there is no clock or no timestamp, or
 *      the frame is ahead of the clock (a source that is not live).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstrdmacapture.h"
#include "gstrdmacommon.h"

/* NTP's epoch (1900) is this far before the Unix one (RFC 5905). */
#define NTP_UNIX_OFFSET_NS (G_GUINT64_CONSTANT(2208988800) * GST_SECOND)
/* TAI - UTC since 2017-01-01, the last leap second (IERS Bulletin C); PTP
 * time is TAI.  A source that knows better stamps x-unix itself. */
#define TAI_UTC_OFFSET_NS (G_GUINT64_CONSTANT(37) * GST_SECOND)
/* An age past this is no capture delay but a stalled or odd clock: the
 * wall clock now is nearer the truth. */
#define MAX_AGE (60 * GST_SECOND)

static gboolean reference_time(GstBuffer *buf, const gchar *media, guint64 *out)
{
  GstCaps *caps = gst_caps_new_empty_simple(media);
  GstReferenceTimestampMeta *ts =
      gst_buffer_get_reference_timestamp_meta(buf, caps);

  gst_caps_unref(caps);
  if (!ts || !GST_CLOCK_TIME_IS_VALID(ts->timestamp))
    return FALSE;
  *out = ts->timestamp;
  return TRUE;
}

guint64 gst_rdma_capture_time(GstElement *element, GstBuffer *buf,
                              GstClockTime running_time)
{
  guint64 now = gst_rdma_realtime_ns(), t;
  GstClock *clock;

  if (reference_time(buf, "timestamp/x-unix", &t))
    return t;
  if (reference_time(buf, "timestamp/x-ntp", &t) && t >= NTP_UNIX_OFFSET_NS)
    return t - NTP_UNIX_OFFSET_NS;
  if (reference_time(buf, "timestamp/x-ptp", &t) && t >= TAI_UTC_OFFSET_NS)
    return t - TAI_UTC_OFFSET_NS;
  if (!GST_CLOCK_TIME_IS_VALID(running_time))
    return now;
  clock = gst_element_get_clock(element);
  if (clock) {
    GstClockTime base = gst_element_get_base_time(element);
    GstClockTime clock_now = gst_clock_get_time(clock);

    /* The two clocks read together: a thread preempted between the two
     * reads would date the frame that much earlier. */
    for (int tries = 0; tries < 3; tries++) {
      guint64 after = gst_rdma_realtime_ns();

      if (after - now < 100 * GST_USECOND)
        break;
      now = after;
      clock_now = gst_clock_get_time(clock);
    }
    gst_object_unref(clock);
    if (GST_CLOCK_TIME_IS_VALID(base) && clock_now >= base &&
        clock_now - base >= running_time &&
        clock_now - base - running_time <= MAX_AGE &&
        now >= clock_now - base - running_time)
      return now - (clock_now - base - running_time);
  }
  return now;
}
