/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-rdmasrc-lanes.c - the automatic device-blocks share is per lane:
 * every sender connection has a lane of `blocks` blocks of its own, so a
 * device's share is three quarters of its own lane over the devices on
 * that lane, not over every device of the element (or of every rdmasrc
 * on the shared receiver).  A device whose sender leaves has no lane until
 * one takes it over; its share is then the least it could get.
 *
 * A lane is a sender process's connection: the cameras of this process
 * share one (camera_rig_new), and a second lane is this test binary again
 * (child-sender.h).  Transport: SBR_TEST_TRANSPORT
 * (shm on the host, verbs in the Soft-RoCE VM).
 */
#include <gst/app/gstappsink.h>
#include <gst/check/gstcheck.h>

#include <unistd.h>

#include "child-sender.h"
#include "pipeline-check.h"

#define WAIT (20 * GST_SECOND)
#define MAX_DEVICES 8

static const gchar *transport; /* SBR_TEST_TRANSPORT */
static const gchar *rdma_addr; /* SBR_RDMA_ADDR */

static guint test_port(void)
{
  /* 20000..24999: clear of the other element tests' ranges. */
  static guint seq;
  return 20000 + (guint)(getpid() % 500) * 10 + (seq++ % 10);
}

/* ------------------------------------------------- a second sender */

/* Cameras first..first+n-1 in another process: a lane of their own. */
static GPid rig_process(guint port, guint first, guint n)
{
  return child_sender_spawn(transport, rdma_addr, port, first, n, 64);
}

/* ------------------------------------------------------------ stats */

static GstStructure *stats_of(GstElement *src)
{
  GstStructure *s = NULL;

  g_object_get(src, "stats", &s, NULL);
  fail_unless(s != NULL);
  return s;
}

/* A device's "rdmasrc-device-stats" field, or NULL. */
static const GstStructure *device_stats(const GstStructure *s, guint device)
{
  gchar name[16];
  const GValue *v;

  g_snprintf(name, sizeof name, "device-%u", device);
  v = gst_structure_get_value(s, name);
  return v && G_VALUE_HOLDS(v, GST_TYPE_STRUCTURE) ? gst_value_get_structure(v)
                                                   : NULL;
}

/* Device's share (its stats' device-blocks), 0 without stats. */
static guint share_of(GstElement *src, guint device)
{
  GstStructure *s = stats_of(src);
  const GstStructure *ds = device_stats(s, device);
  guint v = 0;

  if (ds)
    fail_unless(gst_structure_get_uint(ds, "device-blocks", &v));
  gst_structure_free(s);
  return v;
}

static guint device_uint(GstElement *src, guint device, const gchar *field)
{
  GstStructure *s = stats_of(src);
  const GstStructure *ds = device_stats(s, device);
  guint v = 0;

  fail_unless(ds != NULL, "no stats for device %u", device);
  fail_unless(gst_structure_get_uint(ds, field, &v), "no %s", field);
  gst_structure_free(s);
  return v;
}

static guint64 device_u64(GstElement *src, guint device, const gchar *field)
{
  GstStructure *s = stats_of(src);
  const GstStructure *ds = device_stats(s, device);
  guint64 v = 0;

  fail_unless(ds != NULL, "no stats for device %u", device);
  fail_unless(gst_structure_get_uint64(ds, field, &v), "no %s", field);
  gst_structure_free(s);
  return v;
}

/* Waits (bounded: a hang check, not a speed one) until device's share is
 * want; returns the share it had last. */
static guint wait_share(GstElement *src, guint device, guint want)
{
  gint64 end = g_get_monotonic_time() + (gint64)(WAIT / GST_USECOND);
  guint got;

  while ((got = share_of(src, device)) != want && g_get_monotonic_time() < end)
    g_usleep(20000);
  return got;
}

static GstElement *src_of(GstElement *pipeline, const gchar *name)
{
  GstElement *src = gst_bin_get_by_name(GST_BIN(pipeline), name);

  fail_unless(src != NULL);
  return src;
}

/* ------------------------------------------------ shares per lane */

/* Two cameras on this process's lane, four on another's: three quarters
 * of the default 32-block lane is 24 blocks, 12 for each of the two and
 * 6 for each of the four (over all six, 4 each).  When the second sender
 * goes, its devices have no lane (the least share, 24 over six); when it
 * comes back, on a new lane, they share that one again. */
