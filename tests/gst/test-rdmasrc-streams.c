/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-rdmasrc-streams.c - every camera its own stream: rdmasrc's pads as a
 * user links them (sinks straight on the pads, no queues), a slow and a
 * stuck consumer beside fast ones, and state cycles while senders stream.
 *
 * Senders are live videotestsrc cameras into rdmasink (one connection for
 * all, as on a rig) in the same process; the transport is SBR_TEST_TRANSPORT
 * (shm on the host, verbs in the Soft-RoCE VM).  Every fast pad is checked
 * for every frame, in order: consecutive packet numbers (OFFSET).  DISCONT
 * flags are counted apart: rdmasrc also marks a frame whose timestamps it
 * re-based (Counts.discont), which loses nothing.
 */
#include <gst/app/gstappsink.h>
#include <gst/check/gstcheck.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "child-sender.h"
#include "pipeline-check.h"

#define MAX_PADS 12
#define WAIT (15 * GST_SECOND)

static const gchar *transport; /* SBR_TEST_TRANSPORT */
static const gchar *rdma_addr; /* SBR_RDMA_ADDR */
static guint repeat = 20;      /* SBR_TEST_REPEAT */

static guint test_port(void)
{
  /* 35000..49999: clear of test-rdma-elements' 50000.. range. */
  static guint seq;
  return 35000 + (guint)(getpid() % 1500) * 10 + (seq++ % 10);
}

/* ----------------------------------------------------------- counting */

typedef struct {
  GMutex lock;
  guint frames[MAX_PADS];
  guint64 last_offset[MAX_PADS];
  guint out_of_order[MAX_PADS]; /* gaps and reorders of packet numbers */
  guint backwards[MAX_PADS];    /* packet numbers that went back: frames of
                                   two senders mixed (gaps and DISCONT are
                                   not: a starved sender makes those) */
  gsize first_size[MAX_PADS];
  guint other_size[MAX_PADS]; /* frames not the size of the first one */
  /* DISCONT frames, counted apart: besides after a drop, rdmasrc marks
   * one where it re-based the sender's timestamps, which it does when the
   * sender's frames fell more than 500 ms off its estimate of the
   * sender's clock for 200 ms, as a sender starved of CPU's may (the VM's
   * emulated CPU, or this host running two VMs beside four suites: one
   * in a whole run, CI at 80ad8b1, with the capture-clock test then). */
  guint discont[MAX_PADS];
} Counts;

static Counts counts;

static void on_handoff(GstElement *sink, GstBuffer *buf, GstPad *pad,
                       gpointer user_data)
{
  guint d = GPOINTER_TO_UINT(user_data);

  (void)sink;
  (void)pad;
  g_mutex_lock(&counts.lock);
  if (counts.frames[d] > 0) {
    guint64 step = (GST_BUFFER_OFFSET(buf) - counts.last_offset[d]) & 0xffff;

    if (step != 1)
      counts.out_of_order[d]++;
    if (step == 0 || step > 0x8000)
      counts.backwards[d]++;
    if (gst_buffer_get_size(buf) != counts.first_size[d])
      counts.other_size[d]++;
  } else {
    counts.first_size[d] = gst_buffer_get_size(buf);
  }
  if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_DISCONT))
    counts.discont[d]++;
  counts.last_offset[d] = GST_BUFFER_OFFSET(buf);
  counts.frames[d]++;
  g_mutex_unlock(&counts.lock);
}

static guint frames_of(guint d)
{
  guint n;

  g_mutex_lock(&counts.lock);
  n = counts.frames[d];
  g_mutex_unlock(&counts.lock);
  return n;
}

static void counts_reset(void)
{
  g_mutex_lock(&counts.lock);
  memset(counts.frames, 0, sizeof counts.frames);
  memset(counts.out_of_order, 0, sizeof counts.out_of_order);
  memset(counts.backwards, 0, sizeof counts.backwards);
  memset(counts.other_size, 0, sizeof counts.other_size);
  memset(counts.discont, 0, sizeof counts.discont);
  g_mutex_unlock(&counts.lock);
}

/* ---------------------------------------------------------- pipelines */

/* Counts what fakesink "s<d>" gets as frames of device d. */
static void count_sinks(GstElement *pipeline, guint n)
{
  for (guint d = 0; d < n; d++) {
    gchar *name = g_strdup_printf("s%u", d);
    GstElement *sink = gst_bin_get_by_name(GST_BIN(pipeline), name);

    if (sink) {
      g_signal_connect(sink, "handoff", G_CALLBACK(on_handoff),
                       GUINT_TO_POINTER(d));
      gst_object_unref(sink);
    }
    g_free(name);
  }
}

/* rdmasrc "r" with a counting fakesink "s<d>" straight on src_<d> for
 * d < n (no queues), after extra_props; counts reset. */
static GstElement *receiver_new(guint port, guint n, const gchar *extra_props)
{
  GString *desc = g_string_new(NULL);
  GstElement *rx;

  counts_reset();
  g_string_append_printf(desc,
                         "rdmasrc name=r transport=%s address=%s port=%u "
                         "stats-interval=0 %s",
                         transport, rdma_addr, port, extra_props);
  for (guint d = 0; d < n; d++)
    g_string_append_printf(
        desc, " r.src_%u ! fakesink name=s%u signal-handoffs=true", d, d);
  rx = parse(desc->str);
  g_string_free(desc, TRUE);
  count_sinks(rx, n);
  return rx;
}

/* n live cameras, devices 0..n-1, into rdmasinks sharing one connection
 * (frames of them, or endless when 0). */
static GstElement *cameras_new(guint port, guint n, guint frames,
                               const gchar *sink_props)
{
  return camera_rig_new(transport, rdma_addr, port, 0, n, frames, sink_props);
}

static gboolean wait_frames(guint d, guint count, GstClockTime timeout)
{
  gint64 end = g_get_monotonic_time() + (gint64)(timeout / GST_USECOND);

  while (frames_of(d) < count && g_get_monotonic_time() < end)
    g_usleep(10000);
  return frames_of(d) >= count;
}

static GstStructure *rdmasrc_stats(GstElement *pipeline)
{
  GstElement *r = gst_bin_get_by_name(GST_BIN(pipeline), "r");
  GstStructure *s = NULL;

  fail_unless(r != NULL);
  g_object_get(r, "stats", &s, NULL);
  gst_object_unref(r);
  fail_unless(s != NULL);
  return s;
}

