/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-rdma-uri.c - rdma://HOST:PORT/DEVICE?key=value URIs: both elements
 * take them (GstURIHandler, and the uri property on a launch line), a bad
 * one changes nothing and says why (as a property: fails the start), and
 * playbin and uridecodebin play one camera of a rig through rdmasrc in
 * URI mode (the one-camera rdmasrc, which signals no-more-pads).
 *
 * Transport: SBR_TEST_TRANSPORT (shm on the host, verbs in the VM).
 */
#include <gst/app/gstappsink.h>
#include <gst/check/gstcheck.h>

#include <string.h>
#include <unistd.h>

#include "pipeline-check.h"

#define WAIT (20 * GST_SECOND)

static const gchar *transport; /* SBR_TEST_TRANSPORT */
static const gchar *rdma_addr; /* SBR_RDMA_ADDR */

static guint test_port(void)
{
  /* 40000..44999: clear of the other element tests' ranges. */
  static guint seq;
  return 40000 + (guint)(getpid() % 500) * 10 + (seq++ % 10);
}

static gchar *enum_nick(GObject *obj, const gchar *name)
{
  GValue v = G_VALUE_INIT;
  gchar *s;

  g_value_init(&v, G_PARAM_SPEC_VALUE_TYPE(g_object_class_find_property(
                       G_OBJECT_GET_CLASS(obj), name)));
  g_object_get_property(obj, name, &v);
  s = gst_value_serialize(&v);
  g_value_unset(&v);
  return s;
}

GST_START_TEST(test_sink_takes_a_uri)
{
  GError *err = NULL;
  GstElement *sink = gst_element_make_from_uri(
      GST_URI_SINK, "rdma://10.0.0.7:7123/3?transport=shm&backpressure=drop",
      NULL, &err);
  gchar *host = NULL, *s, *uri;
  guint port = 0, device = 0;

  fail_unless(sink != NULL, "%s", err ? err->message : "?");
  fail_unless_equals_string(GST_OBJECT_NAME(gst_element_get_factory(sink)),
                            "rdmasink");
  g_object_get(sink, "host", &host, "port", &port, "device-id", &device, NULL);
  fail_unless_equals_string(host, "10.0.0.7");
  fail_unless_equals_int(port, 7123);
  fail_unless_equals_int(device, 3);
  s = enum_nick(G_OBJECT(sink), "transport");
  fail_unless_equals_string(s, "shm");
  g_free(s);
  s = enum_nick(G_OBJECT(sink), "backpressure");
  fail_unless_equals_string(s, "drop");
  g_free(s);
  uri = gst_uri_handler_get_uri(GST_URI_HANDLER(sink));
  fail_unless_equals_string(uri, "rdma://10.0.0.7:7123/3?transport=shm");
  g_free(uri);
  g_free(host);
  gst_object_unref(sink);
}
GST_END_TEST;

GST_START_TEST(test_src_takes_a_uri)
{
  GError *err = NULL;
  GstElement *src = gst_element_make_from_uri(
      GST_URI_SRC, "rdma://[::1]:7124/4?transport=shm&over-budget=pause", NULL,
      &err);
  gchar *address = NULL, *s, *uri;
  guint port = 0;
  gint device = -1;
  GstPad *pad;

  fail_unless(src != NULL, "%s", err ? err->message : "?");
  fail_unless_equals_string(GST_OBJECT_NAME(gst_element_get_factory(src)),
                            "rdmasrc");
  g_object_get(src, "address", &address, "port", &port, "device-id", &device,
               NULL);
  fail_unless_equals_string(address, "::1");
  fail_unless_equals_int(port, 7124);
  fail_unless_equals_int(device, 4);
  /* The one camera's pad, with the URI's policy. */
  pad = gst_element_get_static_pad(src, "src_4");
  fail_unless(pad != NULL);
  s = enum_nick(G_OBJECT(pad), "over-budget");
  fail_unless_equals_string(s, "pause");
  g_free(s);
  gst_object_unref(pad);
  uri = gst_uri_handler_get_uri(GST_URI_HANDLER(src));
  fail_unless_equals_string(uri, "rdma://[::1]:7124/4?transport=shm");
  g_free(uri);
  /* No device: every device, as rdmasrc without device-id. */
  fail_unless(gst_uri_handler_set_uri(GST_URI_HANDLER(src),
                                      "rdma://0.0.0.0:7125", &err));
  g_object_get(src, "device-id", &device, NULL);
  fail_unless_equals_int(device, -1);
  g_free(address);
  gst_object_unref(src);
}
GST_END_TEST;