GST_START_TEST(test_share_is_its_lanes)
{
  guint port = test_port();
  GString *desc = g_string_new(NULL);
  GstElement *rx, *tx, *r;
  GstStructure *s;
  guint element_share = 0;
  GPid other;

  g_string_append_printf(desc,
                         "rdmasrc name=r transport=%s address=%s port=%u "
                         "stats-interval=0",
                         transport, rdma_addr, port);
  for (guint d = 0; d < 6; d++)
    g_string_append_printf(desc, " r.src_%u ! fakesink async=false", d);
  rx = parse(desc->str);
  g_string_free(desc, TRUE);
  r = src_of(rx, "r");
  set_state(rx, GST_STATE_PLAYING);
  tx = camera_rig_new(transport, rdma_addr, port, 0, 2, 0, "");
  set_state(tx, GST_STATE_PLAYING);
  other = rig_process(port, 2, 4);

  for (guint d = 0; d < 2; d++)
    fail_unless_equals_int(wait_share(r, d, 12), 12);
  for (guint d = 2; d < 6; d++)
    fail_unless_equals_int(wait_share(r, d, 6), 6);
  /* The element-wide field: the smallest share. */
  s = stats_of(r);
  fail_unless(gst_structure_get_uint(s, "device-blocks", &element_share));
  fail_unless_equals_int(element_share, 6);
  gst_structure_free(s);

  /* The second sender is gone: its devices are nobody's. */
  child_sender_kill(other);
  for (guint d = 2; d < 6; d++)
    fail_unless_equals_int(wait_share(r, d, 24 / 6), 24 / 6);
  for (guint d = 0; d < 2; d++)
    fail_unless_equals_int(share_of(r, d), 12);

  /* It reconnects (a new lane): its devices share that one. */
  other = rig_process(port, 2, 4);
  for (guint d = 2; d < 6; d++)
    fail_unless_equals_int(wait_share(r, d, 6), 6);
  for (guint d = 0; d < 2; d++)
    fail_unless_equals_int(share_of(r, d), 12);

  child_sender_kill(other);
  stop(tx);
  gst_object_unref(r);
  stop(rx);
}

GST_END_TEST;

/* An explicit device-blocks wins over the per-lane share. */
GST_START_TEST(test_explicit_share_wins)
{
  guint port = test_port();
  gchar *desc = g_strdup_printf(
      "rdmasrc name=r transport=%s address=%s port=%u stats-interval=0 "
      "device-blocks=3 r.src_0 ! fakesink async=false r.src_1 ! fakesink "
      "async=false",
      transport, rdma_addr, port);
  GstElement *rx = parse(desc), *tx, *r;
  GPid other;

  g_free(desc);
  r = src_of(rx, "r");
  set_state(rx, GST_STATE_PLAYING);
  tx = camera_rig_new(transport, rdma_addr, port, 0, 1, 0, "");
  set_state(tx, GST_STATE_PLAYING);
  other = rig_process(port, 1, 1);
  for (guint d = 0; d < 2; d++) {
    /* Wait for the camera's frames, then its share is still 3. */
    gint64 end = g_get_monotonic_time() + (gint64)(WAIT / GST_USECOND);

    while (device_u64(r, d, "pushed") == 0 && g_get_monotonic_time() < end)
      g_usleep(20000);
    fail_unless(device_u64(r, d, "pushed") > 0, "device %u: no frame", d);
    fail_unless_equals_int(share_of(r, d), 3);
  }
  child_sender_kill(other);
  stop(tx);
  gst_object_unref(r);
  stop(rx);
}

GST_END_TEST;

/* ------------------------------------ a consumer that keeps a window */

/* An analysis that keeps each camera's last KEEP frames (a sliding
 * window, as a motion detector or a re-encoder's reference frames) and
 * takes every new one at once: it keeps up, it only holds blocks. */
#define KEEP 48

typedef struct {
  GMutex lock;
  GQueue kept[MAX_DEVICES];
  guint frames[MAX_DEVICES];
} Window;

static Window window;

static GstFlowReturn on_sample(GstAppSink *sink, gpointer data)
{
  guint d = GPOINTER_TO_UINT(data);
  GstSample *sample = gst_app_sink_pull_sample(sink);
  GstSample *oldest = NULL;

  g_mutex_lock(&window.lock);
  g_queue_push_tail(&window.kept[d], sample);
  if (g_queue_get_length(&window.kept[d]) > KEEP)
    oldest = g_queue_pop_head(&window.kept[d]);
  window.frames[d]++;
  g_mutex_unlock(&window.lock);
  if (oldest)
    gst_sample_unref(oldest);
  return GST_FLOW_OK;
}

