/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-rdma-keyunit.c - key units asked for across the link (issue 28,
 * item 3): an upstream GstForceKeyUnit sent at rdmasrc's pad reaches the
 * sender's encoder and brings a key frame; a receiver that restarts
 * mid-GOP asks by itself (request-keyframe).
 *
 * A live videotestsrc at 25 fps into an encoder that makes one key frame
 * at the start only (vp8enc keyframe-max-dist=100000; openh264enc
 * gop-size=100000 where it is installed) into rdmasink, rdmasrc into a
 * probe, in one process over SBR_TEST_TRANSPORT.  Without the feature no
 * key frame ever comes again: the waits are hang checks (10 s), and the
 * times it took are measured and printed (request to key frame at
 * rdmasrc's pad), not asserted.
 */
#include <gst/check/gstcheck.h>
#include <gst/video/video.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline-check.h"

#define HANG_US (10 * G_USEC_PER_SEC)
#define ROUNDS 10

static const gchar *transport; /* SBR_TEST_TRANSPORT */
static const gchar *rdma_addr; /* SBR_RDMA_ADDR */

static guint test_port(void)
{
  /* 35000..39999: clear of the other element tests' ranges. */
  static guint seq;
  return 35000 + (guint)(getpid() % 500) * 10 + (seq++ % 10);
}

typedef struct {
  const gchar *name;
  const gchar *enc; /* one key frame at the start, then none */
} Codec;

static const Codec vp8 = {
    "VP8",
    "vp8enc deadline=1 cpu-used=16 threads=1 keyframe-max-dist=100000",
};
static const Codec h264 = {
    "H.264",
    "openh264enc complexity=low gop-size=100000 ! h264parse config-interval=-1"
    " ! video/x-h264,stream-format=byte-stream,alignment=au",
};

/* What rdmasrc's pad pushed. */
static struct {
  GMutex lock;
  guint buffers, keys, deltas;
  guint deltas_before_key; /* pushed before the first key frame */
  gint64 last_key_us;      /* monotonic, when the newest key frame came */
} rec;

static GstPadProbeReturn on_pushed(GstPad *pad, GstPadProbeInfo *info,
                                   gpointer data)
{
  GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER(info);

  (void)pad;
  (void)data;
  g_mutex_lock(&rec.lock);
  rec.buffers++;
  if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_DELTA_UNIT)) {
    rec.deltas++;
    if (rec.keys == 0)
      rec.deltas_before_key++;
  } else {
    rec.keys++;
    rec.last_key_us = g_get_monotonic_time();
  }
  g_mutex_unlock(&rec.lock);
  return GST_PAD_PROBE_OK;
}

static void record_reset(void)
{
  g_mutex_lock(&rec.lock);
  rec.buffers = rec.keys = rec.deltas = rec.deltas_before_key = 0;
  rec.last_key_us = 0;
  g_mutex_unlock(&rec.lock);
}

static guint record_get(const guint *field)
{
  guint v;

  g_mutex_lock(&rec.lock);
  v = *field;
  g_mutex_unlock(&rec.lock);
  return v;
}

/* Waits until field is at least min; FALSE at the hang bound. */
static gboolean wait_record(const guint *field, guint min)
{
  gint64 end = g_get_monotonic_time() + HANG_US;

  while (record_get(field) < min)
    if (g_get_monotonic_time() > end)
      return FALSE;
    else
      g_usleep(1000);
  return TRUE;
}

static guint64 stat_of(GstElement *pipeline, const gchar *element,
                       const gchar *field, gboolean device)
{
  GstElement *e = gst_bin_get_by_name(GST_BIN(pipeline), element);
  GstStructure *s = NULL, *d = NULL;
  guint64 v = 0;

  fail_unless(e != NULL);
  g_object_get(e, "stats", &s, NULL);
  gst_object_unref(e);
  if (device)
    fail_unless(gst_structure_get(s, "device-0", GST_TYPE_STRUCTURE, &d, NULL));
  fail_unless(gst_structure_get_uint64(device ? d : s, field, &v), "no %s",
              field);
  if (d)
    gst_structure_free(d);
  gst_structure_free(s);
  return v;
}

/* sink_props "sync=false": frames go as they are encoded; by default
 * rdmasink waits for each frame's time plus the pipeline's latency (60 ms
 * here), which every frame, the key frame too, spends before the link. */
