/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-rdmasrc-shared.c - one pipeline per camera on the receiver: every
 * rdmasrc of a process on the same transport and port shares one receiver
 * (one listener, one lane per sender), each gets the device it asked for
 * (device-id), devices nobody asked for are dropped and counted, one
 * rdmasrc starting, stopping or failing never costs another a frame, the
 * last one out closes the listener, and settings that can't be shared are
 * an error naming both elements.
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
  /* 45000..49999: clear of the other element tests' ranges. */
  static guint seq;
  return 45000 + (guint)(getpid() % 500) * 10 + (seq++ % 10);
}

/* One camera's pipeline, rdmasrc device-id=N ! appsink, and what its
 * appsink saw: frames, and whether each followed the one before in the
 * sender's numbering (GST_BUFFER_OFFSET, one packet a frame here). */
typedef struct {
  GstElement *pipeline;
  GstElement *src;
  guint device;
  gint frames;   /* atomic */
  gint gaps;     /* atomic: a frame missing since the one before */
  gint disconts; /* atomic: DISCONT after the first buffer */
  gint wrong;    /* atomic: buffers whose caps aren't this camera's */
  guint64 last_offset;
  gboolean have_last;
} Camera;

static GstFlowReturn on_sample(GstAppSink *sink, gpointer data)
{
  Camera *cam = data;
  GstSample *sample = gst_app_sink_pull_sample(sink);
  GstBuffer *buf = gst_sample_get_buffer(sample);
  GstStructure *s = gst_caps_get_structure(gst_sample_get_caps(sample), 0);
  gint width = 0;

  /* Each camera of the rig is 64 + device pixels wide: its own caps. */
  gst_structure_get_int(s, "width", &width);
  if (width != 64 + (gint)cam->device)
    g_atomic_int_inc(&cam->wrong);
  if (cam->have_last) {
    if (GST_BUFFER_OFFSET(buf) != ((cam->last_offset + 1) & 0xffff))
      g_atomic_int_inc(&cam->gaps);
    if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_DISCONT))
      g_atomic_int_inc(&cam->disconts);
  }
  cam->last_offset = GST_BUFFER_OFFSET(buf);
  cam->have_last = TRUE;
  g_atomic_int_inc(&cam->frames);
  gst_sample_unref(sample);
  return GST_FLOW_OK;
}

/* The pipeline of desc, whose rdmasrc is named src_name and its appsink
 * "out", for camera device. */
static Camera *camera_parse(const gchar *desc, const gchar *src_name,
                            guint device)
{
  Camera *cam = g_new0(Camera, 1);
  GstAppSinkCallbacks cb = {.new_sample = on_sample};
  GstElement *sink;

  cam->device = device;
  cam->pipeline = parse(desc);
  cam->src = gst_bin_get_by_name(GST_BIN(cam->pipeline), src_name);
  sink = gst_bin_get_by_name(GST_BIN(cam->pipeline), "out");
  gst_app_sink_set_callbacks(GST_APP_SINK(sink), &cb, cam, NULL);
  gst_object_unref(sink);
  return cam;
}

/* over-budget=pause: a reader stalled by a loaded machine pauses the
 * sender rather than losing frames, so a gap is always ours.  Sender
 * timestamps: the skew estimate marks DISCONT where arrivals jump (a
 * starved process), and a DISCONT here must mean a lost frame only (one
 * failed once beside a CI run, session 16). */
#define CAMERA_PROPS                                                           \
  "over-budget=pause max-queued=300 stats-interval=0 timestamp-mode=sender"
#define CAMERA_SINK "appsink name=out sync=false async=false emit-signals=false"

/* rdmasrc device-id=device ! appsink, with extra rdmasrc properties. */
static Camera *camera_new(guint port, guint device, const gchar *props)
{
  gchar *desc =
      g_strdup_printf("rdmasrc name=r transport=%s address=%s port=%u "
                      "device-id=%u " CAMERA_PROPS " %s ! " CAMERA_SINK,
                      transport, rdma_addr, port, device, props ? props : "");
  Camera *cam = camera_parse(desc, "r", device);

  g_free(desc);
  return cam;
}

/* rdmasrc name=name name.src_<device> ! appsink: the camera named by a
 * request pad, no device-id. */
