/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-rdmasrc-pads.c - rdmasrc's pads as a launch line and an application
 * see them: a pad named on the launch line exists before its camera comes
 * (requested), so EOS ends the pipeline even when that camera never comes
 * or no sender is there at all (gst-launch -e exits); an unnamed link
 * still waits for the first camera, whatever its device; pads are asked
 * for as tee's are (by name, or the lowest free device), and a released
 * one's name can be asked for again.
 *
 * Transport: SBR_TEST_TRANSPORT (shm on the host, verbs in the VM).
 */
#include <gst/check/gstcheck.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pipeline-check.h"

#define WAIT (15 * GST_SECOND)

static const gchar *transport; /* SBR_TEST_TRANSPORT */
static const gchar *rdma_addr; /* SBR_RDMA_ADDR */

static guint test_port(void)
{
  /* 30000..34999: clear of the other element tests' ranges. */
  static guint seq;
  return 30000 + (guint)(getpid() % 500) * 10 + (seq++ % 10);
}

static gint handoffs; /* atomic: buffers fakesink "s" got */

static void on_handoff(GstElement *sink, GstBuffer *buf, GstPad *pad,
                       gpointer user_data)
{
  (void)sink;
  (void)buf;
  (void)pad;
  (void)user_data;
  g_atomic_int_inc(&handoffs);
}

/* The receiver, with fakesink "s" counting its buffers. */
static GstElement *receiver_new(const gchar *links, guint port)
{
  gchar *desc = g_strdup_printf("rdmasrc name=r transport=%s address=%s "
                                "port=%u stats-interval=0 %s",
                                transport, rdma_addr, port, links);
  GstElement *rx = parse(desc);
  GstElement *s = gst_bin_get_by_name(GST_BIN(rx), "s");

  g_free(desc);
  g_atomic_int_set(&handoffs, 0);
  if (s) {
    g_object_set(s, "signal-handoffs", TRUE, NULL);
    g_signal_connect(s, "handoff", G_CALLBACK(on_handoff), NULL);
    gst_object_unref(s);
  }
  return rx;
}

static gboolean wait_handoffs(gint count, GstClockTime timeout)
{
  gint64 end = g_get_monotonic_time() + (gint64)(timeout / GST_USECOND);

  while (g_atomic_int_get(&handoffs) < count && g_get_monotonic_time() < end)
    g_usleep(10000);
  return g_atomic_int_get(&handoffs) >= count;
}

static gboolean has_pad(GstElement *pipeline, const gchar *name)
{
  GstElement *r = gst_bin_get_by_name(GST_BIN(pipeline), "r");
  GstPad *pad = gst_element_get_static_pad(r, name);
  gboolean linked = pad && gst_pad_is_linked(pad);

  if (pad)
    gst_object_unref(pad);
  gst_object_unref(r);
  return linked;
}

/* Nobody sends: EOS to the pipeline (what gst-launch -e does) still ends
 * it, through the two pads the launch line asked for. */
GST_START_TEST(test_eos_without_a_sender)
{
  GstElement *rx = receiver_new(
      "r.src_0 ! fakesink name=s r.src_5 ! fakesink sync=true", test_port());

  /* Linked at once: the pads exist before any camera. */
  fail_unless(has_pad(rx, "src_0") && has_pad(rx, "src_5"));
  set_state(rx, GST_STATE_PLAYING);
  g_usleep(200000);
  fail_unless(gst_element_send_event(rx, gst_event_new_eos()));
  expect_eos(rx, WAIT);
  stop(rx);
}

GST_END_TEST;

/* Camera 0 streams, camera 5 never comes: EOS ends both branches.  The
 * sink of the absent camera has async=false: in a live pipeline a sink
 * that never gets data would keep every sink waiting to preroll
 * (GStreamer's rule, not rdmasrc's; docs/design.md "Pads"). */