static GstElement *sender_new(const Codec *codec, guint port,
                              const gchar *sink_props)
{
  gchar *desc = g_strdup_printf(
      "videotestsrc is-live=true pattern=ball ! video/x-raw,format=I420,"
      "width=160,height=120,framerate=25/1 ! %s ! rdmasink name=tx "
      "transport=%s host=%s port=%u device-id=0 %s",
      codec->enc, transport, rdma_addr, port, sink_props);
  GstElement *p = parse(desc);

  g_free(desc);
  return p;
}

static GstElement *receiver_new(guint port, const gchar *props)
{
  gchar *desc = g_strdup_printf(
      "rdmasrc name=rx transport=%s address=%s port=%u device-id=0 %s ! "
      "identity name=in ! fakesink sync=false",
      transport, rdma_addr, port, props);
  GstElement *p = parse(desc), *in;
  GstPad *pad;

  g_free(desc);
  in = gst_bin_get_by_name(GST_BIN(p), "in");
  pad = gst_element_get_static_pad(in, "sink");
  gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, on_pushed, NULL, NULL);
  gst_object_unref(pad);
  gst_object_unref(in);
  return p;
}

static int cmp_time(const void *a, const void *b)
{
  gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;
  return x < y ? -1 : x > y;
}

/* ROUNDS upstream force-key-unit events sent at rdmasrc's src pad, each
 * once a few delta frames came since the previous key frame: each brings
 * a key frame.  Prints request-to-key-frame times. */
static void run_force_key_unit(const Codec *codec, const gchar *sink_props)
{
  guint port = test_port();
  GstElement *rx, *tx, *src;
  GstPad *srcpad;
  gint64 took[ROUNDS];

  record_reset();
  /* Only the upstream events ask: a gap (a pad drop on a loaded host)
   * would have rdmasrc ask as well, or its pad wait, and a key frame
   * nobody here asked for, or none for a while, is then no verdict. */
  rx = receiver_new(port, "request-keyframe=false wait-for-keyframe=false");
  tx = sender_new(codec, port, sink_props);
  set_state(rx, GST_STATE_PLAYING);
  set_state(tx, GST_STATE_PLAYING);
  src = gst_bin_get_by_name(GST_BIN(rx), "rx");
  /* The stream is under way: its key frame and a second of deltas. */
  fail_unless(wait_record(&rec.keys, 1), "%s: no first key frame", codec->name);
  fail_unless(wait_record(&rec.deltas, 25), "%s: no delta frames", codec->name);
  srcpad = gst_element_get_static_pad(src, "src_0");
  fail_unless(srcpad != NULL);
  for (guint i = 0; i < ROUNDS; i++) {
    guint keys = record_get(&rec.keys), deltas = record_get(&rec.deltas);
    gint64 t0;

    /* Without a request no key frame comes: deltas only meanwhile. */
    fail_unless(wait_record(&rec.deltas, deltas + 3));
    fail_unless(record_get(&rec.keys) == keys,
                "%s: a key frame nobody asked for", codec->name);
    t0 = g_get_monotonic_time();
    fail_unless(gst_pad_send_event(
        srcpad, gst_video_event_new_upstream_force_key_unit(
                    GST_CLOCK_TIME_NONE, i % 2 == 0, i + 1)));
    fail_unless(wait_record(&rec.keys, keys + 1),
                "%s: round %u: no key frame within 10 s of the request "
                "(rdmasrc asked %" G_GUINT64_FORMAT " times, rdmasink pushed "
                "%" G_GUINT64_FORMAT ")",
                codec->name, i, stat_of(rx, "rx", "key-units-requested", TRUE),
                stat_of(tx, "tx", "key-units-sent-upstream", FALSE));
    g_mutex_lock(&rec.lock);
    took[i] = rec.last_key_us - t0;
    g_mutex_unlock(&rec.lock);
  }
  fail_unless_equals_uint64(stat_of(rx, "rx", "key-units-upstream", TRUE),
                            ROUNDS);
  fail_unless_equals_uint64(stat_of(rx, "rx", "key-units-answered", TRUE),
                            ROUNDS);
  fail_unless(stat_of(tx, "tx", "key-units-requested", FALSE) >= ROUNDS);
  fail_unless(stat_of(tx, "tx", "key-units-sent-upstream", FALSE) >= ROUNDS);
  qsort(took, ROUNDS, sizeof took[0], cmp_time);
  g_print("# %s over %s, rdmasink %s: upstream force-key-unit at rdmasrc's "
          "pad to the key frame there, %u requests at 25 fps: min %.1f ms, "
          "median %.1f ms, max %.1f ms\n",
          codec->name, transport, *sink_props ? sink_props : "sync=true",
          ROUNDS, took[0] / 1000.0, took[ROUNDS / 2] / 1000.0,
          took[ROUNDS - 1] / 1000.0);
  gst_object_unref(srcpad);
  gst_object_unref(src);
  stop(tx);
  stop(rx);
}