static Camera *camera_by_pad_new(guint port, const gchar *name, guint device)
{
  gchar *desc = g_strdup_printf(
      "rdmasrc name=%s transport=%s address=%s port=%u " CAMERA_PROPS
      " %s.src_%u ! " CAMERA_SINK,
      name, transport, rdma_addr, port, name, device);
  Camera *cam = camera_parse(desc, name, device);

  g_free(desc);
  return cam;
}

static void camera_free(Camera *cam)
{
  gst_object_unref(cam->src);
  stop(cam->pipeline);
  g_free(cam);
}

/* A new stream of the camera starts (after it was stopped). */
static void camera_reset(Camera *cam)
{
  cam->have_last = FALSE;
  g_atomic_int_set(&cam->frames, 0);
}

static gboolean wait_frames(Camera *cam, gint count)
{
  gint64 end = g_get_monotonic_time() + (gint64)(WAIT / GST_USECOND);

  while (g_atomic_int_get(&cam->frames) < count && g_get_monotonic_time() < end)
    g_usleep(10000);
  return g_atomic_int_get(&cam->frames) >= count;
}

/* n live cameras 0..n-1, camera d 64+d pixels wide so each has caps of
 * its own, into rdmasinks sharing one connection. */
static GstElement *rig_new(guint port, guint n)
{
  GString *desc = g_string_new(NULL);
  GstElement *rig;

  for (guint d = 0; d < n; d++)
    g_string_append_printf(desc,
                           " videotestsrc is-live=true pattern=%u ! "
                           "video/x-raw,format=GRAY8,width=%u,height=48,"
                           "framerate=25/1 ! rdmasink transport=%s host=%s "
                           "port=%u device-id=%u stats-interval=0 "
                           "wait-timeout=60000",
                           d, 64 + d, transport, rdma_addr, port, d);
  rig = parse(desc->str);
  g_string_free(desc, TRUE);
  return rig;
}

static GstStructure *stats_of(Camera *cam)
{
  GstStructure *s = NULL;

  g_object_get(cam->src, "stats", &s, NULL);
  fail_unless(s != NULL);
  return s;
}

static guint64 stats_u64(const GstStructure *s, const gchar *field)
{
  guint64 v = 0;

  fail_unless(gst_structure_get_uint64(s, field, &v),
              "no %s in %" GST_PTR_FORMAT, field, s);
  return v;
}

/* The error the bus of pipeline carries, or NULL. */
static gchar *error_text(GstElement *pipeline)
{
  GstBus *bus = gst_element_get_bus(pipeline);
  GstMessage *msg =
      gst_bus_timed_pop_filtered(bus, 5 * GST_SECOND, GST_MESSAGE_ERROR);
  gchar *text = NULL;

  gst_object_unref(bus);
  if (msg) {
    GError *err = NULL;

    gst_message_parse_error(msg, &err, NULL);
    text = g_strdup(err->message);
    g_error_free(err);
    gst_message_unref(msg);
  }
  return text;
}

/* To PLAYING, waiting for it; a failure says what the bus said. */
static void play(GstElement *pipeline)
{
  GstStateChangeReturn ret = gst_element_set_state(pipeline, GST_STATE_PLAYING);

  if (ret != GST_STATE_CHANGE_FAILURE)
    ret = gst_element_get_state(pipeline, NULL, NULL, WAIT);
  if (ret == GST_STATE_CHANGE_FAILURE) {
    gchar *err = error_text(pipeline);

    fail("%s: PLAYING failed: %s", GST_OBJECT_NAME(pipeline),
         GST_STR_NULL(err));
  }
  fail_if(ret == GST_STATE_CHANGE_ASYNC, "%s: PLAYING not reached",
          GST_OBJECT_NAME(pipeline));
}

/* Three pipelines, one camera each, on one port: one listener, one lane
 * for the sender's one connection, each pipeline its own camera only. */