/* A device's "rdmasrc-device-stats": the field "device-<N>". */
static const GstStructure *device_stats(const GstStructure *s, guint device)
{
  gchar name[16];
  const GValue *v;

  g_snprintf(name, sizeof name, "device-%u", device);
  v = gst_structure_get_value(s, name);
  fail_unless(v && G_VALUE_HOLDS(v, GST_TYPE_STRUCTURE),
              "no stats for device %u", device);
  return gst_value_get_structure(v);
}

static guint64 u64(const GstStructure *s, const gchar *field)
{
  guint64 v = 0;

  fail_unless(gst_structure_get_uint64(s, field, &v), "no %s", field);
  return v;
}

static guint uint_field(const GstStructure *s, const gchar *field)
{
  guint v = 0;

  fail_unless(gst_structure_get_uint(s, field, &v), "no %s", field);
  return v;
}

static gsize rss_kib(void)
{
  gsize pages = 0, rss = 0;
  FILE *f = fopen("/proc/self/statm", "r");

  fail_unless(f != NULL);
  fail_unless(fscanf(f, "%zu %zu", &pages, &rss) == 2);
  fclose(f);
  return rss * (gsize)sysconf(_SC_PAGESIZE) / 1024;
}

/* Waits until every one of count frames of device d was delivered or
 * dropped and counted. */
static gboolean wait_accounted(GstElement *rx, guint d, guint count,
                               GstClockTime timeout)
{
  gint64 end = g_get_monotonic_time() + (gint64)(timeout / GST_USECOND);

  for (;;) {
    GstStructure *s = rdmasrc_stats(rx);
    guint64 drops = u64(device_stats(s, d), "drops-leaky");

    gst_structure_free(s);
    if (frames_of(d) + drops >= count)
      return TRUE;
    if (g_get_monotonic_time() >= end)
      return FALSE;
    g_usleep(20000);
  }
}

/* ------------------------------------------- sinks straight on the pads */

/* The Soft-RoCE VM (verbs suite) runs on an emulated CPU. */
static gboolean emulated_cpu(void)
{
  return g_strcmp0(transport, "verbs") == 0;
}

#define RUN_FRAMES 10

/* A lane of 128 small blocks (the cameras' frames are 3 KiB): 8 blocks a
 * device for twelve, not the default 2.  A device's share is how long its
 * pad's thread may be starved of CPU before the live policy drops; 2
 * frames (80 ms) is too little on a shared 2-core host running 24 live
 * threads beside other work, where a fast pad was seen to lose 7 of 10
 * and 12 of 75 frames.  What head-of-line blocking costs (most frames) is
 * as visible with 8 as with 2. */
#define LOADED_HOST_LANE "blocks=128 block-size=16384"

/* Where device d's frames went that its sink didn't get, for a failure
 * message: every counter of rdmasrc (the pad's drops, the library's losses
 * on the way) and of its rdmasink (drops before a frame had a number, which
 * the receiver can't see as a gap).  Freed by the caller. */
static gchar *where_frames_went(GstElement *rx, GstElement *tx, guint d)
{
  static const gchar *const src_fields[] = {"frames",
                                            "drops",
                                            "gaps",
                                            "rejected",
                                            "refused",
                                            "drops-leaky",
                                            "drops-not-playing",
                                            "drops-ended",
                                            "copies",
                                            "pushed"};
  static const gchar *const sink_fields[] = {
      "frames",        "drops",           "paused-drops",
      "refused-drops", "reconnect-drops", "unmappable-drops"};
  GString *out = g_string_new(NULL);
  GstStructure *s = rdmasrc_stats(rx);
  const GstStructure *ds = device_stats(s, d);
  gchar name[16];
  GstElement *sink;
  guint64 v;

  g_string_append_printf(out, "device %u: delivered %u; rdmasrc", d,
                         frames_of(d));
  for (guint k = 0; k < G_N_ELEMENTS(src_fields); k++)
    if (gst_structure_get_uint64(ds, src_fields[k], &v))
      g_string_append_printf(out, " %s=%" G_GUINT64_FORMAT, src_fields[k], v);
  if (gst_structure_get_uint64(s, "no-caps-drops", &v))
    g_string_append_printf(out, " no-caps-drops=%" G_GUINT64_FORMAT, v);
  gst_structure_free(s);
  g_snprintf(name, sizeof name, "tx%u", d);
  sink = gst_bin_get_by_name(GST_BIN(tx), name);
  if (sink) {
    GstStructure *ts = NULL;

    g_object_get(sink, "stats", &ts, NULL);
    g_string_append(out, "; rdmasink");
    for (guint k = 0; ts && k < G_N_ELEMENTS(sink_fields); k++)
      if (gst_structure_get_uint64(ts, sink_fields[k], &v))
        g_string_append_printf(out, " %s=%" G_GUINT64_FORMAT, sink_fields[k],
                               v);
    if (ts)
      gst_structure_free(ts);
    gst_object_unref(sink);
  }
  return g_string_free(out, FALSE);
}

/* The launch line: rdmasrc r.src_0 ! fakesink r.src_1 ! fakesink
 * ..., no queues, rdmasrc's props.  Every sink must preroll, get every
 * frame and EOS. */
static void sinks_without_queues(guint n, guint runs, const gchar *props)
{
  for (guint run = 0; run < runs; run++) {
    guint port = test_port();
    GstElement *rx, *tx;
    GstStructure *s;

    rx = receiver_new(port, n, props);
    set_state(rx, GST_STATE_PLAYING);
    tx = cameras_new(port, n, RUN_FRAMES, "");
    set_state(tx, GST_STATE_PLAYING);

    /* The pipeline posts EOS once every sink had it. */
    expect_eos(rx, WAIT);
    s = rdmasrc_stats(rx);
    for (guint d = 0; d < n; d++) {
      guint64 dropped = u64(device_stats(s, d), "drops-leaky");

      /* Every frame is delivered or dropped and counted.  A live
       * pipeline plays only once every sink prerolled, so the first
       * camera's sink may wait for the twelfth camera's first frame, and
       * a pad's thread may be starved of CPU (the VM's emulated CPU; 24
       * live threads on a shared 2-core host): then the live policy
       * drops, counts, and keeps the rest in order.  How much is lost
       * under load is benchmark B8's business; half the frames bound it
       * here, far below what head-of-line blocking lost. */
      fail_unless(dropped <= (emulated_cpu() ? RUN_FRAMES : RUN_FRAMES / 2),
                  "device %u: %" G_GUINT64_FORMAT " dropped", d, dropped);
      if (frames_of(d) + dropped != RUN_FRAMES) {
        /* Seen once under load (one frame short): say where it went. */
        gchar *where = where_frames_went(rx, tx, d);

        fail("%u frames sent, %u + %" G_GUINT64_FORMAT " dropped: %s",
             RUN_FRAMES, frames_of(d), dropped, where);
        g_free(where);
      }
      if (dropped == 0)
        fail_unless_equals_int(counts.out_of_order[d], 0);
    }
    gst_structure_free(s);
    stop(tx);
    stop(rx);
  }
}

