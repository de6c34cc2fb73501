// SPDX-License-Identifier: LGPL-2.1-or-later
//
// rdma-analytics: an OpenCV app that embeds rdmasrc and analyses every
// camera it receives.
//
//   rdma-analytics [--transport shm|verbs] [--address A] [--port N]
//                  [--prop NAME=VALUE]... [--devices N] [--seconds N]
//                  [--mosaic FILE.png] [--faces]
//
// Pipeline: rdmasrc, and for every pad src_N as it appears (camera N,
// whenever it arrives): queue ! videoconvert ! video/x-raw,format=BGR !
// appsink.  Each appsink's callback runs in its queue's thread, so the
// cameras are analysed in parallel: motion (MOG2 background subtraction,
// then contours of the foreground: the moving regions) and, with --faces,
// a Haar face cascade.  One JSON line per analysed frame on stdout:
//
//   {"device":3,"packet":41,"pts":1600000000,"capture_time_ns":...,
//    "motion":true,"regions":[[x,y,w,h],...],"latency_us":812}
//
// latency_us = CLOCK_REALTIME when the result is ready - the capture time
// (the sender's wall clock, from the buffer's timestamp/x-unix
// GstReferenceTimestampMeta); across hosts it includes their clock offset.
// Events are lines too: {"device":3,"event":"added"|"stream-start"|"eos"}.
// A camera's "eos" line also says what became of the frames of the stream
// it ends: "received" from rdmasrc, "analysed", "dropped" by this app (its
// leaky queue keeps the newest two while an analysis runs, as live
// analytics should) and "rdmasrc_dropped" (what the camera's rdmasrc pad
// dropped: drop-oldest over its budget, before PLAYING, after EOS; its
// stats' drops-*).  Every frame sent is in one of the last three.
// A camera's EOS is reported and the app keeps running: when the camera
// comes back (a new sender), the same pad gets stream-start and frames.
//
// Ends after --seconds N, or once --devices N cameras have all ended (EOS),
// or on SIGINT/SIGTERM; then prints per-camera frames and p50/p99 latency
// on stderr, writes the --mosaic, and exits 0 (1 on a pipeline error).
// What a user changes: analyse() below.

#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <glib-unix.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/objdetect.hpp>
#include <opencv2/video.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <unistd.h>
#include <string>
#include <vector>