GST_START_TEST(test_eos_with_a_camera_that_never_came)
{
  guint port = test_port();
  GstElement *rx = receiver_new(
      "r.src_0 ! fakesink name=s r.src_5 ! fakesink async=false", port);
  GstElement *tx = camera_rig_new(transport, rdma_addr, port, 0, 1, 0, "");

  set_state(rx, GST_STATE_PLAYING);
  set_state(tx, GST_STATE_PLAYING);
  fail_unless(wait_handoffs(5, WAIT), "camera 0: %d frames",
              g_atomic_int_get(&handoffs));
  fail_unless(gst_element_send_event(rx, gst_event_new_eos()));
  expect_eos(rx, WAIT);
  stop(tx);
  stop(rx);
}

GST_END_TEST;

/* The same after a state cycle: pads kept across NULL have no stream in
 * the new run until their camera sends, and still get EOS. */
GST_START_TEST(test_eos_after_a_state_cycle)
{
  guint port = test_port();
  GstElement *rx = receiver_new("r.src_2 ! fakesink name=s", port);
  GstElement *tx = camera_rig_new(transport, rdma_addr, port, 2, 1, 0, "");

  set_state(rx, GST_STATE_PLAYING);
  set_state(tx, GST_STATE_PLAYING);
  fail_unless(wait_handoffs(3, WAIT));
  stop(tx);
  change_state(rx, GST_STATE_NULL);
  set_state(rx, GST_STATE_PLAYING);
  g_usleep(200000);
  fail_unless(gst_element_send_event(rx, gst_event_new_eos()));
  expect_eos(rx, WAIT);
  stop(rx);
}

GST_END_TEST;

/* A requested pad gets its camera when it comes, after PLAYING. */
GST_START_TEST(test_requested_pad_gets_its_camera_later)
{
  guint port = test_port();
  GstElement *rx = receiver_new("r.src_3 ! fakesink name=s", port);
  GstElement *tx;

  set_state(rx, GST_STATE_PLAYING);
  g_usleep(300000);
  tx = camera_rig_new(transport, rdma_addr, port, 3, 1, 0, "");
  set_state(tx, GST_STATE_PLAYING);
  fail_unless(wait_handoffs(10, WAIT), "src_3: %d frames",
              g_atomic_int_get(&handoffs));
  stop(tx);
  stop(rx);
}

GST_END_TEST;

/* `rdmasrc ! sink` waits for the first camera, device 7 here, as a link
 * to a demuxer waits for its first stream. */
GST_START_TEST(test_unnamed_link_takes_the_first_camera)
{
  guint port = test_port();
  GstElement *rx = receiver_new("! fakesink name=s", port);
  GstElement *tx = camera_rig_new(transport, rdma_addr, port, 7, 1, 0, "");

  set_state(rx, GST_STATE_PLAYING);
  set_state(tx, GST_STATE_PLAYING);
  fail_unless(wait_handoffs(5, WAIT), "%d frames", g_atomic_int_get(&handoffs));
  fail_unless(has_pad(rx, "src_7"));
  stop(tx);
  stop(rx);
}

GST_END_TEST;

/* rdmasrc device-id=3, one camera's source (OpenCV's VideoCapture, a
 * URI): its pad src_3 is the element's own, from the sometimes template as
 * a demuxer's stream pads are, not a request pad an application made and
 * may release.  It is there as soon as the property is set, so the link
 * is made at parse time and camera 3 flows with no pad-added; device-id
 * changed in NULL moves the pad. */
static gint pads_added; /* atomic */

static void count_pad_added(GstElement *element, GstPad *pad, gpointer data)
{
  (void)element;
  (void)pad;
  (void)data;
  g_atomic_int_inc(&pads_added);
}

