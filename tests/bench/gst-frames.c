/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gst-frames - one end of the big-frame benchmark (tests/bench/run.py part
 * B11) and of the instructions-per-frame counts (part B12), the same
 * pipelines for rdmasink/rdmasrc and shmsink/shmsrc:
 *
 *   gst-frames send    --transport rdma|shm --streams N --port P
 *                      --width W --height H --format RGB|NV12|I420
 *                      --frames F [--warmup K] [--live --fps R]
 *                      [--shm-frames S] [--linger S]
 *   gst-frames receive (the same) [--block-size B] [--seconds S]
 *
 * Sender, per camera i (non-live unless --live: flat out):
 *   videotestsrc pattern=solid-color num-buffers=F ! video/x-raw,... ! SINK
 *   rdma  SINK = rdmasink transport=shm port=P device-id=i sync=false
 *   shm   SINK = identity drop-allocation=true ! shmsink shm-size=S frames
 *         (identity: see tests/bench/gst_peers.py, shmsink stalls without)
 * Receiver, per camera i:
 *   rdma  one rdmasrc transport=shm port=P (its defaults unless
 *         --block-size), its pad src_i ! appsink
 *   shm   shmsrc is-live=true ! capsfilter ! appsink
 *
 * The consumer is what appsink, OpenCV and every CPU analytics element do
 * with a frame: it maps the buffer once (gst_buffer_map, READ) and unmaps
 * it.  It reads no pixel: the pixels cost the same whoever carried them,
 * and what is compared here is the carrying.  A buffer of more than one
 * memory is merged by that map into a new one, a copy of the frame: the
 * receiver counts such buffers (maps_merged) whatever rdmasrc's stats say.
 *
 * Both ends count frames; the counted span of each starts once every
 * camera is past its first K frames (--warmup, K a camera: connection and
 * caps set-up are not a frame's cost) and ends with the last frame (the
 * receiver: the last expected, or its idle timeout; the sender: its EOS).
 * CPU (getrusage, user + system, all threads) and wall time are of that
 * span.  Instructions per frame (B12) are not taken from a span: callgrind's
 * client requests zero and dump only the calling thread's counters, and
 * inclusive costs of the functions running across them come out wrong, so
 * B12 runs each rig twice under callgrind, short and long, and divides the
 * difference of the whole runs by the difference of the frames delivered
 * (start-up and tear-down are the same in both and cancel).  Each end
 * prints one JSON object.  A benchmark tool: it
 * never fails on a figure.
 */
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <gst/app/gstappsink.h>
#include <gst/gst.h>

#define MAX_STREAMS 64

struct options {
  gboolean send;
  const char *transport; /* rdma or shm */
  guint streams;
  guint port;
  guint width, height;
  const char *fps; /* the caps' framerate, "30" or "1/2" */
  const char *format;
  guint frames; /* per camera */
  guint warmup; /* frames per camera before the counted span */
  gboolean live;
  guint block_size; /* receive, rdma: 0 = rdmasrc's default */
  guint shm_frames; /* shmsink's area, in frames */
  double seconds;   /* the most either end waits */
  double idle;      /* receive: no frame for this long ends the run */
  double linger;    /* send: stays up after EOS (shmsrc reads our area) */
  const char *socket_dir;
  gboolean no_map;  /* receive: the consumer doesn't map (for comparison) */
  gboolean appsink; /* receive: appsink consumes, not fakesink + probe */
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
  (void)sig;
  stop_requested = 1;
}

static double cpu_seconds(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static gsize frame_bytes(const struct options *o)
{
  gsize px = (gsize)o->width * o->height;
  return g_ascii_strcasecmp(o->format, "RGB") == 0 ? px * 3 : px * 3 / 2;
}

static char *caps_string(const struct options *o)
{
  return g_strdup_printf("video/x-raw,format=%s,width=%u,height=%u,"
                         "framerate=%s%s",
                         o->format, o->width, o->height, o->fps,
                         strchr(o->fps, '/') ? "" : "/1");
}

/* kB of a /proc/self/status line ("VmLck:", "VmHWM:"), -1 if absent. */
static long proc_status_kb(const char *key)
{
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  if (!f)
    return -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, key, strlen(key))) {
      kb = strtol(line + strlen(key), NULL, 10);
      break;
    }
  fclose(f);
  return kb;
}