/* The fabric settings travel as query keys like any property; a value
 * out of the verbs spec's range (retry forever) is refused, named. */
GST_START_TEST(test_fabric_settings_in_a_uri)
{
  GError *err = NULL;
  GstElement *sink = gst_element_make_from_uri(
      GST_URI_SINK,
      "rdma://10.0.0.7:7123/"
      "3?tos=96&ack-timeout=12&retry-count=5&comp-vector=1",
      NULL, &err);
  GstElement *src = gst_element_make_from_uri(
      GST_URI_SRC, "rdma://0.0.0.0:7123?numa-node=-2&huge-pages=false", NULL,
      &err);
  guint ack = 0, retry = 0;
  gint tos = 0, vector = 0, node = 0;
  gboolean huge = TRUE;

  fail_unless(sink != NULL && src != NULL, "%s", err ? err->message : "?");
  g_object_get(sink, "tos", &tos, "ack-timeout", &ack, "retry-count", &retry,
               "comp-vector", &vector, NULL);
  fail_unless_equals_int(tos, 96);
  fail_unless_equals_int(ack, 12);
  fail_unless_equals_int(retry, 5);
  fail_unless_equals_int(vector, 1);
  g_object_get(src, "numa-node", &node, "huge-pages", &huge, NULL);
  fail_unless_equals_int(node, -2);
  fail_unless(!huge);
  fail_if(gst_uri_handler_set_uri(
      GST_URI_HANDLER(sink), "rdma://10.0.0.7:7123/3?retry-count=7", &err));
  fail_unless(err && strstr(err->message, "\"7\" is not a value") &&
                  strstr(err->message, "retry-count"),
              "%s", err ? err->message : "no error");
  g_clear_error(&err);
  g_object_get(sink, "retry-count", &retry, NULL);
  fail_unless_equals_int(retry, 5);
  gst_object_unref(sink);
  gst_object_unref(src);
}
GST_END_TEST;

/* A bad URI is refused whole, naming what is wrong; and not while
 * running. */
GST_START_TEST(test_bad_uris_change_nothing)
{
  static const struct {
    const gchar *uri, *says;
  } bad[] = {
      {"rdma://127.0.0.1:7126/x?transport=shm", "device"},
      {"rdma://127.0.0.1:7126/256", "device"},
      {"srt://127.0.0.1:7126/1", "srt"},
      {"rdma://127.0.0.1:7126/1?nope=1", "nope"},
      {"rdma://127.0.0.1:7126/1?blocks=many", "many"},
      {"rdma://127.0.0.1:7126/1?transport=carrier-pigeon", "carrier-pigeon"},
      {"rdma://127.0.0.1:7126/1?port=1", "port"},
      {"rdma://127.0.0.1:99999/1", "65535"},
      {"rdma://127.0.0.1:0/1", "65535"},
  };
  GstElement *src = gst_element_factory_make("rdmasrc", NULL);
  gchar *uri;

  fail_unless(gst_uri_handler_set_uri(
      GST_URI_HANDLER(src), "rdma://127.0.0.1:7000/2?transport=shm", NULL));
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    GError *err = NULL;

    fail_if(gst_uri_handler_set_uri(GST_URI_HANDLER(src), bad[i].uri, &err),
            "%s accepted", bad[i].uri);
    fail_unless(err && strstr(err->message, bad[i].says), "%s: %s", bad[i].uri,
                err ? err->message : "no error");
    g_clear_error(&err);
    uri = gst_uri_handler_get_uri(GST_URI_HANDLER(src));
    fail_unless_equals_string(uri, "rdma://127.0.0.1:7000/2?transport=shm");
    g_free(uri);
  }
  gst_object_unref(src);
}
GST_END_TEST;

