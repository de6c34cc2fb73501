/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pipeline-check.h - what the element test programs share: parsing a
 * launch line, state changes that fail the test when they fail, waiting
 * for EOS, and a rig of live cameras into rdmasinks.
 */
#ifndef PIPELINE_CHECK_H
#define PIPELINE_CHECK_H

#include <gst/check/gstcheck.h>

/* The transport and address the suite runs over: SBR_TEST_TRANSPORT (shm
 * on the host, verbs in the Soft-RoCE VM) and SBR_RDMA_ADDR. */
G_GNUC_UNUSED static void test_transport_from_env(const gchar **transport,
                                                  const gchar **address)
{
  *transport = g_getenv("SBR_TEST_TRANSPORT");
  if (!*transport || !**transport)
    *transport = "shm";
  *address = g_getenv("SBR_RDMA_ADDR");
  if (!*address)
    *address = "127.0.0.1";
}

G_GNUC_UNUSED static GstElement *parse(const gchar *desc)
{
  GError *err = NULL;
  GstElement *pipeline = gst_parse_launch(desc, &err);

  fail_unless(pipeline != NULL && err == NULL, "parse \"%s\": %s", desc,
              err ? err->message : "?");
  return pipeline;
}

/* The launch line of n live cameras, devices first..first+n-1 (GRAY8,
 * width x 48, 25 fps, frames of them or endless when 0), into rdmasinks
 * tx<device> sharing one connection.  Plain GLib: a child sender process
 * (child-sender.h) uses it without gst-check. */
G_GNUC_UNUSED static gchar *camera_rig_desc(const gchar *transport,
                                            const gchar *host, guint port,
                                            guint first, guint n, guint frames,
                                            guint width,
                                            const gchar *sink_props)
{
  GString *desc = g_string_new(NULL);

  for (guint d = first; d < first + n; d++) {
    g_string_append_printf(desc,
                           " videotestsrc is-live=true pattern=%u "
                           "num-buffers=%d ! video/x-raw,format=GRAY8,"
                           "width=%u,height=48,framerate=25/1 ! rdmasink "
                           "name=tx%u transport=%s host=%s port=%u "
                           "device-id=%u stats-interval=0 %s",
                           d % 20, frames ? (gint)frames : -1, width, d,
                           transport, host, port, d, sink_props);
  }
  return g_string_free(desc, FALSE);
}

/* camera_rig_desc's cameras, 64 pixels wide, parsed. */
G_GNUC_UNUSED static GstElement *
camera_rig_new(const gchar *transport, const gchar *host, guint port,
               guint first, guint n, guint frames, const gchar *sink_props)
{
  gchar *desc =
      camera_rig_desc(transport, host, port, first, n, frames, 64, sink_props);
  GstElement *pipeline = parse(desc);

  g_free(desc);
  return pipeline;
}

G_GNUC_UNUSED static void set_state(GstElement *pipeline, GstState state)
{
  fail_if(gst_element_set_state(pipeline, state) == GST_STATE_CHANGE_FAILURE);
}

/* Sets the state and waits until it is reached (generous: a hang check). */
G_GNUC_UNUSED static void change_state(GstElement *pipeline, GstState state)
{
  GstStateChangeReturn ret = gst_element_set_state(pipeline, state);

  fail_if(ret == GST_STATE_CHANGE_FAILURE);
  ret = gst_element_get_state(pipeline, NULL, NULL, 10 * GST_SECOND);
  fail_if(ret == GST_STATE_CHANGE_FAILURE || ret == GST_STATE_CHANGE_ASYNC,
          "state %s not reached: %s", gst_element_state_get_name(state),
          gst_element_state_change_return_get_name(ret));
}

G_GNUC_UNUSED static void stop(GstElement *pipeline)
{
  fail_unless_equals_int(gst_element_set_state(pipeline, GST_STATE_NULL),
                         GST_STATE_CHANGE_SUCCESS);
  gst_object_unref(pipeline);
}

/* Waits for EOS (or fails on an error or after timeout). */
G_GNUC_UNUSED static void expect_eos(GstElement *pipeline, GstClockTime timeout)
{
  GstBus *bus = gst_element_get_bus(pipeline);
  GstMessage *msg = gst_bus_timed_pop_filtered(
      bus, timeout, GST_MESSAGE_EOS | GST_MESSAGE_ERROR);

  gst_object_unref(bus);
  fail_unless(msg != NULL, "no EOS within %" GST_TIME_FORMAT,
              GST_TIME_ARGS(timeout));
  if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
    GError *err = NULL;
    gst_message_parse_error(msg, &err, NULL);
    fail("error from %s: %s", GST_OBJECT_NAME(msg->src), err->message);
  }
  gst_message_unref(msg);
}

#endif /* PIPELINE_CHECK_H */
