/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-rdma-headers.c - stream headers and tags cross the link and come again
 * (issue 28, item 4; docs/protocol.md, flag HEADER): appsrc ! rdmasink
 * and rdmasrc ! appsink, an encoded stream whose headers (HEADER-flagged
 * buffers, as h264parse config-interval=0 or vorbisenc send them) go once
 * at its start, key frames every KEY_EVERY frames and deltas between.
 *
 * - the HEADER flag arrives, on the headers only;
 * - a receiver restarted mid-GOP gets the headers again, before any
 *   frame, then no delta before the next key frame;
 * - a stream that brings its own headers after the restart (the first
 *   buffer the new receiver is sent is a header) gets none resent;
 * - a consumer that stops makes rdmasrc's pad drop frames, never headers;
 * - a late rdmasrc on a shared receiver, joining after the headers went
 *   by, gets them before its first frame;
 * - the stream's tags (EVENT blocks) reach the pad, and a restarted
 *   receiver's too.
 *
 * The elements' own logic over libsbr, the same over any transport: the
 * host's shm suite only (tests/gst/meson.build).
 */
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gst/check/gstcheck.h>

#include <string.h>
#include <unistd.h>

#include "pipeline-check.h"

#define KEY_EVERY 10
#define N_HEADERS 2
/* A hang bound, never a verdict on speed. */
#define HANG (30 * GST_SECOND)

static const gchar *transport;
static const gchar *rdma_addr;

static guint test_port(void)
{
  /* 5000..8999: clear of the other element tests' ranges. */
  static guint seq;
  return 5000 + (guint)(getpid() % 400) * 10 + (seq++ % 10);
}

/* Buffer payloads say what they are: "H<i>" a header, "F<n>" frame n. */
static GstBuffer *make_header(guint i)
{
  gchar *s = g_strdup_printf("H%u", i);
  GstBuffer *b = gst_buffer_new_wrapped(s, strlen(s));

  GST_BUFFER_FLAG_SET(b, GST_BUFFER_FLAG_HEADER);
  return b;
}

static GstBuffer *make_frame(guint n)
{
  gchar *s = g_strdup_printf("F%u", n);
  GstBuffer *b = gst_buffer_new_wrapped(s, strlen(s));

  GST_BUFFER_PTS(b) = n * 40 * GST_MSECOND;
  GST_BUFFER_DURATION(b) = 40 * GST_MSECOND;
  if (n % KEY_EVERY != 0)
    GST_BUFFER_FLAG_SET(b, GST_BUFFER_FLAG_DELTA_UNIT);
  return b;
}

static void push(GstElement *tx, GstBuffer *b)
{
  GstElement *in = gst_bin_get_by_name(GST_BIN(tx), "in");

  fail_unless_equals_int(gst_app_src_push_buffer(GST_APP_SRC(in), b),
                         GST_FLOW_OK);
  gst_object_unref(in);
}

/* What a received buffer is: its payload as a string, and its flags. */
typedef struct {
  gchar *what;
  gboolean header, delta;
} Got;

static gboolean pull(GstElement *rx, const gchar *sink, GstClockTime timeout,
                     Got *got)
{
  GstElement *out = gst_bin_get_by_name(GST_BIN(rx), sink);
  GstSample *sample = gst_app_sink_try_pull_sample(GST_APP_SINK(out), timeout);
  GstBuffer *b;
  GstMapInfo map;

  gst_object_unref(out);
  if (!sample)
    return FALSE;
  b = gst_sample_get_buffer(sample);
  fail_unless(gst_buffer_map(b, &map, GST_MAP_READ));
  got->what = g_strndup((const gchar *)map.data, map.size);
  gst_buffer_unmap(b, &map);
  got->header = GST_BUFFER_FLAG_IS_SET(b, GST_BUFFER_FLAG_HEADER);
  got->delta = GST_BUFFER_FLAG_IS_SET(b, GST_BUFFER_FLAG_DELTA_UNIT);
  gst_sample_unref(sample);
  return TRUE;
}

static guint64 sink_stat(GstElement *tx, const gchar *field)
{
  GstElement *e = gst_bin_get_by_name(GST_BIN(tx), "tx");
  GstStructure *s = NULL;
  guint64 v = 0;
  gboolean b;

  g_object_get(e, "stats", &s, NULL);
  gst_object_unref(e);
  if (gst_structure_get_boolean(s, field, &b))
    v = b;
  else
    fail_unless(gst_structure_get_uint64(s, field, &v),
                "no %s in %" GST_PTR_FORMAT, field, s);
  gst_structure_free(s);
  return v;
}