static void on_no_more_pads(GstElement *element, gpointer data)
{
  (void)element;
  g_atomic_int_inc((gint *)data);
}

/* In URI mode rdmasrc has its one pad from the start and says no more
 * will come when it starts (what decodebin and playbin wait for from a
 * source with sometimes pads). */
GST_START_TEST(test_uri_mode_signals_no_more_pads)
{
  gchar *uri = g_strdup_printf("rdma://%s:%u/5?transport=%s", rdma_addr,
                               test_port(), transport);
  GstElement *src = gst_element_make_from_uri(GST_URI_SRC, uri, NULL, NULL);
  gint no_more = 0;

  fail_unless(src != NULL);
  g_signal_connect(src, "no-more-pads", G_CALLBACK(on_no_more_pads), &no_more);
  fail_unless_equals_int(gst_element_set_state(src, GST_STATE_PAUSED),
                         GST_STATE_CHANGE_NO_PREROLL);
  fail_unless_equals_int(g_atomic_int_get(&no_more), 1);
  fail_unless_equals_int(g_list_length(src->srcpads), 1);
  gst_element_set_state(src, GST_STATE_NULL);
  gst_object_unref(src);
  g_free(uri);
}
GST_END_TEST;

/* A bad rdma:// URI given to playbin (gst-play-1.0, GstPlay, OpenCV's URI
 * mode) reaches the bus as an error in our words, naming what is wrong
 * with the URI, not a generic "no element for URI" nor a pipeline that
 * waits for a camera on settings it didn't ask for. */
GST_START_TEST(test_playbin_says_what_is_wrong_with_a_uri)
{
  static const struct {
    const gchar *uri, *says;
  } bad[] = {
      {"rdma://127.0.0.1:99999/1?transport=shm", "65535"},
      {"rdma://127.0.0.1:0/1?transport=shm", "65535"},
      {"rdma://127.0.0.1:7126/300?transport=shm", "255"},
      {"rdma://127.0.0.1:7126/1?transport=carrier-pigeon", "carrier-pigeon"},
      {"rdma://127.0.0.1:7126/1?nope=1", "nope"},
      {"rdma:///1", "rdma://HOST:PORT/DEVICE"},
  };

  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    GstElement *playbin = gst_element_factory_make("playbin", NULL);
    GstBus *bus;
    GstMessage *msg;
    GError *err = NULL;

    g_object_set(playbin, "uri", bad[i].uri, "video-sink",
                 gst_element_factory_make("fakesink", NULL), "flags", 1, NULL);
    gst_element_set_state(playbin, GST_STATE_PAUSED);
    bus = gst_element_get_bus(playbin);
    msg = gst_bus_timed_pop_filtered(bus, 10 * GST_SECOND, GST_MESSAGE_ERROR);
    fail_unless(msg != NULL, "%s: no error", bad[i].uri);
    gst_message_parse_error(msg, &err, NULL);
    fail_unless(strstr(err->message, bad[i].says), "%s: %s", bad[i].uri,
                err->message);
    g_error_free(err);
    gst_message_unref(msg);
    gst_object_unref(bus);
    stop(playbin);
  }
}
GST_END_TEST;

static gint frames; /* atomic */

static GstFlowReturn on_sample(GstAppSink *sink, gpointer data)
{
  GstSample *sample = gst_app_sink_pull_sample(sink);

  (void)data;
  g_atomic_int_inc(&frames);
  gst_sample_unref(sample);
  return GST_FLOW_OK;
}

static gboolean wait_frames(gint count)
{
  gint64 end = g_get_monotonic_time() + (gint64)(WAIT / GST_USECOND);

  while (g_atomic_int_get(&frames) < count && g_get_monotonic_time() < end)
    g_usleep(10000);
  return g_atomic_int_get(&frames) >= count;
}

static GstElement *counting_appsink(void)
{
  GstElement *sink = gst_element_factory_make("appsink", NULL);
  GstAppSinkCallbacks cb = {.new_sample = on_sample};

  g_object_set(sink, "sync", FALSE, NULL);
  gst_app_sink_set_callbacks(GST_APP_SINK(sink), &cb, NULL, NULL);
  g_atomic_int_set(&frames, 0);
  return sink;
}