/* The counted span, shared by the streaming threads that count frames and
 * the main loop that reports it. */
struct span {
  GMutex lock;
  guint per_stream[MAX_STREAMS];
  guint streams_warm; /* cameras past their warm-up */
  guint64 frames;     /* all cameras, the whole run */
  guint64 counted;    /* frames in the span */
  gboolean started, ended;
  gint64 t0, t1, t_last; /* monotonic us */
  double cpu0, cpu1;
  guint64 merged, merged_counted; /* buffers of more than one memory */
  guint max_memories;
};

static struct span span;
static const struct options *opts;

/* A frame of camera i went by (the sender: into its sink; the receiver:
 * mapped by the consumer).  Starts the span once every camera is warm. */
static void span_frame(guint i, guint n_mem)
{
  g_mutex_lock(&span.lock);
  span.frames++;
  span.t_last = g_get_monotonic_time();
  if (n_mem > 1)
    span.merged++;
  if (n_mem > span.max_memories)
    span.max_memories = n_mem;
  if (span.started && !span.ended) {
    span.counted++;
    span.merged_counted += n_mem > 1;
  }
  if (i < MAX_STREAMS && ++span.per_stream[i] == opts->warmup + 1 &&
      ++span.streams_warm == opts->streams && !span.started) {
    /* This frame is the first counted one of the last camera to warm up;
     * the others' frames since their warm-up are not, which only makes
     * the span a little shorter, alike for both transports. */
    span.started = TRUE;
    span.counted = 1;
    span.merged_counted = n_mem > 1;
    span.t0 = span.t_last;
    span.cpu0 = cpu_seconds();
  }
  g_mutex_unlock(&span.lock);
}

static void span_end(void)
{
  g_mutex_lock(&span.lock);
  if (span.started && !span.ended) {
    span.ended = TRUE;
    span.t1 = span.t_last;
    span.cpu1 = cpu_seconds();
  }
  g_mutex_unlock(&span.lock);
}

static void print_span(void)
{
  double wall = span.ended ? (span.t1 - span.t0) / 1e6 : 0;
  printf("\"frames\":%" G_GUINT64_FORMAT ",\"counted\":%" G_GUINT64_FORMAT
         ",\"span_s\":%.4f,\"cpu_s\":%.4f,\"frames_per_s\":%.2f,"
         "\"cpu_us_per_frame\":%.2f,\"maps_merged\":%" G_GUINT64_FORMAT
         ",\"maps_merged_counted\":%" G_GUINT64_FORMAT
         ",\"max_memories\":%u,\"vmlck_kb\":%ld,\"vmhwm_kb\":%ld",
         span.frames, span.counted, wall, span.cpu1 - span.cpu0,
         wall > 0 ? span.counted / wall : 0,
         span.counted ? (span.cpu1 - span.cpu0) * 1e6 / span.counted : 0,
         span.merged, span.merged_counted, span.max_memories,
         proc_status_kb("VmLck:"), proc_status_kb("VmHWM:"));
}

/* ------------------------------------------------------------- sender */

static GstPadProbeReturn sink_probe(GstPad *pad, GstPadProbeInfo *info,
                                    gpointer user)
{
  (void)pad;
  (void)info;
  span_frame(GPOINTER_TO_UINT(user), 1);
  return GST_PAD_PROBE_OK;
}

static char *sender_desc(const struct options *o)
{
  GString *d = g_string_new(NULL);
  char *caps = caps_string(o);

  for (guint i = 0; i < o->streams; i++) {
    g_string_append_printf(d,
                           "videotestsrc is-live=%s pattern=solid-color "
                           "num-buffers=%u ! %s ! ",
                           o->live ? "true" : "false", o->frames, caps);
    if (!strcmp(o->transport, "rdma"))
      g_string_append_printf(d,
                             "rdmasink name=s%u transport=shm port=%u "
                             "device-id=%u sync=false stats-interval=0 ",
                             i, o->port, i);
    else
      g_string_append_printf(
          d,
          "identity drop-allocation=true ! shmsink name=s%u "
          "socket-path=%s/sbr-frames-%u-%u shm-size=%" G_GSIZE_FORMAT
          " wait-for-connection=true sync=false ",
          i, o->socket_dir, o->port, i, o->shm_frames * frame_bytes(o));
  }
  g_free(caps);
  return g_string_free(d, FALSE);
}

