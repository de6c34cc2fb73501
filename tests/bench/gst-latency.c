/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gst-latency - one end of the capture-to-appsink latency benchmark
 * (tests/bench/run.py part B9), the same pipelines for every transport:
 *
 *   gst-latency send    --transport T --streams N --port P [video options]
 *                       [--first-device D] [--backend shm|verbs --address A]
 *   gst-latency receive --transport T --streams N --port P [video options]
 *                       [--seconds S] [--warmup S] [--poll-mode M] [--queue]
 *                       [--senders K] [--backend shm|verbs --address A]
 *                       [--device-blocks B]
 *
 * and of B10 (many senders into one receiver): K sender processes of N
 * cameras each, the k-th with --first-device k*N, into one receiver with
 * --streams K*N --senders K.
 *
 * Sender, per camera i:
 *   videotestsrc is-live=true pattern=solid-color ! video/x-raw,... ! SINK
 * Receiver, per camera i:
 *   SRC [! queue] ! appsink sync=false
 * with, by transport (all on this host):
 *   rdma  SINK = rdmasink transport=shm port=P device-id=D+i sync=false
 *         SRC  = one rdmasrc transport=shm port=P, its pad src_i
 *                (poll-mode=M when the element has that property;
 *                max-senders=K when K is above its default;
 *                device-blocks=B when given, else its automatic share)
 *         --backend verbs: transport=verbs, host=A / address=A instead
 *   shm   SINK = identity drop-allocation=true ! shmsink socket-path=...
 *         SRC  = shmsrc socket-path=... is-live=true
 *         (identity: see tests/bench/gst_peers.py, shmsink stalls without)
 *   tcp   SINK = tcpclientsink host=127.0.0.1 port=P+i
 *         SRC  = tcpserversrc port=P+i ! rawvideoparse (the frames back)
 *
 * The capture time travels in the frame itself, so every transport carries
 * it alike: a pad probe on videotestsrc's src pad (the moment the live
 * source lets the frame go) writes 8 magic bytes, CLOCK_REALTIME in ns and
 * the camera's frame number (both little-endian) into the frame's first 24
 * bytes, and adds the same time
 * as a "timestamp/x-unix" GstReferenceTimestampMeta, which rdmasink sends
 * as the block's capture time (rdmasrc gives it back as that meta: the
 * receiver reports it too, as a check).  The appsink's new-sample callback
 * reads CLOCK_REALTIME again: latency = the difference, one host, one
 * clock.  Frames arriving in the first --warmup seconds are not counted.
 * The frame numbers give the frames lost, from the bytes alone (whatever
 * dropped them: sender, transport or receiver): per camera, the numbers
 * missing between its first and its last frame received over the whole
 * run.  A live videotestsrc never skips a number (a late frame is still
 * made), so a gap is a frame lost after capture.
 *
 * The receiver prints one JSON object: latency percentiles (nearest rank,
 * every sample kept) over all cameras and per camera, frames, and the CPU
 * of this process (getrusage, user + system) over the counted span, as a
 * percentage of one core.  A benchmark tool: it never fails on a figure.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <gst/app/gstappsink.h>
#include <gst/gst.h>

/* B10 puts 8 senders of 12 cameras into one receiver. */
#define MAX_STREAMS 128
/* 02: the frame number follows the time (01 had the time only). */
#define STAMP_MAGIC "SBRLAT02"
#define STAMP_LEN 24

struct options {
  gboolean send;
  const char *transport;
  guint streams;
  guint port;
  guint width, height, fps;
  const char *format; /* RGB or I420 */
  double seconds;     /* receive: counted span; send: how long to send */
  double warmup;
  const char *poll_mode;
  gboolean queue;
  guint first_device;  /* send: device-id (tcp/shm: port, socket) of camera 0 */
  guint senders;       /* receive: sender processes (rdmasrc max-senders) */
  const char *backend; /* rdma: shm or verbs */
  const char *address; /* rdma over verbs: the receiver's address */
  guint device_blocks; /* receive: rdmasrc device-blocks, 0 = its default */
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
  (void)sig;
  stop_requested = 1;
}

static guint64 realtime_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (guint64)ts.tv_sec * GST_SECOND + (guint64)ts.tv_nsec;
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
  return g_ascii_strcasecmp(o->format, "I420") == 0 ? px * 3 / 2 : px * 3;
}