/* playbin uri=rdma://...: camera 1 of three, to an appsink. */
GST_START_TEST(test_playbin_plays_a_camera)
{
  guint port = test_port();
  GstElement *rig = camera_rig_new(transport, rdma_addr, port, 0, 3, 0, "");
  GstElement *playbin = gst_element_factory_make("playbin", NULL);
  gchar *uri = g_strdup_printf("rdma://%s:%u/1?transport=%s", rdma_addr, port,
                               transport);

  fail_unless(playbin != NULL);
  /* flags=video: no audio sink to wait for. */
  g_object_set(playbin, "uri", uri, "video-sink", counting_appsink(), "flags",
               1, NULL);
  set_state(playbin, GST_STATE_PLAYING);
  change_state(rig, GST_STATE_PLAYING);
  fail_unless(wait_frames(25), "%d frames", g_atomic_int_get(&frames));
  stop(rig);
  stop(playbin);
  g_free(uri);
}
GST_END_TEST;

/* uridecodebin uri=rdma://... ! appsink: its pad is linked as it comes
 * (a delayed link, as for any dynamic source). */
GST_START_TEST(test_uridecodebin_plays_a_camera)
{
  guint port = test_port();
  GstElement *rig = camera_rig_new(transport, rdma_addr, port, 0, 3, 0, "");
  gchar *desc = g_strdup_printf("uridecodebin uri=rdma://%s:%u/2?transport=%s "
                                "! appsink name=s sync=false",
                                rdma_addr, port, transport);
  GstElement *pipeline = parse(desc);
  GstElement *sink = gst_bin_get_by_name(GST_BIN(pipeline), "s");
  GstAppSinkCallbacks cb = {.new_sample = on_sample};

  gst_app_sink_set_callbacks(GST_APP_SINK(sink), &cb, NULL, NULL);
  gst_object_unref(sink);
  g_atomic_int_set(&frames, 0);
  set_state(pipeline, GST_STATE_PLAYING);
  change_state(rig, GST_STATE_PLAYING);
  fail_unless(wait_frames(25), "%d frames", g_atomic_int_get(&frames));
  stop(rig);
  stop(pipeline);
  g_free(desc);
}
GST_END_TEST;

/* The uri property (as srtsink/srtsrc have): a launch line names both
 * ends with one URI each, and frames flow; reading it gives the URI of
 * the settings now. */
GST_START_TEST(test_uri_property_on_launch_lines)
{
  guint port = test_port();
  gchar *uri = g_strdup_printf("rdma://%s:%u/2?transport=%s", rdma_addr, port,
                               transport);
  gchar *desc = g_strdup_printf(
      "rdmasrc name=r uri=\"%s\" ! appsink name=s sync=false async=false", uri);
  GstElement *rx = parse(desc);
  GstElement *src = gst_bin_get_by_name(GST_BIN(rx), "r");
  GstElement *appsink = gst_bin_get_by_name(GST_BIN(rx), "s");
  GstAppSinkCallbacks cb = {.new_sample = on_sample};
  GstElement *tx, *sink;
  gchar *got = NULL, *nick;
  gint device = -1;
  guint rx_port = 0;

  g_free(desc);
  g_object_get(src, "device-id", &device, "port", &rx_port, "uri", &got, NULL);
  fail_unless_equals_int(device, 2);
  fail_unless_equals_int(rx_port, port);
  nick = enum_nick(G_OBJECT(src), "transport");
  fail_unless_equals_string(nick, transport);
  g_free(nick);
  fail_unless(got && strstr(got, "/2?") && strstr(got, transport), "%s",
              GST_STR_NULL(got));
  g_free(got);
  g_atomic_int_set(&frames, 0);
  gst_app_sink_set_callbacks(GST_APP_SINK(appsink), &cb, NULL, NULL);
  gst_object_unref(appsink);

  desc = g_strdup_printf("videotestsrc is-live=true ! video/x-raw,format=GRAY8,"
                         "width=64,height=48,framerate=25/1 ! rdmasink "
                         "name=t uri=\"%s\" stats-interval=0",
                         uri);
  tx = parse(desc);
  g_free(desc);
  sink = gst_bin_get_by_name(GST_BIN(tx), "t");
  g_object_get(sink, "uri", &got, NULL);
  fail_unless(got && strstr(got, "/2?") && strstr(got, transport), "%s",
              GST_STR_NULL(got));
  g_free(got);
  gst_object_unref(sink);

  change_state(rx, GST_STATE_PLAYING);
  change_state(tx, GST_STATE_PLAYING);
  fail_unless(wait_frames(25), "%d frames", g_atomic_int_get(&frames));
  stop(tx);
  stop(rx);
  gst_object_unref(src);
  g_free(uri);
}
GST_END_TEST;