GST_START_TEST(test_device_id_pad_links_statically)
{
  guint port = test_port();
  GstElement *rx = receiver_new("device-id=3 ! fakesink name=s", port);
  GstElement *r = gst_bin_get_by_name(GST_BIN(rx), "r");
  GstPad *pad = gst_element_get_static_pad(r, "src_3");
  GstPadTemplate *templ;
  GstElement *tx;

  fail_unless(pad != NULL && gst_pad_is_linked(pad));
  templ = gst_pad_get_pad_template(pad);
  fail_unless(templ != NULL);
  fail_unless_equals_int(GST_PAD_TEMPLATE_PRESENCE(templ), GST_PAD_SOMETIMES);
  gst_object_unref(templ);
  gst_object_unref(pad);

  g_atomic_int_set(&pads_added, 0);
  g_signal_connect(r, "pad-added", G_CALLBACK(count_pad_added), NULL);
  tx = camera_rig_new(transport, rdma_addr, port, 3, 2, 0, "");
  set_state(rx, GST_STATE_PLAYING);
  set_state(tx, GST_STATE_PLAYING);
  fail_unless(wait_handoffs(10, WAIT), "src_3: %d frames",
              g_atomic_int_get(&handoffs));
  fail_unless_equals_int(g_atomic_int_get(&pads_added), 0);
  stop(tx);
  change_state(rx, GST_STATE_NULL);

  g_object_set(r, "device-id", 4, NULL);
  pad = gst_element_get_static_pad(r, "src_3");
  fail_unless(pad == NULL, "src_3 still there");
  pad = gst_element_get_static_pad(r, "src_4");
  fail_unless(pad != NULL);
  templ = gst_pad_get_pad_template(pad);
  fail_unless_equals_int(GST_PAD_TEMPLATE_PRESENCE(templ), GST_PAD_SOMETIMES);
  gst_object_unref(templ);
  gst_object_unref(pad);
  g_object_set(r, "device-id", -1, NULL);
  fail_unless_equals_int(r->numsrcpads, 0);
  gst_object_unref(r);
  stop(rx);
}

GST_END_TEST;

/* Pads are asked for as tee's and compositor's are: by name,
 * src_<device> with device < 256, or unnamed (NULL, "src_%u") for the
 * lowest device without a pad; a released pad goes away and its name can
 * be asked for again. */
GST_START_TEST(test_pads_are_requested_as_tee_does)
{
  GstElement *r = gst_element_factory_make("rdmasrc", NULL);
  GstPad *pad, *p0, *p1;

  fail_unless(r != NULL);
  fail_unless(gst_element_request_pad_simple(r, "src_x") == NULL);
  fail_unless(gst_element_request_pad_simple(r, "src_256") == NULL);
  fail_unless(gst_element_request_pad_simple(r, "src_1x") == NULL);
  pad = gst_element_request_pad_simple(r, "src_255");
  fail_unless(pad != NULL);
  fail_unless_equals_string(GST_PAD_NAME(pad), "src_255");
  gst_element_release_request_pad(r, pad);
  gst_object_unref(pad);
  fail_unless(gst_element_get_static_pad(r, "src_255") == NULL);
  fail_unless_equals_int(GST_ELEMENT(r)->numsrcpads, 0);
  /* Released: the name again. */
  pad = gst_element_request_pad_simple(r, "src_255");
  fail_unless(pad != NULL);
  fail_unless_equals_string(GST_PAD_NAME(pad), "src_255");
  /* Unnamed: the lowest free device, either spelling. */
  p0 = gst_element_request_pad_simple(r, "src_%u");
  fail_unless(p0 != NULL);
  fail_unless_equals_string(GST_PAD_NAME(p0), "src_0");
  p1 = gst_element_request_pad(r, gst_element_get_pad_template(r, "src_%u"),
                               NULL, NULL);
  fail_unless(p1 != NULL);
  fail_unless_equals_string(GST_PAD_NAME(p1), "src_1");
  gst_element_release_request_pad(r, p0);
  gst_object_unref(p0);
  p0 = gst_element_request_pad_simple(r, "src_%u");
  fail_unless(p0 != NULL);
  fail_unless_equals_string(GST_PAD_NAME(p0), "src_0");
  gst_object_unref(p0);
  gst_object_unref(p1);
  gst_object_unref(pad);
  gst_object_unref(r);
}

GST_END_TEST;