GST_START_TEST(test_one_receiver_per_port)
{
  guint port = test_port();
  GstElement *rig = rig_new(port, 3);
  Camera *cams[3];

  for (guint d = 0; d < 3; d++) {
    cams[d] = camera_new(port, d, NULL);
    play(cams[d]->pipeline);
  }
  play(rig);
  for (guint d = 0; d < 3; d++)
    fail_unless(wait_frames(cams[d], 25), "camera %u: %d frames", d,
                g_atomic_int_get(&cams[d]->frames));
  for (guint d = 0; d < 3; d++) {
    GstStructure *s = stats_of(cams[d]);
    guint members = 0;

    fail_unless(gst_structure_get_uint(s, "receiver-members", &members));
    fail_unless_equals_int(members, 3);
    /* One sender process, one connection: one lane in all. */
    fail_unless_equals_int(stats_u64(s, "lanes-opened"), 1);
    for (guint other = 0; other < 3; other++) {
      gchar name[16];

      g_snprintf(name, sizeof name, "device-%u", other);
      fail_unless(gst_structure_has_field(s, name) == (other == d),
                  "camera %u: %s", d, name);
    }
    gst_structure_free(s);
    fail_unless_equals_int(g_atomic_int_get(&cams[d]->wrong), 0);
    fail_unless_equals_int(g_atomic_int_get(&cams[d]->gaps), 0);
  }
  stop(rig);
  for (guint d = 0; d < 3; d++)
    camera_free(cams[d]);
}
GST_END_TEST;

/* Cameras 0..3 sent, camera 2 asked for: the others are dropped and
 * counted, and get no pad. */
GST_START_TEST(test_unclaimed_devices_dropped)
{
  guint port = test_port();
  GstElement *rig = rig_new(port, 4);
  Camera *cam = camera_new(port, 2, NULL);
  GstStructure *s;
  GList *pads;

  play(cam->pipeline);
  play(rig);
  fail_unless(wait_frames(cam, 25));
  /* The other cameras' frames, dropped and counted: waited for (the
   * rig's cameras need not keep pace with camera 2 on a loaded host). */
  for (gint64 end = g_get_monotonic_time() + WAIT / GST_USECOND;;) {
    s = stats_of(cam);
    if (stats_u64(s, "unclaimed-drops") >= 25)
      break;
    fail_unless(g_get_monotonic_time() < end, "%" GST_PTR_FORMAT, s);
    gst_structure_free(s);
    g_usleep(10000);
  }
  gst_structure_free(s);
  GST_OBJECT_LOCK(cam->src);
  pads = cam->src->srcpads;
  fail_unless_equals_int(g_list_length(pads), 1);
  fail_unless_equals_string(GST_OBJECT_NAME(pads->data), "src_2");
  GST_OBJECT_UNLOCK(cam->src);
  fail_unless_equals_int(g_atomic_int_get(&cam->wrong), 0);
  stop(rig);
  camera_free(cam);
}
GST_END_TEST;

/* Two rdmasrcs on one port, "first" asking for src_0 and "second" for
 * src_1 by request pads, and a rig sending both cameras: started, each
 * camera's first 25 frames in. */
static GstElement *two_by_pads_start(guint port, Camera *cams[2])
{
  GstElement *rig = rig_new(port, 2);

  cams[0] = camera_by_pad_new(port, "first", 0);
  cams[1] = camera_by_pad_new(port, "second", 1);
  play(cams[0]->pipeline);
  play(cams[1]->pipeline);
  play(rig);
  for (guint d = 0; d < 2; d++)
    fail_unless(wait_frames(cams[d], 25), "camera %u: %d frames", d,
                g_atomic_int_get(&cams[d]->frames));
  return rig;
}

/* Two rdmasrcs of a process on one port, each naming its camera by a
 * request pad and neither a device-id: the second to start takes just its
 * pad's device (it failed with "both take every device"), so each gets
 * its own camera and no pad of the other's. */
GST_START_TEST(test_request_pads_split_the_cameras)
{
  guint port = test_port();
  Camera *cams[2];
  GstElement *rig = two_by_pads_start(port, cams);

  for (guint d = 0; d < 2; d++) {
    GstStructure *s = stats_of(cams[d]);
    gchar other[16];
    GstPad *pad;

    g_snprintf(other, sizeof other, "device-%u", 1 - d);
    fail_if(gst_structure_has_field(s, other), "camera %u: %" GST_PTR_FORMAT, d,
            s);
    gst_structure_free(s);
    g_snprintf(other, sizeof other, "src_%u", 1 - d);
    pad = gst_element_get_static_pad(cams[d]->src, other);
    fail_if(pad != NULL, "camera %u has %s", d, other);
    fail_unless_equals_int(g_atomic_int_get(&cams[d]->wrong), 0);
  }
  stop(rig);
  camera_free(cams[1]);
  camera_free(cams[0]);
}
GST_END_TEST;

/* Once both run, the rdmasrc that names its pads asks for a pad of the
 * device the other (which takes every device) has: refused, and the
 * other's pad keeps its camera (the request took it silently before). */