/* rdmasrc's device 0 counter field. */
static guint64 src_stat(GstElement *rx, const gchar *field)
{
  GstElement *e = gst_bin_get_by_name(GST_BIN(rx), "r");
  GstStructure *s = NULL, *d = NULL;
  guint64 v = 0;

  g_object_get(e, "stats", &s, NULL);
  gst_object_unref(e);
  if (gst_structure_get(s, "device-0", GST_TYPE_STRUCTURE, &d, NULL)) {
    fail_unless(gst_structure_get_uint64(d, field, &v), "no %s", field);
    gst_structure_free(d);
  }
  gst_structure_free(s);
  return v;
}

/* max_buffers 1: a consumer that takes nothing until pulled, so frames
 * wait in rdmasrc's pad queue. */
static GstElement *receiver_max(guint port, guint device, guint max_buffers)
{
  gchar *desc = g_strdup_printf(
      "rdmasrc name=r transport=%s address=%s port=%u device-id=%u ! "
      "appsink name=out sync=false max-buffers=%u",
      transport, rdma_addr, port, device, max_buffers);
  GstElement *rx = parse(desc);

  g_free(desc);
  return rx;
}

static GstElement *receiver(guint port, guint device)
{
  return receiver_max(port, device, 1000);
}

/* between: elements between appsrc and rdmasink ("" none). */
static GstElement *sender_with(guint port, guint device, const gchar *between)
{
  gchar *desc = g_strdup_printf(
      "appsrc name=in format=time is-live=true caps=application/x-rdma-test ! "
      "%s rdmasink name=tx transport=%s host=%s port=%u device-id=%u "
      "sync=false",
      between, transport, rdma_addr, port, device);
  GstElement *tx = parse(desc);

  g_free(desc);
  return tx;
}

static GstElement *sender(guint port, guint device)
{
  return sender_with(port, device, "");
}

/* The headers, then frames 0..n_frames-1, each checked as it arrives.
 * Returns the next frame's number. */
static guint stream_start(GstElement *tx, GstElement *rx, guint n_frames)
{
  Got g;

  for (guint i = 0; i < N_HEADERS; i++)
    push(tx, make_header(i));
  for (guint n = 0; n < n_frames; n++)
    push(tx, make_frame(n));
  for (guint i = 0; i < N_HEADERS; i++) {
    gchar *want = g_strdup_printf("H%u", i);

    fail_unless(pull(rx, "out", HANG, &g), "header %u did not arrive", i);
    fail_unless_equals_string(g.what, want);
    fail_unless(g.header, "%s without the HEADER flag", g.what);
    g_free(want);
    g_free(g.what);
  }
  for (guint n = 0; n < n_frames; n++) {
    gchar *want = g_strdup_printf("F%u", n);

    fail_unless(pull(rx, "out", HANG, &g), "frame %u did not arrive", n);
    fail_unless_equals_string(g.what, want);
    fail_if(g.header, "%s has the HEADER flag", g.what);
    fail_unless_equals_int(g.delta, n % KEY_EVERY != 0);
    g_free(want);
    g_free(g.what);
  }
  return n_frames;
}

/* A new receiver in the old one's place.  Over shm an idle sender only
 * notices the old one left when it sends: delta frames from *n on go
 * (lost, or dropped at the sender) until its connection is up to the new
 * receiver, so whichever of them was the new receiver's first, the
 * stream starts there mid-GOP; with headers, header buffers H7 go
 * instead.  *n: the next frame's number. */
static GstElement *restart_receiver(GstElement *rx, GstElement *tx, guint port,
                                    guint *n, gboolean headers)
{
  guint64 reconnects = sink_stat(tx, "reconnects");
  gint64 end;

  change_state(rx, GST_STATE_NULL);
  gst_object_unref(rx);
  rx = receiver(port, 0);
  set_state(rx, GST_STATE_PLAYING);
  end = g_get_monotonic_time() + HANG / GST_USECOND;
  while (sink_stat(tx, "reconnects") == reconnects ||
         !sink_stat(tx, "connected")) {
    fail_unless(g_get_monotonic_time() < end, "the sender never reconnected");
    if (*n % KEY_EVERY == 0)
      (*n)++; /* deltas only */
    push(tx, headers ? make_header(7) : make_frame((*n)++));
    g_usleep(10 * G_TIME_SPAN_MILLISECOND);
  }
  if (*n % KEY_EVERY == 0)
    (*n)++; /* the next pushed is a delta too */
  return rx;
}