static char *caps_string(const struct options *o)
{
  return g_strdup_printf("video/x-raw,format=%s,width=%u,height=%u,"
                         "framerate=%u/1",
                         o->format, o->width, o->height, o->fps);
}

/* ------------------------------------------------------------- sender */

static GstCaps *unix_caps;
static gint stamp_copies;
static guint64 stamp_seq[MAX_STREAMS]; /* per camera, on its streaming thread */

static GstPadProbeReturn stamp_probe(GstPad *pad, GstPadProbeInfo *info,
                                     gpointer user_data)
{
  GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER(info);
  guint8 stamp[STAMP_LEN];
  guint64 now, seq = stamp_seq[GPOINTER_TO_UINT(user_data)]++;

  (void)pad;
  /* A pool buffer pushed by the source has one owner: no copy.  Counted
   * in case an element keeps a reference. */
  if (!gst_buffer_is_writable(buf))
    g_atomic_int_inc(&stamp_copies);
  buf = gst_buffer_make_writable(buf);
  now = realtime_ns();
  memcpy(stamp, STAMP_MAGIC, 8);
  for (int i = 0; i < 8; i++) {
    stamp[8 + i] = (guint8)(now >> (8 * i));
    stamp[16 + i] = (guint8)(seq >> (8 * i));
  }
  gst_buffer_fill(buf, 0, stamp, sizeof stamp);
  gst_buffer_add_reference_timestamp_meta(buf, unix_caps, now,
                                          GST_CLOCK_TIME_NONE);
  GST_PAD_PROBE_INFO_DATA(info) = buf;
  return GST_PAD_PROBE_OK;
}

static char *sender_desc(const struct options *o)
{
  GString *d = g_string_new(NULL);
  char *caps = caps_string(o);
  gsize frame = frame_bytes(o);

  for (guint i = 0; i < o->streams; i++) {
    guint dev = o->first_device + i;

    g_string_append_printf(d,
                           "videotestsrc name=v%u is-live=true "
                           "pattern=solid-color ! %s ! ",
                           i, caps);
    if (!strcmp(o->transport, "rdma"))
      g_string_append_printf(d,
                             "rdmasink name=rdmasink%u transport=%s host=%s "
                             "port=%u device-id=%u sync=false "
                             "stats-interval=0 ",
                             i, o->backend, o->address, o->port, dev);
    else if (!strcmp(o->transport, "shm"))
      /* 6 frames of room: the reader releases each at once. */
      g_string_append_printf(
          d,
          "identity drop-allocation=true ! shmsink "
          "socket-path=/tmp/sbr-lat-%u-%u shm-size=%" G_GSIZE_FORMAT
          " wait-for-connection=true sync=false ",
          o->port, dev, 6 * frame);
    else
      g_string_append_printf(d,
                             "tcpclientsink host=127.0.0.1 port=%u "
                             "sync=false ",
                             o->port + dev);
  }
  g_free(caps);
  return g_string_free(d, FALSE);
}