GST_START_TEST(test_named_pad_of_the_other_is_refused)
{
  guint port = test_port();
  Camera *cams[2];
  GstElement *rig = two_by_pads_start(port, cams);
  GstPad *pad;
  gint before;

  pad = gst_element_request_pad_simple(cams[1]->src, "src_0");
  fail_unless(pad == NULL, "second got src_0, first's camera");
  before = g_atomic_int_get(&cams[0]->frames);
  fail_unless(wait_frames(cams[0], before + 25), "first: %d frames after %d",
              g_atomic_int_get(&cams[0]->frames), before);
  fail_unless_equals_int(g_atomic_int_get(&cams[1]->wrong), 0);
  stop(rig);
  camera_free(cams[1]);
  camera_free(cams[0]);
}
GST_END_TEST;

/* One camera's pipeline stops mid-stream and starts again, another fails
 * to start (its settings can't be shared): the other cameras lose no
 * frame, get no DISCONT; the restarted one gets its stream again although
 * its caps were sent long before. */
GST_START_TEST(test_members_independent)
{
  guint port = test_port();
  GstElement *rig = rig_new(port, 3);
  Camera *cams[3], *bad;
  gint before[3];

  for (guint d = 0; d < 3; d++) {
    cams[d] = camera_new(port, d, NULL);
    play(cams[d]->pipeline);
  }
  play(rig);
  for (guint d = 0; d < 3; d++)
    fail_unless(wait_frames(cams[d], 10));

  change_state(cams[1]->pipeline, GST_STATE_NULL);
  for (guint d = 0; d < 3; d++)
    before[d] = g_atomic_int_get(&cams[d]->frames);
  fail_unless(wait_frames(cams[0], before[0] + 25));
  fail_unless(wait_frames(cams[2], before[2] + 25));
  fail_unless_equals_int(g_atomic_int_get(&cams[1]->frames), before[1]);

  /* An rdmasrc that can't join fails alone. */
  bad = camera_new(port, 1, "blocks=8");
  fail_unless_equals_int(
      gst_element_set_state(bad->pipeline, GST_STATE_PLAYING),
      GST_STATE_CHANGE_FAILURE);
  camera_free(bad);

  camera_reset(cams[1]);
  play(cams[1]->pipeline);
  fail_unless(wait_frames(cams[1], 25), "restarted camera: %d frames",
              g_atomic_int_get(&cams[1]->frames));
  fail_unless(wait_frames(cams[0], before[0] + 75));

  for (guint d = 0; d < 3; d++) {
    fail_unless_equals_int(g_atomic_int_get(&cams[d]->gaps), 0);
    fail_unless_equals_int(g_atomic_int_get(&cams[d]->wrong), 0);
    fail_unless_equals_int(g_atomic_int_get(&cams[d]->disconts), 0);
  }
  stop(rig);
  for (guint d = 0; d < 3; d++)
    camera_free(cams[d]);
}
GST_END_TEST;

/* While one rdmasrc holds the port, another with other settings is
 * refused naming both; once the last one left, the listener is closed and
 * the same settings make a new one. */
GST_START_TEST(test_last_out_closes)
{
  guint port = test_port();
  Camera *a = camera_new(port, 0, NULL);
  Camera *b = camera_new(port, 1, NULL);
  Camera *c = camera_new(port, 2, "block-size=8192");
  GstStructure *s;
  guint members = 0;
  gchar *err;

  change_state(a->pipeline, GST_STATE_PLAYING);
  change_state(b->pipeline, GST_STATE_PLAYING);
  fail_unless_equals_int(gst_element_set_state(c->pipeline, GST_STATE_PLAYING),
                         GST_STATE_CHANGE_FAILURE);
  gst_element_set_state(c->pipeline, GST_STATE_NULL);

  change_state(a->pipeline, GST_STATE_NULL);
  /* b is still there: so is the receiver with a's settings. */
  fail_unless_equals_int(gst_element_set_state(c->pipeline, GST_STATE_PLAYING),
                         GST_STATE_CHANGE_FAILURE);
  err = error_text(c->pipeline);
  fail_unless(err && strstr(err, "block-size"), "%s", GST_STR_NULL(err));
  g_free(err);
  gst_element_set_state(c->pipeline, GST_STATE_NULL);

  change_state(b->pipeline, GST_STATE_NULL);
  change_state(c->pipeline, GST_STATE_PLAYING);
  s = stats_of(c);
  fail_unless(gst_structure_get_uint(s, "receiver-members", &members));
  fail_unless_equals_int(members, 1);
  gst_structure_free(s);
  camera_free(a);
  camera_free(b);
  camera_free(c);
}
GST_END_TEST;

