/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-rdma-extras.c - what a stream carries beyond its bytes and times
 * crosses the link (issue 28; docs/protocol.md, "Stream events and frame
 * extras"): appsrc ! rdmasink and rdmasrc ! appsink over one transport.
 *
 * - buffer flags (MARKER, a header bit; DROPPABLE, CORRUPTED, GAP,
 *   DECODE_ONLY, which go as extras) arrive on their frames and on no
 *   other, and MARKER costs no extras block;
 * - metas (time code, region of interest with its parameters, caption,
 *   an x-ntp reference timestamp, protection, a custom meta) arrive on
 *   their frames; a meta nobody can write out is counted at the sender;
 * - a frame with padded planes (GstVideoMeta strides) goes as it is to a
 *   consumer that takes the meta, and is copied into the caps' layout for
 *   one that doesn't (layout-copies);
 * - the upstream stream-start (its stream-id under the pad's, group-id),
 *   a segment's applied rate and a GAP event reach the pad.
 *
 * The elements' own logic over libsbr: the host's shm suite.
 */
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gst/check/gstcheck.h>
#include <gst/video/video.h>
#include <sbr.h>

#include <string.h>
#include <unistd.h>

#include "pipeline-check.h"

/* A hang bound, never a verdict on speed. */
#define HANG (30 * GST_SECOND)
#define FRAME_NS (40 * GST_MSECOND)

static const gchar *transport;
static const gchar *rdma_addr;

static guint test_port(void)
{
  /* 9000..12999: clear of the other element tests' ranges. */
  static guint seq;
  return 9000 + (guint)(getpid() % 400) * 10 + (seq++ % 10);
}

/* device-id=0: the pad is asked for at once; without (any_device) it is
 * a sometimes pad made when the camera's caps come. */
static GstElement *receiver_on(guint port, const gchar *mode,
                               gboolean any_device)
{
  gchar *desc = g_strdup_printf(
      "rdmasrc name=r transport=%s address=%s port=%u %s "
      "timestamp-mode=%s ! appsink name=out sync=false max-buffers=1000",
      transport, rdma_addr, port, any_device ? "" : "device-id=0", mode);
  GstElement *rx = parse(desc);

  g_free(desc);
  return rx;
}

static GstElement *receiver(guint port, const gchar *mode)
{
  return receiver_on(port, mode, FALSE);
}

static GstElement *sender(guint port, const gchar *caps)
{
  gchar *desc = g_strdup_printf(
      "appsrc name=in format=time is-live=true handle-segment-change=true "
      "caps=\"%s\" ! rdmasink name=tx transport=%s host=%s port=%u "
      "device-id=0 sync=false",
      caps, transport, rdma_addr, port);
  GstElement *tx = parse(desc);

  g_free(desc);
  return tx;
}

static GstElement *by_name(GstElement *bin, const gchar *name)
{
  GstElement *e = gst_bin_get_by_name(GST_BIN(bin), name);

  fail_unless(e != NULL, "no %s", name);
  return e;
}

static GstBuffer *frame(guint n, gsize size)
{
  GstBuffer *b = gst_buffer_new_allocate(NULL, size, NULL);

  gst_buffer_memset(b, 0, (guint8)n, size);
  GST_BUFFER_PTS(b) = n * FRAME_NS;
  GST_BUFFER_DURATION(b) = FRAME_NS;
  return b;
}

static void push(GstElement *tx, GstBuffer *b)
{
  GstElement *in = by_name(tx, "in");

  fail_unless_equals_int(gst_app_src_push_buffer(GST_APP_SRC(in), b),
                         GST_FLOW_OK);
  gst_object_unref(in);
}

/* The next buffer at the receiver (the test fails after HANG). */
static GstSample *pull(GstElement *rx)
{
  GstElement *out = by_name(rx, "out");
  GstSample *sample = gst_app_sink_try_pull_sample(GST_APP_SINK(out), HANG);

  gst_object_unref(out);
  fail_unless(sample != NULL, "no frame came");
  return sample;
}

static guint64 sink_stat(GstElement *tx, const gchar *field)
{
  GstElement *e = by_name(tx, "tx");
  GstStructure *s = NULL;
  guint64 v = 0;

  g_object_get(e, "stats", &s, NULL);
  gst_object_unref(e);
  fail_unless(gst_structure_get_uint64(s, field, &v),
              "no %s in %" GST_PTR_FORMAT, field, s);
  gst_structure_free(s);
  return v;
}

/* rdmasrc's own field, or with device its device-0 structure's. */
static guint64 src_stat(GstElement *rx, gboolean device, const gchar *field)
{
  GstElement *e = by_name(rx, "r");
  GstStructure *s = NULL, *d = NULL;
  guint64 v = 0;

  g_object_get(e, "stats", &s, NULL);
  gst_object_unref(e);
  if (device)
    fail_unless(gst_structure_get(s, "device-0", GST_TYPE_STRUCTURE, &d, NULL));
  fail_unless(gst_structure_get_uint64(d ? d : s, field, &v), "no %s", field);
  if (d)
    gst_structure_free(d);
  gst_structure_free(s);
  return v;
}

static void start(GstElement *rx, GstElement *tx)
{
  set_state(rx, GST_STATE_PLAYING);
  set_state(tx, GST_STATE_PLAYING);
}

static void finish(GstElement *rx, GstElement *tx)
{
  change_state(tx, GST_STATE_NULL);
  change_state(rx, GST_STATE_NULL);
  gst_object_unref(tx);
  gst_object_unref(rx);
}

static const GstBufferFlags carried[] = {
    GST_BUFFER_FLAG_MARKER,      GST_BUFFER_FLAG_DROPPABLE,
    GST_BUFFER_FLAG_CORRUPTED,   GST_BUFFER_FLAG_GAP,
    GST_BUFFER_FLAG_DECODE_ONLY,
};
#define N_FLAG_FRAMES (2 * G_N_ELEMENTS(carried))

/* Frame n: odd ones carry none, frame 2k carries carried[k]. */
static GstBufferFlags flags_of(guint n)
{
  return n % 2 ? 0 : carried[n / 2];
}

/* MARKER is a header bit, so it costs no extras block. */
static gboolean needs_extras(guint n)
{
  return flags_of(n) != 0 && flags_of(n) != GST_BUFFER_FLAG_MARKER;
}

GST_START_TEST(test_flags_cross_on_their_frames)
{
  guint port = test_port();
  GstElement *rx = receiver(port, "skew"),
             *tx = sender(port, "application/x-rdma-test");

  start(rx, tx);
  for (guint n = 0; n < N_FLAG_FRAMES; n++) {
    GstBuffer *b = frame(n, 64);

    GST_BUFFER_FLAG_SET(b, flags_of(n));
    push(tx, b);
  }
  for (guint n = 0; n < N_FLAG_FRAMES; n++) {
    GstSample *sample = pull(rx);
    GstBuffer *b = gst_sample_get_buffer(sample);
    GstMapInfo map;

    fail_unless(gst_buffer_map(b, &map, GST_MAP_READ));
    fail_unless_equals_int(map.data[0], n);
    gst_buffer_unmap(b, &map);
    for (guint k = 0; k < G_N_ELEMENTS(carried); k++)
      fail_unless_equals_int(GST_BUFFER_FLAG_IS_SET(b, carried[k]),
                             (flags_of(n) & carried[k]) != 0);
    gst_sample_unref(sample);
  }
  /* The stream-start, then one extras event per flagged frame but the
   * MARKER one, none for the others. */
  {
    guint want = 1;

    for (guint n = 0; n < N_FLAG_FRAMES; n++)
      want += needs_extras(n);
    fail_unless_equals_uint64(src_stat(rx, FALSE, "events-received"), want);
  }
  fail_unless_equals_uint64(src_stat(rx, FALSE, "extras-dropped"), 0);
  finish(rx, tx);
}

GST_END_TEST;

static const GstMetaInfo *custom_info(void)
{
  static const gchar *tags[] = {NULL};
  const GstMetaInfo *info = gst_meta_get_info("RdmaTestDetection");

  return info ? info
              : gst_meta_register_custom("RdmaTestDetection", tags, NULL, NULL,
                                         NULL);
}

static void add_metas(GstBuffer *b, guint n)
{
  GstVideoRegionOfInterestMeta *roi;
  GstCustomMeta *cm;
  GstCaps *ntp = gst_caps_new_empty_simple("timestamp/x-ntp");
  static const guint8 cc[] = {0xfc, 0x94, 0x20};

  gst_buffer_add_video_time_code_meta_full(
      b, 25, 1, NULL, GST_VIDEO_TIME_CODE_FLAGS_NONE, 10, 20, 30, n, 0);
  roi = gst_buffer_add_video_region_of_interest_meta(b, "face", 10, 20, 30, 40);
  roi->id = (gint)n;
  gst_video_region_of_interest_meta_add_param(
      roi, gst_structure_new("detection", "confidence", G_TYPE_DOUBLE, 0.75,
                             "label", G_TYPE_STRING, "person", NULL));
  gst_buffer_add_video_caption_meta(b, GST_VIDEO_CAPTION_TYPE_CEA708_CDP, cc,
                                    sizeof cc);
  gst_buffer_add_reference_timestamp_meta(b, ntp, 1000 + n, 7);
  gst_caps_unref(ntp);
  gst_buffer_add_protection_meta(
      b,
      gst_structure_new("application/x-cenc", "iv_size", G_TYPE_UINT, 8, NULL));
  cm = gst_buffer_add_custom_meta(b, "RdmaTestDetection");
  gst_structure_set(gst_custom_meta_get_structure(cm), "track", G_TYPE_UINT, n,
                    NULL);
  /* No serializer writes this one out. */
  gst_buffer_add_video_affine_transformation_meta(b);
}

static void check_metas(GstBuffer *b, guint n)
{
  GstVideoTimeCodeMeta *tc = gst_buffer_get_video_time_code_meta(b);
  GstVideoRegionOfInterestMeta *roi =
      gst_buffer_get_video_region_of_interest_meta_id(b, (gint)n);
  GstVideoCaptionMeta *cap = gst_buffer_get_video_caption_meta(b);
  GstCaps *ntp = gst_caps_new_empty_simple("timestamp/x-ntp");
  GstReferenceTimestampMeta *ref =
      gst_buffer_get_reference_timestamp_meta(b, ntp);
  GstProtectionMeta *prot =
      (GstProtectionMeta *)gst_buffer_get_meta(b, GST_PROTECTION_META_API_TYPE);
  GstCustomMeta *cm = gst_buffer_get_custom_meta(b, "RdmaTestDetection");
  GstStructure *param;
  gdouble confidence = 0;
  guint track = G_MAXUINT, iv = 0;

  gst_caps_unref(ntp);
  fail_unless(tc != NULL, "frame %u: no time code", n);
  fail_unless_equals_int(tc->tc.config.fps_n, 25);
  fail_unless_equals_int(tc->tc.hours, 10);
  fail_unless_equals_int(tc->tc.seconds, 30);
  fail_unless_equals_int(tc->tc.frames, n);
  fail_unless(roi != NULL, "frame %u: no region %u", n, n);
  fail_unless_equals_string(g_quark_to_string(roi->roi_type), "face");
  fail_unless_equals_int(roi->x, 10);
  fail_unless_equals_int(roi->h, 40);
  param = gst_video_region_of_interest_meta_get_param(roi, "detection");
  fail_unless(param != NULL, "frame %u: the region has no parameters", n);
  fail_unless(gst_structure_get_double(param, "confidence", &confidence));
  fail_unless(confidence == 0.75);
  fail_unless_equals_string(gst_structure_get_string(param, "label"), "person");
  fail_unless(cap != NULL, "frame %u: no caption", n);
  fail_unless_equals_int(cap->caption_type, GST_VIDEO_CAPTION_TYPE_CEA708_CDP);
  fail_unless_equals_int(cap->size, 3);
  fail_unless_equals_int(cap->data[1], 0x94);
  fail_unless(ref != NULL, "frame %u: no x-ntp timestamp", n);
  fail_unless_equals_uint64(ref->timestamp, 1000 + n);
  fail_unless_equals_uint64(ref->duration, 7);
  fail_unless(prot != NULL, "frame %u: no protection meta", n);
  fail_unless(gst_structure_get_uint(prot->info, "iv_size", &iv));
  fail_unless_equals_int(iv, 8);
  fail_unless(cm != NULL, "frame %u: no custom meta", n);
  fail_unless(gst_structure_get_uint(gst_custom_meta_get_structure(cm), "track",
                                     &track));
  fail_unless_equals_int(track, n);
  fail_unless(gst_buffer_get_meta(
                  b, GST_VIDEO_AFFINE_TRANSFORMATION_META_API_TYPE) == NULL);
}

GST_START_TEST(test_metas_cross_on_their_frames)
{
  guint port = test_port();
  GstElement *rx = receiver(port, "skew"),
             *tx = sender(port, "application/x-rdma-test");
  const guint n_frames = 6;

  custom_info();
  start(rx, tx);
  for (guint n = 0; n < n_frames; n++) {
    GstBuffer *b = frame(n, 64);

    if (n % 3 != 2)
      add_metas(b, n);
    push(tx, b);
  }
  for (guint n = 0; n < n_frames; n++) {
    GstSample *sample = pull(rx);
    GstBuffer *b = gst_sample_get_buffer(sample);

    if (n % 3 != 2)
      check_metas(b, n);
    else
      fail_unless(gst_buffer_get_video_time_code_meta(b) == NULL &&
                      gst_buffer_get_custom_meta(b, "RdmaTestDetection") ==
                          NULL,
                  "frame %u has another frame's metas", n);
    gst_sample_unref(sample);
  }
  /* The affine transformation of each frame with metas stayed behind. */
  fail_unless_equals_uint64(sink_stat(tx, "metas-not-carried"), 4);
  fail_unless_equals_uint64(src_stat(rx, FALSE, "metas-not-restored"), 0);
  finish(rx, tx);
}

GST_END_TEST;

#define W 64
#define H 4
#define STRIDE 128 /* twice the caps' default: each row padded */
/* The caps of W x H GRAY8 frames. */
#define GRAY_CAPS "video/x-raw,format=GRAY8,width=64,height=4,framerate=25/1"

/* GRAY_CAPS as a GstVideoInfo: the caps' default layout. */
static void gray_info(GstVideoInfo *info)
{
  GstCaps *caps = gst_caps_from_string(GRAY_CAPS);

  fail_unless(gst_video_info_from_caps(info, caps));
  gst_caps_unref(caps);
}

/* A GRAY8 frame whose rows are STRIDE apart, row r all (n + r). */
static GstBuffer *padded_frame(guint n)
{
  GstBuffer *b = frame(n, STRIDE * H);
  gsize offset[GST_VIDEO_MAX_PLANES] = {0};
  gint stride[GST_VIDEO_MAX_PLANES] = {STRIDE};
  GstMapInfo map;

  fail_unless(gst_buffer_map(b, &map, GST_MAP_WRITE));
  for (guint r = 0; r < H; r++) {
    memset(map.data + r * STRIDE, (gint)(n + r), W);
    memset(map.data + r * STRIDE + W, 0xee, STRIDE - W); /* padding */
  }
  gst_buffer_unmap(b, &map);
  gst_buffer_add_video_meta_full(b, GST_VIDEO_FRAME_FLAG_NONE,
                                 GST_VIDEO_FORMAT_GRAY8, W, H, 1, offset,
                                 stride);
  return b;
}

/* The frame as a reader of its layout sees it: every row right. */
static void check_rows(GstBuffer *b, GstVideoInfo *info, guint n)
{
  GstVideoFrame vf;

  fail_unless(gst_video_frame_map(&vf, info, b, GST_MAP_READ));
  for (guint r = 0; r < H; r++) {
    const guint8 *row = (const guint8 *)GST_VIDEO_FRAME_PLANE_DATA(&vf, 0) +
                        r * GST_VIDEO_FRAME_PLANE_STRIDE(&vf, 0);

    for (guint x = 0; x < W; x++)
      fail_unless_equals_int(row[x], n + r);
  }
  gst_video_frame_unmap(&vf);
}

static GstPadProbeReturn takes_video_meta(GstPad *pad, GstPadProbeInfo *info,
                                          gpointer data)
{
  GstQuery *query = GST_PAD_PROBE_INFO_QUERY(info);

  (void)pad;
  (void)data;
  if (GST_QUERY_TYPE(query) != GST_QUERY_ALLOCATION)
    return GST_PAD_PROBE_OK;
  gst_query_add_allocation_meta(query, GST_VIDEO_META_API_TYPE, NULL);
  return GST_PAD_PROBE_HANDLED;
}

/* The consumer without the meta is behind a sometimes pad, whose caps
 * were set on it, not queued (the layout is learnt from them too). */
static void padded_frames_reach(gboolean consumer_takes_meta)
{
  guint port = test_port();
  GstElement *rx = receiver_on(port, "skew", !consumer_takes_meta),
             *tx = sender(port, GRAY_CAPS);
  const guint n_frames = 4;
  GstVideoInfo info;

  gray_info(&info);
  if (consumer_takes_meta) {
    GstElement *out = by_name(rx, "out");
    GstPad *sink = gst_element_get_static_pad(out, "sink");

    gst_pad_add_probe(sink, GST_PAD_PROBE_TYPE_QUERY_DOWNSTREAM,
                      takes_video_meta, NULL, NULL);
    gst_object_unref(sink);
    gst_object_unref(out);
  }
  start(rx, tx);
  for (guint n = 0; n < n_frames; n++)
    push(tx, padded_frame(n));
  for (guint n = 0; n < n_frames; n++) {
    GstSample *sample = pull(rx);
    GstBuffer *b = gst_sample_get_buffer(sample);
    GstVideoMeta *vm = gst_buffer_get_video_meta(b);

    if (consumer_takes_meta) {
      fail_unless(vm != NULL, "frame %u: the padded layout was lost", n);
      fail_unless_equals_int(vm->stride[0], STRIDE);
      fail_unless_equals_int(gst_buffer_get_size(b), STRIDE * H);
    } else {
      /* In the caps' own layout, as a reader without the meta reads it. */
      fail_unless(vm == NULL, "frame %u: a meta the consumer doesn't take", n);
      fail_unless_equals_int(gst_buffer_get_size(b), W * H);
    }
    check_rows(b, &info, n);
    gst_sample_unref(sample);
  }
  fail_unless_equals_uint64(src_stat(rx, TRUE, "layout-copies"),
                            consumer_takes_meta ? 0 : n_frames);
  finish(rx, tx);
}

GST_START_TEST(test_padded_planes_go_as_they_are_to_a_consumer_of_the_meta)
{
  padded_frames_reach(TRUE);
}

GST_END_TEST;

GST_START_TEST(test_padded_planes_are_laid_out_for_a_consumer_without_it)
{
  padded_frames_reach(FALSE);
}

GST_END_TEST;

/* A layout as rdmasink writes one, with what a forger chooses. */
static GstStructure *forged_layout(guint n_planes, guint64 offset, gint stride)
{
  GValue offsets = G_VALUE_INIT, strides = G_VALUE_INIT;
  GstStructure *s = gst_structure_new(
      "video-meta", "format", G_TYPE_STRING, "GRAY8", "width", G_TYPE_UINT, W,
      "height", G_TYPE_UINT, H, "flags", G_TYPE_UINT, 0, NULL);

  gst_value_array_init(&offsets, n_planes);
  gst_value_array_init(&strides, n_planes);
  for (guint i = 0; i < n_planes; i++) {
    GValue v = G_VALUE_INIT;

    g_value_init(&v, G_TYPE_UINT64);
    g_value_set_uint64(&v, offset);
    gst_value_array_append_and_take_value(&offsets, &v);
    g_value_init(&v, G_TYPE_INT);
    g_value_set_int(&v, stride);
    gst_value_array_append_and_take_value(&strides, &v);
  }
  gst_structure_take_value(s, "offsets", &offsets);
  gst_structure_take_value(s, "strides", &strides);
  return s;
}

/* "rdma-frame" with the one meta m (taken). */
static gchar *forged_extras(GstStructure *m)
{
  GValue metas = G_VALUE_INIT, v = G_VALUE_INIT;
  GstStructure *s =
      gst_structure_new("rdma-frame", "flags", G_TYPE_UINT, 0, NULL);
  gchar *str;

  gst_value_array_init(&metas, 1);
  g_value_init(&v, GST_TYPE_STRUCTURE);
  g_value_take_boxed(&v, m);
  gst_value_array_append_and_take_value(&metas, &v);
  gst_structure_take_value(s, "metas", &metas);
  str = gst_structure_to_string(s);
  gst_structure_free(s);
  return str;
}

static void send_block(sbr_sender *sender, enum sbr_kind kind, const void *data,
                       gsize len)
{
  struct sbr_block_meta meta;

  sbr_block_meta_init(&meta, 0);
  meta.kind = kind;
  if (kind == SBR_KIND_DATA)
    meta.pts = 0;
  fail_unless_equals_int(sbr_sender_send(sender, &meta, data, len), 0);
}

/* A forged or broken sender's stream events and extras (libsbr directly,
 * no rdmasink): layouts that don't fit the caps or the frame, a time
 * code with no rate, an empty caption, segments no rate makes, text that
 * isn't a structure.  Every frame arrives as it was sent, without what
 * was forged, and each forgery is counted; nothing maps past a frame. */
/* prefix, then 40,000 nested empty arrays: text no stream sends. */
static gchar *deeply_nested(const gchar *prefix)
{
  GString *deep = g_string_new(prefix);

  for (guint i = 0; i < 40000; i++)
    g_string_append_c(deep, '<');
  for (guint i = 0; i < 40000; i++)
    g_string_append_c(deep, '>');
  g_string_append_c(deep, ';');
  return g_string_free(deep, FALSE);
}

GST_START_TEST(test_forged_extras_are_dropped_and_counted)
{
  guint port = test_port();
  GstElement *rx = receiver(port, "sender");
  const gchar *caps = GRAY_CAPS;
  gchar *frames[] = {
      forged_extras(forged_layout(1, 0, 100000)), /* rows past the frame */
      forged_extras(forged_layout(1, 0, -64)),    /* backwards */
      forged_extras(forged_layout(2, 0, 64)),     /* GRAY8 has one plane */
      forged_extras(forged_layout(1, 1000, 64)),  /* starts past the end */
      forged_extras(gst_structure_new(
          "timecode-meta", "fps-n", G_TYPE_INT, 0, "fps-d", G_TYPE_INT, 1,
          "flags", G_TYPE_UINT, 0, "hours", G_TYPE_UINT, 1, "minutes",
          G_TYPE_UINT, 2, "seconds", G_TYPE_UINT, 3, "frames", G_TYPE_UINT, 4,
          "field-count", G_TYPE_UINT, 0, NULL)),
  };
  const gchar *dropped[] = {
      "rdma-segment, rate=(double)0, applied-rate=(double)1;",
      "rdma-segment, rate=(double)1e-200, applied-rate=(double)1e-200;",
      "rdma-gap, running-time=(string)soon;",
      "not, a=structure,,, at all",
  };
  struct sbr_sender_config cfg;
  sbr_sender *sender = NULL;
  guint8 payload[W * H];
  char errbuf[256] = "";

  set_state(rx, GST_STATE_PLAYING);
  sbr_sender_config_init(&cfg);
  cfg.backend =
      g_str_equal(transport, "shm") ? SBR_BACKEND_SHM : SBR_BACKEND_VERBS;
  cfg.host = rdma_addr;
  cfg.port = (uint16_t)port;
  fail_unless(sbr_sender_new(&cfg, &sender, errbuf, sizeof errbuf) == 0, "%s",
              errbuf);
  send_block(sender, SBR_KIND_CAPS, caps, strlen(caps));
  memset(payload, 0x5a, sizeof payload);
  for (guint i = 0; i < G_N_ELEMENTS(frames); i++) {
    send_block(sender, SBR_KIND_EVENT, frames[i], strlen(frames[i]));
    send_block(sender, SBR_KIND_DATA, payload, sizeof payload);
    g_free(frames[i]);
  }
  for (guint i = 0; i < G_N_ELEMENTS(dropped); i++)
    send_block(sender, SBR_KIND_EVENT, dropped[i], strlen(dropped[i]));
  /* 40,000 nested arrays, as an event and as caps: GStreamer's parser
   * would recurse through the receive thread's stack and crash the
   * process.  The caps are refused (a warning), the stream's stay. */
  {
    gchar *deep = deeply_nested("rdma-tags, taglist=(int)");

    send_block(sender, SBR_KIND_EVENT, deep, strlen(deep));
    g_free(deep);
    deep = deeply_nested("video/x-raw, a=(int)");
    send_block(sender, SBR_KIND_CAPS, deep, strlen(deep));
    g_free(deep);
  }
  send_block(sender, SBR_KIND_DATA, payload, sizeof payload);
  fail_unless_equals_int(sbr_sender_flush(sender, 5000), 0);

  for (guint i = 0; i <= G_N_ELEMENTS(frames); i++) {
    GstSample *sample = pull(rx);
    GstBuffer *b = gst_sample_get_buffer(sample);
    GstMapInfo map;

    fail_unless_equals_int(gst_buffer_get_size(b), W * H);
    fail_unless(gst_buffer_get_video_meta(b) == NULL,
                "frame %u kept a forged layout", i);
    fail_unless(gst_buffer_get_video_time_code_meta(b) == NULL,
                "frame %u kept a forged time code", i);
    fail_unless(gst_buffer_map(b, &map, GST_MAP_READ));
    fail_unless(map.data[0] == 0x5a && map.data[W * H - 1] == 0x5a);
    gst_buffer_unmap(b, &map);
    gst_sample_unref(sample);
  }
  fail_unless_equals_uint64(src_stat(rx, FALSE, "metas-not-restored"),
                            G_N_ELEMENTS(frames));
  fail_unless_equals_uint64(src_stat(rx, FALSE, "events-dropped"),
                            G_N_ELEMENTS(dropped) + 1);
  sbr_sender_free(sender);
  change_state(rx, GST_STATE_NULL);
  gst_object_unref(rx);
}

GST_END_TEST;

/* Events at the receiver's appsink, in order, with the buffers' PTS. */
typedef struct {
  GMutex lock;
  GstEvent *stream_start;
  gdouble applied_rate;
  GstClockTime gap_ts, gap_duration;
  guint n_buffers_before_gap;
  guint n_buffers;
  guint n_stream_starts, n_caps;
} Seen;

static GstPadProbeReturn on_data(GstPad *pad, GstPadProbeInfo *info,
                                 gpointer data)
{
  Seen *seen = data;

  (void)pad;
  g_mutex_lock(&seen->lock);
  if (info->type & GST_PAD_PROBE_TYPE_BUFFER)
    seen->n_buffers++;
  else {
    GstEvent *event = GST_PAD_PROBE_INFO_EVENT(info);
    const GstSegment *segment;

    switch (GST_EVENT_TYPE(event)) {
    case GST_EVENT_STREAM_START:
      gst_event_replace(&seen->stream_start, event);
      seen->n_stream_starts++;
      break;
    case GST_EVENT_CAPS:
      seen->n_caps++;
      break;
    case GST_EVENT_SEGMENT:
      gst_event_parse_segment(event, &segment);
      seen->applied_rate = segment->applied_rate;
      break;
    case GST_EVENT_GAP:
      gst_event_parse_gap(event, &seen->gap_ts, &seen->gap_duration);
      seen->n_buffers_before_gap = seen->n_buffers;
      break;
    default:
      break;
    }
  }
  g_mutex_unlock(&seen->lock);
  return GST_PAD_PROBE_OK;
}

/* seen records what reaches rx's appsink from now on. */
static void watch(GstElement *rx, Seen *seen)
{
  GstElement *out = by_name(rx, "out");
  GstPad *sink = gst_element_get_static_pad(out, "sink");

  memset(seen, 0, sizeof *seen);
  g_mutex_init(&seen->lock);
  seen->applied_rate = 1.0;
  seen->gap_ts = GST_CLOCK_TIME_NONE;
  gst_pad_add_probe(
      sink, GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM,
      on_data, seen, NULL);
  gst_object_unref(sink);
  gst_object_unref(out);
}

/* After the receiver stopped: no probe calls any more. */
static void unwatch(Seen *seen)
{
  gst_event_replace(&seen->stream_start, NULL);
  g_mutex_clear(&seen->lock);
}

/* The sender's stream-start as its rdmasink got it. */
static GstEvent *sent_stream_start(GstElement *tx)
{
  GstElement *e = by_name(tx, "tx");
  GstPad *sink = gst_element_get_static_pad(e, "sink");
  GstEvent *event = gst_pad_get_sticky_event(sink, GST_EVENT_STREAM_START, 0);

  gst_object_unref(sink);
  gst_object_unref(e);
  fail_unless(event != NULL);
  return event;
}

GST_START_TEST(test_stream_start_segment_rate_and_gaps_cross)
{
  guint port = test_port();
  GstElement *rx = receiver(port, "sender"),
             *tx = sender(port, "application/x-rdma-test");
  GstElement *in = by_name(tx, "in");
  Seen seen;
  const gchar *sent_id = NULL, *got_id = NULL;
  guint sent_group = 0, got_group = 1;
  GstEvent *sent;
  GstSegment segment;
  GstSample *sample;
  GstBuffer *b;

  watch(rx, &seen);
  start(rx, tx);
  /* A stream played at twice its speed upstream (applied rate 2). */
  gst_segment_init(&segment, GST_FORMAT_TIME);
  segment.applied_rate = 2.0;
  b = frame(0, 64);
  sample = gst_sample_new(b, NULL, &segment, NULL);
  fail_unless_equals_int(gst_app_src_push_sample(GST_APP_SRC(in), sample),
                         GST_FLOW_OK);
  gst_sample_unref(sample);
  gst_buffer_unref(b);
  push(tx, frame(1, 64));
  /* Nothing for frames 2 and 3, then frame 4. */
  fail_unless(gst_element_send_event(
      in, gst_event_new_gap(2 * FRAME_NS, 2 * FRAME_NS)));
  push(tx, frame(4, 64));
  for (guint n = 0; n < 3; n++)
    gst_sample_unref(pull(rx));

  sent = sent_stream_start(tx);
  gst_event_parse_stream_start(sent, &sent_id);
  fail_unless(gst_event_parse_group_id(sent, &sent_group));
  g_mutex_lock(&seen.lock);
  fail_unless(seen.stream_start != NULL);
  gst_event_parse_stream_start(seen.stream_start, &got_id);
  fail_unless(g_str_has_suffix(got_id, sent_id), "stream-id %s, sent %s",
              got_id, sent_id);
  /* Group-ids count per process: the sender's group is one of ours. */
  fail_unless(gst_event_parse_group_id(seen.stream_start, &got_group));
  fail_unless(got_group != sent_group, "the sender's group-id %u as it is",
              sent_group);
  fail_unless(seen.applied_rate == 2.0, "applied rate %f", seen.applied_rate);
  /* In its place, in the sender's running time (timestamp-mode=sender). */
  fail_unless_equals_int(seen.n_buffers_before_gap, 2);
  fail_unless_equals_uint64(seen.gap_ts, 2 * FRAME_NS);
  fail_unless_equals_uint64(seen.gap_duration, 2 * FRAME_NS);
  g_mutex_unlock(&seen.lock);
  fail_unless_equals_uint64(src_stat(rx, FALSE, "events-dropped"), 0);

  gst_event_unref(sent);
  gst_object_unref(in);
  finish(rx, tx);
  unwatch(&seen);
}

GST_END_TEST;

/* The sender renegotiates: its stream-start goes again before the new
 * CAPS block, yet it is the same stream: one stream-start downstream, two
 * caps, every frame. */
GST_START_TEST(test_renegotiation_is_no_new_stream)
{
  guint port = test_port();
  GstElement *rx = receiver(port, "sender"),
             *tx = sender(port, "application/x-rdma-test,v=(int)1");
  GstElement *in = by_name(tx, "in");
  Seen seen;
  GstCaps *caps2 = gst_caps_from_string("application/x-rdma-test,v=(int)2");

  watch(rx, &seen);
  start(rx, tx);
  push(tx, frame(0, 64));
  push(tx, frame(1, 64));
  for (guint n = 0; n < 2; n++)
    gst_sample_unref(pull(rx));
  g_object_set(in, "caps", caps2, NULL);
  push(tx, frame(2, 64));
  push(tx, frame(3, 64));
  for (guint n = 0; n < 2; n++) {
    GstSample *sample = pull(rx);

    fail_unless(gst_caps_is_equal(gst_sample_get_caps(sample), caps2));
    gst_sample_unref(sample);
  }
  g_mutex_lock(&seen.lock);
  fail_unless_equals_int(seen.n_stream_starts, 1);
  fail_unless_equals_int(seen.n_caps, 2);
  fail_unless_equals_int(seen.n_buffers, 4);
  g_mutex_unlock(&seen.lock);
  /* Both stream-starts came and were taken. */
  fail_unless(sink_stat(tx, "events-sent") >= 2);

  gst_caps_unref(caps2);
  gst_object_unref(in);
  finish(rx, tx);
  unwatch(&seen);
}

GST_END_TEST;

/* rdmasink's serialize-meta: the affine transformation's first entry. */
static GstStructure *write_affine(GstElement *sink, GstBuffer *buf,
                                  GstMeta *meta, gpointer data)
{
  (void)sink;
  (void)buf;
  (void)data;
  if (meta->info->api != GST_VIDEO_AFFINE_TRANSFORMATION_META_API_TYPE)
    return NULL;
  return gst_structure_new(
      "affine", "m0", G_TYPE_FLOAT,
      ((GstVideoAffineTransformationMeta *)meta)->matrix[0], NULL);
}

/* rdmasrc's deserialize-meta: puts it back. */
static gboolean read_affine(GstElement *src, GstBuffer *buf, const gchar *api,
                            const GstStructure *fields, gpointer data)
{
  GstVideoAffineTransformationMeta *m;
  gdouble m0;

  (void)src;
  (void)data;
  if (g_strcmp0(api,
                g_type_name(GST_VIDEO_AFFINE_TRANSFORMATION_META_API_TYPE)))
    return FALSE;
  m = gst_buffer_add_video_affine_transformation_meta(buf);
  {
    const GValue *v = gst_structure_get_value(fields, "m0");

    m0 = v && G_VALUE_HOLDS_FLOAT(v) ? g_value_get_float(v) : -1;
  }
  m->matrix[0] = (gfloat)m0;
  return TRUE;
}

/* A meta rdmasink can't write out goes when the application writes it
 * (serialize-meta) and reads it back (deserialize-meta). */
GST_START_TEST(test_app_metas_cross_through_the_signals)
{
  guint port = test_port();
  GstElement *rx = receiver(port, "skew"),
             *tx = sender(port, "application/x-rdma-test");
  GstElement *sink = by_name(tx, "tx"), *src = by_name(rx, "r");

  g_signal_connect(sink, "serialize-meta", G_CALLBACK(write_affine), NULL);
  g_signal_connect(src, "deserialize-meta", G_CALLBACK(read_affine), NULL);
  start(rx, tx);
  for (guint n = 0; n < 3; n++) {
    GstBuffer *b = frame(n, 64);

    gst_buffer_add_video_affine_transformation_meta(b)->matrix[0] =
        0.5f + (gfloat)n;
    push(tx, b);
  }
  for (guint n = 0; n < 3; n++) {
    GstSample *sample = pull(rx);
    GstVideoAffineTransformationMeta *m =
        (GstVideoAffineTransformationMeta *)gst_buffer_get_meta(
            gst_sample_get_buffer(sample),
            GST_VIDEO_AFFINE_TRANSFORMATION_META_API_TYPE);

    fail_unless(m != NULL, "frame %u: the application's meta was lost", n);
    fail_unless(m->matrix[0] == 0.5f + (gfloat)n, "frame %u: %f", n,
                m->matrix[0]);
    gst_sample_unref(sample);
  }
  fail_unless_equals_uint64(sink_stat(tx, "metas-not-carried"), 0);
  fail_unless_equals_uint64(src_stat(rx, FALSE, "metas-not-restored"), 0);
  gst_object_unref(sink);
  gst_object_unref(src);
  finish(rx, tx);
}

GST_END_TEST;

/* ------------------------------------------------------ max-meta-size */

/* A region of interest whose parameters take about size bytes as text. */
static void add_region(GstBuffer *b, gint id, gsize size)
{
  GstVideoRegionOfInterestMeta *roi =
      gst_buffer_add_video_region_of_interest_meta(b, "face", 1, 2, 3, 4);
  gchar *notes = g_strnfill(size, 'x');

  roi->id = id;
  gst_video_region_of_interest_meta_add_param(
      roi, gst_structure_new("detection", "notes", G_TYPE_STRING, notes, NULL));
  g_free(notes);
}

static void set_property(GstElement *bin, const gchar *name, guint size)
{
  GstElement *e = by_name(bin, name);

  g_object_set(e, "max-meta-size", size, NULL);
  gst_object_unref(e);
}

/* rdmasink's max-meta-size: a frame's largest metas stay behind until the
 * rest fits, counted; its flags go whatever its metas take. */
GST_START_TEST(test_max_meta_size_leaves_the_largest_metas_behind)
{
  guint port = test_port();
  GstElement *rx = receiver(port, "skew"),
             *tx = sender(port, "application/x-rdma-test");
  GstBuffer *b;
  GstSample *sample;

  set_property(tx, "tx", 1024);
  start(rx, tx);
  b = frame(0, 64);
  add_region(b, 1, 100);
  add_region(b, 2, 2000); /* over the bound alone */
  add_region(b, 3, 100);
  push(tx, b);
  b = frame(1, 64);
  GST_BUFFER_FLAG_SET(b, GST_BUFFER_FLAG_MARKER);
  add_region(b, 4, 2000);
  push(tx, b);

  sample = pull(rx);
  b = gst_sample_get_buffer(sample);
  fail_unless(gst_buffer_get_video_region_of_interest_meta_id(b, 1) != NULL);
  fail_unless(gst_buffer_get_video_region_of_interest_meta_id(b, 2) == NULL);
  fail_unless(gst_buffer_get_video_region_of_interest_meta_id(b, 3) != NULL);
  gst_sample_unref(sample);
  sample = pull(rx);
  b = gst_sample_get_buffer(sample);
  fail_unless(GST_BUFFER_FLAG_IS_SET(b, GST_BUFFER_FLAG_MARKER));
  fail_unless(gst_buffer_get_video_region_of_interest_meta(b) == NULL);
  gst_sample_unref(sample);
  fail_unless_equals_uint64(sink_stat(tx, "metas-not-carried"), 2);
  finish(rx, tx);
}

GST_END_TEST;

/* Fitting never leaves a padded frame's layout behind, however large the
 * regions beside it: without it the rows would be read in the caps'
 * layout (the reviewer's case: ~400 regions, each smaller than the
 * layout, made "largest first" drop it). */
GST_START_TEST(test_max_meta_size_keeps_the_layout)
{
  guint port = test_port();
  GstElement *rx = receiver(port, "skew"), *tx = sender(port, GRAY_CAPS);
  GstVideoInfo info;
  GstSample *sample;
  GstBuffer *b;

  gray_info(&info);
  set_property(tx, "tx", 256); /* room for the layout alone */
  start(rx, tx);
  b = padded_frame(7);
  for (gint id = 1; id <= 4; id++) /* each smaller than the layout */
    gst_buffer_add_video_region_of_interest_meta(b, "f", 1, 2, 3, 4)->id = id;
  push(tx, b);
  sample = pull(rx);
  b = gst_sample_get_buffer(sample);
  /* Laid out for this consumer (it takes no GstVideoMeta) from the
   * padded layout that crossed: every row right. */
  check_rows(b, &info, 7);
  fail_unless(gst_buffer_get_video_region_of_interest_meta(b) == NULL);
  gst_sample_unref(sample);
  fail_unless_equals_uint64(sink_stat(tx, "metas-not-carried"), 4);
  fail_unless_equals_uint64(src_stat(rx, TRUE, "layout-copies"), 1);
  finish(rx, tx);
}

GST_END_TEST;

/* rdmasrc's max-meta-size: a larger set from the wire is not parsed; its
 * frame comes without it, the next frame's fitting set is taken. */
GST_START_TEST(test_max_meta_size_bounds_what_the_receiver_parses)
{
  guint port = test_port();
  GstElement *rx = receiver(port, "skew"),
             *tx = sender(port, "application/x-rdma-test");
  GstBuffer *b;
  GstSample *sample;

  set_property(rx, "r", 512);
  start(rx, tx);
  b = frame(0, 64);
  add_region(b, 1, 1000);
  push(tx, b);
  b = frame(1, 64);
  add_region(b, 2, 100);
  push(tx, b);

  sample = pull(rx);
  fail_unless(gst_buffer_get_video_region_of_interest_meta(
                  gst_sample_get_buffer(sample)) == NULL);
  gst_sample_unref(sample);
  sample = pull(rx);
  fail_unless(gst_buffer_get_video_region_of_interest_meta_id(
                  gst_sample_get_buffer(sample), 2) != NULL);
  gst_sample_unref(sample);
  fail_unless_equals_uint64(src_stat(rx, FALSE, "events-dropped"), 1);
  fail_unless_equals_uint64(sink_stat(tx, "metas-not-carried"), 0);
  finish(rx, tx);
}

GST_END_TEST;

/* rdmasrc's max-meta-size with padded planes: a frame whose layout came
 * in a set too large to parse can't be read and is dropped (counted, the
 * next frame DISCONT), not pushed as garbage rows in the caps' layout; a
 * frame in the caps' layout loses only its metas. */
GST_START_TEST(test_max_meta_size_drops_a_frame_whose_layout_is_lost)
{
  guint port = test_port();
  GstElement *rx = receiver(port, "skew"), *tx = sender(port, GRAY_CAPS);
  GstVideoInfo info;
  GstSample *sample;
  GstBuffer *b;

  gray_info(&info);
  set_property(rx, "r", 256); /* the layout alone fits, not with a note */
  start(rx, tx);
  b = frame(0, W * H); /* the caps' layout */
  add_region(b, 1, 300);
  push(tx, b);
  b = padded_frame(1);
  add_region(b, 2, 300);
  push(tx, b);
  push(tx, padded_frame(2));

  sample = pull(rx);
  b = gst_sample_get_buffer(sample);
  fail_unless_equals_uint64(gst_buffer_get_size(b), W * H);
  fail_unless(gst_buffer_get_video_region_of_interest_meta(b) == NULL);
  gst_sample_unref(sample);
  sample = pull(rx);
  b = gst_sample_get_buffer(sample);
  fail_unless(GST_BUFFER_FLAG_IS_SET(b, GST_BUFFER_FLAG_DISCONT));
  check_rows(b, &info, 2); /* frame 2's rows: frame 1 didn't come */
  gst_sample_unref(sample);
  fail_unless_equals_uint64(src_stat(rx, TRUE, "drops-no-layout"), 1);
  fail_unless_equals_uint64(src_stat(rx, FALSE, "events-dropped"), 2);
  fail_unless_equals_uint64(sink_stat(tx, "metas-not-carried"), 0);
  finish(rx, tx);
}

GST_END_TEST;

static Suite *rdma_extras_suite(void)
{
  Suite *s = suite_create("rdma-extras");
  TCase *tc = tcase_create("general");

  test_transport_from_env(&transport, &rdma_addr);
  tcase_set_timeout(tc, 90);
  suite_add_tcase(s, tc);
  tcase_add_test(tc, test_flags_cross_on_their_frames);
  tcase_add_test(tc, test_metas_cross_on_their_frames);
  tcase_add_test(tc,
                 test_padded_planes_go_as_they_are_to_a_consumer_of_the_meta);
  tcase_add_test(tc, test_padded_planes_are_laid_out_for_a_consumer_without_it);
  tcase_add_test(tc, test_stream_start_segment_rate_and_gaps_cross);
  tcase_add_test(tc, test_forged_extras_are_dropped_and_counted);
  tcase_add_test(tc, test_renegotiation_is_no_new_stream);
  tcase_add_test(tc, test_app_metas_cross_through_the_signals);
  tcase_add_test(tc, test_max_meta_size_leaves_the_largest_metas_behind);
  tcase_add_test(tc, test_max_meta_size_bounds_what_the_receiver_parses);
  tcase_add_test(tc, test_max_meta_size_keeps_the_layout);
  tcase_add_test(tc, test_max_meta_size_drops_a_frame_whose_layout_is_lost);
  return s;
}

GST_CHECK_MAIN(rdma_extras);