static int run_send(const struct options *o)
{
  char *desc = sender_desc(o);
  GError *err = NULL;
  GstElement *p = gst_parse_launch(desc, &err);
  int ret = 0;

  g_free(desc);
  if (!p) {
    fprintf(stderr, "gst-latency: %s\n", err ? err->message : "parse failed");
    return 1;
  }
  unix_caps = gst_caps_from_string("timestamp/x-unix");
  for (guint i = 0; i < o->streams; i++) {
    char name[16];
    g_snprintf(name, sizeof name, "v%u", i);
    GstElement *v = gst_bin_get_by_name(GST_BIN(p), name);
    GstPad *pad = gst_element_get_static_pad(v, "src");
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, stamp_probe,
                      GUINT_TO_POINTER(i), NULL);
    gst_object_unref(pad);
    gst_object_unref(v);
  }
  gst_element_set_state(p, GST_STATE_PLAYING);
  GstBus *bus = gst_element_get_bus(p);
  gint64 end = g_get_monotonic_time() + (gint64)(o->seconds * 1e6);
  while (!stop_requested && g_get_monotonic_time() < end) {
    GstMessage *m =
        gst_bus_timed_pop_filtered(bus, 100 * GST_MSECOND, GST_MESSAGE_ERROR);
    if (m) {
      GError *e = NULL;
      gst_message_parse_error(m, &e, NULL);
      fprintf(stderr, "gst-latency send: %s: %s\n", GST_MESSAGE_SRC_NAME(m),
              e->message);
      g_error_free(e);
      gst_message_unref(m);
      ret = 1;
      break;
    }
  }
  gst_object_unref(bus);
  /* rdmasink's own count of frames sent without a copy (videotestsrc drew
   * into its registered memory) and with one. */
  guint64 zero_copy = 0, copied = 0, drops = 0;
  /* The connection's (shared by the sinks): read from the first. */
  static const char *const conn_fields[] = {
      "direct-blocks", "producer-posts", "kicks", "pause-reads", "sync-reads"};
  guint64 conn[G_N_ELEMENTS(conn_fields)] = {0};
  for (guint i = 0; !strcmp(o->transport, "rdma") && i < o->streams; i++) {
    char name[16];
    GstStructure *st = NULL;
    g_snprintf(name, sizeof name, "rdmasink%u", i);
    GstElement *sink = gst_bin_get_by_name(GST_BIN(p), name);
    if (sink)
      g_object_get(sink, "stats", &st, NULL);
    if (st) {
      guint64 v = 0;
      if (gst_structure_get_uint64(st, "zero-copy-buffers", &v))
        zero_copy += v;
      if (gst_structure_get_uint64(st, "copied-buffers", &v))
        copied += v;
      if (gst_structure_get_uint64(st, "drops", &v))
        drops += v;
      for (guint k = 0; i == 0 && k < G_N_ELEMENTS(conn_fields); k++)
        gst_structure_get_uint64(st, conn_fields[k], &conn[k]);
      gst_structure_free(st);
    }
    if (sink)
      gst_object_unref(sink);
  }
  gst_element_set_state(p, GST_STATE_NULL);
  gst_object_unref(p);
  gst_caps_unref(unix_caps);
  guint64 stamped = 0;
  for (guint i = 0; i < o->streams; i++)
    stamped += stamp_seq[i];
  printf("{\"mode\":\"send\",\"transport\":\"%s\",\"streams\":%u,"
         "\"first_device\":%u,\"frames_stamped\":%" G_GUINT64_FORMAT ","
         "\"stamp_copies\":%d,\"zero_copy_buffers\":%" G_GUINT64_FORMAT
         ",\"copied_buffers\":%" G_GUINT64_FORMAT
         ",\"rdmasink_drops\":%" G_GUINT64_FORMAT ",",
         o->transport, o->streams, o->first_device, stamped,
         g_atomic_int_get(&stamp_copies), zero_copy, copied, drops);
  for (guint k = 0; k < G_N_ELEMENTS(conn_fields); k++)
    printf("\"%s\":%" G_GUINT64_FORMAT ",", conn_fields[k], conn[k]);
  printf("\"ok\":%s}\n", ret ? "false" : "true");
  return ret;
}

/* ----------------------------------------------------------- receiver */

struct stream {
  guint64 *lat_ns; /* counted samples */
  guint64 *meta_ns;
  guint64 *push_ns; /* rdma: capture -> rdmasrc's pad pushes the buffer */
  gsize n, n_meta, n_push, cap;
  guint64 frames, no_stamp;
  /* Frame numbers over the whole run (not only the counted span). */
  gboolean seq_seen;
  guint64 seq_first, seq_last;
  guint64 seq_frames;   /* frames with a number, in order */
  guint64 out_of_order; /* a number at or below the last one */
};

static struct {
  GMutex lock;
  gboolean counting;
  guint64 count_from_ns; /* realtime */
  guint64 first_arrival_ns;
  struct stream s[MAX_STREAMS];
} rx;

static GstCaps *rx_unix_caps;

