/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-rdma-output.c - what users read: the stats as gst-launch-1.0 -m
 * prints them (and whether those lines parse back), src_N's caps in -v,
 * the stats an application reads from the property, and blurbs that name
 * every stats field.
 *
 * The gst-launch test runs receiver and sender as gst-launch-1.0
 * processes (found on PATH; the plugin through GST_PLUGIN_PATH, which
 * meson sets to the build's gst/ directory), so this process never loads
 * the plugin and parses the printed lines as a log reader would.  The
 * transport is SBR_TEST_TRANSPORT (shm on the host, verbs in the VM).
 */
#include <gst/check/gstcheck.h>

#include <signal.h>
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

/* ----------------------------------------------------- gst-launch-1.0 */

/* gst-launch-1.0 with args (a NULL-terminated list), stdout into out_fd
 * (-1: /dev/null). */
static GPid launch(gint out_fd, const gchar *const *args)
{
  GPtrArray *argv = g_ptr_array_new();
  GError *err = NULL;
  GPid pid = 0;
  gboolean ok;

  g_ptr_array_add(argv, (gpointer) "gst-launch-1.0");
  for (guint i = 0; args[i]; i++)
    g_ptr_array_add(argv, (gpointer)args[i]);
  g_ptr_array_add(argv, NULL);
  ok = g_spawn_async_with_fds(NULL, (gchar **)argv->pdata, NULL,
                              G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD |
                                  (out_fd < 0 ? G_SPAWN_STDOUT_TO_DEV_NULL : 0),
                              NULL, NULL, &pid, -1, out_fd, -1, &err);
  fail_unless(ok, "spawn gst-launch-1.0: %s", err ? err->message : "?");
  g_ptr_array_free(argv, TRUE);
  return pid;
}

/* A sender gst-launch-1.0 of one live camera as device, output discarded;
 * transport_host_port: the rdmasink properties that name the receiver. */
static GPid launch_camera(const gchar *const transport_host_port[3],
                          guint device)
{
  gchar *device_arg = g_strdup_printf("device-id=%u", device);
  const gchar *args[] = {
      "videotestsrc",
      "is-live=true",
      "!",
      "video/x-raw,format=GRAY8,width=64,height=48,framerate=25/1",
      "!",
      "rdmasink",
      transport_host_port[0],
      transport_host_port[1],
      transport_host_port[2],
      device_arg,
      "stats-interval=0",
      NULL};
  GPid pid = launch(-1, args);

  g_free(device_arg);
  return pid;
}

/* SIGINT (gst-launch stops its pipeline and exits, its output flushed);
 * SIGKILL if it hasn't exited within timeout.  Returns TRUE if it exited
 * on its own. */
static gboolean interrupt(GPid pid, GstClockTime timeout)
{
  gint64 end = g_get_monotonic_time() + (gint64)(timeout / GST_USECOND);

  kill(pid, SIGINT);
  while (g_get_monotonic_time() < end) {
    if (waitpid(pid, NULL, WNOHANG) == pid)
      return TRUE;
    g_usleep(20000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return FALSE;
}

/* The structure a -m line "Got message #N from element "r" (element): S"
 * prints, if the line is one and S is named name; NULL otherwise, and a
 * test failure if such a line doesn't parse. */
static GstStructure *parse_message_line(const gchar *line, const gchar *name)
{
  const gchar *tag = "(element): ";
  const gchar *p = strstr(line, tag);
  GstStructure *s;

  if (!g_str_has_prefix(line, "Got message #") || !p)
    return NULL;
  p += strlen(tag);
  if (!g_str_has_prefix(p, name) || p[strlen(name)] != ',')
    return NULL;
  s = gst_structure_from_string(p, NULL);
  fail_unless(s != NULL, "a printed %s doesn't parse back: %s", name, p);
  return s;
}

static guint64 u64(const GstStructure *s, const gchar *field)
{
  guint64 v = 0;

  fail_unless(gst_structure_get_uint64(s, field, &v),
              "no %s in %" GST_PTR_FORMAT, field, s);
  return v;
}

/* Whether text holds what the test below checks: 3 rdmasrc-stats ticks
 * and, for each of devices 0 and 1, an rdmasrc-device-stats line that
 * counts frames.  Waited for rather than a time the output takes: a
 * loaded host starts and runs gst-launch processes slower. */
static gboolean stats_complete(const gchar *text)
{
  gchar **lines = g_strsplit(text, "\n", -1);
  guint n_stats = 0;
  gboolean frames[2] = {FALSE, FALSE};

  /* The last line may be cut: only whole ones. */
  for (guint i = 0; lines[i] && lines[i + 1]; i++) {
    GstStructure *st;
    guint id = G_MAXUINT;
    guint64 f = 0;

    if ((st = parse_message_line(lines[i], "rdmasrc-stats"))) {
      n_stats++;
      gst_structure_free(st);
    } else if ((st = parse_message_line(lines[i], "rdmasrc-device-stats"))) {
      if (gst_structure_get_uint(st, "device-id", &id) && id < 2 &&
          gst_structure_get_uint64(st, "frames", &f) && f > 0)
        frames[id] = TRUE;
      gst_structure_free(st);
    }
  }
  g_strfreev(lines);
  return n_stats >= 3 && frames[0] && frames[1];
}

/* Receiver and two cameras (devices 0 and 1) as gst-launch-1.0 processes,
 * for a few seconds; the receiver's -m -v output parses back:
 * rdmasrc-stats with the element-wide counters, each device once per tick
 * in an rdmasrc-device-stats line of its own (not also nested in
 * rdmasrc-stats), and src_N's caps. */
GST_START_TEST(test_launch_m_prints_stats_that_parse_back)
{
  guint port = test_port();
  gchar *port_arg = g_strdup_printf("port=%u", port);
  gchar *transport_arg = g_strdup_printf("transport=%s", transport);
  gchar *address_arg = g_strdup_printf("address=%s", rdma_addr);
  gchar *host_arg = g_strdup_printf("host=%s", rdma_addr);
  const gchar *recv_args[] = {
      "-m",        "-v",       "rdmasrc",  transport_arg,
      address_arg, port_arg,   "name=r",   "stats-interval=200",
      "r.src_0",   "!",        "fakesink", "r.src_1",
      "!",         "fakesink", NULL};
  const gchar *const sink_args[3] = {transport_arg, host_arg, port_arg};
  GstStructure *last = NULL, *last_dev[2] = {NULL, NULL};
  guint64 dev_frames[2] = {0, 0};
  guint n_stats = 0, n_dev = 0;
  gboolean caps_shown[2] = {FALSE, FALSE};
  gchar *path = NULL, *text = NULL, **lines;
  GError *err = NULL;
  GPid rx, tx0, tx1 = 0;
  gint fd;

  /* A log reader: nothing of the plugin's is registered here. */
  fail_unless(g_type_from_name("GstRdmaOverBudget") == 0);
  fd = g_file_open_tmp("rdma-output-XXXXXX", &path, &err);
  fail_unless(fd >= 0, "tmp file: %s", err ? err->message : "?");
  rx = launch(fd, recv_args);
  /* Listening once gst-launch says it plays (20 s at most). */
  for (gint64 end = g_get_monotonic_time() + 20 * G_TIME_SPAN_SECOND;
       g_get_monotonic_time() < end;) {
    gchar *sofar = NULL;
    gboolean playing = g_file_get_contents(path, &sofar, NULL, NULL) &&
                       strstr(sofar, "Setting pipeline to PLAYING");

    g_free(sofar);
    if (playing)
      break;
    g_usleep(20 * G_TIME_SPAN_MILLISECOND);
  }
  /* The cameras start one after the other: two pads negotiating at the
   * same instant can lose one's -v line in GLib (deep-notify is
   * G_SIGNAL_NO_RECURSE across threads; docs/design.md "Pads asked for by
   * name"), and this test checks our pads, not that race. */
  tx0 = launch_camera(sink_args, 0);
  /* Until both pads' caps are printed and the stats ticks count both
   * cameras' frames (stats_complete), 60 s at most: what the output
   * says, not how long it took to say it. */
  for (gint64 end = g_get_monotonic_time() + 60 * G_TIME_SPAN_SECOND;
       g_get_monotonic_time() < end;) {
    gchar *sofar = NULL;

    g_usleep(100 * G_TIME_SPAN_MILLISECOND);
    if (!g_file_get_contents(path, &sofar, NULL, NULL))
      continue;
    gboolean caps0 = strstr(sofar, "GstRdmaSrcPad:src_0: caps = video/x-raw") &&
                     strstr(sofar, "fakesink0.GstPad:sink: caps = video");
    gboolean caps1 =
        caps0 && strstr(sofar, "GstRdmaSrcPad:src_1: caps = video/x-raw");
    gboolean done = caps1 && stats_complete(sofar);
    g_free(sofar);
    if (caps0 && !tx1)
      tx1 = launch_camera(sink_args, 1);
    if (done)
      break;
  }
  fail_unless(interrupt(rx, 10 * GST_SECOND), "receiver didn't exit");
  interrupt(tx0, 5 * GST_SECOND);
  if (tx1)
    interrupt(tx1, 5 * GST_SECOND);
  close(fd);

  fail_unless(g_file_get_contents(path, &text, NULL, &err), "%s",
              err ? err->message : "?");
  unlink(path);
  lines = g_strsplit(text, "\n", -1);
  for (guint i = 0; lines[i]; i++) {
    GstStructure *s;

    /* The per-device stats are no longer an array. */
    fail_if(strstr(lines[i], "devices=(") != NULL, "%s", lines[i]);
    for (guint d = 0; d < 2; d++) {
      gchar *want = g_strdup_printf(
          "GstRdmaSrc:r.GstRdmaSrcPad:src_%u: caps = video/x-raw", d);
      if (strstr(lines[i], want))
        caps_shown[d] = TRUE;
      g_free(want);
    }
    if ((s = parse_message_line(lines[i], "rdmasrc-stats"))) {
      n_stats++;
      /* Each device is posted once a tick: in its own message only. */
      fail_if(gst_structure_has_field(s, "device-0") ||
                  gst_structure_has_field(s, "device-1"),
              "%s", lines[i]);
      if (last)
        gst_structure_free(last);
      last = s;
    } else if ((s = parse_message_line(lines[i], "rdmasrc-device-stats"))) {
      guint id = G_MAXUINT;

      n_dev++;
      fail_unless(gst_structure_get_uint(s, "device-id", &id));
      fail_unless(id < 2, "device %u", id);
      dev_frames[id] = MAX(dev_frames[id], u64(s, "frames"));
      if (last_dev[id])
        gst_structure_free(last_dev[id]);
      last_dev[id] = s;
    }
  }
  fail_unless(n_stats >= 3, "%u rdmasrc-stats lines in:\n%s", n_stats, text);
  fail_unless(n_dev >= 2, "%u rdmasrc-device-stats lines", n_dev);
  /* One line per device per tick, no more (the last tick may be cut). */
  fail_unless(n_dev <= 2 * n_stats, "%u device lines for %u ticks", n_dev,
              n_stats);
  for (guint d = 0; d < 2; d++) {
    fail_unless(last_dev[d] != NULL, "no rdmasrc-device-stats of device %u", d);
    fail_unless_equals_string(
        gst_structure_get_string(last_dev[d], "over-budget"), "drop-oldest");
    gst_structure_free(last_dev[d]);
    fail_unless(dev_frames[d] > 0, "device %u: no frames in its own lines", d);
    fail_unless(caps_shown[d], "-v didn't show src_%u's caps in:\n%s", d, text);
  }
  fail_unless(u64(last, "pushed") > 0);

  gst_structure_free(last);
  g_strfreev(lines);
  g_free(text);
  g_free(path);
  g_free(port_arg);
  g_free(transport_arg);
  g_free(address_arg);
  g_free(host_arg);
}

GST_END_TEST;

/* ------------------------------------------------- in this process */

static GstStructure *stats_of(GstElement *pipeline, const gchar *name)
{
  GstElement *e = gst_bin_get_by_name(GST_BIN(pipeline), name);
  GstStructure *s = NULL;

  fail_unless(e != NULL);
  g_object_get(e, "stats", &s, NULL);
  gst_object_unref(e);
  fail_unless(s != NULL);
  return s;
}

/* How an application reads device N: the field "device-<N>". */
static guint64 device_frames(const GstStructure *s, guint device)
{
  GstStructure *d = NULL;
  gchar name[16];
  guint64 frames = 0;

  g_snprintf(name, sizeof name, "device-%u", device);
  if (!gst_structure_get(s, name, GST_TYPE_STRUCTURE, &d, NULL))
    return 0;
  gst_structure_get_uint64(d, "frames", &frames);
  gst_structure_free(d);
  return frames;
}

/* A receiver with pads for devices 0 and 1, and a sender of both. */
static void start_pair(GstElement **rx, GstElement **tx)
{
  guint port = test_port();
  gchar *desc;

  desc = g_strdup_printf("rdmasrc name=r transport=%s address=%s port=%u "
                         "stats-interval=100 r.src_0 ! fakesink "
                         "r.src_1 ! fakesink",
                         transport, rdma_addr, port);
  *rx = parse(desc);
  g_free(desc);
  desc = g_strdup_printf(
      "videotestsrc is-live=true ! video/x-raw,format=GRAY8,width=64,"
      "height=48,framerate=25/1 ! rdmasink name=tx0 transport=%s host=%s "
      "port=%u device-id=0 stats-interval=0 videotestsrc is-live=true ! "
      "video/x-raw,format=GRAY8,width=64,height=48,framerate=25/1 ! "
      "rdmasink name=tx1 transport=%s host=%s port=%u device-id=1 "
      "stats-interval=0",
      transport, rdma_addr, port, transport, rdma_addr, port);
  *tx = parse(desc);
  g_free(desc);
  fail_if(gst_element_set_state(*rx, GST_STATE_PLAYING) ==
          GST_STATE_CHANGE_FAILURE);
  fail_if(gst_element_set_state(*tx, GST_STATE_PLAYING) ==
          GST_STATE_CHANGE_FAILURE);
}

/* Both devices have frames in the stats property, within WAIT; else the
 * failure says what each end counted (ci10, session 17: one of the two
 * never had a frame, and the bare message said nothing more). */
static GstStructure *wait_both_devices(GstElement *rx, GstElement *tx)
{
  gint64 end = g_get_monotonic_time() + (gint64)(WAIT / GST_USECOND);
  GstStructure *s = NULL, *t0, *t1;

  while (g_get_monotonic_time() < end) {
    s = stats_of(rx, "r");
    if (device_frames(s, 0) > 0 && device_frames(s, 1) > 0)
      return s;
    gst_structure_free(s);
    g_usleep(50000);
  }
  s = stats_of(rx, "r");
  t0 = stats_of(tx, "tx0");
  t1 = stats_of(tx, "tx1");
  fail("devices 0 and 1 never both had frames: rdmasrc %" GST_PTR_FORMAT
       "; tx0 %" GST_PTR_FORMAT "; tx1 %" GST_PTR_FORMAT,
       s, t0, t1);
  return NULL;
}

/* The property as an application reads it: a field per device with a
 * pad, nothing for the others, no array; and the bus carries each
 * device's structure as a message of its own. */
GST_START_TEST(test_stats_property_has_a_field_per_device)
{
  GstElement *rx, *tx, *r;
  GstStructure *s;
  GstBus *bus;
  gboolean seen[2] = {FALSE, FALSE};
  gint64 end;
  gchar *str;

  /* Not started: counters only, and no "devices=(int)< >". */
  r = gst_element_factory_make("rdmasrc", NULL);
  g_object_get(r, "stats", &s, NULL);
  fail_unless(gst_structure_has_name(s, "rdmasrc-stats"));
  fail_if(gst_structure_has_field(s, "devices"));
  fail_if(gst_structure_has_field(s, "device-0"));
  str = gst_structure_to_string(s);
  fail_if(strchr(str, '<') != NULL, "%s", str);
  g_free(str);
  gst_structure_free(s);
  gst_object_unref(r);

  start_pair(&rx, &tx);
  s = wait_both_devices(rx, tx);
  fail_if(gst_structure_has_field(s, "devices"));
  fail_if(gst_structure_has_field(s, "device-2"), "no pad, no field");
  for (guint d = 0; d < 2; d++) {
    const GstStructure *ds;
    gchar name[16];
    guint id = G_MAXUINT;

    g_snprintf(name, sizeof name, "device-%u", d);
    ds = gst_value_get_structure(gst_structure_get_value(s, name));
    fail_unless(gst_structure_has_name(ds, "rdmasrc-device-stats"));
    fail_unless(gst_structure_get_uint(ds, "device-id", &id));
    fail_unless_equals_int(id, d);
    /* A plain string: parses back without the plugin. */
    fail_unless_equals_string(gst_structure_get_string(ds, "over-budget"),
                              "drop-oldest");
  }
  gst_structure_free(s);

  bus = gst_element_get_bus(rx);
  end = g_get_monotonic_time() + (gint64)(WAIT / GST_USECOND);
  while (!(seen[0] && seen[1]) && g_get_monotonic_time() < end) {
    GstMessage *msg =
        gst_bus_timed_pop_filtered(bus, 100 * GST_MSECOND, GST_MESSAGE_ELEMENT);
    const GstStructure *ms;
    guint id = G_MAXUINT;

    if (!msg)
      continue;
    ms = gst_message_get_structure(msg);
    if (gst_structure_has_name(ms, "rdmasrc-device-stats") &&
        gst_structure_get_uint(ms, "device-id", &id) && id < 2 &&
        u64(ms, "frames") > 0)
      seen[id] = TRUE;
    gst_message_unref(msg);
  }
  gst_object_unref(bus);
  fail_unless(seen[0] && seen[1], "no rdmasrc-device-stats messages");

  stop(tx);
  stop(rx);
}

GST_END_TEST;

/* Every field the stats carry is named in the element's documentation
 * (its SECTION comment: rdmasrc's element-wide and per-device fields,
 * rdmasink's device and connection fields), where the field lists moved
 * from the blurbs. */
static void check_doc_names(gchar **words, const GstStructure *s,
                            const gchar *what)
{
  for (gint i = 0; i < gst_structure_n_fields(s); i++) {
    const gchar *field = gst_structure_nth_field_name(s, (guint)i);
    const GValue *v = gst_structure_get_value(s, field);

    if (G_VALUE_HOLDS(v, GST_TYPE_STRUCTURE)) {
      /* "device-<N>" is named as such; its fields are checked. */
      fail_unless(g_str_has_prefix(field, "device-"), "%s", field);
      check_doc_names(words, gst_value_get_structure(v), what);
      continue;
    }
    fail_unless(g_strv_contains((const gchar *const *)words, field),
                "%s: the element documentation doesn't name \"%s\"", what,
                field);
  }
}

/* The words of the SECTION:element-NAME comment of gst/FILE in the source
 * tree (SBR_SOURCE_ROOT, set by meson). */
static gchar **section_words(const gchar *file, const gchar *name)
{
  const gchar *root = g_getenv("SBR_SOURCE_ROOT");
  gchar *path, *text = NULL, *tag, *start, *end, **words;

  fail_unless(root != NULL, "SBR_SOURCE_ROOT not set");
  path = g_build_filename(root, "gst", file, NULL);
  fail_unless(g_file_get_contents(path, &text, NULL, NULL), "%s", path);
  tag = g_strdup_printf("SECTION:element-%s", name);
  start = strstr(text, tag);
  fail_unless(start != NULL, "no %s in %s", tag, path);
  end = strstr(start, "*/");
  fail_unless(end != NULL);
  *end = '\0';
  words = g_regex_split_simple("[^a-z0-9-]+", start, 0, 0);
  g_free(tag);
  g_free(path);
  g_free(text);
  return words;
}

GST_START_TEST(test_docs_name_every_stats_field)
{
  GstElement *rx, *tx;
  GstStructure *s;
  gchar **words;

  start_pair(&rx, &tx);
  s = wait_both_devices(rx, tx);
  words = section_words("gstrdmasrc.c", "rdmasrc");
  check_doc_names(words, s, "rdmasrc");
  g_strfreev(words);
  gst_structure_free(s);
  s = stats_of(tx, "tx0");
  fail_unless(gst_structure_has_field(s, "connection-id"), "not connected");
  words = section_words("gstrdmasink.c", "rdmasink");
  check_doc_names(words, s, "rdmasink");
  g_strfreev(words);
  gst_structure_free(s);
  stop(tx);
  stop(rx);
}

GST_END_TEST;

/* Blurbs are what gst-inspect prints under each property: one or two
 * sentences (the details are in the element documentation).
 * rdmasink's "blocksize" (its own, hiding basesink's) says it is
 * block-size, periodic stats are opt-in on both elements, and the enums
 * are marked as plugin API. */
static void check_blurbs(const gchar *factory)
{
  GstElement *e = gst_element_factory_make(factory, NULL);
  guint n = 0;
  GParamSpec **props =
      g_object_class_list_properties(G_OBJECT_GET_CLASS(e), &n);

  for (guint i = 0; i < n; i++) {
    const gchar *blurb = g_param_spec_get_blurb(props[i]);
    guint sentences = 1;

    /* Our own properties only: GstElement's and GstBaseSink's are theirs. */
    if (props[i]->owner_type != G_OBJECT_TYPE(e))
      continue;
    for (const gchar *p = blurb; (p = strstr(p, ". ")); p++)
      sentences++;
    fail_unless(sentences <= 2 && strlen(blurb) <= 200,
                "%s:%s: %u sentences, %u characters: %s", factory,
                props[i]->name, sentences, (guint)strlen(blurb), blurb);
  }
  g_free(props);
  gst_object_unref(e);
}

GST_START_TEST(test_blurbs_are_short)
{
  GstElement *sink = gst_element_factory_make("rdmasink", NULL);
  GstElement *src = gst_element_factory_make("rdmasrc", NULL);
  GParamSpec *pspec;

  check_blurbs("rdmasink");
  check_blurbs("rdmasrc");
  check_blurbs("rdmaframeset");
  pspec = g_object_class_find_property(G_OBJECT_GET_CLASS(sink), "blocksize");
  fail_unless(strstr(g_param_spec_get_blurb(pspec), "block-size") != NULL);
  pspec =
      g_object_class_find_property(G_OBJECT_GET_CLASS(src), "stats-interval");
  fail_unless(strstr(g_param_spec_get_blurb(pspec), "rdmasrc-device-stats") !=
              NULL);
  for (guint i = 0; i < 2; i++) {
    GObject *e = G_OBJECT(i ? src : sink);

    pspec =
        g_object_class_find_property(G_OBJECT_GET_CLASS(e), "stats-interval");
    fail_unless_equals_int(G_PARAM_SPEC_UINT(pspec)->default_value, 0);
  }
  /* Every enum of a property is plugin API (gst-inspect, the docs). */
  {
    static const gchar *const enums[] = {
        "GstRdmaTransport", "GstRdmaMechanism", "GstRdmaBackpressure",
        "GstRdmaOverBudget", "GstRdmaPollMode"};

    for (guint i = 0; i < G_N_ELEMENTS(enums); i++) {
      GType t = g_type_from_name(enums[i]);

      fail_unless(t != 0, "%s", enums[i]);
      fail_unless(gst_type_is_plugin_api(t, NULL), "%s", enums[i]);
    }
  }
  gst_object_unref(sink);
  gst_object_unref(src);
}

GST_END_TEST;

/* gst-inspect-1.0 FACTORY's output (the plugin from GST_PLUGIN_PATH, as
 * for a user). */
static gchar *inspect(const gchar *factory)
{
  const gchar *argv[] = {"gst-inspect-1.0", factory, NULL};
  gchar *out = NULL;
  GError *err = NULL;
  gint status = 0;

  fail_unless(g_spawn_sync(NULL, (gchar **)argv, NULL, G_SPAWN_SEARCH_PATH,
                           NULL, NULL, &out, NULL, &status, &err),
              "spawn gst-inspect-1.0: %s", err ? err->message : "?");
  fail_unless(g_spawn_check_wait_status(status, NULL),
              "gst-inspect-1.0 %s failed", factory);
  return out;
}

/* The per-pad over-budget is only reachable if gst-inspect (and the docs)
 * know the pad type: both templates carry GstRdmaSrcPad, which is plugin
 * API, and its properties are printed under each template, as for
 * compositor's pads. */
GST_START_TEST(test_inspect_lists_pad_properties)
{
  GstElement *src = gst_element_factory_make("rdmasrc", NULL);
  const gchar *const templates[] = {"src_%u", "src_%s"};
  gchar *out, *p;
  guint n = 0;

  fail_unless(src != NULL, "no rdmasrc");
  for (guint i = 0; i < G_N_ELEMENTS(templates); i++) {
    GstPadTemplate *t = gst_element_class_get_pad_template(
        GST_ELEMENT_GET_CLASS(src), templates[i]);

    fail_unless(t != NULL, "%s", templates[i]);
    fail_unless_equals_string(g_type_name(GST_PAD_TEMPLATE_GTYPE(t)),
                              "GstRdmaSrcPad");
  }
  fail_unless(gst_type_is_plugin_api(g_type_from_name("GstRdmaSrcPad"), NULL));
  gst_object_unref(src);

  out = inspect("rdmasrc");
  /* Each template: its type, then "Pad Properties:" naming over-budget
   * before the next template or the element's own properties. */
  for (p = out; (p = strstr(p, "Type: GstRdmaSrcPad")); p++) {
    gchar *props = strstr(p, "Pad Properties:");
    gchar *next = strstr(p + 1, "Type: GstRdmaSrcPad");
    gchar *budget = props ? strstr(props, "over-budget") : NULL;

    fail_unless(props && budget && (!next || budget < next),
                "a template without over-budget in:\n%s", out);
    n++;
  }
  fail_unless_equals_int(n, 2);
  g_free(out);
}

GST_END_TEST;

/* Element metadata holds GStreamer's keys only (gst-inspect prints every
 * key; the example launch lines are in the element documentation). */
GST_START_TEST(test_metadata_has_standard_keys_only)
{
  static const gchar *const standard[] = {
      GST_ELEMENT_METADATA_LONGNAME,    GST_ELEMENT_METADATA_KLASS,
      GST_ELEMENT_METADATA_DESCRIPTION, GST_ELEMENT_METADATA_AUTHOR,
      GST_ELEMENT_METADATA_DOC_URI,     GST_ELEMENT_METADATA_ICON_NAME};
  static const gchar *const factories[] = {"rdmasink", "rdmasrc",
                                           "rdmaframeset"};

  for (guint i = 0; i < G_N_ELEMENTS(factories); i++) {
    GstElementFactory *f = gst_element_factory_find(factories[i]);
    gchar **keys;

    fail_unless(f != NULL, "%s", factories[i]);
    keys = gst_element_factory_get_metadata_keys(f);
    for (guint k = 0; keys && keys[k]; k++)
      fail_unless(g_strv_contains(standard, keys[k]), "%s: metadata key \"%s\"",
                  factories[i], keys[k]);
    g_strfreev(keys);
    gst_object_unref(f);
  }
}

GST_END_TEST;

/* basesink's "blocksize" (bytes per pull, which this push-mode sink never
 * makes) stood beside rdmasink's block-size and did nothing when set:
 * rdmasink's own "blocksize" hides it and is block-size, on a launch
 * line too, and gst-inspect shows it once. */
GST_START_TEST(test_blocksize_is_block_size)
{
  GstElement *sink = gst_parse_launch("rdmasink name=k blocksize=65536", NULL);
  GParamSpec *pspec;
  guint size = 0;
  gchar *out, *found;

  fail_unless(sink != NULL);
  pspec = g_object_class_find_property(G_OBJECT_GET_CLASS(sink), "blocksize");
  fail_unless(pspec != NULL);
  fail_unless_equals_string(g_type_name(pspec->owner_type), "GstRdmaSink");
  g_object_get(sink, "block-size", &size, NULL);
  fail_unless_equals_int(size, 65536);
  g_object_set(sink, "block-size", 4096, NULL);
  g_object_get(sink, "blocksize", &size, NULL);
  fail_unless_equals_int(size, 4096);
  gst_object_unref(sink);

  out = inspect("rdmasink");
  found = strstr(out, "  blocksize ");
  fail_unless(found != NULL, "%s", out);
  fail_if(strstr(found + 1, "  blocksize "), "blocksize twice:\n%s", out);
  g_free(out);
}

GST_END_TEST;

/* The author is someone to write to, and the plugin says where it came
 * from (the docs cache said "Unknown package origin"). */
GST_START_TEST(test_author_and_origin)
{
  static const gchar *const factories[] = {"rdmasink", "rdmasrc",
                                           "rdmaframeset"};
  GstPlugin *plugin = gst_registry_find_plugin(gst_registry_get(), "rdma");

  for (guint i = 0; i < G_N_ELEMENTS(factories); i++) {
    GstElementFactory *f = gst_element_factory_find(factories[i]);
    const gchar *author;

    fail_unless(f != NULL, "%s", factories[i]);
    author = gst_element_factory_get_metadata(f, GST_ELEMENT_METADATA_AUTHOR);
    fail_unless(author && strchr(author, '<') && strchr(author, '@') &&
                    g_str_has_suffix(author, ">"),
                "%s: author \"%s\"", factories[i], GST_STR_NULL(author));
    gst_object_unref(f);
  }
  fail_unless(plugin != NULL);
  fail_if(g_str_equal(gst_plugin_get_origin(plugin), "Unknown package origin"));
  gst_object_unref(plugin);
}

GST_END_TEST;

static Suite *rdma_output_suite(void)
{
  Suite *s = suite_create("rdma-output");
  TCase *tc = tcase_create("general");

  test_transport_from_env(&transport, &rdma_addr);
  tcase_set_timeout(tc, 60);
  suite_add_tcase(s, tc);
  tcase_add_test(tc, test_launch_m_prints_stats_that_parse_back);
  tcase_add_test(tc, test_stats_property_has_a_field_per_device);
  tcase_add_test(tc, test_docs_name_every_stats_field);
  tcase_add_test(tc, test_blurbs_are_short);
  tcase_add_test(tc, test_inspect_lists_pad_properties);
  tcase_add_test(tc, test_metadata_has_standard_keys_only);
  tcase_add_test(tc, test_blocksize_is_block_size);
  tcase_add_test(tc, test_author_and_origin);
  return s;
}

GST_CHECK_MAIN(rdma_output);