GST_START_TEST(test_sinks_without_queues_one_pad)
{
  sinks_without_queues(1, repeat, "");
}

GST_END_TEST;

GST_START_TEST(test_sinks_without_queues_three_pads)
{
  sinks_without_queues(3, repeat, "");
}

GST_END_TEST;

GST_START_TEST(test_sinks_without_queues_twelve_pads)
{
  /* The default lane gives each of twelve 2 blocks: see LOADED_HOST_LANE. */
  sinks_without_queues(12, repeat, LOADED_HOST_LANE);
}

GST_END_TEST;

/* ------------------------------------------------- a slow consumer */

#define SLOW_FRAMES 75 /* 3 s at 25 fps */

/* Twelve cameras; device 0's consumer takes 200 ms a frame (5 fps), the
 * others are fast.  The others get every frame, in order; the slow pad's
 * frames beyond its share are dropped (drop-oldest) and counted, and its
 * sender is not slowed.
 * The fast pads are over-budget=pause and their cameras wait for blocks
 * as long as rdmasink allows: a fast pad whose thread a loaded host
 * starves pauses its own camera rather than losing frames (ci1, session
 * 17: 8 dropped beside the other suites), so the verdict is the code's,
 * not the CPU's.  Were the slow pad to block the others (head-of-line),
 * they would pause for good and never get their frames: still caught. */
GST_START_TEST(test_slow_consumer_does_not_slow_the_others)
{
  guint port = test_port();
  GString *desc = g_string_new(NULL);
  GstElement *rx, *tx;
  GstStructure *s;
  const GstStructure *slow;
  guint budget;

  counts_reset();
  g_string_append_printf(desc,
                         "rdmasrc name=r transport=%s address=%s port=%u "
                         "stats-interval=0 over-budget=pause " LOADED_HOST_LANE
                         " src_0::over-budget=drop-oldest r.src_0 ! identity "
                         "sleep-time=200000 ! fakesink name=s0 "
                         "signal-handoffs=true",
                         transport, rdma_addr, port);
  for (guint d = 1; d < MAX_PADS; d++)
    g_string_append_printf(
        desc, " r.src_%u ! fakesink name=s%u signal-handoffs=true", d, d);
  rx = parse(desc->str);
  g_string_free(desc, TRUE);
  count_sinks(rx, MAX_PADS);
  set_state(rx, GST_STATE_PLAYING);
  tx = cameras_new(port, MAX_PADS, SLOW_FRAMES, "wait-timeout=60000");
  set_state(tx, GST_STATE_PLAYING);

  for (guint d = 1; d < MAX_PADS; d++)
    if (!wait_accounted(rx, d, SLOW_FRAMES, WAIT)) {
      s = rdmasrc_stats(rx);
      fail("device %u: %u of %u: %s", d, frames_of(d), SLOW_FRAMES,
           gst_structure_to_string(device_stats(s, d)));
    }
  /* The senders were never made to drop: every frame of every camera
   * left. */
  for (guint d = 0; d < MAX_PADS; d++) {
    GstElement *sink;
    GstStructure *ts = NULL;
    gchar *name = g_strdup_printf("tx%u", d);

    sink = gst_bin_get_by_name(GST_BIN(tx), name);
    g_free(name);
    g_object_get(sink, "stats", &ts, NULL);
    fail_unless_equals_int(u64(ts, "drops"), 0);
    gst_structure_free(ts);
    gst_object_unref(sink);
  }
  s = rdmasrc_stats(rx);
  slow = device_stats(s, 0);
  budget = uint_field(s, "device-blocks");
  /* The slow pad: about a third of its frames got through by now, the
   * rest beyond its share was dropped and counted, never queued past it. */
  fail_unless_equals_int(budget, 8); /* 96 usable blocks, 12 devices */
  fail_unless(frames_of(0) < SLOW_FRAMES);
  fail_unless(u64(slow, "drops-leaky") > 0, "%" GST_PTR_FORMAT, slow);
  fail_unless(uint_field(slow, "queued") <= budget);
  fail_unless(uint_field(slow, "lane-blocks") <= budget);
  for (guint d = 1; d < MAX_PADS; d++) {
    const GstStructure *ds = device_stats(s, d);

    /* Every frame, in order, none dropped. */
    fail_unless_equals_int(u64(ds, "drops-leaky"), 0);
    fail_unless_equals_int(counts.out_of_order[d], 0);
    fail_unless_equals_int(frames_of(d), SLOW_FRAMES);
  }
  gst_structure_free(s);
  /* Every sink gets EOS, the slow one after its last queued frame. */
  expect_eos(rx, WAIT);
  stop(tx);
  stop(rx);
}

GST_END_TEST;

/* ------------------------------------------------- a stuck consumer */

/* Device 0's appsink is not pulled for 5 s (its push blocks); the other
 * cameras are unaffected, and device 0 resumes when pulled again. */