/* Pushes frames from n on, one at a time, taking what the new receiver
 * got after each (those pushed before the sender reconnected are dropped
 * at the sender), up to the first key frame.  Fills what (the names, /h
 * for HEADER, /d for DELTA_UNIT) and returns the next frame's number. */
static guint push_until_key_arrives(GstElement *tx, GstElement *rx, guint n,
                                    GString *what)
{
  gint64 end = g_get_monotonic_time() + HANG / GST_USECOND;
  Got g;

  for (;;) {
    fail_unless(g_get_monotonic_time() < end,
                "no key frame reached the new receiver: \"%s\"", what->str);
    push(tx, make_frame(n++));
    while (pull(rx, "out", 20 * GST_MSECOND, &g)) {
      gboolean key = !g.header && !g.delta;

      g_string_append_printf(what, "%s%s%s ", g.what, g.header ? "/h" : "",
                             g.delta ? "/d" : "");
      g_free(g.what);
      if (key)
        return n;
    }
  }
}

/* The headers first, each flagged, then no delta: the key frame next. */
static void expect_headers_then_key(const gchar *what)
{
  gchar **w = g_strsplit(g_strstrip((gchar *)what), " ", -1);
  guint n = g_strv_length(w);

  fail_unless(n == N_HEADERS + 1, "the new receiver got \"%s\"", what);
  fail_unless_equals_string(w[0], "H0/h");
  fail_unless_equals_string(w[1], "H1/h");
  fail_unless(g_str_has_prefix(w[2], "F") && !strchr(w[2], '/'),
              "after the headers \"%s\"", w[2]);
  g_strfreev(w);
}

GST_START_TEST(test_headers_come_again_to_a_restarted_receiver)
{
  guint port = test_port();
  GstElement *rx = receiver(port, 0), *tx = sender(port, 0);
  GString *what = g_string_new(NULL);
  guint n;

  set_state(rx, GST_STATE_PLAYING);
  set_state(tx, GST_STATE_PLAYING);
  /* Mid-GOP: frames 0..14, the key frame 10 and deltas after it. */
  n = stream_start(tx, rx, 15);
  fail_unless_equals_uint64(sink_stat(tx, "headers-resent"), 0);
  rx = restart_receiver(rx, tx, port, &n, FALSE);
  n = push_until_key_arrives(tx, rx, n, what);
  GST_INFO("the new receiver got: %s", what->str);
  expect_headers_then_key(what->str);
  fail_unless_equals_uint64(sink_stat(tx, "headers-resent"), N_HEADERS);
  fail_unless(n > 15);
  g_string_free(what, TRUE);
  change_state(tx, GST_STATE_NULL);
  change_state(rx, GST_STATE_NULL);
  gst_object_unref(tx);
  gst_object_unref(rx);
}

GST_END_TEST;

/* After the restart the stream sends new headers itself (an encoder that
 * repeats them, new ones): the old ones are not sent on top. */
GST_START_TEST(test_a_stream_bringing_its_headers_gets_none_resent)
{
  guint port = test_port();
  GstElement *rx = receiver(port, 0), *tx = sender(port, 0);
  guint n;
  Got g;

  set_state(rx, GST_STATE_PLAYING);
  set_state(tx, GST_STATE_PLAYING);
  n = stream_start(tx, rx, 5);
  rx = restart_receiver(rx, tx, port, &n, TRUE);
  /* The first that reached the new receiver was an H7 (those pushed
   * before the sender reconnected are dropped): one more, in case none. */
  push(tx, make_header(7));
  fail_unless(pull(rx, "out", HANG, &g), "nothing reached the new receiver");
  fail_unless_equals_string(g.what, "H7");
  fail_unless(g.header);
  g_free(g.what);
  fail_unless_equals_uint64(sink_stat(tx, "headers-resent"), 0);
  change_state(tx, GST_STATE_NULL);
  change_state(rx, GST_STATE_NULL);
  gst_object_unref(tx);
  gst_object_unref(rx);
}

GST_END_TEST;