/* A fakesink after pad, playing with the pipeline. */
static void link_fakesink(GstElement *pipeline, GstPad *pad)
{
  GstElement *sink = gst_element_factory_make("fakesink", NULL);
  GstPad *sinkpad;

  g_object_set(sink, "sync", FALSE, "async", FALSE, NULL);
  gst_bin_add(GST_BIN(pipeline), sink);
  sinkpad = gst_element_get_static_pad(sink, "sink");
  gst_pad_link(pad, sinkpad);
  gst_object_unref(sinkpad);
  gst_element_sync_state_with_parent(sink);
}

static void link_counting_sink(GstElement *pipeline, GstPad *pad)
{
  GstElement *sink = gst_element_factory_make("fakesink", NULL);
  GstPad *sinkpad;

  g_object_set(sink, "signal-handoffs", TRUE, "sync", FALSE, "async", FALSE,
               NULL);
  g_signal_connect(sink, "handoff", G_CALLBACK(on_handoff), NULL);
  gst_bin_add(GST_BIN(pipeline), sink);
  sinkpad = gst_element_get_static_pad(sink, "sink");
  fail_unless_equals_int(gst_pad_link(pad, sinkpad), GST_PAD_LINK_OK);
  gst_object_unref(sinkpad);
  fail_unless(gst_element_sync_state_with_parent(sink));
}

/* While playing: camera 3's pad is released (its task stops, its frames
 * are dropped) and asked for again: the new src_3 gets camera 3. */
GST_START_TEST(test_released_pad_comes_back_while_playing)
{
  guint port = test_port();
  GstElement *rx = gst_pipeline_new(NULL);
  GstElement *tx = camera_rig_new(transport, rdma_addr, port, 3, 1, 0, "");
  GstElement *r = gst_element_factory_make("rdmasrc", "r");
  GstPad *pad;

  gst_util_set_object_arg(G_OBJECT(r), "transport", transport);
  g_object_set(r, "address", rdma_addr, "port", port, "stats-interval", 0,
               NULL);
  gst_bin_add(GST_BIN(rx), gst_object_ref(r));
  g_atomic_int_set(&handoffs, 0);
  pad = gst_element_request_pad_simple(r, "src_3");

  fail_unless(pad != NULL);
  link_counting_sink(rx, pad);
  set_state(rx, GST_STATE_PLAYING);
  set_state(tx, GST_STATE_PLAYING);
  fail_unless(wait_handoffs(5, WAIT), "%d frames", g_atomic_int_get(&handoffs));

  gst_element_release_request_pad(r, pad);
  gst_object_unref(pad);
  fail_unless(gst_element_get_static_pad(r, "src_3") == NULL);
  pad = gst_element_request_pad_simple(r, "src_3");
  fail_unless(pad != NULL, "src_3 not given again");
  g_atomic_int_set(&handoffs, 0);
  link_counting_sink(rx, pad);
  fail_unless(wait_handoffs(5, WAIT), "again: %d frames",
              g_atomic_int_get(&handoffs));
  gst_object_unref(pad);
  gst_object_unref(r);
  stop(tx);
  stop(rx);
}

GST_END_TEST;

/* What the pad-added handler saw. */
typedef struct {
  GstElement *pipeline;
  gint calls;        /* atomic */
  gint on_receive;   /* atomic: calls on the receive thread */
  gint during_sleep; /* camera 0's frames while the first call slept */
} PadAdded;

static void on_pad_added(GstElement *r, GstPad *pad, PadAdded *pa)
{
  char name[16] = "";

  (void)r;
  pthread_getname_np(pthread_self(), name, sizeof name);
  if (!strcmp(name, "rdmasrc:receive"))
    g_atomic_int_inc(&pa->on_receive);
  if (g_atomic_int_add(&pa->calls, 1) == 0) {
    /* A slow handler: a Python app building a branch.  It returns once
     * camera 0 has had 50 frames meanwhile (2 s of 25 fps), or after
     * 20 s: counted, so a host that runs the cameras late only makes it
     * slower. */
    gint before = g_atomic_int_get(&handoffs);
    gint64 end = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;

    while (g_atomic_int_get(&handoffs) - before < 50 &&
           g_get_monotonic_time() < end)
      g_usleep(10000);
    pa->during_sleep = g_atomic_int_get(&handoffs) - before;
  }
  link_fakesink(pa->pipeline, pad);
}