GST_START_TEST(test_stuck_consumer_then_resumes)
{
  const guint n = 4;
  guint port = test_port();
  GString *desc = g_string_new(NULL);
  GstElement *rx, *tx, *stuck;
  guint before[MAX_PADS];
  GstSample *sample;
  GstStructure *s;
  guint got;

  counts_reset();
  g_string_append_printf(desc,
                         "rdmasrc name=r transport=%s address=%s port=%u "
                         "stats-interval=0 r.src_0 ! appsink name=stuck "
                         "sync=false max-buffers=1",
                         transport, rdma_addr, port);
  for (guint d = 1; d < n; d++)
    g_string_append_printf(
        desc, " r.src_%u ! fakesink name=s%u signal-handoffs=true", d, d);
  rx = parse(desc->str);
  g_string_free(desc, TRUE);
  count_sinks(rx, n);
  stuck = gst_bin_get_by_name(GST_BIN(rx), "stuck");
  set_state(rx, GST_STATE_PLAYING);
  tx = cameras_new(port, n, 0, "");
  set_state(tx, GST_STATE_PLAYING);

  /* Nobody pulls "stuck": its push blocks until each other camera has
   * had 100 more frames (4 s of its 25 fps; a hang bound of 3 x WAIT,
   * not a rate: a busy host takes longer, a stuck pad holding up the
   * others never gets there). */
  fail_unless(wait_frames(1, 5, WAIT));
  for (guint d = 1; d < n; d++)
    before[d] = frames_of(d);
  for (guint d = 1; d < n; d++)
    fail_unless(wait_frames(d, before[d] + 100, 3 * WAIT),
                "device %u: %u frames while device 0 was stuck", d,
                frames_of(d) - before[d]);
  s = rdmasrc_stats(rx);
  /* The stuck device holds at most its share of the lane (what the
   * blocked push and the appsink keep), the rest was copied or dropped. */
  fail_unless(uint_field(device_stats(s, 0), "lane-blocks") <=
                  uint_field(s, "device-blocks"),
              "%" GST_PTR_FORMAT, s);
  fail_unless(u64(device_stats(s, 0), "drops-leaky") > 0);
  gst_structure_free(s);

  /* Pulled again: device 0 resumes. */
  got = 0;
  for (guint i = 0; i < 20; i++) {
    sample = gst_app_sink_try_pull_sample(GST_APP_SINK(stuck), 2 * GST_SECOND);
    if (sample) {
      got++;
      gst_sample_unref(sample);
    }
  }
  fail_unless_equals_int(got, 20);
  /* The others in order, but for frames the live policy dropped when
   * their own thread was starved (counted; the VM's emulated CPU). */
  s = rdmasrc_stats(rx);
  for (guint d = 1; d < n; d++)
    fail_unless(counts.out_of_order[d] <=
                    u64(device_stats(s, d), "drops-leaky"),
                "device %u: %u out of order", d, counts.out_of_order[d]);
  gst_structure_free(s);
  gst_object_unref(stuck);
  stop(tx);
  stop(rx);
}

GST_END_TEST;

/* over-budget=pause on a stuck camera's pad: its sender is told to stop
 * (the pause flag it reads with its status READ) and drops by its own
 * backpressure setting; the other camera flows in order; pulled again, the
 * camera's share empties, the flag clears and it resumes. */
GST_START_TEST(test_pause_policy_stops_the_stuck_sender)
{
  guint port = test_port();
  gchar *desc;
  GstElement *rx, *tx, *stuck, *tx0;
  GstStructure *s, *ts = NULL;
  const GstStructure *ds;
  guint got = 0, before;
  gboolean paused = TRUE;

  counts_reset();
  desc = g_strdup_printf("rdmasrc name=r transport=%s address=%s port=%u "
                         "stats-interval=0 src_0::over-budget=pause "
                         "r.src_0 ! appsink name=stuck sync=false "
                         "max-buffers=1 r.src_1 ! fakesink name=s1 "
                         "signal-handoffs=true",
                         transport, rdma_addr, port);
  rx = parse(desc);
  g_free(desc);
  count_sinks(rx, 2);
  stuck = gst_bin_get_by_name(GST_BIN(rx), "stuck");
  set_state(rx, GST_STATE_PLAYING);
  tx = cameras_new(port, 2, 0, "backpressure=drop");
  set_state(tx, GST_STATE_PLAYING);

  fail_unless(wait_frames(1, 5, WAIT));
  before = frames_of(1);
  /* Camera 1 runs on (50 frames, 2 s of its 25 fps; a hang bound, not a
   * rate), in order, but for frames its pad dropped when its own thread
   * was starved (counted: ci7 saw two, with the sanitizer suites and two
   * VMs beside it). */
  fail_unless(wait_frames(1, before + 50, 3 * WAIT), "%u",
              frames_of(1) - before);
  s = rdmasrc_stats(rx);
  fail_unless(counts.out_of_order[1] <= u64(device_stats(s, 1), "drops-leaky") +
                                            u64(device_stats(s, 1), "drops"),
              "device 1: %u out of order, %" GST_PTR_FORMAT,
              counts.out_of_order[1], device_stats(s, 1));
  gst_structure_free(s);
  /* Until the sender has dropped camera 0's frames for the flag (it sees
   * it with a status READ, whenever its host runs it). */
  tx0 = gst_bin_get_by_name(GST_BIN(tx), "tx0");
  for (gint64 end = g_get_monotonic_time() + 3 * WAIT / GST_USECOND;;) {
    g_object_get(tx0, "stats", &ts, NULL);
    if (u64(ts, "paused-drops") > 0 || g_get_monotonic_time() >= end)
      break;
    gst_structure_free(ts);
    g_usleep(10000);
  }
  fail_unless(u64(ts, "paused-drops") > 0);
  gst_structure_free(ts);
  s = rdmasrc_stats(rx);
  ds = device_stats(s, 0);
  fail_unless(gst_structure_get_boolean(ds, "paused", &paused));
  fail_unless(paused, "device 0 not paused");
  fail_unless(u64(ds, "pauses") >= 1);
  fail_unless(u64(ds, "paused-time") > 0);
  fail_unless_equals_int(u64(device_stats(s, 1), "pauses"), 0);
  gst_structure_free(s);

  /* Pulled again: the share empties, the flag clears, frames come. */
  for (guint i = 0; i < 40 && got < 35; i++) {
    GstSample *sample =
        gst_app_sink_try_pull_sample(GST_APP_SINK(stuck), 2 * GST_SECOND);
    if (sample) {
      got++;
      gst_sample_unref(sample);
    }
  }
  fail_unless(got >= 35, "only %u frames after the pause", got);
  s = rdmasrc_stats(rx);
  fail_unless(gst_structure_get_boolean(device_stats(s, 0), "paused", &paused));
  fail_unless(!paused, "device 0 still paused");
  gst_structure_free(s);
  gst_object_unref(tx0);
  gst_object_unref(stuck);
  stop(tx);
  stop(rx);
}

GST_END_TEST;

/* ------------------------------------------------- timing across pauses */

/* Capture-to-render latency of device 0's frames at a sync=true sink. */
typedef struct {
  GMutex lock;
  gint64 last_latency_us;
  guint rendered;
} Latency;

static Latency latency;

static void on_render(GstElement *sink, GstBuffer *buf, GstPad *pad,
                      gpointer user_data)
{
  GstCaps *unix_caps = gst_caps_new_empty_simple("timestamp/x-unix");
  GstReferenceTimestampMeta *meta =
      gst_buffer_get_reference_timestamp_meta(buf, unix_caps);

  (void)sink;
  (void)pad;
  (void)user_data;
  gst_caps_unref(unix_caps);
  g_mutex_lock(&latency.lock);
  if (meta)
    latency.last_latency_us =
        (g_get_real_time() * 1000 - (gint64)meta->timestamp) / 1000;
  latency.rendered++;
  g_mutex_unlock(&latency.lock);
}