/* rdmasrc's own counter field (not a device's). */
static guint64 src_top_stat(GstElement *rx, const gchar *field)
{
  GstElement *e = gst_bin_get_by_name(GST_BIN(rx), "r");
  GstStructure *s = NULL;
  guint64 v = 0;

  g_object_get(e, "stats", &s, NULL);
  gst_object_unref(e);
  fail_unless(gst_structure_get_uint64(s, field, &v), "no %s", field);
  gst_structure_free(s);
  return v;
}

/* Two rdmasrcs of one process share the receiver on a port: the one for
 * device 0 joins after device 0's headers went by (to nobody: dropped and
 * counted), and gets them before its first frame, then the key frame. */
GST_START_TEST(test_a_late_joiner_gets_the_headers)
{
  guint port = test_port();
  GstElement *early = receiver(port, 1), *tx = sender(port, 0), *late, *in;
  GString *what = g_string_new(NULL);
  guint64 events;
  gint64 end;
  guint n = 0;

  set_state(early, GST_STATE_PLAYING);
  set_state(tx, GST_STATE_PLAYING);
  for (guint i = 0; i < N_HEADERS; i++)
    push(tx, make_header(i));
  end = g_get_monotonic_time() + HANG / GST_USECOND;
  /* Frames until the headers and a frame after them reached the receiver
   * (the first sent go while the sender connects: dropped there). */
  while (src_top_stat(early, "unclaimed-drops") < N_HEADERS + 1) {
    fail_unless(g_get_monotonic_time() < end, "nothing reached the receiver");
    push(tx, make_frame(n++));
    g_usleep(10 * G_TIME_SPAN_MILLISECOND);
  }
  fail_unless_equals_uint64(sink_stat(tx, "headers-resent"), 0);
  /* Tags after the headers (h264parse sends them once it parsed the
   * SPS): an EVENT block, no new stream, the headers still the stream's. */
  events = sink_stat(tx, "events-sent");
  in = gst_bin_get_by_name(GST_BIN(tx), "in");
  fail_unless(gst_element_send_event(
      in, gst_event_new_tag(gst_tag_list_new(GST_TAG_TITLE, "late", NULL))));
  gst_object_unref(in);
  while (sink_stat(tx, "events-sent") == events) {
    fail_unless(g_get_monotonic_time() < end, "the tags never went");
    if (n % KEY_EVERY == 0)
      n++; /* deltas only, to nobody */
    push(tx, make_frame(n++));
    g_usleep(10 * G_TIME_SPAN_MILLISECOND);
  }
  if (n % KEY_EVERY == 0)
    n++; /* the late joiner's first frame a delta */
  late = receiver(port, 0);
  set_state(late, GST_STATE_PLAYING);
  n = push_until_key_arrives(tx, late, n, what);
  GST_INFO("the late joiner got: %s", what->str);
  expect_headers_then_key(what->str);
  g_string_free(what, TRUE);
  change_state(tx, GST_STATE_NULL);
  change_state(late, GST_STATE_NULL);
  change_state(early, GST_STATE_NULL);
  gst_object_unref(tx);
  gst_object_unref(late);
  gst_object_unref(early);
}

GST_END_TEST;

/* A consumer that stops: rdmasrc's pad drops its oldest queued frames for
 * room (drop-oldest, the default for a live source: the sender's appsrc
 * is one), and the deltas after them up to
 * the next key frame, but never a header: the next key frame needs it. */
GST_START_TEST(test_pad_drops_keep_the_headers)
{
  guint port = test_port();
  GstElement *rx = receiver_max(port, 0, 1), *tx = sender(port, 0);
  gint64 end;
  guint headers = 0, frames = 0;
  Got g;

  set_state(rx, GST_STATE_PLAYING);
  set_state(tx, GST_STATE_PLAYING);
  for (guint i = 0; i < 4; i++)
    push(tx, make_header(i));
  end = g_get_monotonic_time() + HANG / GST_USECOND;
  for (guint n = 0; src_stat(rx, "drops-leaky") == 0; n++) {
    fail_unless(g_get_monotonic_time() < end, "the pad never dropped a frame");
    push(tx, make_frame(n));
    g_usleep(2 * G_TIME_SPAN_MILLISECOND);
  }
  while (pull(rx, "out", 500 * GST_MSECOND, &g)) {
    if (g.header) {
      gchar *want = g_strdup_printf("H%u", headers++);

      fail_unless_equals_string(g.what, want);
      fail_unless(frames == 0, "%s after %u frames", g.what, frames);
      g_free(want);
    } else {
      frames++;
    }
    g_free(g.what);
  }
  fail_unless_equals_int(headers, 4);
  fail_unless(frames > 0);
  change_state(tx, GST_STATE_NULL);
  change_state(rx, GST_STATE_NULL);
  gst_object_unref(tx);
  gst_object_unref(rx);
}