static void print_rdmasink_stats(GstElement *p, const struct options *o)
{
  static const char *const per_sink[] = {"zero-copy-buffers", "copied-buffers",
                                         "drops"};
  static const char *const conn_fields[] = {"direct-blocks", "direct-fallbacks",
                                            "block-payload-size"};
  guint64 sum[G_N_ELEMENTS(per_sink)] = {0};
  guint64 conn[G_N_ELEMENTS(conn_fields)] = {0};
  guint send_blocks = 0;

  for (guint i = 0; i < o->streams; i++) {
    char name[16];
    GstStructure *st = NULL;
    g_snprintf(name, sizeof name, "s%u", i);
    GstElement *sink = gst_bin_get_by_name(GST_BIN(p), name);
    if (!sink)
      continue;
    g_object_get(sink, "stats", &st, NULL);
    if (i == 0)
      g_object_get(sink, "send-blocks", &send_blocks, NULL);
    gst_object_unref(sink);
    if (!st)
      continue;
    char *all = gst_structure_to_string(st);
    fprintf(stderr, "%s stats: %s\n", name, all);
    g_free(all);
    for (guint k = 0; k < G_N_ELEMENTS(per_sink); k++) {
      guint64 v = 0;
      if (gst_structure_get_uint64(st, per_sink[k], &v))
        sum[k] += v;
    }
    /* The connection's, shared by the sinks: read from the first. */
    for (guint k = 0; i == 0 && k < G_N_ELEMENTS(conn_fields); k++)
      gst_structure_get_uint64(st, conn_fields[k], &conn[k]);
    gst_structure_free(st);
  }
  printf(",\"rdmasink\":{");
  for (guint k = 0; k < G_N_ELEMENTS(per_sink); k++)
    printf("%s\"%s\":%" G_GUINT64_FORMAT, k ? "," : "", per_sink[k], sum[k]);
  for (guint k = 0; k < G_N_ELEMENTS(conn_fields); k++)
    printf(",\"%s\":%" G_GUINT64_FORMAT, conn_fields[k], conn[k]);
  printf(",\"send-blocks\":%u}", send_blocks);
}

static int run_send(const struct options *o)
{
  char *desc = sender_desc(o);
  GError *err = NULL;
  GstElement *p = gst_parse_launch(desc, &err);
  const char *error = NULL;
  char *error_text = NULL;

  g_free(desc);
  if (!p) {
    fprintf(stderr, "gst-frames: %s\n", err ? err->message : "parse failed");
    return 1;
  }
  for (guint i = 0; i < o->streams; i++) {
    char name[16];
    g_snprintf(name, sizeof name, "s%u", i);
    GstElement *s = gst_bin_get_by_name(GST_BIN(p), name);
    GstPad *pad = gst_element_get_static_pad(s, "sink");
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, sink_probe,
                      GUINT_TO_POINTER(i), NULL);
    gst_object_unref(pad);
    gst_object_unref(s);
  }
  gst_element_set_state(p, GST_STATE_PLAYING);
  GstBus *bus = gst_element_get_bus(p);
  gint64 end = g_get_monotonic_time() + (gint64)(o->seconds * 1e6);
  gboolean eos = FALSE;
  while (!stop_requested && g_get_monotonic_time() < end) {
    GstMessage *m = gst_bus_timed_pop_filtered(
        bus, 20 * GST_MSECOND, GST_MESSAGE_ERROR | GST_MESSAGE_EOS);
    if (!m)
      continue;
    if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR) {
      GError *e = NULL;
      gst_message_parse_error(m, &e, NULL);
      error_text =
          g_strdup_printf("%s: %s", GST_MESSAGE_SRC_NAME(m), e->message);
      error = error_text;
      g_error_free(e);
    } else {
      eos = TRUE;
    }
    gst_message_unref(m);
    break;
  }
  /* Every sink has rendered its last frame: the span ends here, before
   * the linger (an idle sender's wait is no frame's cost). */
  span_end();
  gint64 linger_end = g_get_monotonic_time() + (gint64)(o->linger * 1e6);
  while (eos && !stop_requested && g_get_monotonic_time() < linger_end)
    g_usleep(10000);
  gst_object_unref(bus);
  printf("{\"mode\":\"send\",\"transport\":\"%s\",\"streams\":%u,"
         "\"frame_bytes\":%" G_GSIZE_FORMAT ",\"eos\":%s,",
         o->transport, o->streams, frame_bytes(o), eos ? "true" : "false");
  print_span();
  if (!strcmp(o->transport, "rdma"))
    print_rdmasink_stats(p, o);
  else
    printf(",\"shm_area_bytes\":%" G_GSIZE_FORMAT,
           o->shm_frames * frame_bytes(o) * o->streams);
  if (error)
    printf(",\"error\":\"%s\"", g_strescape(error, NULL));
  printf("}\n");
  fflush(stdout);
  gst_element_set_state(p, GST_STATE_NULL);
  gst_object_unref(p);
  g_free(error_text);
  return error ? 1 : 0;
}