static guint64 sink_dropped(GstElement *sink)
{
  GstStructure *s = NULL;
  guint64 dropped = 0;

  g_object_get(sink, "stats", &s, NULL);
  fail_unless(s && gst_structure_get_uint64(s, "dropped", &dropped));
  gst_structure_free(s);
  return dropped;
}

/* Seconds after a pause in which rendering must get back on time. */
#define ON_TIME_WITHIN 5

/* Rendering after a pause is back to its level: within ON_TIME_WITHIN
 * seconds comes a whole second with frames coming (15 of 25), none late
 * but one, and capture-to-render latency near where it was.  A pause
 * that leaked into the timestamps spoils every second after it (+2 s of
 * latency, or nearly every frame dropped as late); a thread of this
 * process starved of CPU on a loaded shared host spoils a second now and
 * then (2 frames late in a second was seen), so the first good second
 * counts, not the first second. */
static void expect_on_time(GstElement *sink, gint64 before_us,
                           const gchar *what)
{
  guint64 dropped0, dropped = 0;
  guint rendered0, rendered = 0;
  gint64 now_us = 0;

  g_usleep(G_USEC_PER_SEC); /* the pause's own aftermath */
  for (guint second = 0; second < ON_TIME_WITHIN; second++) {
    dropped0 = sink_dropped(sink);
    g_mutex_lock(&latency.lock);
    rendered0 = latency.rendered;
    g_mutex_unlock(&latency.lock);
    g_usleep(G_USEC_PER_SEC);
    g_mutex_lock(&latency.lock);
    now_us = latency.last_latency_us;
    rendered = latency.rendered - rendered0;
    g_mutex_unlock(&latency.lock);
    dropped = sink_dropped(sink) - dropped0;
    /* A pause that leaked into the timestamps adds its 2 s. */
    if (rendered >= 15 && dropped <= 1 && now_us < before_us + 500000)
      return;
    GST_INFO("after %s, second %u: %u rendered, %" G_GUINT64_FORMAT
             " dropped as late, latency %" G_GINT64_FORMAT " us",
             what, second, rendered, dropped, now_us);
  }
  fail("after %s, no second of %u on time; the last: %u rendered, "
       "%" G_GUINT64_FORMAT " dropped as late, latency %" G_GINT64_FORMAT
       " us, before %" G_GINT64_FORMAT " us",
       what, ON_TIME_WITHIN, rendered, dropped, now_us, before_us);
}

/* rdmasrc ! fakesink sync=true max-lateness=20 ms, one live camera: after
 * the receiver's pipeline and then the sender's is PAUSED for 2 s, frames
 * render on time again (the issue: +2 s latency for good, or 72 of 75
 * frames dropped as late). */
GST_START_TEST(test_timing_survives_pauses_of_either_side)
{
  guint port = test_port();
  gchar *desc;
  GstElement *rx, *tx, *sink;
  gint64 before_us;

  desc = g_strdup_printf("rdmasrc name=r transport=%s address=%s port=%u "
                         "stats-interval=0 r.src_0 ! fakesink name=s0 "
                         "sync=true max-lateness=20000000 qos=true "
                         "signal-handoffs=true",
                         transport, rdma_addr, port);
  rx = parse(desc);
  g_free(desc);
  sink = gst_bin_get_by_name(GST_BIN(rx), "s0");
  g_signal_connect(sink, "handoff", G_CALLBACK(on_render), NULL);
  set_state(rx, GST_STATE_PLAYING);
  tx = cameras_new(port, 1, 0, "");
  set_state(tx, GST_STATE_PLAYING);

  for (gint i = 0; i < 200; i++) {
    g_mutex_lock(&latency.lock);
    before_us = latency.rendered >= 25 ? latency.last_latency_us : -1;
    g_mutex_unlock(&latency.lock);
    if (before_us >= 0)
      break;
    g_usleep(50000);
  }
  fail_unless(before_us >= 0, "no frames rendered");

  change_state(rx, GST_STATE_PAUSED);
  g_usleep(2 * G_USEC_PER_SEC);
  set_state(rx, GST_STATE_PLAYING);
  expect_on_time(sink, before_us, "the receiver's pause");

  change_state(tx, GST_STATE_PAUSED);
  g_usleep(2 * G_USEC_PER_SEC);
  set_state(tx, GST_STATE_PLAYING);
  expect_on_time(sink, before_us, "the sender's pause");

  gst_object_unref(sink);
  stop(tx);
  stop(rx);
}

GST_END_TEST;

/* ------------------------------------------------- a device's life */

/* A camera in another process (a second sender, child-sender.h), width
 * wide. */
static GPid camera_process(guint port, guint device, guint width)
{
  return child_sender_spawn(transport, rdma_addr, port, device, 1, width);
}

/* The first message from r of the types whose structure is named name
 * (NULL: any), within timeout. */
static GstMessage *wait_named(GstElement *pipeline, GstMessageType types,
                              const gchar *name, GstClockTime timeout)
{
  GstBus *bus = gst_element_get_bus(pipeline);
  gint64 end = g_get_monotonic_time() + (gint64)(timeout / GST_USECOND);
  GstMessage *msg = NULL;

  while (g_get_monotonic_time() < end) {
    msg = gst_bus_timed_pop_filtered(bus, 100 * GST_MSECOND, types);
    if (!msg)
      continue;
    if (!name || (gst_message_get_structure(msg) &&
                  gst_structure_has_name(gst_message_get_structure(msg), name)))
      break;
    gst_message_unref(msg);
    msg = NULL;
  }
  gst_object_unref(bus);
  return msg;
}

static gint pad_width(GstElement *pipeline, const gchar *pad_name)
{
  GstElement *r = gst_bin_get_by_name(GST_BIN(pipeline), "r");
  GstPad *pad = gst_element_get_static_pad(r, pad_name);
  GstCaps *caps = pad ? gst_pad_get_current_caps(pad) : NULL;
  gint width = -1;

  if (caps)
    gst_structure_get_int(gst_caps_get_structure(caps, 0), "width", &width);
  if (caps)
    gst_caps_unref(caps);
  if (pad)
    gst_object_unref(pad);
  gst_object_unref(r);
  return width;
}