namespace
{

const char *const kFaceCascade =
    "/usr/share/opencv4/haarcascades/haarcascade_frontalface_default.xml";
// Frames the background model learns from before "motion" means anything.
const int kWarmupFrames = 25;

struct Options {
  std::string transport = "shm";
  std::string address;
  int port = 7471;
  std::vector<std::pair<std::string, std::string>> props;
  unsigned devices = 0; // 0: don't end on EOS
  unsigned seconds = 0; // 0: no time limit
  std::string mosaic;
  bool faces = false;
};

// One camera.  Its analysis state is touched only by its appsink's
// streaming thread; `lock` guards what main() reads at exit.
struct Device {
  unsigned number = 0;
  cv::Ptr<cv::BackgroundSubtractorMOG2> bg;
  cv::CascadeClassifier faces;
  std::mutex lock;
  uint64_t frames = 0, motion_frames = 0, eos_count = 0;
  // Frames rdmasrc pushed, in total and when each stream's EOS passed its
  // pad (the next stream's frames may follow before the EOS reaches the
  // appsink); what the last "eos" line reported.
  uint64_t received = 0;
  std::deque<uint64_t> received_at_eos;
  uint64_t reported_received = 0, reported_frames = 0, reported_drops = 0;
  bool ended = false;
  std::vector<double> latency_us;
  cv::Mat last; // annotated copy of the latest frame, for the mosaic
};

struct App {
  Options opt;
  GstElement *pipeline = nullptr;
  GstElement *src = nullptr; // rdmasrc, for its stats
  GMainLoop *loop = nullptr;
  std::mutex lock; // devices, stdout
  std::map<unsigned, std::unique_ptr<Device>> devices;
  int status = 0;
};

int64_t realtime_ns()
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void emit(App *app, const std::string &line)
{
  std::lock_guard<std::mutex> g(app->lock);
  fputs(line.c_str(), stdout);
  fputc('\n', stdout);
  fflush(stdout);
}

void emit_event(App *app, unsigned device, const char *event)
{
  emit(app, "{\"device\":" + std::to_string(device) + ",\"event\":\"" + event +
                "\"}");
}

// The per-frame analysis: what a user replaces.  `frame` is BGR and points
// into the GstBuffer (valid only during this call).  Fills `regions` with
// moving regions, `found` with faces, and draws both on `annotated`.
void analyse(Device *dev, const cv::Mat &frame, std::vector<cv::Rect> &regions,
             std::vector<cv::Rect> &found, cv::Mat &annotated)
{
  cv::Mat fg;
  dev->bg->apply(frame, fg);
  // Shadows (127) are not motion; opening removes single-pixel noise.
  cv::threshold(fg, fg, 200, 255, cv::THRESH_BINARY);
  cv::morphologyEx(fg, fg, cv::MORPH_OPEN,
                   cv::getStructuringElement(cv::MORPH_RECT, {3, 3}));
  std::vector<std::vector<cv::Point>> contours;
  cv::findContours(fg, contours, cv::RETR_EXTERNAL, cv::CHAIN_APPROX_SIMPLE);
  const double min_area = frame.total() * 0.001; // 0.1 % of the picture
  for (const auto &c : contours)
    if (cv::contourArea(c) >= min_area)
      regions.push_back(cv::boundingRect(c));

  if (!dev->faces.empty()) {
    cv::Mat grey;
    cv::cvtColor(frame, grey, cv::COLOR_BGR2GRAY);
    dev->faces.detectMultiScale(grey, found, 1.2, 4, 0, {24, 24});
  }

  frame.copyTo(annotated);
  for (const auto &r : regions)
    cv::rectangle(annotated, r, {0, 0, 255}, 2);
  for (const auto &r : found)
    cv::rectangle(annotated, r, {255, 0, 0}, 2);
}

std::string rects_json(const std::vector<cv::Rect> &rs)
{
  std::string s = "[";
  for (size_t i = 0; i < rs.size(); i++) {
    char b[80];
    snprintf(b, sizeof b, "%s[%d,%d,%d,%d]", i ? "," : "", rs[i].x, rs[i].y,
             rs[i].width, rs[i].height);
    s += b;
  }
  return s + "]";
}

GstFlowReturn on_sample(GstAppSink *sink, gpointer data)
{
  auto *app = static_cast<App *>(data);
  auto *dev = static_cast<Device *>(
      g_object_get_data(G_OBJECT(sink), "rdma-analytics-device"));
  GstSample *sample = gst_app_sink_pull_sample(sink);
  if (!sample)
    return GST_FLOW_EOS;
  GstBuffer *buf = gst_sample_get_buffer(sample);
  GstVideoInfo info;
  if (!buf || !gst_video_info_from_caps(&info, gst_sample_get_caps(sample))) {
    gst_sample_unref(sample);
    return GST_FLOW_OK;
  }

  // The capture time: the sender's wall clock when the frame was taken.
  static GstCaps *unix_caps = gst_caps_new_empty_simple("timestamp/x-unix");
  GstReferenceTimestampMeta *ts =
      gst_buffer_get_reference_timestamp_meta(buf, unix_caps);
  int64_t capture = ts ? (int64_t)ts->timestamp : -1;

  // No copy: the cv::Mat wraps the mapped memory.  When the buffer holds
  // several GstMemory blocks, gst_buffer_map merges them into one
  // contiguous (copied) block for us; videoconvert's output is one block.
  int stride = GST_VIDEO_INFO_PLANE_STRIDE(&info, 0);
  if (GstVideoMeta *vm = gst_buffer_get_video_meta(buf))
    stride = vm->stride[0];
  GstMapInfo map;
  if (!gst_buffer_map(buf, &map, GST_MAP_READ)) {
    gst_sample_unref(sample);
    return GST_FLOW_OK;
  }
  cv::Mat frame(GST_VIDEO_INFO_HEIGHT(&info), GST_VIDEO_INFO_WIDTH(&info),
                CV_8UC3, map.data, (size_t)stride);

  std::vector<cv::Rect> regions, found;
  cv::Mat annotated;
  analyse(dev, frame, regions, found, annotated);
  gst_buffer_unmap(buf, &map);

  uint64_t n;
  {
    std::lock_guard<std::mutex> g(dev->lock);
    n = ++dev->frames;
  }
  // While the background model warms up everything looks like motion.
  bool warm = n > (uint64_t)kWarmupFrames;
  if (!warm)
    regions.clear();
  bool motion = !regions.empty();

  int64_t done = realtime_ns();
  double latency = capture >= 0 ? (done - capture) / 1000.0 : -1.0;
  char head[256];
  snprintf(head, sizeof head,
           "{\"device\":%u,\"packet\":%" G_GUINT64_FORMAT
           ",\"pts\":%" G_GINT64_FORMAT ",\"capture_time_ns\":%" PRId64
           ",\"warm\":%s,\"motion\":%s,\"regions\":",
           dev->number, (guint64)GST_BUFFER_OFFSET(buf),
           GST_BUFFER_PTS_IS_VALID(buf) ? (gint64)GST_BUFFER_PTS(buf) : -1,
           capture, warm ? "true" : "false", motion ? "true" : "false");
  std::string line = head + rects_json(regions);
  if (!dev->faces.empty())
    line += ",\"faces\":" + rects_json(found);
  line += ",\"latency_us\":" + std::to_string((long long)latency) + "}";
  gst_sample_unref(sample);
  emit(app, line);

  std::lock_guard<std::mutex> g(dev->lock);
  if (latency >= 0)
    dev->latency_us.push_back(latency);
  dev->motion_frames += motion;
  dev->last = annotated;
  return GST_FLOW_OK;
}

void maybe_finish(App *app)
{
  if (!app->opt.devices)
    return;
  unsigned ended = 0;
  {
    std::lock_guard<std::mutex> g(app->lock);
    for (auto &kv : app->devices) {
      std::lock_guard<std::mutex> d(kv.second->lock);
      ended += kv.second->ended;
    }
  }
  if (ended >= app->opt.devices)
    g_main_loop_quit(app->loop);
}

gboolean quit_idle(gpointer data)
{
  maybe_finish(static_cast<App *>(data));
  return G_SOURCE_REMOVE;
}

// On the appsink's sink pad (after the queue, so in order with the
// frames): report EOS and drop it, so that the branch stays ready for the
// camera's next stream-start (a reconnecting sender).
struct ProbeCtx {
  App *app;
  Device *dev;
};

// What the camera's rdmasrc pad has dropped so far (its stats' drops-*).
uint64_t rdmasrc_drops(App *app, unsigned number)
{
  GstStructure *stats = nullptr, *device = nullptr;
  uint64_t total = 0;
  g_object_get(app->src, "stats", &stats, nullptr);
  std::string name = "device-" + std::to_string(number);
  if (stats && gst_structure_get(stats, name.c_str(), GST_TYPE_STRUCTURE,
                                 &device, nullptr)) {
    for (const char *f : {"drops-leaky", "drops-not-playing", "drops-ended"}) {
      guint64 v = 0;
      if (gst_structure_get_uint64(device, f, &v))
        total += v;
    }
    gst_structure_free(device);
  }
  if (stats)
    gst_structure_free(stats);
  return total;
}

// The "eos" line: the stream's frames received, analysed and dropped.
void emit_eos(App *app, Device *dev)
{
  uint64_t drops = rdmasrc_drops(app, dev->number);
  uint64_t received, analysed, rdmasrc_dropped;
  {
    std::lock_guard<std::mutex> g(dev->lock);
    uint64_t at_eos = dev->received;
    if (!dev->received_at_eos.empty()) {
      at_eos = dev->received_at_eos.front();
      dev->received_at_eos.pop_front();
    }
    received = at_eos - dev->reported_received;
    analysed = dev->frames - dev->reported_frames;
    rdmasrc_dropped = drops - dev->reported_drops;
    dev->reported_received = at_eos;
    dev->reported_frames = dev->frames;
    dev->reported_drops = drops;
  }
  emit(app, "{\"device\":" + std::to_string(dev->number) +
                ",\"event\":\"eos\",\"received\":" + std::to_string(received) +
                ",\"analysed\":" + std::to_string(analysed) +
                ",\"dropped\":" + std::to_string(received - analysed) +
                ",\"rdmasrc_dropped\":" + std::to_string(rdmasrc_dropped) +
                "}");
}

GstPadProbeReturn on_branch_event(GstPad *, GstPadProbeInfo *info,
                                  gpointer data)
{
  auto *c = static_cast<ProbeCtx *>(data);
  GstEvent *ev = GST_PAD_PROBE_INFO_EVENT(info);
  switch (GST_EVENT_TYPE(ev)) {
  case GST_EVENT_STREAM_START: {
    std::lock_guard<std::mutex> g(c->dev->lock);
    c->dev->ended = false;
    break;
  }
  case GST_EVENT_EOS: {
    {
      std::lock_guard<std::mutex> g(c->dev->lock);
      c->dev->ended = true;
      c->dev->eos_count++;
    }
    emit_eos(c->app, c->dev);
    g_idle_add(quit_idle, c->app);
    return GST_PAD_PROBE_DROP;
  }
  default:
    break;
  }
  return GST_PAD_PROBE_OK;
}

// On rdmasrc's pad, in its thread: a frame received, a camera (re)starting
// or ending.
GstPadProbeReturn on_src_pad(GstPad *, GstPadProbeInfo *info, gpointer data)
{
  auto *c = static_cast<ProbeCtx *>(data);
  if (info->type & GST_PAD_PROBE_TYPE_BUFFER) {
    std::lock_guard<std::mutex> g(c->dev->lock);
    c->dev->received++;
    return GST_PAD_PROBE_OK;
  }
  switch (GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info))) {
  case GST_EVENT_STREAM_START:
    emit_event(c->app, c->dev->number, "stream-start");
    break;
  case GST_EVENT_EOS: {
    std::lock_guard<std::mutex> g(c->dev->lock);
    c->dev->received_at_eos.push_back(c->dev->received);
    break;
  }
  default:
    break;
  }
  return GST_PAD_PROBE_OK;
}