static GstFlowReturn on_sample(GstAppSink *sink, gpointer user_data)
{
  guint idx = GPOINTER_TO_UINT(user_data);
  GstSample *sample = gst_app_sink_pull_sample(sink);
  guint64 now = realtime_ns();
  guint8 stamp[STAMP_LEN];
  GstBuffer *buf;
  GstReferenceTimestampMeta *meta;
  struct stream *s = &rx.s[idx];

  if (!sample)
    return GST_FLOW_EOS;
  buf = gst_sample_get_buffer(sample);
  meta = gst_buffer_get_reference_timestamp_meta(buf, rx_unix_caps);
  gboolean stamped =
      gst_buffer_extract(buf, 0, stamp, sizeof stamp) == sizeof stamp &&
      memcmp(stamp, STAMP_MAGIC, 8) == 0;
  guint64 t = 0, seq = 0;
  for (int i = 0; stamped && i < 8; i++) {
    t |= (guint64)stamp[8 + i] << (8 * i);
    seq |= (guint64)stamp[16 + i] << (8 * i);
  }
  g_mutex_lock(&rx.lock);
  if (!rx.first_arrival_ns)
    rx.first_arrival_ns = now;
  s->frames++;
  if (stamped && s->seq_seen && seq <= s->seq_last) {
    s->out_of_order++;
  } else if (stamped) {
    if (!s->seq_seen)
      s->seq_first = seq;
    s->seq_seen = TRUE;
    s->seq_last = seq;
    s->seq_frames++;
  }
  if (rx.counting && now >= rx.count_from_ns) {
    if (stamped && s->n < s->cap)
      s->lat_ns[s->n++] = now > t ? now - t : 0;
    else if (!stamped)
      s->no_stamp++;
    if (meta && s->n_meta < s->cap)
      s->meta_ns[s->n_meta++] =
          now > meta->timestamp ? now - meta->timestamp : 0;
  }
  g_mutex_unlock(&rx.lock);
  gst_sample_unref(sample);
  return GST_FLOW_OK;
}

/* rdma only: where the time goes, the other half of the split.  A probe on
 * rdmasrc's pad runs on its pad task as it pushes: capture (the meta) to
 * push is the transport and rdmasrc's hand-off, push to appsink the rest. */
static GstPadProbeReturn on_rdmasrc_push(GstPad *pad, GstPadProbeInfo *info,
                                         gpointer user_data)
{
  guint64 now = realtime_ns();
  struct stream *s = &rx.s[GPOINTER_TO_UINT(user_data)];
  GstReferenceTimestampMeta *meta = gst_buffer_get_reference_timestamp_meta(
      GST_PAD_PROBE_INFO_BUFFER(info), rx_unix_caps);

  (void)pad;
  g_mutex_lock(&rx.lock);
  if (meta && rx.counting && now >= rx.count_from_ns && s->n_push < s->cap)
    s->push_ns[s->n_push++] = now > meta->timestamp ? now - meta->timestamp : 0;
  g_mutex_unlock(&rx.lock);
  return GST_PAD_PROBE_OK;
}

static GstElement *make_tail(GstElement *pipeline, const struct options *o,
                             guint idx)
{
  GstElement *sink = gst_element_factory_make("appsink", NULL);
  GstAppSinkCallbacks cb = {.new_sample = on_sample};
  GstElement *first = sink;

  g_object_set(sink, "sync", FALSE, "async", FALSE, "enable-last-sample", FALSE,
               NULL);
  gst_app_sink_set_callbacks(GST_APP_SINK(sink), &cb, GUINT_TO_POINTER(idx),
                             NULL);
  gst_bin_add(GST_BIN(pipeline), sink);
  if (o->queue) {
    first = gst_element_factory_make("queue", NULL);
    gst_bin_add(GST_BIN(pipeline), first);
    gst_element_link(first, sink);
    gst_element_sync_state_with_parent(first);
  }
  gst_element_sync_state_with_parent(sink);
  return first;
}

struct rdma_ctx {
  GstElement *pipeline;
  const struct options *o;
};

static void on_pad_added(GstElement *src, GstPad *pad, gpointer user_data)
{
  struct rdma_ctx *c = user_data;
  char *name = gst_pad_get_name(pad);
  guint idx;

  (void)src;
  if (sscanf(name, "src_%u", &idx) == 1 && idx < c->o->streams) {
    GstElement *first = make_tail(c->pipeline, c->o, idx);
    GstPad *sinkpad = gst_element_get_static_pad(first, "sink");
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, on_rdmasrc_push,
                      GUINT_TO_POINTER(idx), NULL);
    gst_pad_link(pad, sinkpad);
    gst_object_unref(sinkpad);
  }
  g_free(name);
}