/* A slow pad-added handler: the other cameras flow meanwhile,
 * as it runs on no thread they wait for (issue 19 item 7). */
GST_START_TEST(test_slow_pad_added_handler_stalls_no_camera)
{
  guint port = test_port();
  GstElement *rx = receiver_new("r.src_0 ! fakesink name=s sync=false", port);
  GstElement *tx = camera_rig_new(transport, rdma_addr, port, 0, 3, 0, "");
  GstElement *r = gst_bin_get_by_name(GST_BIN(rx), "r");
  PadAdded pa = {.pipeline = rx};
  gint64 end;

  g_signal_connect(r, "pad-added", G_CALLBACK(on_pad_added), &pa);
  set_state(rx, GST_STATE_PLAYING);
  set_state(tx, GST_STATE_PLAYING);
  /* Cameras 1 and 2 come as sometimes pads. */
  end = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
  while (g_atomic_int_get(&pa.calls) < 2 && g_get_monotonic_time() < end)
    g_usleep(10000);
  fail_unless_equals_int(g_atomic_int_get(&pa.calls), 2);
  end = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
  while (pa.during_sleep == 0 && g_get_monotonic_time() < end)
    g_usleep(10000);
  fail_unless_equals_int(g_atomic_int_get(&pa.on_receive), 0);
  /* Flowing, camera 0's 50 frames; stalled, what its queue held. */
  fail_unless(pa.during_sleep >= 50,
              "camera 0: %d frames while the handler ran 20 s",
              pa.during_sleep);
  gst_object_unref(r);
  stop(tx);
  stop(rx);
}

GST_END_TEST;

/* What a user types: gst-launch-1.0 -e with a pad for a camera that
 * isn't there, Ctrl-C, and the pipeline ends cleanly (exit status 0). */
GST_START_TEST(test_gst_launch_e_exits_on_ctrl_c)
{
  gchar *port = g_strdup_printf("port=%u", test_port());
  gchar *transport_arg = g_strdup_printf("transport=%s", transport);
  gchar *address_arg = g_strdup_printf("address=%s", rdma_addr);
  const gchar *argv[] = {"gst-launch-1.0",
                         "-e",
                         "rdmasrc",
                         "name=r",
                         transport_arg,
                         address_arg,
                         port,
                         "r.src_4",
                         "!",
                         "fakesink",
                         NULL};
  GError *err = NULL;
  gint out_fd = -1, status = -1;
  GPid pid;
  gchar buf[4096];
  GString *out = g_string_new(NULL);
  gint64 end;

  fail_unless(
      g_spawn_async_with_pipes(NULL, (gchar **)argv, NULL,
                               G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD,
                               NULL, NULL, &pid, NULL, &out_fd, NULL, &err),
      "spawn: %s", err ? err->message : "?");
  /* Ctrl-C once it plays. */
  end = g_get_monotonic_time() + 15 * G_TIME_SPAN_SECOND;
  while (!strstr(out->str, "Setting pipeline to PLAYING") &&
         g_get_monotonic_time() < end) {
    ssize_t n = read(out_fd, buf, sizeof buf - 1);
    if (n <= 0)
      break;
    g_string_append_len(out, buf, n);
  }
  fail_unless(strstr(out->str, "Setting pipeline to PLAYING") != NULL,
              "gst-launch said: %s", out->str);
  g_usleep(300000);
  kill(pid, SIGINT);
  end = g_get_monotonic_time() + 10 * G_TIME_SPAN_SECOND;
  while (g_get_monotonic_time() < end) {
    if (waitpid(pid, &status, WNOHANG) == pid)
      break;
    g_usleep(20000);
  }
  if (!WIFEXITED(status)) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    fail("gst-launch -e did not end within 10 s of Ctrl-C");
  }
  fail_unless_equals_int(WEXITSTATUS(status), 0);
  close(out_fd);
  g_string_free(out, TRUE);
  g_free(port);
  g_free(transport_arg);
  g_free(address_arg);
}