void on_pad_added(GstElement *, GstPad *pad, gpointer data)
{
  auto *app = static_cast<App *>(data);
  gchar *name = gst_pad_get_name(pad);
  unsigned number = 0;
  bool ok = sscanf(name, "src_%u", &number) == 1;
  g_free(name);
  if (!ok)
    return;

  auto dev = std::make_unique<Device>();
  dev->number = number;
  dev->bg = cv::createBackgroundSubtractorMOG2(200, 16.0, false);
  if (app->opt.faces)
    dev->faces.load(kFaceCascade);

  // queue first: it decouples rdmasrc's thread from the analysis (and
  // works around rdmasrc's current trouble with sinks linked straight on).
  GstElement *q = gst_element_factory_make("queue", nullptr);
  GstElement *conv = gst_element_factory_make("videoconvert", nullptr);
  GstElement *filter = gst_element_factory_make("capsfilter", nullptr);
  GstElement *sink = gst_element_factory_make("appsink", nullptr);
  if (!q || !conv || !filter || !sink) {
    g_printerr("rdma-analytics: missing queue/videoconvert/appsink\n");
    return;
  }
  g_object_set(q, "max-size-buffers", 2, "max-size-bytes", 0, "max-size-time",
               (guint64)0, "leaky", 2 /* downstream */, nullptr);
  GstCaps *bgr = gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING,
                                     "BGR", nullptr);
  g_object_set(filter, "caps", bgr, nullptr);
  gst_caps_unref(bgr);
  g_object_set(sink, "sync", FALSE, "max-buffers", 2, "drop", TRUE, nullptr);
  g_object_set_data(G_OBJECT(sink), "rdma-analytics-device", dev.get());
  GstAppSinkCallbacks cb = {};
  cb.new_sample = on_sample;
  gst_app_sink_set_callbacks(GST_APP_SINK(sink), &cb, app, nullptr);

  auto *bctx = new ProbeCtx{app, dev.get()};
  GstPad *sinkpad = gst_element_get_static_pad(sink, "sink");
  gst_pad_add_probe(sinkpad, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM,
                    on_branch_event, bctx,
                    [](gpointer p) { delete static_cast<ProbeCtx *>(p); });
  gst_object_unref(sinkpad);
  auto *sctx = new ProbeCtx{app, dev.get()};
  gst_pad_add_probe(pad,
                    (GstPadProbeType)(GST_PAD_PROBE_TYPE_BUFFER |
                                      GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM),
                    on_src_pad, sctx,
                    [](gpointer p) { delete static_cast<ProbeCtx *>(p); });

  {
    std::lock_guard<std::mutex> g(app->lock);
    app->devices[number] = std::move(dev);
  }
  gst_bin_add_many(GST_BIN(app->pipeline), q, conv, filter, sink, nullptr);
  gst_element_link_many(q, conv, filter, sink, nullptr);
  for (GstElement *e : {sink, filter, conv, q})
    gst_element_sync_state_with_parent(e);
  GstPad *qpad = gst_element_get_static_pad(q, "sink");
  if (gst_pad_link(pad, qpad) != GST_PAD_LINK_OK)
    g_printerr("rdma-analytics: could not link camera %u\n", number);
  gst_object_unref(qpad);
  emit_event(app, number, "added");
}