/* Sets rdmasrc's poll-mode when it has one; returns the mode that runs. */
static char *apply_poll_mode(GstElement *src, const char *want)
{
  GParamSpec *ps =
      g_object_class_find_property(G_OBJECT_GET_CLASS(src), "poll-mode");
  GValue v = G_VALUE_INIT;
  char *mode;

  if (!ps)
    return g_strdup("backoff");
  if (want && *want)
    gst_util_set_object_arg(G_OBJECT(src), "poll-mode", want);
  g_value_init(&v, ps->value_type);
  g_object_get_property(G_OBJECT(src), "poll-mode", &v);
  if (G_VALUE_HOLDS_ENUM(&v)) {
    GEnumValue *ev = g_enum_get_value(
        G_ENUM_CLASS(g_type_class_peek(ps->value_type)), g_value_get_enum(&v));
    mode = g_strdup(ev ? ev->value_nick : "?");
  } else {
    mode = g_strdup_value_contents(&v);
  }
  g_value_unset(&v);
  return mode;
}

/* rdmasrc's counters summed over its devices: what it dropped or copied
 * (a frame lost or copied on the way shows in the latency figures too). */
static void print_rdmasrc_stats(GstElement *src)
{
  static const char *const per_dev[] = {
      "frames", "gaps",   "drops",       "drops-leaky", "drops-not-playing",
      "copies", "pushed", "task-wakeups"};
  guint64 sum[G_N_ELEMENTS(per_dev)] = {0};
  guint64 frames_copied = 0, copies = 0, poll_sleeps = 0, predicted = 0,
          missed = 0, woken = 0, timed_out = 0;
  GstStructure *st = NULL;

  g_object_get(src, "stats", &st, NULL);
  if (!st)
    return;
  gst_structure_get_uint64(st, "frames-copied", &frames_copied);
  gst_structure_get_uint64(st, "copies", &copies);
  gst_structure_get_uint64(st, "poll-sleeps", &poll_sleeps);
  gst_structure_get_uint64(st, "frames-predicted", &predicted);
  gst_structure_get_uint64(st, "frames-missed", &missed);
  gst_structure_get_uint64(st, "poll-sleeps-woken", &woken);
  gst_structure_get_uint64(st, "poll-sleeps-timed-out", &timed_out);
  /* One structure field per device, "device-<N>" (since 42480b1; before
   * it a "devices" array, which this no longer reads). */
  for (gint f = 0; f < gst_structure_n_fields(st); f++) {
    const char *name = gst_structure_nth_field_name(st, (guint)f);
    const GValue *v = gst_structure_get_value(st, name);
    if (!g_str_has_prefix(name, "device-") || !GST_VALUE_HOLDS_STRUCTURE(v))
      continue;
    const GstStructure *d = gst_value_get_structure(v);
    for (guint k = 0; k < G_N_ELEMENTS(per_dev); k++) {
      guint64 x = 0;
      if (gst_structure_get_uint64(d, per_dev[k], &x))
        sum[k] += x;
    }
  }
  printf("\"rdmasrc\":{\"frames-copied\":%" G_GUINT64_FORMAT
         ",\"copies\":%" G_GUINT64_FORMAT ",\"poll-sleeps\":%" G_GUINT64_FORMAT
         ",\"frames-predicted\":%" G_GUINT64_FORMAT
         ",\"frames-missed\":%" G_GUINT64_FORMAT
         ",\"poll-sleeps-woken\":%" G_GUINT64_FORMAT
         ",\"poll-sleeps-timed-out\":%" G_GUINT64_FORMAT,
         frames_copied, copies, poll_sleeps, predicted, missed, woken,
         timed_out);
  for (guint k = 0; k < G_N_ELEMENTS(per_dev); k++)
    printf(",\"devices-%s\":%" G_GUINT64_FORMAT, per_dev[k], sum[k]);
  printf("},");
  gst_structure_free(st);
}

static int cmp_u64(const void *a, const void *b)
{
  guint64 x = *(const guint64 *)a, y = *(const guint64 *)b;
  return x < y ? -1 : x > y;
}

/* Nearest-rank q-quantile of n sorted values, in us. */
static double quantile_us(const guint64 *v, gsize n, double q)
{
  gsize rank;

  if (!n)
    return -1;
  rank = (gsize)(q * (double)n);
  if ((double)rank < q * (double)n || rank == 0)
    rank++;
  return v[rank - 1] / 1e3;
}

