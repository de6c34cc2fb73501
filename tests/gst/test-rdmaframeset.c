/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-rdmaframeset.c - rdmaframeset (gst/gstrdmaframeset.c) with
 * GstHarness: three cameras' frames pushed by hand, a test clock for its
 * deadline, so every verdict is on what the element did with the frames
 * it got, never on how fast this machine is.  Its sets are taken from a
 * probe on its src pad (the harness's own sink splits buffer lists).
 */
#include <gst/check/gstcheck.h>
#include <gst/check/gstharness.h>

#define N_CAM 3
#define FRAME (40 * GST_MSECOND) /* 25 fps: tolerance 20 ms by default */
#define CAPS "video/x-raw,format=GRAY8,width=4,height=4,framerate=25/1"

typedef struct {
  GstHarness *h[N_CAM];
  GstElement *fs;
  GAsyncQueue *sets; /* GstBufferList, as they left the src pad */
} Rig;

static GstPadProbeReturn on_list(GstPad *pad, GstPadProbeInfo *info,
                                 gpointer user_data)
{
  (void)pad;
  if (info->type & GST_PAD_PROBE_TYPE_BUFFER_LIST)
    g_async_queue_push(
        user_data, gst_buffer_list_ref(GST_PAD_PROBE_INFO_BUFFER_LIST(info)));
  return GST_PAD_PROBE_OK;
}

/* rdmaframeset with cameras sink_0..sink_2, each a harness (live, no
 * latency upstream) sending caps; extra: properties of the element or its
 * pads as on a launch line (gst_util_set_object_arg). */
static void rig_start(Rig *rig, const gchar *const *props)
{
  GstPad *src;

  memset(rig, 0, sizeof *rig);
  rig->sets = g_async_queue_new_full((GDestroyNotify)gst_buffer_list_unref);
  rig->h[0] = gst_harness_new_with_padnames("rdmaframeset", "sink_0", "src");
  rig->fs = rig->h[0]->element;
  for (guint i = 1; i < N_CAM; i++) {
    gchar name[16];

    g_snprintf(name, sizeof name, "sink_%u", i);
    rig->h[i] = gst_harness_new_with_element(rig->fs, name, NULL);
  }
  for (guint i = 0; props && props[i]; i += 2) {
    GObject *target = G_OBJECT(rig->fs);
    const gchar *prop = props[i];
    const gchar *colons = strstr(prop, "::");
    GstPad *pad = NULL;

    if (colons) {
      gchar *pad_name = g_strndup(prop, colons - prop);
      pad = gst_element_get_static_pad(rig->fs, pad_name);
      g_free(pad_name);
      fail_unless(pad != NULL);
      target = G_OBJECT(pad);
      prop = colons + 2;
    }
    gst_util_set_object_arg(target, prop, props[i + 1]);
    if (pad)
      gst_object_unref(pad);
  }
  src = gst_element_get_static_pad(rig->fs, "src");
  gst_pad_add_probe(src, GST_PAD_PROBE_TYPE_BUFFER_LIST, on_list, rig->sets,
                    NULL);
  gst_object_unref(src);
  for (guint i = 0; i < N_CAM; i++)
    gst_harness_set_src_caps_str(rig->h[i], CAPS);
}

static void rig_stop(Rig *rig)
{
  for (guint i = N_CAM; i-- > 0;)
    gst_harness_teardown(rig->h[i]);
  g_async_queue_unref(rig->sets);
}

/* Camera cam's frame at running time pts, captured (x-unix) at capture
 * unless NONE, its first byte cam (to tell frames apart). */
static void push_capture(Rig *rig, guint cam, GstClockTime pts,
                         GstClockTime capture)
{
  GstBuffer *buf = gst_buffer_new_allocate(NULL, 16, NULL);

  gst_buffer_memset(buf, 0, (guint8)cam, 16);
  GST_BUFFER_PTS(buf) = pts;
  GST_BUFFER_DURATION(buf) = FRAME;
  if (GST_CLOCK_TIME_IS_VALID(capture)) {
    GstCaps *unix_caps = gst_caps_new_empty_simple("timestamp/x-unix");
    gst_buffer_add_reference_timestamp_meta(buf, unix_caps, capture,
                                            GST_CLOCK_TIME_NONE);
    gst_caps_unref(unix_caps);
  }
  fail_unless_equals_int(gst_harness_push(rig->h[cam], buf), GST_FLOW_OK);
}

static void push(Rig *rig, guint cam, GstClockTime pts)
{
  push_capture(rig, cam, pts, GST_CLOCK_TIME_NONE);
}

/* The next set out (fails after 5 s: a set that never came). */
static GstBufferList *next_set(Rig *rig)
{
  GstBufferList *list =
      g_async_queue_timeout_pop(rig->sets, 5 * G_USEC_PER_SEC);

  fail_unless(list != NULL, "no frame set came out");
  return list;
}

static void expect_no_set(Rig *rig)
{
  GstBufferList *list = g_async_queue_timeout_pop(rig->sets, 200000);

  fail_unless(list == NULL, "a set came out before its deadline");
}

static const GstStructure *frame_meta(GstBuffer *buf)
{
  GstCustomMeta *meta = gst_buffer_get_custom_meta(buf, "GstRdmaFrameMeta");

  fail_unless(meta != NULL, "a frame without its rdma-frame meta");
  return gst_custom_meta_get_structure(meta);
}

static const GstStructure *set_meta(GstBufferList *list)
{
  GstCustomMeta *meta;

  fail_unless(gst_buffer_list_length(list) > 0);
  meta = gst_buffer_get_custom_meta(gst_buffer_list_get(list, 0),
                                    "GstRdmaFrameSetMeta");
  fail_unless(meta != NULL, "a set without its rdma-frame-set meta");
  return gst_custom_meta_get_structure(meta);
}

static guint frame_device(GstBuffer *buf)
{
  guint id;

  fail_unless(gst_structure_get_uint(frame_meta(buf), "device-id", &id));
  return id;
}

/* The set: its instant, its frames' devices in order (each frame's
 * first byte its camera, its PTS within the tolerance of the instant) and
 * the missing devices, as the metas say. */
static void expect_set(GstBufferList *list, GstClockTime instant,
                       const gchar *devices, const gchar *missing)
{
  const GstStructure *s = set_meta(list);
  GString *got = g_string_new(NULL), *got_missing = g_string_new(NULL);
  guint64 pts, tol;
  gboolean complete;
  const GValue *array;

  fail_unless(gst_structure_get_uint64(s, "pts", &pts));
  fail_unless(gst_structure_get_uint64(s, "tolerance", &tol));
  fail_unless(gst_structure_get_boolean(s, "complete", &complete));
  fail_unless_equals_uint64(pts, instant);
  for (guint i = 0; i < gst_buffer_list_length(list); i++) {
    GstBuffer *buf = gst_buffer_list_get(list, i);
    guint8 byte0;

    gst_buffer_extract(buf, 0, &byte0, 1);
    fail_unless_equals_int(byte0, frame_device(buf));
    fail_unless(GST_BUFFER_PTS(buf) >= instant &&
                    GST_BUFFER_PTS(buf) < instant + tol,
                "frame of device %u at %" GST_TIME_FORMAT
                " in the set of %" GST_TIME_FORMAT,
                frame_device(buf), GST_TIME_ARGS(GST_BUFFER_PTS(buf)),
                GST_TIME_ARGS(instant));
    g_string_append_printf(got, "%s%u", i ? "," : "", frame_device(buf));
  }
  array = gst_structure_get_value(s, "missing");
  fail_unless(array && GST_VALUE_HOLDS_ARRAY(array));
  for (guint i = 0; i < gst_value_array_get_size(array); i++)
    g_string_append_printf(
        got_missing, "%s%u", i ? "," : "",
        g_value_get_uint(gst_value_array_get_value(array, i)));
  fail_unless_equals_string(got->str, devices);
  fail_unless_equals_string(got_missing->str, missing);
  fail_unless(complete == (*missing == '\0'));
  g_string_free(got, TRUE);
  g_string_free(got_missing, TRUE);
}

static guint64 stat(Rig *rig, const gchar *camera, const gchar *field)
{
  GstStructure *s = NULL, *cs = NULL;
  guint64 v = G_MAXUINT64;

  g_object_get(rig->fs, "stats", &s, NULL);
  fail_unless(s != NULL);
  if (camera) {
    fail_unless(gst_structure_get(s, camera, GST_TYPE_STRUCTURE, &cs, NULL),
                "no %s in the stats", camera);
    fail_unless(gst_structure_get_uint64(cs, field, &v));
    gst_structure_free(cs);
  } else {
    fail_unless(gst_structure_get_uint64(s, field, &v), "no %s", field);
  }
  gst_structure_free(s);
  return v;
}

GST_START_TEST(test_complete_when_all_frames_within_tolerance)
{
  Rig rig;
  GstBufferList *list;

  rig_start(&rig, NULL);
  /* Captured 0, 1 and 19 ms after the first: one instant.  The set goes
   * out when the last camera's frame is there, before any deadline (the
   * test clock never moves). */
  push(&rig, 0, 1 * GST_MSECOND);
  push(&rig, 2, 19 * GST_MSECOND);
  expect_no_set(&rig);
  push(&rig, 1, 0);
  list = next_set(&rig);
  expect_set(list, 0, "0,1,2", "");
  gst_buffer_list_unref(list);
  push(&rig, 1, FRAME);
  push(&rig, 0, FRAME + 2 * GST_MSECOND);
  push(&rig, 2, FRAME + 1 * GST_MSECOND);
  list = next_set(&rig);
  expect_set(list, FRAME, "0,1,2", "");
  gst_buffer_list_unref(list);
  fail_unless_equals_uint64(stat(&rig, NULL, "sets-complete"), 2);
  fail_unless_equals_uint64(stat(&rig, NULL, "sets-partial"), 0);
  fail_unless_equals_uint64(stat(&rig, NULL, "frames"), 6);
  fail_unless_equals_uint64(stat(&rig, NULL, "tolerance"), FRAME / 2);
  fail_unless_equals_uint64(stat(&rig, NULL, "max-spread"), 19 * GST_MSECOND);
  fail_unless_equals_uint64(stat(&rig, NULL, "last-spread"), 2 * GST_MSECOND);
  rig_stop(&rig);
}
GST_END_TEST;

GST_START_TEST(test_late_camera_is_named_missing)
{
  Rig rig;
  GstBufferList *list;

  rig_start(&rig, NULL);
  /* Camera 2 sends nothing: the set waits for its deadline, the instant
   * plus the tolerance (no latency upstream nor of its own), no more. */
  push(&rig, 0, 0);
  push(&rig, 1, 1 * GST_MSECOND);
  fail_unless(gst_harness_wait_for_clock_id_waits(rig.h[0], 1, 5));
  expect_no_set(&rig);
  fail_unless(gst_harness_crank_single_clock_wait(rig.h[0]));
  list = next_set(&rig);
  expect_set(list, 0, "0,1", "2");
  gst_buffer_list_unref(list);
  fail_unless_equals_uint64(
      gst_clock_get_time(GST_CLOCK(gst_harness_get_testclock(rig.h[0]))),
      FRAME / 2);

  /* Its frame of that instant, when it comes, is late: dropped, never in
   * the next set; the next instant is complete. */
  push(&rig, 2, 2 * GST_MSECOND);
  push(&rig, 0, FRAME);
  push(&rig, 1, FRAME);
  push(&rig, 2, FRAME + 3 * GST_MSECOND);
  list = next_set(&rig);
  expect_set(list, FRAME, "0,1,2", "");
  gst_buffer_list_unref(list);
  fail_unless_equals_uint64(stat(&rig, "camera-2", "misses"), 1);
  fail_unless_equals_uint64(stat(&rig, "camera-2", "late-drops"), 1);
  fail_unless_equals_uint64(stat(&rig, "camera-2", "frames"), 1);
  fail_unless_equals_uint64(stat(&rig, "camera-0", "misses"), 0);
  fail_unless_equals_uint64(stat(&rig, NULL, "sets-partial"), 1);
  fail_unless_equals_uint64(stat(&rig, NULL, "sets-complete"), 1);
  fail_unless_equals_uint64(stat(&rig, NULL, "late-drops"), 1);
  rig_stop(&rig);
}
GST_END_TEST;

GST_START_TEST(test_two_instants_never_mixed)
{
  Rig rig;
  GstBufferList *list;

  rig_start(&rig, NULL);
  /* Camera 1 missed the first instant; camera 0 already has its frame
   * of the second queued behind the first.  Once every camera has a frame
   * queued the first set can go: camera 1's next frame is the second
   * instant's, so it has none for the first. */
  push(&rig, 0, 0);
  /* Its src task waits for the deadline: it has queried the latency, so
   * a pad takes a second frame (live: two).  Before that a second push
   * would wait for room that only the test clock's deadline makes (a
   * hang one run in three before this wait). */
  fail_unless(gst_harness_wait_for_clock_id_waits(rig.h[0], 1, 5));
  push(&rig, 0, FRAME);
  push(&rig, 1, FRAME + 1 * GST_MSECOND);
  expect_no_set(&rig);
  push(&rig, 2, 2 * GST_MSECOND);
  list = next_set(&rig);
  expect_set(list, 0, "0,2", "1");
  gst_buffer_list_unref(list);
  push(&rig, 2, FRAME + 2 * GST_MSECOND);
  list = next_set(&rig);
  expect_set(list, FRAME, "0,1,2", "");
  gst_buffer_list_unref(list);
  /* A frame just past the tolerance (a camera out of phase) is not the
   * set's. */
  push(&rig, 0, 2 * FRAME);
  push(&rig, 1, 2 * FRAME + FRAME / 2);
  push(&rig, 2, 2 * FRAME + 1 * GST_MSECOND);
  list = next_set(&rig);
  expect_set(list, 2 * FRAME, "0,2", "1");
  gst_buffer_list_unref(list);
  fail_unless_equals_uint64(stat(&rig, NULL, "late-drops"), 0);
  rig_stop(&rig);
}
GST_END_TEST;

GST_START_TEST(test_metas_carry_device_capture_time_and_caps)
{
  static const gchar *const props[] = {"sink_2::device-id", "7", NULL};
  const GstClockTime capture0 = G_GUINT64_CONSTANT(1795000000) * GST_SECOND;
  Rig rig;
  GstBufferList *list;
  GstCaps *want = gst_caps_from_string(CAPS);
  const GstStructure *s;
  guint64 v;
  gint64 offset;
  guint u;

  rig_start(&rig, props);
  /* Camera 1 changes its caps (50 fps): its frame carries the new ones,
   * and the tolerance follows the fastest camera (half of 20 ms). */
  gst_harness_set_src_caps_str(
      rig.h[1], "video/x-raw,format=GRAY8,width=8,height=8,framerate=50/1");
  push_capture(&rig, 0, 5 * GST_MSECOND, capture0);
  push_capture(&rig, 1, 6 * GST_MSECOND, capture0 + 1 * GST_MSECOND);
  push(&rig, 2, 9 * GST_MSECOND);
  list = next_set(&rig);
  fail_unless_equals_int(gst_buffer_list_length(list), 3);
  s = set_meta(list);
  fail_unless_equals_string(gst_structure_get_name(s), "rdma-frame-set");
  fail_unless(gst_structure_get_uint64(s, "sequence", &v) && v == 0);
  fail_unless(gst_structure_get_uint64(s, "tolerance", &v) &&
              v == 10 * GST_MSECOND);
  fail_unless(gst_structure_get_uint(s, "cameras", &u) && u == 3);
  fail_unless(gst_structure_get_uint(s, "frames", &u) && u == 3);
  /* Not every frame has a capture time: the spread is by PTS. */
  fail_unless(gst_structure_get_uint64(s, "spread", &v) &&
              v == 4 * GST_MSECOND);

  /* Devices in order: 0, 1, then sink_2 as device 7. */
  s = frame_meta(gst_buffer_list_get(list, 0));
  fail_unless_equals_string(gst_structure_get_name(s), "rdma-frame");
  fail_unless(gst_structure_get_uint(s, "device-id", &u) && u == 0);
  fail_unless_equals_string(gst_structure_get_string(s, "pad"), "sink_0");
  fail_unless(gst_structure_get_uint64(s, "capture-time", &v) && v == capture0);
  fail_unless(gst_structure_get_uint64(s, "pts", &v) && v == 5 * GST_MSECOND);
  fail_unless(gst_structure_get_int64(s, "offset", &offset) && offset == 0);
  {
    GstCaps *caps = NULL;

    fail_unless(gst_structure_get(s, "caps", GST_TYPE_CAPS, &caps, NULL));
    fail_unless(gst_caps_is_equal(caps, want));
    gst_caps_unref(caps);
  }
  s = frame_meta(gst_buffer_list_get(list, 1));
  fail_unless(gst_structure_get_uint64(s, "capture-time", &v) &&
              v == capture0 + GST_MSECOND);
  fail_unless(gst_structure_get_int64(s, "offset", &offset) &&
              offset == (gint64)GST_MSECOND);
  {
    GstCaps *caps = NULL;
    gint n, d;

    fail_unless(gst_structure_get(s, "caps", GST_TYPE_CAPS, &caps, NULL));
    fail_unless(gst_structure_get_fraction(gst_caps_get_structure(caps, 0),
                                           "framerate", &n, &d) &&
                n == 50 && d == 1);
    gst_caps_unref(caps);
  }
  s = frame_meta(gst_buffer_list_get(list, 2));
  fail_unless(gst_structure_get_uint(s, "device-id", &u) && u == 7);
  fail_unless_equals_string(gst_structure_get_string(s, "pad"), "sink_2");
  fail_unless(!gst_structure_has_field(s, "capture-time"));
  gst_buffer_list_unref(list);
  fail_unless_equals_uint64(stat(&rig, "camera-7", "frames"), 1);

  /* Every frame with a capture time: the spread is theirs, not PTS's. */
  push_capture(&rig, 0, FRAME, capture0 + FRAME);
  push_capture(&rig, 1, FRAME + 7 * GST_MSECOND, capture0 + FRAME);
  push_capture(&rig, 2, FRAME + 3 * GST_MSECOND,
               capture0 + FRAME + GST_MSECOND);
  list = next_set(&rig);
  s = set_meta(list);
  fail_unless(gst_structure_get_uint64(s, "spread", &v) && v == GST_MSECOND);
  fail_unless(gst_structure_get_uint64(s, "pts-spread", &v) &&
              v == 7 * GST_MSECOND);
  gst_buffer_list_unref(list);
  {
    GstCaps *out = gst_pad_get_current_caps(rig.h[0]->sinkpad);

    fail_unless(out != NULL);
    fail_unless(gst_caps_is_equal_fixed(
        out, gst_caps_from_string("application/x-rdma-frame-set")));
    gst_caps_unref(out);
  }
  gst_caps_unref(want);
  rig_stop(&rig);
}
GST_END_TEST;

GST_START_TEST(test_ends_when_every_camera_ended)
{
  Rig rig;
  GstBufferList *list;
  GstEvent *ev;

  rig_start(&rig, NULL);
  push(&rig, 0, 0);
  push(&rig, 1, 0);
  /* An ended camera holds no set: it is missing from it. */
  fail_unless(gst_harness_push_event(rig.h[2], gst_event_new_eos()));
  list = next_set(&rig);
  expect_set(list, 0, "0,1", "2");
  gst_buffer_list_unref(list);
  fail_unless(gst_harness_push_event(rig.h[0], gst_event_new_eos()));
  fail_unless(gst_harness_push_event(rig.h[1], gst_event_new_eos()));
  while ((ev = gst_harness_pull_event(rig.h[0])) &&
         GST_EVENT_TYPE(ev) != GST_EVENT_EOS)
    gst_event_unref(ev);
  fail_unless(ev != NULL, "no EOS");
  gst_event_unref(ev);
  rig_stop(&rig);
}
GST_END_TEST;

static Suite *rdmaframeset_suite(void)
{
  Suite *s = suite_create("rdmaframeset");
  TCase *tc = tcase_create("general");

  /* A hang bound, as every element test file has (check's default is
   * 4 s). */
  tcase_set_timeout(tc, 60);
  suite_add_tcase(s, tc);
  tcase_add_test(tc, test_complete_when_all_frames_within_tolerance);
  tcase_add_test(tc, test_late_camera_is_named_missing);
  tcase_add_test(tc, test_two_instants_never_mixed);
  tcase_add_test(tc, test_metas_carry_device_capture_time_and_caps);
  tcase_add_test(tc, test_ends_when_every_camera_ended);
  return s;
}

GST_CHECK_MAIN(rdmaframeset);