/* Device d's pad carried one sender's frames only: the first camera's
 * width on the pad, every frame its size, its packet numbers never going
 * back.  Gaps and DISCONT may be there: a sender starved of CPU (the
 * VM's emulated one, or a host running two VMs beside four suites) drops
 * frames, and its running time stands still while ours goes on, which
 * re-bases a timestamp; neither mixes two senders. */
static void never_mixed(GstElement *rx, guint d, gint width)
{
  gchar *pad = g_strdup_printf("src_%u", d);
  guint frames, other_size, backwards;

  fail_unless_equals_int(pad_width(rx, pad), width);
  g_free(pad);
  g_mutex_lock(&counts.lock);
  frames = counts.frames[d];
  other_size = counts.other_size[d];
  backwards = counts.backwards[d];
  g_mutex_unlock(&counts.lock);
  fail_unless(frames > 0);
  fail_unless(other_size == 0, "device %u: %u frames of another size", d,
              other_size);
  fail_unless(backwards == 0, "device %u: packet numbers went back %u times", d,
              backwards);
}

/* Two senders (processes) with the same device-id: the first keeps it, the
 * second's frames are refused with a warning naming both; when the first
 * leaves, the second takes the device over on the same pad. */
GST_START_TEST(test_second_sender_of_a_device_is_refused)
{
  guint port = test_port();
  gchar *desc;
  GstElement *rx, *tx;
  GstMessage *msg;
  GError *err = NULL;
  GstStructure *s;
  GPid other;

  counts_reset();
  desc = g_strdup_printf("rdmasrc name=r transport=%s address=%s port=%u "
                         "stats-interval=0 r.src_0 ! fakesink name=s0 "
                         "signal-handoffs=true",
                         transport, rdma_addr, port);
  rx = parse(desc);
  g_free(desc);
  count_sinks(rx, 1);
  set_state(rx, GST_STATE_PLAYING);
  tx = cameras_new(port, 1, 0, ""); /* 64 pixels wide */
  set_state(tx, GST_STATE_PLAYING);
  fail_unless(wait_frames(0, 5, WAIT));
  fail_unless_equals_int(pad_width(rx, "src_0"), 64);

  other = camera_process(port, 0, 80);
  msg = wait_named(rx, GST_MESSAGE_WARNING, NULL, WAIT);
  fail_unless(msg != NULL, "no warning about the second sender");
  gst_message_parse_warning(msg, &err, NULL);
  fail_unless(strstr(err->message, "Device 0 is already sent by") != NULL, "%s",
              err->message);
  g_error_free(err);
  gst_message_unref(msg);
  /* The refusals are counted (polled: the stats may trail the warning). */
  for (gint64 end = g_get_monotonic_time() + WAIT / GST_USECOND;;) {
    guint64 refused_count;
    s = rdmasrc_stats(rx);
    refused_count = u64(device_stats(s, 0), "refused");
    gst_structure_free(s);
    if (refused_count > 0 || g_get_monotonic_time() >= end) {
      fail_unless(refused_count > 0);
      break;
    }
    g_usleep(10000);
  }
  never_mixed(rx, 0, 64);

  /* The owner leaves: the other camera takes over on the same pad. */
  stop(tx);
  for (gint i = 0; i < 150 && pad_width(rx, "src_0") != 80; i++)
    g_usleep(100000);
  fail_unless_equals_int(pad_width(rx, "src_0"), 80);
  child_sender_kill(other);
  stop(rx);
}

GST_END_TEST;

/* The refused sender is told: its rdmasink warns within a few seconds,
 * naming the device and the receiver, and stops sending (the receiver's
 * refused count stops growing); when the owner (another process) goes,
 * it takes the device over on the same pad and says so. */
GST_START_TEST(test_refused_sender_warns_and_takes_over)
{
  guint port = test_port();
  gchar *desc, *want;
  GstElement *rx, *tx, *sink;
  GstMessage *msg;
  GError *err = NULL;
  GstStructure *s;
  const GstStructure *details = NULL;
  guint dev = 99;
  guint64 refused_then = 0, refused_now, sink_drops = 0, sent_then,
          sent_now = 0;
  gboolean refused = FALSE;
  gint64 t0;
  GPid owner;

  counts_reset();
  desc = g_strdup_printf("rdmasrc name=r transport=%s address=%s port=%u "
                         "stats-interval=0 r.src_0 ! fakesink name=s0 "
                         "signal-handoffs=true",
                         transport, rdma_addr, port);
  rx = parse(desc);
  g_free(desc);
  count_sinks(rx, 1);
  set_state(rx, GST_STATE_PLAYING);
  owner = camera_process(port, 0, 64);
  fail_unless(wait_frames(0, 5, WAIT));
  fail_unless_equals_int(pad_width(rx, "src_0"), 64);

  desc = g_strdup_printf(
      "videotestsrc is-live=true ! video/x-raw,format=GRAY8,width=80,"
      "height=48,framerate=25/1 ! rdmasink name=k transport=%s host=%s "
      "port=%u device-id=0 stats-interval=0",
      transport, rdma_addr, port);
  tx = parse(desc);
  g_free(desc);
  t0 = g_get_monotonic_time();
  set_state(tx, GST_STATE_PLAYING);
  msg = wait_named(tx, GST_MESSAGE_WARNING, NULL, WAIT);
  fail_unless(msg != NULL, "the refused sender got no warning");
  GST_INFO("refused sender warned after %" G_GINT64_FORMAT " ms",
           (g_get_monotonic_time() - t0) / 1000);
  gst_message_parse_warning(msg, &err, NULL);
  want = g_strdup_printf("Device 0 is already sent by another sender to %s:%u",
                         rdma_addr, port);
  fail_unless(strstr(err->message, want) != NULL, "%s", err->message);
  g_free(want);
  g_error_free(err);
  gst_message_parse_warning_details(msg, &details);
  fail_unless(details != NULL);
  fail_unless(gst_structure_get_uint(details, "device-id", &dev));
  fail_unless_equals_int(dev, 0);
  gst_message_unref(msg);

  /* It stopped sending, counted by both ends, not timed: once its sink
   * says refused, the frames it sends stay at what it had sent while 25
   * more (a second's) are dropped as refused; then the receiver refuses
   * nothing more while 25 more are (a few frames land before the
   * sender's READ: they were refused by then). */
  sink = gst_bin_get_by_name(GST_BIN(tx), "k");
  for (gint64 end = g_get_monotonic_time() + WAIT / GST_USECOND;;) {
    g_object_get(sink, "stats", &s, NULL);
    fail_unless(gst_structure_get_boolean(s, "refused", &refused));
    if (refused || g_get_monotonic_time() >= end)
      break;
    gst_structure_free(s);
    g_usleep(10000);
  }
  fail_unless(refused, "the refused sender's stats do not say so");
  sent_then = u64(s, "frames");
  gst_structure_free(s);
  for (guint round = 0; round < 2; round++) {
    g_object_get(sink, "stats", &s, NULL);
    fail_unless(gst_structure_get_uint64(s, "refused-drops", &sink_drops));
    gst_structure_free(s);
    if (round == 1) {
      s = rdmasrc_stats(rx);
      refused_then = u64(device_stats(s, 0), "refused");
      gst_structure_free(s);
      fail_unless(refused_then > 0);
    }
    for (gint64 end = g_get_monotonic_time() + WAIT / GST_USECOND;;) {
      guint64 drops_now = 0;
      g_object_get(sink, "stats", &s, NULL);
      fail_unless(gst_structure_get_uint64(s, "refused-drops", &drops_now));
      sent_now = u64(s, "frames");
      gst_structure_free(s);
      if (drops_now >= sink_drops + 25)
        break;
      fail_unless(g_get_monotonic_time() < end,
                  "%" G_GUINT64_FORMAT " frames dropped as refused",
                  drops_now - sink_drops);
      g_usleep(10000);
    }
    fail_unless_equals_uint64(sent_now, sent_then);
  }
  s = rdmasrc_stats(rx);
  refused_now = u64(device_stats(s, 0), "refused");
  gst_structure_free(s);
  fail_unless_equals_uint64(refused_now, refused_then);
  never_mixed(rx, 0, 64);

  /* The owner goes: this sender takes the device over, on the same pad. */
  child_sender_kill(owner);
  msg = wait_named(tx, GST_MESSAGE_INFO, NULL, WAIT);
  fail_unless(msg != NULL, "no info message on taking the device over");
  gst_message_unref(msg);
  for (gint i = 0; i < 150 && pad_width(rx, "src_0") != 80; i++)
    g_usleep(100000);
  fail_unless_equals_int(pad_width(rx, "src_0"), 80);
  refused_then = frames_of(0);
  fail_unless(wait_frames(0, refused_then + 10, WAIT),
              "the new owner's frames did not arrive");
  g_object_get(sink, "stats", &s, NULL);
  fail_unless(gst_structure_get_boolean(s, "refused", &refused));
  fail_unless(!refused);
  gst_structure_free(s);
  gst_object_unref(sink);
  stop(tx);
  stop(rx);
}