/* What can't be shared is an error at READY->PAUSED that names both
 * rdmasrcs: other geometry or mechanism, the same device twice (by
 * device-id or pad names), two that take every device. */
GST_START_TEST(test_conflicts_name_both)
{
  static const struct {
    const gchar *first, *second, *says;
  } cases[] = {
      {"device-id=0", "device-id=1 blocks=16", "blocks"},
      {"device-id=0", "device-id=1 mechanism=sliding-window", "mechanism"},
      {"device-id=0", "device-id=0", "device 0"},
      {"device-id=-1", "device-id=-1", "every device"},
      {"first.src_4", "device-id=4", "device 4"},
      {"first.src_1", "second.src_1", "device 1"},
  };

  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    guint port = test_port();
    gchar *d1 =
        g_strdup_printf("rdmasrc name=first transport=%s address=%s "
                        "port=%u stats-interval=0 %s ! fakesink async=false",
                        transport, rdma_addr, port, cases[i].first);
    gchar *d2 =
        g_strdup_printf("rdmasrc name=second transport=%s address=%s "
                        "port=%u stats-interval=0 %s ! fakesink async=false",
                        transport, rdma_addr, port, cases[i].second);
    GstElement *p1, *p2;
    gchar *err;

    p1 = parse(d1);
    p2 = parse(d2);
    change_state(p1, GST_STATE_PLAYING);
    fail_unless(gst_element_set_state(p2, GST_STATE_PLAYING) ==
                    GST_STATE_CHANGE_FAILURE,
                "case %u: started", i);
    err = error_text(p2);
    fail_unless(err != NULL, "case %u: no error", i);
    fail_unless(strstr(err, "first") && strstr(err, "second") &&
                    strstr(err, cases[i].says),
                "case %u: %s", i, err);
    g_free(err);
    stop(p2);
    stop(p1);
    g_free(d1);
    g_free(d2);
  }
}
GST_END_TEST;

/* device-id makes the pad when it is set, before the launch line's next
 * properties: the element's over-budget still reaches that one pad
 * (a capture asking for over-budget=pause lost frames to drop-oldest). */
GST_START_TEST(test_device_pad_takes_element_policy)
{
  GstElement *src = parse("rdmasrc device-id=2 over-budget=pause");
  GstPad *pad = gst_element_get_static_pad(src, "src_2");
  GEnumValue *v;
  gint policy = -1;

  fail_unless(pad != NULL);
  g_object_get(pad, "over-budget", &policy, NULL);
  v = g_enum_get_value_by_nick(
      g_type_class_peek(G_PARAM_SPEC_VALUE_TYPE(g_object_class_find_property(
          G_OBJECT_GET_CLASS(pad), "over-budget"))),
      "pause");
  fail_unless(v != NULL);
  fail_unless_equals_int(policy, v->value);
  gst_object_unref(pad);
  gst_object_unref(src);
}
GST_END_TEST;

/* The next element message called name on pipeline's bus (others are
 * skipped), or a failure after WAIT. */
static GstStructure *next_element_message(GstElement *pipeline,
                                          const gchar *name)
{
  GstBus *bus = gst_element_get_bus(pipeline);
  gint64 end = g_get_monotonic_time() + (gint64)(WAIT / GST_USECOND);
  GstStructure *found = NULL;

  while (!found && g_get_monotonic_time() < end) {
    GstMessage *msg =
        gst_bus_timed_pop_filtered(bus, 100 * GST_MSECOND, GST_MESSAGE_ELEMENT);

    if (!msg)
      continue;
    if (gst_message_has_name(msg, name))
      found = gst_structure_copy(gst_message_get_structure(msg));
    gst_message_unref(msg);
  }
  gst_object_unref(bus);
  fail_unless(found != NULL, "%s: no %s", GST_OBJECT_NAME(pipeline), name);
  return found;
}

/* peer as the receiver names this process's senders: "shm:pid=N" over
 * shm; over verbs, an address and the sender's port. */
static void check_peer_is_us(const GstStructure *s)
{
  const gchar *peer = gst_structure_get_string(s, "peer");

  fail_unless(peer && *peer, "no peer in %" GST_PTR_FORMAT, s);
  if (g_str_equal(transport, "shm")) {
    gchar *us = g_strdup_printf("shm:pid=%d", (gint)getpid());

    fail_unless_equals_string(peer, us);
    g_free(us);
  } else {
    fail_unless(strrchr(peer, ':') != NULL, "peer %s", peer);
  }
}