/* ----------------------------------------------------------- receiver */

struct receiver {
  guint eos;
  GMainLoop *loop;
};

static struct receiver rx;
/* One byte of each frame read through the map, so the map is not idle. */
volatile guint8 gst_frames_touched;

/* What the consumer does with each frame: one map, one unmap. */
static void consume(guint i, GstBuffer *buf)
{
  GstMapInfo map;
  guint n_mem = gst_buffer_n_memory(buf);

  /* Counted before the map, so that the frame that starts the span has
   * its map (and the merge it may make) inside it. */
  span_frame(i, n_mem);
  if (!opts->no_map && gst_buffer_map(buf, &map, GST_MAP_READ)) {
    gst_frames_touched = map.size ? map.data[0] : 0;
    gst_buffer_unmap(buf, &map);
  }
  g_mutex_lock(&span.lock);
  gboolean all = span.frames >= (guint64)opts->frames * opts->streams;
  g_mutex_unlock(&span.lock);
  if (all) {
    span_end();
    g_main_loop_quit(rx.loop);
  }
}

static GstFlowReturn on_sample(GstAppSink *sink, gpointer user)
{
  GstSample *s = gst_app_sink_pull_sample(sink);

  if (!s)
    return GST_FLOW_EOS;
  consume(GPOINTER_TO_UINT(user), gst_sample_get_buffer(s));
  gst_sample_unref(s);
  return GST_FLOW_OK;
}

static void on_eos(GstAppSink *sink, gpointer user)
{
  (void)sink;
  (void)user;
  g_atomic_int_inc(&rx.eos);
}

static GstPadProbeReturn consume_probe(GstPad *pad, GstPadProbeInfo *info,
                                       gpointer user)
{
  (void)pad;
  if (info->type & GST_PAD_PROBE_TYPE_BUFFER)
    consume(GPOINTER_TO_UINT(user), GST_PAD_PROBE_INFO_BUFFER(info));
  else if (GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) == GST_EVENT_EOS)
    g_atomic_int_inc(&rx.eos);
  return GST_PAD_PROBE_OK;
}

/* The consumer of camera i.  appsink (--appsink) keeps its preroll buffer
 * until it stops, one frame per camera that its source can't reuse
 * (rdmasrc counts it against the device's share of the lane; shmsink's
 * area keeps the block); a fakesink whose pad probe maps each buffer
 * keeps nothing, as an application that maps in a pad probe or a
 * CPU element that maps in its chain does. */