GST_END_TEST;

/* A sender SIGKILLed while another device flows: its device's departure
 * is an event (and EOS with device-lost-eos), the other device goes on,
 * and a new sender brings the device back on the same pad. */
GST_START_TEST(test_killed_sender_is_a_device_lost_event)
{
  guint port = test_port();
  gchar *desc;
  GstElement *rx, *tx;
  GstMessage *msg;
  const GstStructure *ms;
  GstStructure *s;
  guint dev = 99, before;
  gboolean eos = FALSE;
  GPid other;

  counts_reset();
  desc = g_strdup_printf("rdmasrc name=r transport=%s address=%s port=%u "
                         "stats-interval=0 device-lost-eos=true r.src_0 ! "
                         "fakesink name=s0 signal-handoffs=true r.src_1 ! "
                         "fakesink name=s1 signal-handoffs=true",
                         transport, rdma_addr, port);
  rx = parse(desc);
  g_free(desc);
  count_sinks(rx, 2);
  set_state(rx, GST_STATE_PLAYING);
  tx = cameras_new(port, 1, 0, "");
  set_state(tx, GST_STATE_PLAYING);
  other = camera_process(port, 1, 64);
  fail_unless(wait_frames(0, 5, WAIT));
  fail_unless(wait_frames(1, 5, WAIT));

  child_sender_kill(other);
  msg = wait_named(rx, GST_MESSAGE_ELEMENT, "rdmasrc-device-lost", WAIT);
  fail_unless(msg != NULL, "no rdmasrc-device-lost");
  ms = gst_message_get_structure(msg);
  fail_unless(gst_structure_get_uint(ms, "device-id", &dev));
  fail_unless_equals_int(dev, 1);
  fail_unless(gst_structure_get_string(ms, "peer") != NULL);
  gst_message_unref(msg);
  /* Device 0 is unaffected. */
  before = frames_of(0);
  fail_unless(wait_frames(0, before + 10, WAIT));
  s = rdmasrc_stats(rx);
  fail_unless(gst_structure_get_boolean(device_stats(s, 1), "eos", &eos));
  fail_unless(eos, "device 1's stream did not end");
  fail_unless_equals_int(u64(device_stats(s, 1), "losses"), 1);
  fail_unless_equals_int(u64(device_stats(s, 0), "losses"), 0);
  gst_structure_free(s);

  /* It comes back: a new stream on the same pad. */
  before = frames_of(1);
  other = camera_process(port, 1, 64);
  fail_unless(wait_frames(1, before + 5, WAIT), "device 1 did not come back");
  child_sender_kill(other);
  stop(tx);
  stop(rx);
}

GST_END_TEST;

/* timeout applies per device: one camera falling silent is noticed while
 * the other flows (the element-wide timeout never fires then). */
GST_START_TEST(test_silent_device_times_out_while_others_flow)
{
  guint port = test_port();
  gchar *desc;
  GstElement *rx, *tx0, *tx1, *one;
  GstMessage *msg;
  guint dev = 99;

  counts_reset();
  desc = g_strdup_printf("rdmasrc name=r transport=%s address=%s port=%u "
                         "stats-interval=0 timeout=300 r.src_0 ! fakesink "
                         "name=s0 signal-handoffs=true r.src_1 ! fakesink "
                         "name=s1 signal-handoffs=true",
                         transport, rdma_addr, port);
  rx = parse(desc);
  g_free(desc);
  count_sinks(rx, 2);
  set_state(rx, GST_STATE_PLAYING);
  tx0 = cameras_new(port, 1, 0, "");
  /* Device 1 in a pipeline of its own (same connection). */
  tx1 = parse("videotestsrc is-live=true ! video/x-raw,format=GRAY8,width=64,"
              "height=48,framerate=25/1 ! rdmasink name=one stats-interval=0");
  one = gst_bin_get_by_name(GST_BIN(tx1), "one");
  g_object_set(one, "host", rdma_addr, "port", port, "device-id", 1, NULL);
  gst_util_set_object_arg(G_OBJECT(one), "transport", transport);
  gst_object_unref(one);
  set_state(tx0, GST_STATE_PLAYING);
  set_state(tx1, GST_STATE_PLAYING);
  fail_unless(wait_frames(0, 5, WAIT));
  fail_unless(wait_frames(1, 5, WAIT));

  change_state(tx1, GST_STATE_PAUSED);
  /* Device 1's timeout.  Device 0 may have had one of its own, rightly,
   * when a loaded host ran its camera 300 ms late: skipped, not a
   * failure (what is checked is that the silent device is noticed while
   * the other flows). */
  for (gint64 end = g_get_monotonic_time() + WAIT / GST_USECOND;;) {
    gint64 left = end - g_get_monotonic_time();

    msg = left > 0 ? wait_named(rx, GST_MESSAGE_ELEMENT,
                                "rdmasrc-device-timeout", left * GST_USECOND)
                   : NULL;
    fail_unless(msg != NULL, "no rdmasrc-device-timeout of device 1");
    fail_unless(gst_structure_get_uint(gst_message_get_structure(msg),
                                       "device-id", &dev));
    gst_message_unref(msg);
    if (dev == 1)
      break;
    fail_unless_equals_int(dev, 0);
  }
  fail_unless(wait_frames(0, frames_of(0) + 5, WAIT));
  stop(tx1);
  stop(tx0);
  stop(rx);
}