gboolean on_bus(GstBus *, GstMessage *msg, gpointer data)
{
  auto *app = static_cast<App *>(data);
  switch (GST_MESSAGE_TYPE(msg)) {
  case GST_MESSAGE_ERROR: {
    GError *err = nullptr;
    gchar *dbg = nullptr;
    gst_message_parse_error(msg, &err, &dbg);
    g_printerr("rdma-analytics: error from %s: %s (%s)\n",
               GST_OBJECT_NAME(msg->src), err->message, dbg ? dbg : "");
    g_clear_error(&err);
    g_free(dbg);
    app->status = 1;
    g_main_loop_quit(app->loop);
    break;
  }
  case GST_MESSAGE_EOS:
    g_main_loop_quit(app->loop);
    break;
  default:
    break;
  }
  return TRUE;
}

gboolean on_signal(gpointer data)
{
  g_printerr("rdma-analytics: interrupted\n");
  g_main_loop_quit(static_cast<App *>(data)->loop);
  return G_SOURCE_CONTINUE;
}

gboolean on_timeout(gpointer data)
{
  g_main_loop_quit(static_cast<App *>(data)->loop);
  return G_SOURCE_REMOVE;
}

double percentile(std::vector<double> v, double p)
{
  if (v.empty())
    return -1;
  std::sort(v.begin(), v.end());
  size_t i = (size_t)(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

void summary(App *app)
{
  std::vector<double> all;
  g_printerr("rdma-analytics: device frames motion eos latency_p50_us "
             "latency_p99_us\n");
  for (auto &kv : app->devices) {
    Device *d = kv.second.get();
    std::lock_guard<std::mutex> g(d->lock);
    g_printerr("rdma-analytics: %6u %6" G_GUINT64_FORMAT " %6" G_GUINT64_FORMAT
               " %3" G_GUINT64_FORMAT " %14.0f %14.0f\n",
               d->number, (guint64)d->frames, (guint64)d->motion_frames,
               (guint64)d->eos_count, percentile(d->latency_us, 0.5),
               percentile(d->latency_us, 0.99));
    all.insert(all.end(), d->latency_us.begin(), d->latency_us.end());
  }
  g_printerr("rdma-analytics: all %zu frames: latency p50 %.0f us, p99 "
             "%.0f us\n",
             all.size(), percentile(all, 0.5), percentile(all, 0.99));
}

// Every camera's latest annotated frame on a grid, 4 wide, 320x240 tiles.
void write_mosaic(App *app)
{
  const int cols = 4, tw = 320, th = 240;
  int n = (int)app->devices.size();
  if (n == 0) {
    g_printerr("rdma-analytics: no camera: no mosaic\n");
    return;
  }
  int rows = (n + cols - 1) / cols;
  cv::Mat mosaic(rows * th, cols * tw, CV_8UC3, cv::Scalar(32, 32, 32));
  int i = 0;
  for (auto &kv : app->devices) {
    Device *d = kv.second.get();
    cv::Rect cell((i % cols) * tw, (i / cols) * th, tw, th);
    std::lock_guard<std::mutex> g(d->lock);
    if (!d->last.empty())
      cv::resize(d->last, mosaic(cell), {tw, th});
    std::string label = "dev " + std::to_string(d->number) + " " +
                        std::to_string(d->frames) + " fr" +
                        (d->ended ? " EOS" : "");
    cv::putText(mosaic, label, {cell.x + 6, cell.y + th - 8},
                cv::FONT_HERSHEY_SIMPLEX, 0.6, {0, 255, 255}, 2);
    i++;
  }
  if (cv::imwrite(app->opt.mosaic, mosaic))
    g_printerr("rdma-analytics: mosaic of %d camera(s) in %s\n", n,
               app->opt.mosaic.c_str());
  else
    g_printerr("rdma-analytics: could not write %s\n", app->opt.mosaic.c_str());
}

[[noreturn]] void usage(int status)
{
  fputs("usage: rdma-analytics [--transport shm|verbs] [--address A] "
        "[--port N]\n"
        "         [--prop NAME=VALUE]... [--devices N] [--seconds N]\n"
        "         [--mosaic FILE.png] [--faces]\n"
        "  --prop      any other rdmasrc property (blocks=64, ...)\n"
        "  --devices   end once N cameras have ended (EOS)\n"
        "  --seconds   end after N seconds (0: no limit)\n"
        "  --mosaic    write every camera's last annotated frame there\n"
        "  --faces     also run the Haar frontal-face cascade\n",
        status ? stderr : stdout);
  exit(status);
}

Options parse(int argc, char **argv)
{
  Options o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage(2);
      return argv[++i];
    };
    if (a == "--transport")
      o.transport = value();
    else if (a == "--address")
      o.address = value();
    else if (a == "--port")
      o.port = atoi(value().c_str());
    else if (a == "--prop") {
      std::string p = value();
      size_t eq = p.find('=');
      if (eq == std::string::npos)
        usage(2);
      o.props.emplace_back(p.substr(0, eq), p.substr(eq + 1));
    } else if (a == "--devices")
      o.devices = (unsigned)atoi(value().c_str());
    else if (a == "--seconds")
      o.seconds = (unsigned)atoi(value().c_str());
    else if (a == "--mosaic")
      o.mosaic = value();
    else if (a == "--faces")
      o.faces = true;
    else if (a == "-h" || a == "--help")
      usage(0);
    else
      usage(2);
  }
  return o;
}

} // namespace