static guint window_frames(guint d)
{
  guint n;

  g_mutex_lock(&window.lock);
  n = window.frames[d];
  g_mutex_unlock(&window.lock);
  return n;
}

/* Waits until devices 0..n-1 each had at least want frames through the
 * window, or fails saying which fell short. */
static void wait_window_frames(guint n, guint want)
{
  for (guint d = 0; d < n; d++) {
    gint64 end = g_get_monotonic_time() + (gint64)(WAIT / GST_USECOND);

    while (window_frames(d) < want && g_get_monotonic_time() < end)
      g_usleep(20000);
    fail_unless(window_frames(d) >= want, "device %u: %u frames", d,
                window_frames(d));
  }
}

static void window_clear(void)
{
  g_mutex_lock(&window.lock);
  for (guint d = 0; d < MAX_DEVICES; d++) {
    g_queue_clear_full(&window.kept[d], (GDestroyNotify)gst_sample_unref);
    window.frames[d] = 0;
  }
  g_mutex_unlock(&window.lock);
}

/* rdmasrc r (extra props) with a windowed appsink on src_<d>, d < n. */
static GstElement *windowed_receiver(guint port, guint n, const gchar *props)
{
  GString *desc = g_string_new(NULL);
  GstElement *rx;

  window_clear();
  g_string_append_printf(desc,
                         "rdmasrc name=r transport=%s address=%s port=%u "
                         "stats-interval=0 %s",
                         transport, rdma_addr, port, props);
  for (guint d = 0; d < n; d++)
    g_string_append_printf(desc,
                           " r.src_%u ! appsink name=a%u sync=false "
                           "async=false enable-last-sample=false",
                           d, d);
  rx = parse(desc->str);
  g_string_free(desc, TRUE);
  for (guint d = 0; d < n; d++) {
    gchar name[8];
    GstElement *sink;
    GstAppSinkCallbacks cb = {.new_sample = on_sample};

    g_snprintf(name, sizeof name, "a%u", d);
    sink = src_of(rx, name);
    gst_app_sink_set_callbacks(GST_APP_SINK(sink), &cb, GUINT_TO_POINTER(d),
                               NULL);
    gst_object_unref(sink);
  }
  return rx;
}

/* Two lanes of two cameras each, blocks=256: 192 usable blocks a lane, 96
 * for each camera of its lane; the window holds KEEP = 48 frames a camera
 * (one block each), the frame coming makes 49.  Over the element's four
 * devices (48 each) frames past the window were copied out of the lane;
 * per lane none is.  All four hold 196 blocks, well under max-held's
 * bound (255): a pad task late by over half a second could still take
 * the element over it (copies), so the lane is that large. */
GST_START_TEST(test_windowed_consumer_keeps_zero_copy)
{
  guint port = test_port();
  GstElement *rx = windowed_receiver(port, 4, "blocks=256 block-size=16384"),
             *tx, *r;
  GPid other;

  r = src_of(rx, "r");
  set_state(rx, GST_STATE_PLAYING);
  tx = camera_rig_new(transport, rdma_addr, port, 0, 2, 0, "");
  set_state(tx, GST_STATE_PLAYING);
  other = rig_process(port, 2, 2);
  /* Well past the window (at 25 fps, 3.5 s). */
  wait_window_frames(4, KEEP + 40);
  for (guint d = 0; d < 4; d++) {
    fail_unless_equals_int(device_u64(r, d, "copies"), 0);
    fail_unless_equals_int(device_u64(r, d, "drops-leaky"), 0);
    fail_unless_equals_int(share_of(r, d), 96);
    /* Not a vacuous pass: the window really holds its frames' blocks. */
    fail_unless(device_uint(r, d, "held-downstream") >= KEEP,
                "device %u holds %u", d, device_uint(r, d, "held-downstream"));
  }
  child_sender_kill(other);
  stop(tx);
  gst_object_unref(r);
  stop(rx);
  window_clear();
}

GST_END_TEST;