static void print_dist(const char *prefix, guint64 *v, gsize n)
{
  double sum = 0;

  qsort(v, n, sizeof *v, cmp_u64);
  for (gsize i = 0; i < n; i++)
    sum += (double)v[i];
  printf("\"%ssamples\":%" G_GSIZE_FORMAT ",\"%sp50_us\":%.1f,"
         "\"%sp90_us\":%.1f,\"%sp99_us\":%.1f,\"%smax_us\":%.1f,"
         "\"%smean_us\":%.1f",
         prefix, n, prefix, quantile_us(v, n, 0.5), prefix,
         quantile_us(v, n, 0.9), prefix, quantile_us(v, n, 0.99), prefix,
         n ? v[n - 1] / 1e3 : -1, prefix, n ? sum / n / 1e3 : -1);
}

static int run_receive(const struct options *o)
{
  GstElement *p = gst_pipeline_new("rx");
  char *caps = caps_string(o);
  char *mode = NULL;
  struct rdma_ctx rc = {p, o};
  GstElement *rdmasrc = NULL;
  GString *errors = g_string_new(NULL);
  gsize cap = (gsize)((o->seconds + 2) * o->fps * 2) + 64;

  g_mutex_init(&rx.lock);
  rx_unix_caps = gst_caps_from_string("timestamp/x-unix");
  for (guint i = 0; i < o->streams; i++) {
    rx.s[i].cap = cap;
    rx.s[i].lat_ns = g_new0(guint64, cap);
    rx.s[i].meta_ns = g_new0(guint64, cap);
    rx.s[i].push_ns = g_new0(guint64, cap);
  }
  if (!strcmp(o->transport, "rdma")) {
    GstElement *src = gst_element_factory_make("rdmasrc", NULL);
    if (!src) {
      fprintf(stderr, "gst-latency: no rdmasrc (GST_PLUGIN_PATH?)\n");
      return 1;
    }
    gst_util_set_object_arg(G_OBJECT(src), "transport", o->backend);
    g_object_set(src, "address", o->address, "port", o->port, "block-size",
                 (guint)(frame_bytes(o) + 72), "stats-interval", 0, NULL);
    /* One lane per sender process: above the default a sender would be
     * refused (lanes full). */
    guint max_senders = 0;
    g_object_get(src, "max-senders", &max_senders, NULL);
    if (o->senders > max_senders)
      g_object_set(src, "max-senders", o->senders, NULL);
    if (o->device_blocks)
      g_object_set(src, "device-blocks", o->device_blocks, NULL);
    mode = apply_poll_mode(src, o->poll_mode);
    gst_bin_add(GST_BIN(p), src);
    rdmasrc = src;
    g_signal_connect(src, "pad-added", G_CALLBACK(on_pad_added), &rc);
  } else {
    for (guint i = 0; i < o->streams; i++) {
      char *desc;
      GError *err = NULL;
      if (!strcmp(o->transport, "shm"))
        desc = g_strdup_printf(
            "shmsrc socket-path=/tmp/sbr-lat-%u-%u is-live=true", o->port, i);
      else
        desc = g_strdup_printf(
            "tcpserversrc host=127.0.0.1 port=%u ! rawvideoparse "
            "width=%u height=%u format=%s framerate=%u/1",
            o->port + i, o->width, o->height,
            g_ascii_strcasecmp(o->format, "I420") ? "rgb" : "i420", o->fps);
      GstElement *bin = gst_parse_bin_from_description(desc, TRUE, &err);
      g_free(desc);
      if (!bin) {
        fprintf(stderr, "gst-latency: %s\n", err->message);
        return 1;
      }
      gst_bin_add(GST_BIN(p), bin);
      GstElement *first = make_tail(p, o, i);
      gst_element_link(bin, first);
    }
  }

  GstBus *bus = gst_element_get_bus(p);
  gst_element_set_state(p, GST_STATE_PLAYING);
  fprintf(stderr, "ready\n");
  gint64 t0 = g_get_monotonic_time();
  gint64 budget = (gint64)((o->seconds + o->warmup + 30) * 1e6);
  double cpu0 = 0;
  guint64 wall0 = 0, wall1 = 0;
  double cpu1 = 0;
  gboolean counting = FALSE;

  while (!stop_requested && g_get_monotonic_time() - t0 < budget) {
    GstMessage *m =
        gst_bus_timed_pop_filtered(bus, 10 * GST_MSECOND, GST_MESSAGE_ERROR);
    if (m) {
      GError *e = NULL;
      gst_message_parse_error(m, &e, NULL);
      g_string_append_printf(errors, "%s%s: %s", errors->len ? "; " : "",
                             GST_MESSAGE_SRC_NAME(m), e->message);
      g_error_free(e);
      gst_message_unref(m);
      break;
    }
    guint64 now = realtime_ns();
    g_mutex_lock(&rx.lock);
    guint64 first = rx.first_arrival_ns;
    if (!counting && first &&
        now >= first + (guint64)(o->warmup * GST_SECOND)) {
      counting = rx.counting = TRUE;
      rx.count_from_ns = wall0 = now;
      cpu0 = cpu_seconds();
    }
    g_mutex_unlock(&rx.lock);
    if (counting && now >= wall0 + (guint64)(o->seconds * GST_SECOND))
      break;
  }
  g_mutex_lock(&rx.lock);
  rx.counting = FALSE;
  g_mutex_unlock(&rx.lock);
  if (counting) {
    cpu1 = cpu_seconds();
    wall1 = realtime_ns();
  }

  /* All cameras together, then each. */
  gsize total = 0, total_meta = 0, total_push = 0;
  guint64 frames = 0, no_stamp = 0, lost = 0, out_of_order = 0;
  guint streams_seen = 0, streams_lossy = 0;
  for (guint i = 0; i < o->streams; i++) {
    const struct stream *si = &rx.s[i];
    guint64 gap =
        si->seq_seen ? si->seq_last - si->seq_first + 1 - si->seq_frames : 0;
    streams_seen += si->seq_seen;
    streams_lossy += gap > 0;
    lost += gap;
    out_of_order += si->out_of_order;
    total += rx.s[i].n;
    total_meta += rx.s[i].n_meta;
    total_push += rx.s[i].n_push;
    frames += rx.s[i].frames;
    no_stamp += rx.s[i].no_stamp;
  }
  guint64 *all = g_new0(guint64, total + 1);
  guint64 *all_meta = g_new0(guint64, total_meta + 1);
  guint64 *all_push = g_new0(guint64, total_push + 1);
  for (guint i = 0, k = 0, km = 0, kp = 0; i < o->streams; i++) {
    memcpy(all + k, rx.s[i].lat_ns, rx.s[i].n * sizeof *all);
    memcpy(all_meta + km, rx.s[i].meta_ns, rx.s[i].n_meta * sizeof *all);
    memcpy(all_push + kp, rx.s[i].push_ns, rx.s[i].n_push * sizeof *all);
    k += rx.s[i].n;
    km += rx.s[i].n_meta;
    kp += rx.s[i].n_push;
  }
  double wall_s = counting ? (wall1 - wall0) / 1e9 : 0;
  double cpu_s = cpu1 - cpu0;
  printf("{\"mode\":\"receive\",\"transport\":\"%s\",\"streams\":%u,"
         "\"width\":%u,\"height\":%u,\"fps\":%u,\"format\":\"%s\","
         "\"frame_bytes\":%" G_GSIZE_FORMAT ",\"queue\":%s,",
         o->transport, o->streams, o->width, o->height, o->fps, o->format,
         frame_bytes(o), o->queue ? "true" : "false");
  if (mode)
    printf("\"poll_mode\":\"%s\",", mode);
  if (rdmasrc)
    print_rdmasrc_stats(rdmasrc); /* still PLAYING: counters are live */
  gst_element_set_state(p, GST_STATE_NULL);
  printf("\"frames\":%" G_GUINT64_FORMAT ",\"no_stamp\":%" G_GUINT64_FORMAT ",",
         frames, no_stamp);
  /* A camera never seen at all lost everything: streams_seen says so. */
  printf("\"lost\":%" G_GUINT64_FORMAT ",\"out_of_order\":%" G_GUINT64_FORMAT
         ",\"streams_seen\":%u,\"streams_lossy\":%u,",
         lost, out_of_order, streams_seen, streams_lossy);
  print_dist("", all, total);
  printf(",");
  print_dist("meta_", all_meta, total_meta);
  if (total_push) {
    printf(",");
    print_dist("push_", all_push, total_push);
  }
  printf(",\"wall_s\":%.3f,\"cpu_s\":%.3f,\"cpu_percent\":%.2f,"
         "\"per_stream\":[",
         wall_s, cpu_s, wall_s > 0 ? cpu_s / wall_s * 100 : 0);
  for (guint i = 0; i < o->streams; i++) {
    printf("%s{\"stream\":%u,", i ? "," : "", i);
    print_dist("", rx.s[i].lat_ns, rx.s[i].n);
    printf("}");
  }
  printf("],\"errors\":\"");
  for (const char *c = errors->str; *c; c++)
    if (*c != '"' && *c != '\\' && (unsigned char)*c >= 0x20)
      putchar(*c);
  printf("\",\"ok\":%s}\n", counting && total ? "true" : "false");

  g_free(all);
  g_free(all_meta);
  g_free(all_push);
  g_free(mode);
  g_free(caps);
  g_string_free(errors, TRUE);
  gst_object_unref(bus);
  gst_object_unref(p);
  return 0;
}