/* A sender connecting and leaving is an element message on every rdmasrc
 * sharing the receiver, naming the sender and its lane, the same lane
 * both times and for both. */
GST_START_TEST(test_sender_connected_and_left_messages)
{
  guint port = test_port();
  GstElement *rig = rig_new(port, 2);
  Camera *cams[2];
  guint lanes[2][2];

  for (guint d = 0; d < 2; d++) {
    cams[d] = camera_new(port, d, NULL);
    play(cams[d]->pipeline);
  }
  play(rig);
  for (guint d = 0; d < 2; d++) {
    GstStructure *s =
        next_element_message(cams[d]->pipeline, "rdmasrc-sender-connected");

    check_peer_is_us(s);
    fail_unless(gst_structure_get_uint(s, "lane", &lanes[d][0]));
    gst_structure_free(s);
    fail_unless(wait_frames(cams[d], 5), "camera %u: %d frames", d,
                g_atomic_int_get(&cams[d]->frames));
  }
  stop(rig);
  for (guint d = 0; d < 2; d++) {
    GstStructure *s =
        next_element_message(cams[d]->pipeline, "rdmasrc-sender-left");

    check_peer_is_us(s);
    fail_unless(gst_structure_get_uint(s, "lane", &lanes[d][1]));
    gst_structure_free(s);
    fail_unless_equals_int(lanes[d][1], lanes[d][0]);
  }
  /* One sender, one connection: one lane, which both rdmasrcs name. */
  fail_unless_equals_int(lanes[1][0], lanes[0][0]);
  for (guint d = 0; d < 2; d++)
    camera_free(cams[d]);
}
GST_END_TEST;

/* A refused sender is an element message on every rdmasrc sharing the
 * receiver, with the reason; it never had a lane. */
GST_START_TEST(test_sender_refused_message)
{
  guint port = test_port();
  /* Nobody on this host may send. */
  const gchar *rule = "allowed-senders=192.0.2.1";
  Camera *cams[2];
  GstElement *rig;

  for (guint d = 0; d < 2; d++) {
    cams[d] = camera_new(port, d, rule);
    play(cams[d]->pipeline);
  }
  rig = rig_new(port, 1);
  /* Its rdmasink fails (not authorized): what matters is the receiver. */
  gst_element_set_state(rig, GST_STATE_PLAYING);
  for (guint d = 0; d < 2; d++) {
    GstStructure *s =
        next_element_message(cams[d]->pipeline, "rdmasrc-sender-refused");
    const gchar *description = gst_structure_get_string(s, "description");
    guint repeats = G_MAXUINT;

    check_peer_is_us(s);
    fail_unless_equals_string(gst_structure_get_string(s, "reason"),
                              "not-allowed");
    fail_unless(description && *description, "%" GST_PTR_FORMAT, s);
    fail_unless(gst_structure_get_uint(s, "repeats", &repeats));
    fail_unless_equals_int(repeats, 0);
    fail_if(gst_structure_has_field(s, "lane"));
    gst_structure_free(s);
  }
  stop(rig);
  for (guint d = 0; d < 2; d++)
    camera_free(cams[d]);
}
GST_END_TEST;

static Suite *rdmasrc_shared_suite(void)
{
  Suite *s = suite_create("rdmasrc-shared");
  TCase *tc = tcase_create("general");

  test_transport_from_env(&transport, &rdma_addr);
  tcase_set_timeout(tc, 120);
  suite_add_tcase(s, tc);
  tcase_add_test(tc, test_one_receiver_per_port);
  tcase_add_test(tc, test_unclaimed_devices_dropped);
  tcase_add_test(tc, test_members_independent);
  tcase_add_test(tc, test_last_out_closes);
  tcase_add_test(tc, test_conflicts_name_both);
  tcase_add_test(tc, test_request_pads_split_the_cameras);
  tcase_add_test(tc, test_named_pad_of_the_other_is_refused);
  tcase_add_test(tc, test_device_pad_takes_element_policy);
  tcase_add_test(tc, test_sender_connected_and_left_messages);
  tcase_add_test(tc, test_sender_refused_message);
  return s;
}

GST_CHECK_MAIN(rdmasrc_shared);