GST_START_TEST(test_force_key_unit_vp8)
{
  run_force_key_unit(&vp8, "");
}
GST_END_TEST;

GST_START_TEST(test_force_key_unit_vp8_unsynced_sink)
{
  run_force_key_unit(&vp8, "sync=false");
}
GST_END_TEST;

GST_START_TEST(test_force_key_unit_h264)
{
  GstElementFactory *f = gst_element_factory_find("openh264enc");

  if (!f) {
    g_print("# skipped: openh264enc is not installed\n");
    return;
  }
  gst_object_unref(f);
  run_force_key_unit(&h264, "");
}
GST_END_TEST;

/* The receiver restarts mid-GOP: its first frames are delta frames of a
 * new lane (DISCONT).  By default its pad drops them, waiting for a key
 * frame (wait-for-keyframe), and asks for one (request-keyframe): the
 * first frame pushed is that key frame, a key-unit round trip after the
 * restart.  With neither, the deltas are pushed and no key frame comes
 * (a GOP of 100000 frames). */
static void run_restart(gboolean request)
{
  guint port = test_port();
  GstElement *rx, *tx;
  gint64 restart_us, first_delta_us, t_end;

  record_reset();
  rx = receiver_new(port, "");
  tx = sender_new(&vp8, port, "");
  set_state(rx, GST_STATE_PLAYING);
  set_state(tx, GST_STATE_PLAYING);
  fail_unless(wait_record(&rec.keys, 1), "no first key frame");
  fail_unless(wait_record(&rec.deltas, 10), "no delta frames");
  stop(rx);
  record_reset();
  rx = receiver_new(port, request ? ""
                                  : "request-keyframe=false "
                                    "wait-for-keyframe=false");
  restart_us = g_get_monotonic_time();
  set_state(rx, GST_STATE_PLAYING);
  /* The sender reconnects and goes on mid-GOP. */
  if (request) {
    fail_unless(wait_record(&rec.keys, 1),
                "no key frame within 10 s of the restart");
    g_mutex_lock(&rec.lock);
    g_print("# VP8 over %s: receiver restarted mid-GOP: the key frame it "
            "asked for came %.1f ms after the restart, %u delta frames "
            "before it\n",
            transport, (rec.last_key_us - restart_us) / 1000.0,
            rec.deltas_before_key);
    fail_unless_equals_int(rec.deltas_before_key, 0);
    g_mutex_unlock(&rec.lock);
    fail_unless(stat_of(rx, "rx", "key-units-after-gaps", TRUE) >= 1);
    fail_unless(stat_of(rx, "rx", "waiting-for-key-drops", TRUE) >= 1);
  } else {
    fail_unless(wait_record(&rec.deltas, 1), "no frames after the restart");
    first_delta_us = g_get_monotonic_time();
    /* Two seconds of deltas, no key frame: nobody asked. */
    t_end = first_delta_us + 2 * G_USEC_PER_SEC;
    while (g_get_monotonic_time() < t_end)
      g_usleep(10000);
    fail_unless(record_get(&rec.deltas) >= 10);
    fail_unless_equals_int(record_get(&rec.keys), 0);
    fail_unless_equals_uint64(stat_of(rx, "rx", "key-units-requested", TRUE),
                              0);
  }
  stop(tx);
  stop(rx);
}

GST_START_TEST(test_restarted_receiver_asks_for_a_key_frame)
{
  run_restart(TRUE);
}
GST_END_TEST;

GST_START_TEST(test_restarted_receiver_without_request_keyframe_waits)
{
  run_restart(FALSE);
}
GST_END_TEST;

static Suite *keyunit_suite(void)
{
  Suite *s = suite_create("rdma-keyunit");
  TCase *tc = tcase_create("general");

  test_transport_from_env(&transport, &rdma_addr);
  g_mutex_init(&rec.lock);
  tcase_set_timeout(tc, 120);
  suite_add_tcase(s, tc);
  tcase_add_test(tc, test_force_key_unit_vp8);
  tcase_add_test(tc, test_force_key_unit_vp8_unsynced_sink);
  tcase_add_test(tc, test_force_key_unit_h264);
  tcase_add_test(tc, test_restarted_receiver_asks_for_a_key_frame);
  tcase_add_test(tc, test_restarted_receiver_without_request_keyframe_waits);
  return s;
}

GST_CHECK_MAIN(keyunit);