int main(int argc, char **argv)
{
  static const struct option longs[] = {
      {"transport", required_argument, NULL, 't'},
      {"streams", required_argument, NULL, 'n'},
      {"port", required_argument, NULL, 'p'},
      {"width", required_argument, NULL, 'W'},
      {"height", required_argument, NULL, 'H'},
      {"fps", required_argument, NULL, 'f'},
      {"format", required_argument, NULL, 'F'},
      {"seconds", required_argument, NULL, 's'},
      {"warmup", required_argument, NULL, 'w'},
      {"poll-mode", required_argument, NULL, 'm'},
      {"queue", no_argument, NULL, 'q'},
      {"first-device", required_argument, NULL, 'd'},
      {"senders", required_argument, NULL, 'k'},
      {"backend", required_argument, NULL, 'b'},
      {"address", required_argument, NULL, 'a'},
      {"device-blocks", required_argument, NULL, 'B'},
      {NULL, 0, NULL, 0},
  };
  struct options o = {.transport = "rdma",
                      .streams = 1,
                      .port = 7700,
                      .width = 640,
                      .height = 480,
                      .fps = 25,
                      .format = "RGB",
                      .seconds = 10,
                      .warmup = 1,
                      .senders = 1,
                      .backend = "shm",
                      .address = "127.0.0.1"};
  int c;

  gst_init(&argc, &argv);
  while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
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
    case 'f':
      o.fps = (guint)atoi(optarg);
      break;
    case 'F':
      o.format = optarg;
      break;
    case 's':
      o.seconds = atof(optarg);
      break;
    case 'w':
      o.warmup = atof(optarg);
      break;
    case 'm':
      o.poll_mode = optarg;
      break;
    case 'q':
      o.queue = TRUE;
      break;
    case 'd':
      o.first_device = (guint)atoi(optarg);
      break;
    case 'k':
      o.senders = (guint)atoi(optarg);
      break;
    case 'b':
      o.backend = optarg;
      break;
    case 'a':
      o.address = optarg;
      break;
    case 'B':
      o.device_blocks = (guint)atoi(optarg);
      break;
    default:
      fprintf(stderr, "usage: gst-latency send|receive [options]\n");
      return 2;
    }
  }
  if (optind >= argc || o.streams < 1 || o.streams > MAX_STREAMS ||
      (strcmp(o.backend, "shm") && strcmp(o.backend, "verbs")) ||
      (strcmp(argv[optind], "send") && strcmp(argv[optind], "receive")) ||
      (strcmp(o.transport, "rdma") && strcmp(o.transport, "shm") &&
       strcmp(o.transport, "tcp"))) {
    fprintf(stderr,
            "usage: gst-latency send|receive --transport rdma|shm|tcp "
            "[--backend shm|verbs] [--streams N] [--port P] ... "
            "(see the comment at the top of tests/bench/gst-latency.c)\n");
    return 2;
  }
  o.send = !strcmp(argv[optind], "send");
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  return o.send ? run_send(&o) : run_receive(&o);
}