GST_END_TEST;

/* A field of device 0's stats structure in rdmasrc "r". */
static guint64 device0_stat(GstElement *rx, const gchar *field)
{
  GstElement *r = gst_bin_get_by_name(GST_BIN(rx), "r");
  GstStructure *st = NULL;
  const GstStructure *d = NULL;
  guint64 v64 = 0;
  guint v = 0;

  g_object_get(r, "stats", &st, NULL);
  gst_object_unref(r);
  fail_unless(st != NULL);
  fail_unless(gst_structure_get(st, "device-0", GST_TYPE_STRUCTURE, &d, NULL),
              "no device-0 in %" GST_PTR_FORMAT, st);
  if (!gst_structure_get_uint64(d, field, &v64)) {
    fail_unless(gst_structure_get_uint(d, field, &v), "no %s", field);
    v64 = v;
  }
  gst_structure_free((GstStructure *)d);
  gst_structure_free(st);
  return v64;
}

typedef struct {
  GMutex lock;
  GCond cond;
  gboolean closed;
  gboolean entered; /* a buffer waits at the gate */
} Gate;

static GstPadProbeReturn gate_probe(GstPad *pad, GstPadProbeInfo *info,
                                    gpointer user_data)
{
  Gate *g = user_data;

  (void)pad;
  (void)info;
  g_mutex_lock(&g->lock);
  g->entered = TRUE;
  g_cond_broadcast(&g->cond);
  while (g->closed)
    g_cond_wait(&g->cond, &g->lock);
  g_mutex_unlock(&g->lock);
  return GST_PAD_PROBE_OK;
}

static gboolean wait_device0(GstElement *rx, const gchar *field,
                             guint64 at_least, gboolean or_zero)
{
  gint64 end = g_get_monotonic_time() + 15 * G_USEC_PER_SEC;

  for (;;) {
    guint64 v = device0_stat(rx, field);

    if (or_zero ? v == 0 : v >= at_least)
      return TRUE;
    if (g_get_monotonic_time() > end)
      return FALSE;
    g_usleep(10000);
  }
}

/* The receive thread wakes a pad's task only when it sleeps for an item
 * (a futex wake-up each, and on an idle vCPU the host's too: B9).  Frames
 * queued while the task is stuck in a push (preroll, a slow element) are
 * pushed one after the other when it returns, none of them a wake-up.
 * Here a gate holds the first frame in the sink; ten or more queue behind
 * it, the camera stops, the gate opens: the queue drains, and the task was
 * woken no more times than when the first frame reached the gate.  With a
 * signal per queued item, each of them counted as one. */
GST_START_TEST(test_frames_queued_behind_a_push_wake_nobody)
{
  guint port = test_port();
  GstElement *rx =
      receiver_new("blocks=64 device-blocks=40 r.src_0 ! fakesink name=s "
                   "sync=false async=false",
                   port);
  GstElement *s = gst_bin_get_by_name(GST_BIN(rx), "s");
  GstPad *sinkpad = gst_element_get_static_pad(s, "sink");
  Gate gate = {.closed = TRUE};
  guint64 woken, queued;
  GstElement *tx;

  g_mutex_init(&gate.lock);
  g_cond_init(&gate.cond);
  gst_pad_add_probe(sinkpad, GST_PAD_PROBE_TYPE_BUFFER, gate_probe, &gate,
                    NULL);
  set_state(rx, GST_STATE_PLAYING);
  tx = camera_rig_new(transport, rdma_addr, port, 0, 1, 0, "");
  set_state(tx, GST_STATE_PLAYING);
  g_mutex_lock(&gate.lock);
  while (!gate.entered)
    fail_unless(g_cond_wait_until(&gate.cond, &gate.lock,
                                  g_get_monotonic_time() + 15 * G_USEC_PER_SEC),
                "no frame reached the sink");
  g_mutex_unlock(&gate.lock);
  /* The task is in its first push from here until the gate opens. */
  woken = device0_stat(rx, "task-wakeups");
  fail_unless(woken >= 1, "the first frame found the task asleep");
  fail_unless(wait_device0(rx, "queued", 10, FALSE), "frames didn't queue");
  stop(tx);
  queued = device0_stat(rx, "queued");
  g_mutex_lock(&gate.lock);
  gate.closed = FALSE;
  g_cond_broadcast(&gate.cond);
  g_mutex_unlock(&gate.lock);
  fail_unless(wait_device0(rx, "queued", 0, TRUE), "the queue didn't drain");
  fail_unless(wait_handoffs((gint)queued + 1, WAIT), "%d of %u frames pushed",
              g_atomic_int_get(&handoffs), (guint)queued + 1);
  fail_unless_equals_int(device0_stat(rx, "task-wakeups"), woken);
  gst_object_unref(sinkpad);
  gst_object_unref(s);
  stop(rx);
  g_mutex_clear(&gate.lock);
  g_cond_clear(&gate.cond);
}