GST_END_TEST;

/* ------------------------------------------------- state cycles */

/* PLAYING -> PAUSED -> PLAYING -> READY -> NULL -> PLAYING, ten times,
 * while the cameras stream: no hang, frames after every return to
 * PLAYING (the launch line's links survive), memory flat. */
GST_START_TEST(test_state_cycles_while_streaming)
{
  const guint n = 3;
  guint port = test_port();
  GstElement *rx, *tx;
  gsize rss_warm = 0;
  guint cycles =
      g_getenv("SBR_TEST_CYCLES")
          ? (guint)g_ascii_strtoull(g_getenv("SBR_TEST_CYCLES"), NULL, 10)
          : 10;

  rx = receiver_new(port, n, "");
  /* Live: PLAYING completes (the sinks preroll) once frames come, so the
   * returns to PLAYING below are checked by the frames that follow. */
  set_state(rx, GST_STATE_PLAYING);
  tx = cameras_new(port, n, 0, "");
  set_state(tx, GST_STATE_PLAYING);

  for (guint cycle = 0; cycle < cycles; cycle++) {
    guint seen[MAX_PADS];

    for (guint d = 0; d < n; d++) {
      seen[d] = frames_of(d);
      fail_unless(wait_frames(d, seen[d] + 3, WAIT),
                  "cycle %u: device %u stalled at %u", cycle, d, seen[d]);
    }
    /* Measured while frames flow, so the lane is always there. */
    if (cycle == 2)
      rss_warm = rss_kib();
    GST_INFO("cycle %u: RSS %zu KiB", cycle, rss_kib());
    change_state(rx, GST_STATE_PAUSED);
    g_usleep(100000);
    set_state(rx, GST_STATE_PLAYING);
    for (guint d = 0; d < n; d++)
      fail_unless(wait_frames(d, frames_of(d) + 3, WAIT),
                  "cycle %u: device %u stalled after PAUSED", cycle, d);
    change_state(rx, GST_STATE_READY);
    change_state(rx, GST_STATE_NULL);
    set_state(rx, GST_STATE_PLAYING);
  }
  for (guint d = 0; d < n; d++)
    fail_unless(wait_frames(d, frames_of(d) + 3, WAIT));
  /* The pads stayed, and so did each one's share: three quarters of the
   * default 32-block lane over 3 devices, not the whole of it. */
  {
    GstStructure *st = rdmasrc_stats(rx);
    fail_unless_equals_int(uint_field(st, "device-blocks"), 24 / n);
    gst_structure_free(st);
  }
  /* Flat: under 8 MiB over seven cycles after warm-up (a leaked lane of
   * 32 x 1 MiB blocks per cycle would be far more). */
  fail_unless(rss_kib() < rss_warm + 8 * 1024, "RSS %zu KiB, warm %zu KiB",
              rss_kib(), rss_warm);
  stop(tx);
  stop(rx);
}

GST_END_TEST;

/* EOS sent to rdmasrc reaches every pad's sink, with no queue anywhere. */
GST_START_TEST(test_eos_to_the_source_with_sinks_on_the_pads)
{
  const guint n = 3;
  guint port = test_port();
  GstElement *rx, *tx;

  rx = receiver_new(port, n, "");
  set_state(rx, GST_STATE_PLAYING);
  tx = cameras_new(port, n, 0, "");
  set_state(tx, GST_STATE_PLAYING);
  for (guint d = 0; d < n; d++)
    fail_unless(wait_frames(d, 3, WAIT));
  fail_unless(gst_element_send_event(rx, gst_event_new_eos()));
  expect_eos(rx, WAIT);
  stop(tx);
  stop(rx);
}

GST_END_TEST;

static Suite *rdmasrc_streams_suite(void)
{
  Suite *s = suite_create("rdmasrc-streams");
  TCase *tc = tcase_create("general");

  test_transport_from_env(&transport, &rdma_addr);
  if (g_getenv("SBR_TEST_REPEAT"))
    repeat = (guint)g_ascii_strtoull(g_getenv("SBR_TEST_REPEAT"), NULL, 10);
  g_mutex_init(&counts.lock);
  g_mutex_init(&latency.lock);
  tcase_set_timeout(tc, 180);
  suite_add_tcase(s, tc);
  tcase_add_test(tc, test_sinks_without_queues_one_pad);
  tcase_add_test(tc, test_sinks_without_queues_three_pads);
  tcase_add_test(tc, test_sinks_without_queues_twelve_pads);
  tcase_add_test(tc, test_slow_consumer_does_not_slow_the_others);
  tcase_add_test(tc, test_stuck_consumer_then_resumes);
  tcase_add_test(tc, test_pause_policy_stops_the_stuck_sender);
  tcase_add_test(tc, test_timing_survives_pauses_of_either_side);
  tcase_add_test(tc, test_second_sender_of_a_device_is_refused);
  tcase_add_test(tc, test_refused_sender_warns_and_takes_over);
  tcase_add_test(tc, test_killed_sender_is_a_device_lost_event);
  tcase_add_test(tc, test_silent_device_times_out_while_others_flow);
  tcase_add_test(tc, test_state_cycles_while_streaming);
  tcase_add_test(tc, test_eos_to_the_source_with_sinks_on_the_pads);
  return s;
}

GST_CHECK_MAIN(rdmasrc_streams);