static GstElement *make_consumer(guint i)
{
  GstElement *sink;

  if (opts->appsink) {
    GstAppSinkCallbacks cb = {.eos = on_eos, .new_sample = on_sample};
    sink = gst_element_factory_make("appsink", NULL);
    gst_app_sink_set_callbacks(GST_APP_SINK(sink), &cb, GUINT_TO_POINTER(i),
                               NULL);
  } else {
    sink = gst_element_factory_make("fakesink", NULL);
    GstPad *pad = gst_element_get_static_pad(sink, "sink");
    gst_pad_add_probe(
        pad, GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM,
        consume_probe, GUINT_TO_POINTER(i), NULL);
    gst_object_unref(pad);
  }
  /* No last sample: a sink keeping one holds a frame per camera, which
   * rdmasrc would count against max-held. */
  g_object_set(sink, "sync", FALSE, "async", FALSE, "enable-last-sample", FALSE,
               NULL);
  return sink;
}

static void on_pad_added(GstElement *src, GstPad *pad, gpointer user)
{
  GstElement *p = user;
  guint i = 0;
  char *name = gst_pad_get_name(pad);
  (void)src;
  if (sscanf(name, "src_%u", &i) != 1)
    i = MAX_STREAMS;
  g_free(name);
  GstElement *sink = make_consumer(i);
  gst_bin_add(GST_BIN(p), sink);
  gst_element_sync_state_with_parent(sink);
  GstPad *sp = gst_element_get_static_pad(sink, "sink");
  gst_pad_link(pad, sp);
  gst_object_unref(sp);
}

/* rdmasrc's counters: what it copied or dropped, and the memory its lanes
 * hold (what verbs would pin: blocks x block-size a lane). */
static void print_rdmasrc_stats(GstElement *src)
{
  static const char *const per_dev[] = {"frames", "drops", "drops-leaky",
                                        "copies", "frames-fragmented"};
  guint64 sum[G_N_ELEMENTS(per_dev)] = {0};
  gboolean has_fragmented = FALSE;
  guint64 frames_copied = 0, copies = 0, blocks = 0;
  guint lanes = 0, nblocks = 0, block_size = 0;
  GstStructure *st = NULL;

  g_object_get(src, "stats", &st, "blocks", &nblocks, "block-size", &block_size,
               NULL);
  if (!st)
    return;
  /* All of it on stderr, for whoever wonders where a frame went. */
  char *all = gst_structure_to_string(st);
  fprintf(stderr, "rdmasrc stats: %s\n", all);
  g_free(all);
  gst_structure_get_uint64(st, "frames-copied", &frames_copied);
  gst_structure_get_uint64(st, "copies", &copies);
  gst_structure_get_uint64(st, "blocks", &blocks);
  gst_structure_get_uint(st, "lanes-active", &lanes);
  for (gint f = 0; f < gst_structure_n_fields(st); f++) {
    const char *name = gst_structure_nth_field_name(st, (guint)f);
    const GValue *v = gst_structure_get_value(st, name);
    if (!g_str_has_prefix(name, "device-") || !GST_VALUE_HOLDS_STRUCTURE(v))
      continue;
    const GstStructure *d = gst_value_get_structure(v);
    for (guint k = 0; k < G_N_ELEMENTS(per_dev); k++) {
      guint64 x = 0;
      if (gst_structure_get_uint64(d, per_dev[k], &x)) {
        sum[k] += x;
        has_fragmented |= k == G_N_ELEMENTS(per_dev) - 1;
      }
    }
  }
  printf(
      ",\"rdmasrc\":{\"frames-copied\":%" G_GUINT64_FORMAT
      ",\"copies\":%" G_GUINT64_FORMAT ",\"blocks-received\":%" G_GUINT64_FORMAT
      ",\"lanes-active\":%u,\"blocks\":%u,\"block-size\":%u,"
      "\"lane_bytes\":%" G_GUINT64_FORMAT ",\"has-frames-fragmented\":%s",
      frames_copied, copies, blocks, lanes, nblocks, block_size,
      (guint64)lanes * nblocks * block_size, has_fragmented ? "true" : "false");
  for (guint k = 0; k < G_N_ELEMENTS(per_dev); k++)
    printf(",\"devices-%s\":%" G_GUINT64_FORMAT, per_dev[k], sum[k]);
  printf("}");
  gst_structure_free(st);
}