/* A uri that can't be set (a typo on a launch line) fails the start with
 * an error that says why, rather than run with the other settings; a good
 * one set afterwards clears it. */
GST_START_TEST(test_bad_uri_property_fails_the_start)
{
  static const gchar *const factories[] = {"rdmasink", "rdmasrc"};

  for (guint i = 0; i < G_N_ELEMENTS(factories); i++) {
    gchar *desc = g_strdup_printf(
        "fakesrc ! %s name=e uri=\"rdma://127.0.0.1:7000/300\"", factories[i]);
    GstElement *pipeline;
    GstElement *e;
    GstBus *bus;
    GstMessage *msg;
    GError *err = NULL;
    gchar *good, *got = NULL;

    if (i == 1) {
      g_free(desc);
      desc = g_strdup("rdmasrc name=e uri=\"rdma://127.0.0.1:7000/300\" ! "
                      "fakesink async=false");
    }
    pipeline = parse(desc);
    g_free(desc);
    fail_unless_equals_int(gst_element_set_state(pipeline, GST_STATE_PAUSED),
                           GST_STATE_CHANGE_FAILURE);
    bus = gst_element_get_bus(pipeline);
    msg = gst_bus_timed_pop_filtered(bus, 5 * GST_SECOND, GST_MESSAGE_ERROR);
    fail_unless(msg != NULL, "%s: no error", factories[i]);
    gst_message_parse_error(msg, &err, NULL);
    fail_unless(strstr(err->message, "uri") && strstr(err->message, "255"),
                "%s: %s", factories[i], err->message);
    g_error_free(err);
    gst_message_unref(msg);
    gst_object_unref(bus);
    gst_element_set_state(pipeline, GST_STATE_NULL);

    /* Fixed, the error goes: rdmasrc starts (rdmasink would wait for a
     * receiver, so it is only read back). */
    e = gst_bin_get_by_name(GST_BIN(pipeline), "e");
    good = g_strdup_printf("rdma://%s:%u/3?transport=%s", rdma_addr,
                           test_port(), transport);
    g_object_set(e, "uri", good, NULL);
    g_object_get(e, "uri", &got, NULL);
    fail_unless(got && strstr(got, "/3?"), "%s", GST_STR_NULL(got));
    g_free(got);
    g_free(good);
    if (i == 1)
      change_state(pipeline, GST_STATE_PAUSED);
    gst_object_unref(e);
    stop(pipeline);
  }
}
GST_END_TEST;

static Suite *rdma_uri_suite(void)
{
  Suite *s = suite_create("rdma-uri");
  TCase *tc = tcase_create("general");

  test_transport_from_env(&transport, &rdma_addr);
  tcase_set_timeout(tc, 60);
  suite_add_tcase(s, tc);
  tcase_add_test(tc, test_sink_takes_a_uri);
  tcase_add_test(tc, test_src_takes_a_uri);
  tcase_add_test(tc, test_fabric_settings_in_a_uri);
  tcase_add_test(tc, test_bad_uris_change_nothing);
  tcase_add_test(tc, test_uri_mode_signals_no_more_pads);
  tcase_add_test(tc, test_playbin_plays_a_camera);
  tcase_add_test(tc, test_playbin_says_what_is_wrong_with_a_uri);
  tcase_add_test(tc, test_uridecodebin_plays_a_camera);
  tcase_add_test(tc, test_uri_property_on_launch_lines);
  tcase_add_test(tc, test_bad_uri_property_fails_the_start);
  return s;
}

GST_CHECK_MAIN(rdma_uri);
