/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasinkkeyunit.c - rdmasink's side of key units asked for
 * one-sidedly: the receiver bumped the device's request counter, libsbr's
 * status READ saw it (docs/protocol.md, "Key units"), and the sink asks
 * upstream (the encoder) for a key unit with a GstForceKeyUnit event from
 * its sink pad.
 *
 * Which thread pushes the event: neither libsbr's sender thread, where
 * the request is seen, nor the streaming thread.  The sender thread
 * serves every device of the connection, and the event may meet an
 * element upstream that handles it under a lock its streaming thread
 * holds while it waits in our render for a send block, which only the
 * sender thread frees: that would stall every camera of the connection.
 * The streaming thread is safe but would act only at the next render, a
 * whole frame interval later (40 ms at 25 fps) in every round trip.  So
 * the event goes from a thread of GStreamer's pool
 * (gst_element_call_async), at once; requests seen while one is on its
 * way join it (all-headers is kept), as the encoder would merge them
 * anyway.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <gst/video/video.h>

#include "gstrdmasinkpriv.h"

#define GST_CAT_DEFAULT gst_rdma_sink_debug

/* GStreamer's pool thread: the request(s) go upstream now. */
static void gst_rdma_sink_push_key_unit(GstElement *element, gpointer data)
{
  GstRdmaSink *self = GST_RDMA_SINK(element);
  gboolean all_headers;
  GstEvent *event;
  gboolean pushed;
  guint count;

  (void)data;
  /* Cleared first: a request seen while we push calls us again. */
  all_headers = g_atomic_int_exchange(&self->key_unit_headers, 0) != 0;
  g_atomic_int_set(&self->key_unit_pending, 0);
  GST_OBJECT_LOCK(self);
  count = (guint)++self->key_units_sent_upstream;
  GST_OBJECT_UNLOCK(self);
  event = gst_video_event_new_upstream_force_key_unit(GST_CLOCK_TIME_NONE,
                                                      all_headers, count);
  pushed = gst_pad_push_event(GST_BASE_SINK_PAD(self), event);
  GST_DEBUG_OBJECT(self,
                   "the receiver asks for a key unit%s: upstream %s it (%u)",
                   all_headers ? " with all headers" : "",
                   pushed ? "took" : "did not take", count);
}

void gst_rdma_sink_key_unit_requested(GstElement *element, gboolean all_headers)
{
  GstRdmaSink *self = GST_RDMA_SINK(element);

  if (all_headers)
    g_atomic_int_set(&self->key_unit_headers, 1);
  if (g_atomic_int_compare_and_exchange(&self->key_unit_pending, 0, 1))
    gst_element_call_async(element, gst_rdma_sink_push_key_unit, NULL, NULL);
}