/* max-held bounds each lane's blocks out, not the element's: two senders
 * of one camera each, blocks=128 max-held=90, each consumer windowing
 * KEEP = 48 frames (49 blocks out with the one coming).  Per lane that is
 * under the bound: nothing copied.  Over both lanes (98 > 90) every frame
 * past the first sender's window was copied, a sender starved of
 * zero-copy by another's consumer.  The bound leaves a lane 41 blocks for
 * frames queued behind a late pad task (1.6 s at 25 fps): with 60, under
 * ASan on a host running two VMs beside four suites, a late task took a
 * lane over it (16 copies, CI at 243fdca); its share (96) leaves 47. */
GST_START_TEST(test_max_held_is_per_lane)
{
  guint port = test_port();
  GstElement *rx = windowed_receiver(port, 2,
                                     "blocks=128 max-held=90 "
                                     "block-size=16384"),
             *tx, *r;
  GstStructure *s;
  GPid other;

  r = src_of(rx, "r");
  set_state(rx, GST_STATE_PLAYING);
  tx = camera_rig_new(transport, rdma_addr, port, 0, 1, 0, "");
  set_state(tx, GST_STATE_PLAYING);
  other = rig_process(port, 1, 1);
  wait_window_frames(2, KEEP + 20);
  s = stats_of(r);
  fail_unless_equals_int(
      g_value_get_uint64(gst_structure_get_value(s, "copies")), 0);
  gst_structure_free(s);
  for (guint d = 0; d < 2; d++) {
    fail_unless_equals_int(device_u64(r, d, "drops-leaky"), 0);
    /* Not a vacuous pass: both lanes together are over max-held. */
    fail_unless(device_uint(r, d, "held-downstream") >= KEEP,
                "device %u holds %u", d, device_uint(r, d, "held-downstream"));
  }
  child_sender_kill(other);
  stop(tx);
  gst_object_unref(r);
  stop(rx);
  window_clear();
}

GST_END_TEST;

/* ------------------------------------------- the shared receiver */

/* Three rdmasrcs on one port, one camera each (device-id): devices 0 and
 * 1 on this process's lane, 2 on another's.  The share counts the devices
 * of every rdmasrc on the lane, and those of no other lane: 12 for 0 and
 * 1, the whole 24 for 2 (over all three, 8 each). */
GST_START_TEST(test_shared_receiver_shares_per_lane)
{
  guint port = test_port();
  GstElement *rx[3], *src[3], *tx;
  GPid other;

  for (guint d = 0; d < 3; d++) {
    gchar *desc = g_strdup_printf(
        "rdmasrc name=r transport=%s address=%s port=%u device-id=%u "
        "stats-interval=0 ! fakesink async=false",
        transport, rdma_addr, port, d);

    rx[d] = parse(desc);
    g_free(desc);
    src[d] = src_of(rx[d], "r");
    set_state(rx[d], GST_STATE_PLAYING);
  }
  tx = camera_rig_new(transport, rdma_addr, port, 0, 2, 0, "");
  set_state(tx, GST_STATE_PLAYING);
  other = rig_process(port, 2, 1);
  fail_unless_equals_int(wait_share(src[0], 0, 12), 12);
  fail_unless_equals_int(wait_share(src[1], 1, 12), 12);
  fail_unless_equals_int(wait_share(src[2], 2, 24), 24);

  /* One rdmasrc of lane 0 stops: the other has the lane to itself. */
  stop(rx[1]);
  fail_unless_equals_int(wait_share(src[0], 0, 24), 24);
  fail_unless_equals_int(share_of(src[2], 2), 24);

  child_sender_kill(other);
  stop(tx);
  for (guint d = 0; d < 3; d++) {
    gst_object_unref(src[d]);
    if (d != 1) /* stopped (and unreferenced) above */
      stop(rx[d]);
  }
}

GST_END_TEST;

static Suite *rdmasrc_lanes_suite(void)
{
  Suite *s = suite_create("rdmasrc-lanes");
  TCase *tc = tcase_create("general");

  test_transport_from_env(&transport, &rdma_addr);
  tcase_set_timeout(tc, 120);
  suite_add_tcase(s, tc);
  tcase_add_test(tc, test_share_is_its_lanes);
  tcase_add_test(tc, test_explicit_share_wins);
  tcase_add_test(tc, test_windowed_consumer_keeps_zero_copy);
  tcase_add_test(tc, test_max_held_is_per_lane);
  tcase_add_test(tc, test_shared_receiver_shares_per_lane);
  return s;
}

GST_CHECK_MAIN(rdmasrc_lanes);