static gboolean on_tick(gpointer user)
{
  (void)user;
  gint64 now = g_get_monotonic_time();
  g_mutex_lock(&span.lock);
  gint64 last = span.t_last;
  g_mutex_unlock(&span.lock);
  if (stop_requested || (guint)g_atomic_int_get(&rx.eos) >= opts->streams ||
      (last && now - last > (gint64)(opts->idle * 1e6))) {
    span_end();
    g_main_loop_quit(rx.loop);
    return G_SOURCE_REMOVE;
  }
  return G_SOURCE_CONTINUE;
}

static gboolean on_timeout(gpointer user)
{
  (void)user;
  span_end();
  g_main_loop_quit(rx.loop);
  return G_SOURCE_REMOVE;
}

static gboolean on_bus(GstBus *bus, GstMessage *m, gpointer user)
{
  GString *errors = user;
  (void)bus;
  if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR) {
    GError *e = NULL;
    gst_message_parse_error(m, &e, NULL);
    g_string_append_printf(errors, "%s%s: %s", errors->len ? "; " : "",
                           GST_MESSAGE_SRC_NAME(m), e->message);
    g_error_free(e);
  }
  return G_SOURCE_CONTINUE;
}

static int run_receive(const struct options *o)
{
  GstElement *p = gst_pipeline_new("rx");
  GstElement *rdmasrc = NULL;
  GString *errors = g_string_new(NULL);
  char *caps = caps_string(o);

  rx.loop = g_main_loop_new(NULL, FALSE);
  if (!strcmp(o->transport, "rdma")) {
    rdmasrc = gst_element_factory_make("rdmasrc", NULL);
    if (!rdmasrc) {
      fprintf(stderr, "gst-frames: no rdmasrc (GST_PLUGIN_PATH?)\n");
      return 1;
    }
    gst_util_set_object_arg(G_OBJECT(rdmasrc), "transport", "shm");
    g_object_set(rdmasrc, "port", o->port, "stats-interval", 0, NULL);
    if (o->block_size)
      g_object_set(rdmasrc, "block-size", o->block_size, NULL);
    gst_bin_add(GST_BIN(p), rdmasrc);
    g_signal_connect(rdmasrc, "pad-added", G_CALLBACK(on_pad_added), p);
  } else {
    for (guint i = 0; i < o->streams; i++) {
      char *desc = g_strdup_printf("shmsrc socket-path=%s/sbr-frames-%u-%u "
                                   "is-live=true ! capsfilter caps=\"%s\"",
                                   o->socket_dir, o->port, i, caps);
      GError *err = NULL;
      GstElement *bin = gst_parse_bin_from_description(desc, TRUE, &err);
      g_free(desc);
      if (!bin) {
        fprintf(stderr, "gst-frames: %s\n", err->message);
        return 1;
      }
      GstElement *sink = make_consumer(i);
      gst_bin_add_many(GST_BIN(p), bin, sink, NULL);
      gst_element_link(bin, sink);
    }
  }
  g_free(caps);
  GstBus *bus = gst_element_get_bus(p);
  gst_bus_add_watch(bus, on_bus, errors);
  g_timeout_add(10, on_tick, NULL);
  g_timeout_add((guint)(o->seconds * 1000), on_timeout, NULL);
  gst_element_set_state(p, GST_STATE_PLAYING);
  fprintf(stderr, "ready\n");
  g_main_loop_run(rx.loop);
  span_end();

  printf("{\"mode\":\"receive\",\"transport\":\"%s\",\"streams\":%u,"
         "\"width\":%u,\"height\":%u,\"format\":\"%s\",\"frame_bytes\":"
         "%" G_GSIZE_FORMAT ",\"expected\":%u,\"eos_streams\":%u,",
         o->transport, o->streams, o->width, o->height, o->format,
         frame_bytes(o), o->frames * o->streams,
         (guint)g_atomic_int_get(&rx.eos));
  print_span();
  if (rdmasrc)
    print_rdmasrc_stats(rdmasrc); /* still PLAYING: counters are live */
  if (errors->len)
    printf(",\"error\":\"%s\"", g_strescape(errors->str, NULL));
  printf("}\n");
  fflush(stdout);
  gst_element_set_state(p, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(p);
  return 0;
}

int main(int argc, char **argv)
{
  static struct options o = {.transport = "rdma",
                             .streams = 1,
                             .port = 7900,
                             .width = 1920,
                             .height = 1080,
                             .fps = "30",
                             .format = "NV12",
                             .frames = 100,
                             .warmup = 3,
                             .shm_frames = 8,
                             .seconds = 120,
                             .idle = 3,
                             .linger = 30,
                             .socket_dir = "/tmp"};
  static const struct option longopts[] = {
      {"transport", required_argument, NULL, 't'},
      {"streams", required_argument, NULL, 'n'},
      {"port", required_argument, NULL, 'p'},
      {"width", required_argument, NULL, 'W'},
      {"height", required_argument, NULL, 'H'},
      {"fps", required_argument, NULL, 'r'},
      {"format", required_argument, NULL, 'f'},
      {"frames", required_argument, NULL, 'F'},
      {"warmup", required_argument, NULL, 'w'},
      {"live", no_argument, NULL, 'l'},
      {"block-size", required_argument, NULL, 'b'},
      {"shm-frames", required_argument, NULL, 'S'},
      {"seconds", required_argument, NULL, 's'},
      {"idle", required_argument, NULL, 'i'},
      {"linger", required_argument, NULL, 'L'},
      {"socket-dir", required_argument, NULL, 'd'},
      {"no-map", no_argument, NULL, 'm'},
      {"appsink", no_argument, NULL, 'A'},
      {NULL, 0, NULL, 0}};
  int c;

  if (argc < 2 || (strcmp(argv[1], "send") && strcmp(argv[1], "receive"))) {
    fprintf(stderr, "usage: gst-frames send|receive --transport rdma|shm "
                    "[--streams N] [--port P] [--width W --height H "
                    "--format RGB|NV12|I420] [--frames F] [--warmup K] "
                    "[--live --fps R] [--block-size B] [--shm-frames S] "
                    "[--seconds S] [--idle S] [--linger S] [--socket-dir D] "
                    "[--no-map] [--appsink]\n");
    return 2;
  }
  o.send = !strcmp(argv[1], "send");
  while ((c = getopt_long(argc - 1, argv + 1, "", longopts, NULL)) != -1) {
    switch (c) {
    case 't':
      o.transport = optarg;
      break;
    case 'n':
      o.streams = (guint)atoi(optarg);
      break;
    case 'p':
      o.port = (guint)atoi(optarg);
      break;
    case 'W':
      o.width = (guint)atoi(optarg);
      break;
    case 'H':
      o.height = (guint)atoi(optarg);
      break;
    case 'r':
      o.fps = optarg;
      break;
    case 'f':
      o.format = optarg;
      break;
    case 'F':
      o.frames = (guint)atoi(optarg);
      break;
    case 'w':
      o.warmup = (guint)atoi(optarg);
      break;
    case 'l':
      o.live = TRUE;
      break;
    case 'b':
      o.block_size = (guint)atoi(optarg);
      break;
    case 'S':
      o.shm_frames = (guint)atoi(optarg);
      break;
    case 's':
      o.seconds = atof(optarg);
      break;
    case 'i':
      o.idle = atof(optarg);
      break;
    case 'L':
      o.linger = atof(optarg);
      break;
    case 'd':
      o.socket_dir = optarg;
      break;
    case 'm':
      o.no_map = TRUE;
      break;
    case 'A':
      o.appsink = TRUE;
      break;
    default:
      return 2;
    }
  }
  if (o.streams < 1 || o.streams > MAX_STREAMS || o.frames <= o.warmup ||
      (strcmp(o.transport, "rdma") && strcmp(o.transport, "shm"))) {
    fprintf(stderr,
            "gst-frames: 1..%d streams, rdma or shm, and more "
            "frames than warm-up frames\n",
            MAX_STREAMS);
    return 2;
  }
  opts = &o;
  g_mutex_init(&span.lock);
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  gst_init(NULL, NULL);
  return o.send ? run_send(&o) : run_receive(&o);
}
