/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-rdma-big-frames.c - frames larger than a block at the DEFAULT
 * settings: 1920x1080 and 3840x2160 NV12 through appsrc ! rdmasink and
 * rdmasrc ! appsink arrive as exactly one memory per buffer, with the
 * right bytes, and rdmasrc counts no frame pushed in several memories
 * (frames-fragmented: a map of such a buffer merges them, a copy of the
 * frame) and no copy.  A spanning block does it (docs/protocol.md,
 * "Spanning blocks"): the frame lies contiguous in the receiver's lane.
 *
 * SBR_TEST_TRANSPORT (default "shm"; "verbs" in the Soft-RoCE VM) and
 * SBR_RDMA_ADDR (default 127.0.0.1) as in test-rdma-elements.c.
 */
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gst/check/gstcheck.h>

#include <string.h>
#include <unistd.h>

static const gchar *transport;
static const gchar *rdma_addr;

static guint test_port(void)
{
  /* 45000..49999: clear of the other element tests' ranges. */
  static guint seq;
  return 45000 + (guint)(getpid() % 1000) * 5 + (seq++ % 5);
}

static guint8 pattern_byte(guint frame, gsize i)
{
  return (guint8)(frame * 7u + (guint)i * 13u + (guint)(i >> 8));
}

static GstElement *parse(const gchar *desc)
{
  GError *err = NULL;
  GstElement *pipeline = gst_parse_launch(desc, &err);

  fail_unless(pipeline != NULL && err == NULL, "parse \"%s\": %s", desc,
              err ? err->message : "?");
  return pipeline;
}

static GstElement *get(GstElement *bin, const gchar *name)
{
  GstElement *e = gst_bin_get_by_name(GST_BIN(bin), name);

  fail_unless(e != NULL, "no %s", name);
  return e;
}

static void set_state(GstElement *pipeline, GstState state)
{
  fail_if(gst_element_set_state(pipeline, state) == GST_STATE_CHANGE_FAILURE);
}

static guint64 device_u64(GstElement *src, guint device, const gchar *field)
{
  GstStructure *s = NULL;
  const GValue *v;
  gchar name[16];
  guint64 n = 0;

  g_object_get(src, "stats", &s, NULL);
  fail_unless(s != NULL);
  g_snprintf(name, sizeof name, "device-%u", device);
  v = gst_structure_get_value(s, name);
  fail_unless(v && G_VALUE_HOLDS(v, GST_TYPE_STRUCTURE),
              "no %s in %" GST_PTR_FORMAT, name, s);
  fail_unless(gst_structure_get_uint64(gst_value_get_structure(v), field, &n),
              "no %s", field);
  gst_structure_free(s);
  return n;
}

/* n frames of width x height NV12, each pushed once the one before
 * arrived (so no budget copies one: the test is about the layout). */
static void run_nv12(guint width, guint height, guint n)
{
  guint port = test_port();
  gsize size = (gsize)width * height * 3 / 2;
  gchar *rx_desc = g_strdup_printf(
      "rdmasrc name=r transport=%s address=%s port=%u r.src_0 ! "
      "appsink name=out sync=false",
      transport, rdma_addr, port);
  gchar *tx_desc = g_strdup_printf(
      "appsrc name=in format=time caps=video/x-raw,format=NV12,width=%u,"
      "height=%u,framerate=25/1 ! rdmasink transport=%s host=%s port=%u "
      "device-id=0 sync=false",
      width, height, transport, rdma_addr, port);
  GstElement *rx = parse(rx_desc), *tx = parse(tx_desc);
  GstElement *src = get(rx, "r"), *in = get(tx, "in"), *out = get(rx, "out");

  set_state(rx, GST_STATE_PLAYING);
  set_state(tx, GST_STATE_PLAYING);
  for (guint f = 0; f < n; f++) {
    GstBuffer *buf = gst_buffer_new_allocate(NULL, size, NULL);
    GstMapInfo map;
    GstSample *sample;
    GstBuffer *got;

    gst_buffer_map(buf, &map, GST_MAP_WRITE);
    for (gsize i = 0; i < size; i++)
      map.data[i] = pattern_byte(f, i);
    gst_buffer_unmap(buf, &map);
    GST_BUFFER_PTS(buf) = f * 40 * GST_MSECOND;
    GST_BUFFER_DURATION(buf) = 40 * GST_MSECOND;
    fail_unless_equals_int(gst_app_src_push_buffer(GST_APP_SRC(in), buf),
                           GST_FLOW_OK);
    sample = gst_app_sink_try_pull_sample(GST_APP_SINK(out), 20 * GST_SECOND);
    fail_unless(sample != NULL, "%ux%u frame %u did not arrive", width, height,
                f);
    got = gst_sample_get_buffer(sample);
    fail_unless_equals_int(gst_buffer_n_memory(got), 1);
    fail_unless_equals_uint64(gst_buffer_get_size(got), size);
    /* One memory: the map is the lane's bytes, no merge. */
    fail_unless(gst_buffer_map(got, &map, GST_MAP_READ));
    for (gsize i = 0; i < size; i++)
      if (map.data[i] != pattern_byte(f, i))
        fail("%ux%u frame %u byte %" G_GSIZE_FORMAT " wrong", width, height, f,
             i);
    gst_buffer_unmap(got, &map);
    gst_sample_unref(sample);
  }
  fail_unless_equals_uint64(device_u64(src, 0, "frames-fragmented"), 0);
  fail_unless_equals_uint64(device_u64(src, 0, "copies"), 0);
  fail_unless_equals_uint64(device_u64(src, 0, "pushed"), n);

  set_state(tx, GST_STATE_NULL);
  set_state(rx, GST_STATE_NULL);
  gst_object_unref(out);
  gst_object_unref(in);
  gst_object_unref(src);
  gst_object_unref(tx);
  gst_object_unref(rx);
  g_free(tx_desc);
  g_free(rx_desc);
}

GST_START_TEST(test_1080p_nv12_is_one_memory)
{
  run_nv12(1920, 1080, 8);
}

GST_END_TEST;

GST_START_TEST(test_4k_nv12_is_one_memory)
{
  run_nv12(3840, 2160, 4);
}

GST_END_TEST;

static Suite *rdma_big_frames_suite(void)
{
  Suite *s = suite_create("rdma-big-frames");
  TCase *tc = tcase_create("general");

  transport = g_getenv("SBR_TEST_TRANSPORT");
  if (!transport || !*transport)
    transport = "shm";
  rdma_addr = g_getenv("SBR_RDMA_ADDR");
  if (!rdma_addr || !*rdma_addr)
    rdma_addr = "127.0.0.1";
  /* 4K over Soft-RoCE on an emulated CPU: about a second a frame. */
  tcase_set_timeout(tc, 120);
  suite_add_tcase(s, tc);
  tcase_add_test(tc, test_1080p_nv12_is_one_memory);
  tcase_add_test(tc, test_4k_nv12_is_one_memory);
  return s;
}

GST_CHECK_MAIN(rdma_big_frames);