int main(int argc, char **argv)
{
  gst_init(&argc, &argv);
  App app;
  app.opt = parse(argc, argv);
  if (app.opt.faces && access(kFaceCascade, R_OK) != 0) {
    g_printerr("rdma-analytics: %s not found (Debian: opencv-data): no "
               "faces\n",
               kFaceCascade);
    app.opt.faces = false;
  }

  GstElement *src = gst_element_factory_make("rdmasrc", "src");
  if (!src) {
    g_printerr("rdma-analytics: no rdmasrc (set GST_PLUGIN_PATH)\n");
    return 1;
  }
  app.src = src;
  gst_util_set_object_arg(G_OBJECT(src), "transport",
                          app.opt.transport.c_str());
  g_object_set(src, "port", app.opt.port, nullptr);
  if (!app.opt.address.empty())
    g_object_set(src, "address", app.opt.address.c_str(), nullptr);
  for (auto &p : app.opt.props)
    gst_util_set_object_arg(G_OBJECT(src), p.first.c_str(), p.second.c_str());

  app.pipeline = gst_pipeline_new("rdma-analytics");
  gst_bin_add(GST_BIN(app.pipeline), src);
  g_signal_connect(src, "pad-added", G_CALLBACK(on_pad_added), &app);

  app.loop = g_main_loop_new(nullptr, FALSE);
  GstBus *bus = gst_pipeline_get_bus(GST_PIPELINE(app.pipeline));
  gst_bus_add_watch(bus, on_bus, &app);
  gst_object_unref(bus);
  g_unix_signal_add(SIGINT, on_signal, &app);
  g_unix_signal_add(SIGTERM, on_signal, &app);
  if (app.opt.seconds)
    g_timeout_add_seconds(app.opt.seconds, on_timeout, &app);

  if (gst_element_set_state(app.pipeline, GST_STATE_PLAYING) ==
      GST_STATE_CHANGE_FAILURE) {
    g_printerr("rdma-analytics: could not start the pipeline\n");
    app.status = 1;
  } else {
    g_printerr("rdma-analytics: listening (%s port %d)\n",
               app.opt.transport.c_str(), app.opt.port);
    g_main_loop_run(app.loop);
  }
  gst_element_set_state(app.pipeline, GST_STATE_NULL);

  summary(&app);
  if (!app.opt.mosaic.empty())
    write_mosaic(&app);
  gst_object_unref(app.pipeline);
  g_main_loop_unref(app.loop);
  return app.status;
}