GST_END_TEST;

/* A top-level field of rdmasrc "r"'s stats. */
static guint64 receiver_stat(GstElement *rx, const gchar *field)
{
  GstElement *r = gst_bin_get_by_name(GST_BIN(rx), "r");
  GstStructure *st = NULL;
  guint64 v64 = 0;
  guint v = 0;

  g_object_get(r, "stats", &st, NULL);
  gst_object_unref(r);
  fail_unless(st != NULL);
  if (!gst_structure_get_uint64(st, field, &v64)) {
    fail_unless(gst_structure_get_uint(st, field, &v), "no %s", field);
    v64 = v;
  }
  gst_structure_free(st);
  return v64;
}

typedef struct {
  gint eos;         /* atomic: EOS events the sink got */
  gint stream_ends; /* atomic: flushes or drains rdmasrc's pad sent */
} StreamEnds;

static GstPadProbeReturn count_eos(GstPad *pad, GstPadProbeInfo *info,
                                   gpointer user_data)
{
  StreamEnds *e = user_data;

  (void)pad;
  if (GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) == GST_EVENT_EOS)
    g_atomic_int_inc(&e->eos);
  return GST_PAD_PROBE_OK;
}

static GstPadProbeReturn count_stream_ends(GstPad *pad, GstPadProbeInfo *info,
                                           gpointer user_data)
{
  StreamEnds *e = user_data;

  (void)pad;
  if ((GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_EVENT_FLUSH) ||
      ((GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_QUERY_DOWNSTREAM) &&
       GST_QUERY_TYPE(GST_PAD_PROBE_INFO_QUERY(info)) == GST_QUERY_DRAIN))
    g_atomic_int_inc(&e->stream_ends);
  return GST_PAD_PROBE_OK;
}

static gboolean wait_atomic(gint *v, gint at_least)
{
  gint64 end = g_get_monotonic_time() + 15 * G_USEC_PER_SEC;

  while (g_atomic_int_get(v) < at_least && g_get_monotonic_time() < end)
    g_usleep(10000);
  return g_atomic_int_get(v) >= at_least;
}

/* A camera's sender ends (EOS) and a new sender of the same camera comes
 * while the first stream's last frames and its EOS still wait in a queue
 * before a slow consumer (the gate).  Sinks take nothing after EOS but a
 * flush, so the new stream flushes the branch, but only once the first
 * stream's end has gone through: every frame of both streams and both
 * EOS reach the sink.  Flushing at once dropped what the queue held, the
 * EOS with it (rdma-analytics' reconnect check saw one EOS of two). */