GST_END_TEST;

/* The title of the last TAG event that reached a receiver's appsink. */
static gchar *title_seen;
static GMutex title_lock;

static GstPadProbeReturn on_event(GstPad *pad, GstPadProbeInfo *info,
                                  gpointer data)
{
  GstEvent *event = GST_PAD_PROBE_INFO_EVENT(info);
  GstTagList *tags;
  gchar *title = NULL;

  (void)pad;
  (void)data;
  if (GST_EVENT_TYPE(event) != GST_EVENT_TAG)
    return GST_PAD_PROBE_OK;
  gst_event_parse_tag(event, &tags);
  if (gst_tag_list_get_string(tags, GST_TAG_TITLE, &title)) {
    g_mutex_lock(&title_lock);
    g_free(title_seen);
    title_seen = title;
    g_mutex_unlock(&title_lock);
  }
  return GST_PAD_PROBE_OK;
}

static void watch_tags(GstElement *rx)
{
  GstElement *out = gst_bin_get_by_name(GST_BIN(rx), "out");
  GstPad *pad = gst_element_get_static_pad(out, "sink");

  g_mutex_lock(&title_lock);
  g_clear_pointer(&title_seen, g_free);
  g_mutex_unlock(&title_lock);
  gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, on_event, NULL,
                    NULL);
  gst_object_unref(pad);
  gst_object_unref(out);
}

static gboolean title_is(const gchar *want)
{
  gboolean ok;

  g_mutex_lock(&title_lock);
  ok = g_strcmp0(title_seen, want) == 0;
  g_mutex_unlock(&title_lock);
  return ok;
}

/* The sender's stream tags (taginject, as a camera's title) reach the
 * receiver's pad before the first frame, and a restarted receiver gets
 * them again (EVENT blocks, sent again after the caps on a new lane). */
GST_START_TEST(test_tags_cross_and_come_again)
{
  guint port = test_port();
  GstElement *rx = receiver(port, 0),
             *tx = sender_with(port, 0, "taginject tags=title=camera3 !");
  GString *what = g_string_new(NULL);
  guint n;

  watch_tags(rx);
  set_state(rx, GST_STATE_PLAYING);
  set_state(tx, GST_STATE_PLAYING);
  n = stream_start(tx, rx, 3);
  fail_unless(title_is("camera3"), "no title before the first frames");
  /* The stream-start (before the caps), then the tags. */
  fail_unless_equals_uint64(sink_stat(tx, "events-sent"), 2);
  fail_unless_equals_uint64(src_top_stat(rx, "events-received"), 2);
  rx = restart_receiver(rx, tx, port, &n, FALSE);
  watch_tags(rx);
  push_until_key_arrives(tx, rx, n, what);
  fail_unless(title_is("camera3"), "the new receiver got no title (got \"%s\")",
              what->str);
  fail_unless_equals_uint64(src_top_stat(rx, "events-received"), 2);
  fail_unless_equals_uint64(src_top_stat(rx, "events-dropped"), 0);
  g_string_free(what, TRUE);
  change_state(tx, GST_STATE_NULL);
  change_state(rx, GST_STATE_NULL);
  gst_object_unref(tx);
  gst_object_unref(rx);
}

GST_END_TEST;

static Suite *rdma_headers_suite(void)
{
  Suite *s = suite_create("rdma-headers");
  TCase *tc = tcase_create("general");

  test_transport_from_env(&transport, &rdma_addr);
  tcase_set_timeout(tc, 90);
  suite_add_tcase(s, tc);
  tcase_add_test(tc, test_headers_come_again_to_a_restarted_receiver);
  tcase_add_test(tc, test_a_stream_bringing_its_headers_gets_none_resent);
  tcase_add_test(tc, test_pad_drops_keep_the_headers);
  tcase_add_test(tc, test_a_late_joiner_gets_the_headers);
  tcase_add_test(tc, test_tags_cross_and_come_again);
  return s;
}

GST_CHECK_MAIN(rdma_headers);