GST_START_TEST(test_new_stream_after_eos_keeps_the_old_ones_end)
{
  guint port = test_port();
  GstElement *rx = receiver_new(
      "r.src_0 ! queue max-size-buffers=0 max-size-bytes=0 max-size-time=0 ! "
      "fakesink name=s sync=false async=false",
      port);
  GstElement *s = gst_bin_get_by_name(GST_BIN(rx), "s");
  GstElement *r = gst_bin_get_by_name(GST_BIN(rx), "r");
  GstPad *sinkpad = gst_element_get_static_pad(s, "sink");
  GstPad *srcpad = gst_element_get_static_pad(r, "src_0");
  Gate gate = {.closed = TRUE};
  StreamEnds ends = {0, 0};
  GstElement *tx;

  g_mutex_init(&gate.lock);
  g_cond_init(&gate.cond);
  gst_pad_add_probe(sinkpad, GST_PAD_PROBE_TYPE_BUFFER, gate_probe, &gate,
                    NULL);
  gst_pad_add_probe(sinkpad, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, count_eos,
                    &ends, NULL);
  gst_pad_add_probe(srcpad,
                    GST_PAD_PROBE_TYPE_EVENT_FLUSH |
                        GST_PAD_PROBE_TYPE_QUERY_DOWNSTREAM,
                    count_stream_ends, &ends, NULL);
  set_state(rx, GST_STATE_PLAYING);
  tx = camera_rig_new(transport, rdma_addr, port, 0, 1, 10, "");
  set_state(tx, GST_STATE_PLAYING);
  expect_eos(tx, WAIT);
  stop(tx);
  /* The first stream's lane gone, so the second sender isn't refused
   * (and drops nothing) while it is still there. */
  {
    gint64 end = g_get_monotonic_time() + 15 * G_USEC_PER_SEC;
    while (receiver_stat(rx, "lanes-active") > 0 &&
           g_get_monotonic_time() < end)
      g_usleep(10000);
    fail_unless(receiver_stat(rx, "lanes-active") == 0, "lane 0 stayed");
  }
  tx = camera_rig_new(transport, rdma_addr, port, 0, 1, 10, "");
  set_state(tx, GST_STATE_PLAYING);
  /* The new stream reached the pad: it flushed (before) or drains (now),
   * with the first stream's frames and EOS still held at the gate. */
  fail_unless(wait_atomic(&ends.stream_ends, 1), "no new stream");
  fail_unless_equals_int(g_atomic_int_get(&ends.eos), 0);
  g_mutex_lock(&gate.lock);
  gate.closed = FALSE;
  g_cond_broadcast(&gate.cond);
  g_mutex_unlock(&gate.lock);
  expect_eos(tx, WAIT);
  stop(tx);
  fail_unless(wait_atomic(&ends.eos, 2), "%d EOS of 2 reached the sink",
              g_atomic_int_get(&ends.eos));
  fail_unless(wait_handoffs(20, WAIT), "%d of 20 frames reached the sink",
              g_atomic_int_get(&handoffs));
  gst_object_unref(srcpad);
  gst_object_unref(sinkpad);
  gst_object_unref(r);
  gst_object_unref(s);
  stop(rx);
  g_mutex_clear(&gate.lock);
  g_cond_clear(&gate.cond);
}

GST_END_TEST;

static Suite *rdmasrc_pads_suite(void)
{
  Suite *s = suite_create("rdmasrc-pads");
  TCase *tc = tcase_create("general");

  test_transport_from_env(&transport, &rdma_addr);
  tcase_set_timeout(tc, 60);
  suite_add_tcase(s, tc);
  tcase_add_test(tc, test_eos_without_a_sender);
  tcase_add_test(tc, test_eos_with_a_camera_that_never_came);
  tcase_add_test(tc, test_eos_after_a_state_cycle);
  tcase_add_test(tc, test_requested_pad_gets_its_camera_later);
  tcase_add_test(tc, test_unnamed_link_takes_the_first_camera);
  tcase_add_test(tc, test_pads_are_requested_as_tee_does);
  tcase_add_test(tc, test_device_id_pad_links_statically);
  tcase_add_test(tc, test_released_pad_comes_back_while_playing);
  tcase_add_test(tc, test_slow_pad_added_handler_stalls_no_camera);
  tcase_add_test(tc, test_gst_launch_e_exits_on_ctrl_c);
  tcase_add_test(tc, test_frames_queued_behind_a_push_wake_nobody);
  tcase_add_test(tc, test_new_stream_after_eos_keeps_the_old_ones_end);
  return s;
}

GST_CHECK_MAIN(rdmasrc_pads);
