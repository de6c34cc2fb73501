/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-rdmasink
 * @title: rdmasink
 * @see_also: rdmasrc
 *
 * rdmasink sends one stream ("device") to an rdmasrc on another host over
 * RDMA, with the status-byte block transport of libsbr: one-sided WRITEs
 * into the receiver's blocks, no receive posted, no message back.
 *
 * Every rdmasink in a process that names the same #GstRdmaSink:transport,
 * #GstRdmaSink:mechanism, #GstRdmaSink:host and #GstRdmaSink:port shares one
 * connection (one queue pair, one sender thread), in one pipeline or in many;
 * each needs its own #GstRdmaSink:device-id (0-255) on it.  The first sink to
 * start opens the connection and its connection-wide settings
 * (#GstRdmaSink:send-blocks, #GstRdmaSink:block-size,
 * #GstRdmaSink:connect-timeout, #GstRdmaSink:backpressure,
 * #GstRdmaSink:wait-timeout, #GstRdmaSink:read-ahead) apply to all; the last
 * to stop closes it.
 *
 * Connecting happens in the background from start: an rdmasrc in the same
 * pipeline only accepts once it is PLAYING.  The sink waits for the outcome
 * where it needs the connection (allocation query, first buffer, EOS) and
 * fails with a resource error naming host:port and what the transport said
 * when the receiver did not answer within #GstRdmaSink:connect-timeout.
 * What no retry can fix fails at once, the cause in the error message: a
 * receiver that refuses this sender for another #GstRdmaSink:mechanism,
 * protocol version or block geometry (%GST_RESOURCE_ERROR_SETTINGS, "The
 * RDMA receiver at A refused the connection: the receiver runs the
 * status-byte mechanism, the sender sliding-window."), or is not allowed
 * (%GST_RESOURCE_ERROR_NOT_AUTHORIZED), or no RDMA device or no route to
 * the host (%GST_RESOURCE_ERROR_OPEN_WRITE).  A receiver whose lanes are
 * all in use is asked again until the timeout, and then the error
 * (%GST_RESOURCE_ERROR_BUSY) says so.  The same holds when a lost
 * connection is re-established (#GstRdmaSink:reconnect) and the receiver
 * that came back refuses it.
 *
 * Zero copy: the sink proposes an allocator whose memories are registered
 * send blocks, and for video a buffer pool over it, so an upstream element
 * that allocates from them (videotestsrc, videoconvert, most elements that
 * take the downstream pool) renders straight into the memory the NIC
 * reads; such a buffer is submitted without a copy, also when someone
 * else keeps it (the application, a tee, videorate or imagefreeze pushing
 * it again, an enabled last-sample): its send block stays its own until
 * the memory is freed and its WRITE completed, and a second render waits
 * for the first WRITE.  Any other buffer is copied: once into send
 * blocks, fragmented when larger than one block.  Either way a buffer
 * stays readable and unchanged for whoever holds it, and render changes
 * no flag of it.  The stats count both paths (zero-copy-buffers,
 * copied-buffers).  Behind a tee every frame is copied: tee answers the
 * allocation query without the allocators and pools of its branches
 * (upstream allocates on its own), so nothing upstream renders into send
 * blocks.
 *
 * rdmasink takes any media type in system memory only: caps with a memory
 * feature (`video/x-raw(memory:VAMemory)`, `memory:DMABuf`,
 * `memory:CUDAMemory`, `memory:GLMemory`) are refused, and an element that
 * can output either (a hardware decoder) picks system memory; else put
 * the download element (vapostproc, cudadownload, gldownload) in front.
 *
 * Caps travel in-band (a CAPS block before the first buffer, after every
 * renegotiation and after a reconnect), so rdmasrc needs no caps on its
 * launch line.  Buffers carry their running time (PTS/DTS), duration,
 * DISCONT/DELTA_UNIT flags and the capture time, by this host's wall
 * clock: a "timestamp/x-unix" #GstReferenceTimestampMeta when the buffer
 * has one ("timestamp/x-ntp" and "timestamp/x-ptp" converted), else the
 * wall clock at render minus the frame's age on the pipeline clock, so an
 * encoder's delay before the sink is not counted as the camera's.  EOS is
 * sent in-band for this device only.  A frame the sink drops, for
 * whatever reason (below), takes no packet number, so the receiver could
 * not see it: the next frame sent carries DISCONT instead, which tells a
 * decoder over there that the frames it refers to may be missing (rdmasrc
 * then waits for a key frame, #GstRdmaSrc:wait-for-keyframe).
 *
 * A device id belongs to one sender at a time: when the rdmasrc already
 * takes this device from another sender, it refuses this sink's frames and
 * says so one-sidedly (a bit the sink's next status READ brings, within
 * about a millisecond of sending).  The sink then posts one warning per
 * refusal (%GST_RESOURCE_ERROR_BUSY, "Device 3 is already sent by another
 * sender to 10.0.0.1:7471; this sink's frames are dropped until it
 * leaves.", details device-id and address), drops its frames and counts
 * them (refused-drops in the stats) without sending, and keeps its
 * pipeline running: when the other sender leaves, the receiver gives the
 * device to this sink, which sends again from the next frame (its caps
 * first) and posts an info message saying so.
 *
 * When the receiver goes away mid-stream and #GstRdmaSink:reconnect is set,
 * the shared connection reconnects in the background with a back-off, the
 * sink posts a warning, drops (and counts) the frames meanwhile and carries
 * on; without it the sink posts an error.
 *
 * It takes rdma:// URIs (#GstURIHandler): `rdma://HOST:PORT/DEVICE` sets
 * host, port and device-id, and every query key a property, its value as
 * on a launch line
 * (`rdma://10.0.0.2:7471/3?transport=verbs&backpressure=drop`), also
 * through the #GstRdmaSink:uri property, as srtsink's, on a launch line
 * (`rdmasink uri="rdma://10.0.0.2:7471/3?transport=verbs"`).  A uri
 * that can't be set changes nothing and fails the start, saying why.
 *
 * Connection-wide settings, from the first sink to start:
 * #GstRdmaSink:send-blocks bounds a frame (a frame larger than that many
 * blocks can't be sent); #GstRdmaSink:block-size is only asked of the
 * receiver, whose rdmasrc block-size decides (#GstRdmaSink:blocksize, no
 * hyphen, is the same property: it hides basesink's bytes per pull in pull
 * mode, which this push-mode sink never uses); #GstRdmaSink:read-ahead
 * (status-byte) reads the receiver's status array while still writing, up to
 * four READs in flight, which hides the READ's round trip on long links (0
 * reads only when no free block is known, the paper's sync-when-empty).  With
 * #GstRdmaSink:backpressure wait or drop, a frame dropped for want of a free
 * block is counted.  A sink waiting for a free block (or for the connection)
 * when its pipeline goes from PLAYING to PAUSED counts as prerolled and sends
 * that frame once PLAYING again; a flush or a change to READY drops it.
 *
 * ## Key units
 *
 * A receiver may ask for a key unit of this device (rdmasrc does when a
 * decoder downstream of it sends an upstream force-key-unit event, or
 * after a gap in an encoded stream).  It asks one-sidedly, through its
 * status region, and the connection sees the request with its next status
 * READ (within about a millisecond while frames flow); rdmasink then
 * pushes an upstream GstForceKeyUnit (all-headers as asked, running time
 * none) from its sink pad, so an encoder upstream makes its next frame a
 * key frame.
 *
 * ## Statistics
 *
 * The #GstRdmaSink:stats property is one flat structure "rdmasink-stats",
 * also posted as an element message every #GstRdmaSink:stats-interval
 * milliseconds (0, the default, posts none).  This device: device-id,
 * frames, blocks, bytes, drops (backpressure or loss), paused (the
 * receiver paused this device), paused-drops, paused-ns, refused (the
 * receiver takes this device from another sender), refused-drops (buffers
 * dropped meanwhile), zero-copy-buffers, copied-buffers, reconnect-drops,
 * unmappable-drops (foreign memory that failed to map), gap-drops (frames
 * this sink dropped for any reason: each of the drops above, a wait-timeout,
 * a flush, basesink dropping a late buffer), gap-disconts (frames sent
 * with DISCONT because frames before them were dropped), key-units-requested
 * (key units the receiver asked for), key-units-sent-upstream (the
 * GstForceKeyUnit events that asked upstream for them), headers-resent
 * (the stream's HEADER buffers sent again after the caps on a new lane,
 * so a receiver that starts mid-stream can decode), events-sent (EVENT
 * blocks: the stream-start, tags, a segment's rate and gaps, and frames'
 * extras, their rare flags and metas) and metas-not-carried (metas no
 * serializer writes out: gstrdmaextras.h lists those that cross).  The
 * connection it
 * shares with the other rdmasinks of the process: connection-id,
 * connection-users, connected, block-payload-size, reconnects, sync-reads
 * (status READs), sync-read-ns-max, held-skipped, busy-skipped,
 * no-free-waits, connection-blocks, connection-bytes, connection-drops,
 * wr-posted, acks (sliding-window), async-errors (connections ended
 * because the RDMA device reported their QP or CQ in error, or itself
 * failed), completion-timeouts (connections ended because the NIC
 * completed nothing for twice its retry budget, 5 s at least, with work
 * outstanding: a receiver gone unheard), direct-blocks (shm: blocks the camera
 * wrote straight into the receiver's lane), direct-fallbacks (shm: buffers
 * of the sink's allocator copied into the lane after all), kept-copies
 * (shm: buffers of the sink's allocator that someone else held, copied
 * out of the receiver's lane into their own send block at render),
 * producer-posts (frames posted on the streaming thread: the sender's
 * thread not woken for them), kicks (frames that woke it from its wait
 * for a completion), pause-reads (status READs for the pause bitmaps).
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 videotestsrc is-live=true ! video/x-raw,width=1280,height=720
 * ! rdmasink host=192.168.1.20 device-id=3
 * ]| Sends a test pattern as device 3 to the rdmasrc on 192.168.1.20.
 * |[
 * gst-launch-1.0 videotestsrc num-buffers=100 !
 * video/x-raw,width=320,height=240 ! rdmasink transport=shm device-id=3
 * ]| The same on one host through shared memory (the receiver:
 * `gst-launch-1.0 rdmasrc transport=shm name=r r.src_3 ! videoconvert !
 * autovideosink`).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstrdmasinkpriv.h"

#include <errno.h>
#include <string.h>

#include <gst/video/video.h>
#include <sbr.h>

#include "gstrdmaallocator.h"
#include "gstrdmacapture.h"
#include "gstrdmacommon.h"
#include "gstrdmaconnection.h"
#include "gstrdmaelements.h"
#include "gstrdmaenums.h"
#include "gstrdmaproperties.h"
#include "gstrdmauri.h"

enum {
  PROP_0,
  PROP_HOST,
  PROP_PORT,
  PROP_DEVICE_ID,
  PROP_TRANSPORT,
  PROP_MECHANISM,
  PROP_BACKPRESSURE,
  PROP_WAIT_TIMEOUT,
  PROP_RECONNECT,
  PROP_CONNECT_TIMEOUT,
  PROP_SEND_BLOCKS,
  PROP_BLOCK_SIZE,
  PROP_BLOCKSIZE,
  PROP_READ_AHEAD,
  PROP_TOS,
  PROP_ACK_TIMEOUT,
  PROP_RETRY_COUNT,
  PROP_COMP_VECTOR,
  PROP_STATS,
  PROP_STATS_INTERVAL,
  PROP_URI,
  PROP_MAX_META_SIZE,
  N_PROPERTIES
};

#define DEFAULT_HOST "127.0.0.1"
#define DEFAULT_DEVICE_ID 0
#define DEFAULT_BACKPRESSURE GST_RDMA_BACKPRESSURE_WAIT
#define DEFAULT_WAIT_TIMEOUT 1000
#define DEFAULT_RECONNECT TRUE
#define DEFAULT_CONNECT_TIMEOUT 5000
/* Twelve cameras share them; each may hold one while upstream renders. */
#define DEFAULT_SEND_BLOCKS 32
#define DEFAULT_BLOCK_SIZE 0
#define MAX_BLOCK_SIZE (64u << 20)
/* libsbr's: 7 would be "retry forever" on IB and Soft-RoCE. */
#define DEFAULT_RETRY_COUNT 6
/* A wait for a free send block longer than a minute is a stuck receiver,
 * not backpressure. */
#define MAX_WAIT_TIMEOUT 60000
#define EOS_FLUSH_TIMEOUT_MS 2000
/* Render waits this long at most for the previous WRITE of a buffer
 * rendered again before it copies the buffer instead. */
#define KEPT_WAIT_MS 1000

GST_DEBUG_CATEGORY(gst_rdma_sink_debug);
#define GST_CAT_DEFAULT gst_rdma_sink_debug

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE(
    "sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);

#define gst_rdma_sink_parent_class parent_class
G_DEFINE_TYPE_WITH_CODE(GstRdmaSink, gst_rdma_sink, GST_TYPE_BASE_SINK,
                        G_IMPLEMENT_INTERFACE(GST_TYPE_URI_HANDLER,
                                              gst_rdma_sink_uri_handler_init));
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE(rdmasink, "rdmasink", GST_RANK_NONE,
                                      GST_TYPE_RDMA_SINK,
                                      gst_rdma_element_init(plugin));

static GParamSpec *properties[N_PROPERTIES];

static void gst_rdma_sink_finalize(GObject *object);
static void gst_rdma_sink_set_property(GObject *object, guint prop_id,
                                       const GValue *value, GParamSpec *pspec);
static void gst_rdma_sink_get_property(GObject *object, guint prop_id,
                                       GValue *value, GParamSpec *pspec);
static gboolean gst_rdma_sink_start(GstBaseSink *bsink);
static gboolean gst_rdma_sink_stop(GstBaseSink *bsink);
static gboolean gst_rdma_sink_unlock(GstBaseSink *bsink);
static gboolean gst_rdma_sink_unlock_stop(GstBaseSink *bsink);
static gboolean gst_rdma_sink_set_caps(GstBaseSink *bsink, GstCaps *caps);
static GstCaps *gst_rdma_sink_get_caps(GstBaseSink *bsink, GstCaps *filter);
static gboolean gst_rdma_sink_query(GstBaseSink *bsink, GstQuery *query);
static gboolean gst_rdma_sink_propose_allocation(GstBaseSink *bsink,
                                                 GstQuery *query);
static gboolean gst_rdma_sink_event(GstBaseSink *bsink, GstEvent *event);
static GstFlowReturn gst_rdma_sink_prepare(GstBaseSink *bsink, GstBuffer *buf);
static GstFlowReturn gst_rdma_sink_render(GstBaseSink *bsink, GstBuffer *buf);
static GstStructure *gst_rdma_sink_get_stats(GstElement *element);

/* What the rdmasinks of one connection share: where it goes and how it
 * sends, as the first of them to start set it (see the SECTION). */
static void gst_rdma_sink_install_connection_properties(void)
{
  properties[PROP_HOST] = g_param_spec_string(
      "host", "Host",
      "Address of the receiver (rdmasrc); the shm transport ignores it",
      DEFAULT_HOST,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_PORT] =
      gst_rdma_param_spec_port("Port of the receiver to connect to");
  properties[PROP_TRANSPORT] = gst_rdma_param_spec_transport();
  properties[PROP_MECHANISM] = gst_rdma_param_spec_mechanism();
  properties[PROP_BACKPRESSURE] = g_param_spec_enum(
      "backpressure", "Backpressure",
      "When no send block is free: wait up to wait-timeout, or drop the "
      "frame at once (connection-wide)",
      GST_TYPE_RDMA_BACKPRESSURE, DEFAULT_BACKPRESSURE,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_WAIT_TIMEOUT] = g_param_spec_int(
      "wait-timeout", "Wait timeout",
      "With backpressure=wait: milliseconds to wait for a free send block "
      "before the frame is dropped (connection-wide)",
      0, MAX_WAIT_TIMEOUT, DEFAULT_WAIT_TIMEOUT,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_CONNECT_TIMEOUT] = g_param_spec_int(
      "connect-timeout", "Connect timeout",
      "Milliseconds to keep trying to reach the receiver before posting an "
      "error (connection-wide)",
      1, G_MAXINT, DEFAULT_CONNECT_TIMEOUT,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_SEND_BLOCKS] = g_param_spec_uint(
      "send-blocks", "Send blocks",
      "Registered send blocks of the connection, shared by all its "
      "rdmasinks (connection-wide)",
      1, 4096, DEFAULT_SEND_BLOCKS,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_BLOCK_SIZE] = g_param_spec_uint(
      "block-size", "Block size",
      "Block size in bytes asked of the receiver, whose rdmasrc block-size "
      "decides (0 = its choice; connection-wide)",
      0, MAX_BLOCK_SIZE, DEFAULT_BLOCK_SIZE,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  /* basesink's "blocksize" is bytes per pull in pull mode, which this
   * push-mode sink never uses: set beside block-size it did nothing.  A
   * class can't take an inherited property away, but one of its own of
   * the same name hides it (GObject finds the subclass's first), so this
   * one is block-size under the name a user may well type. */
  properties[PROP_BLOCKSIZE] = g_param_spec_uint(
      "blocksize", "Block size",
      "The same as block-size (basesink's bytes per pull in pull mode, "
      "which this push-mode sink never uses, would do nothing)",
      0, MAX_BLOCK_SIZE, DEFAULT_BLOCK_SIZE,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_READ_AHEAD] = g_param_spec_uint(
      "read-ahead", "Read ahead",
      "Status-byte: read the receiver's status array ahead, once this many "
      "or fewer receive blocks are known free (0 = only when none is; "
      "connection-wide)",
      0, 4096, 0,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_MAX_META_SIZE] = gst_rdma_param_spec_max_meta_size(
      "Most bytes a frame's flags and metas take on the wire: beyond it its "
      "largest metas stay behind (counted in metas-not-carried)");
  properties[PROP_TOS] = gst_rdma_param_spec_tos();
  properties[PROP_ACK_TIMEOUT] = gst_rdma_param_spec_ack_timeout();
  properties[PROP_RETRY_COUNT] = g_param_spec_uint(
      "retry-count", "Retry count",
      "Transport retries before the connection is lost: a dead receiver is "
      "found after 4.096 us x 2^ack-timeout x (retry-count + 1); 7 (retry "
      "forever) is not allowed",
      0, 6, DEFAULT_RETRY_COUNT,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_COMP_VECTOR] = gst_rdma_param_spec_comp_vector();
}

/* What each rdmasink has of its own on the connection. */
static void gst_rdma_sink_install_device_properties(void)
{
  properties[PROP_DEVICE_ID] = g_param_spec_uint(
      "device-id", "Device ID",
      "Stream number on the connection, unique among the rdmasinks sharing "
      "it: the receiver's pad src_<device-id>",
      0, SBR_MAX_DEVICES - 1, DEFAULT_DEVICE_ID,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_RECONNECT] = g_param_spec_boolean(
      "reconnect", "Reconnect",
      "When the receiver goes away mid-stream, reconnect in the background "
      "and drop frames meanwhile, instead of posting an error",
      DEFAULT_RECONNECT,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  properties[PROP_STATS] = gst_rdma_param_spec_stats(
      "Counters of this device and of the connection it shares, one flat "
      "structure \"rdmasink-stats\" (the element documentation lists the "
      "fields)");
  properties[PROP_STATS_INTERVAL] =
      gst_rdma_param_spec_stats_interval("rdmasink-stats", NULL);
  properties[PROP_URI] = gst_rdma_uri_param_spec();
}

guint gst_rdma_sink_serialize_meta_signal;

static void gst_rdma_sink_class_init(GstRdmaSinkClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstBaseSinkClass *basesink_class = GST_BASE_SINK_CLASS(klass);

  gobject_class->finalize = gst_rdma_sink_finalize;
  gobject_class->set_property = gst_rdma_sink_set_property;
  gobject_class->get_property = gst_rdma_sink_get_property;

  gst_rdma_sink_install_connection_properties();
  gst_rdma_sink_install_device_properties();
  g_object_class_install_properties(gobject_class, N_PROPERTIES, properties);

  /**
   * GstRdmaSink::serialize-meta:
   * @sink: the rdmasink
   * @buffer: the frame going out
   * @meta: (type gpointer): a #GstMeta of @buffer that rdmasink can't
   *   write out itself (not a video, time code, region, caption,
   *   reference timestamp, protection or custom meta)
   *
   * Emitted on the streaming thread for each such meta of each frame, only
   * while a handler is connected.  A handler that knows the meta returns
   * its fields; rdmasrc's #GstRdmaSrc::deserialize-meta puts it back on
   * the frame over there (its API type's name says which meta it is).
   *
   * Returns: (transfer full) (nullable): the meta's fields, or %NULL
   * (not carried, counted in metas-not-carried)
   */
  gst_rdma_sink_serialize_meta_signal = g_signal_new(
      "serialize-meta", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0,
      g_signal_accumulator_first_wins, NULL, NULL, GST_TYPE_STRUCTURE, 2,
      GST_TYPE_BUFFER | G_SIGNAL_TYPE_STATIC_SCOPE, G_TYPE_POINTER);

  gst_element_class_add_static_pad_template(element_class, &sink_template);
  gst_element_class_set_static_metadata(
      element_class, "RDMA sink", "Sink/Network",
      "Sends a stream as one device of a shared one-sided RDMA connection",
      GST_RDMA_ELEMENT_AUTHOR);

  basesink_class->start = GST_DEBUG_FUNCPTR(gst_rdma_sink_start);
  basesink_class->stop = GST_DEBUG_FUNCPTR(gst_rdma_sink_stop);
  basesink_class->unlock = GST_DEBUG_FUNCPTR(gst_rdma_sink_unlock);
  basesink_class->unlock_stop = GST_DEBUG_FUNCPTR(gst_rdma_sink_unlock_stop);
  basesink_class->set_caps = GST_DEBUG_FUNCPTR(gst_rdma_sink_set_caps);
  basesink_class->get_caps = GST_DEBUG_FUNCPTR(gst_rdma_sink_get_caps);
  basesink_class->query = GST_DEBUG_FUNCPTR(gst_rdma_sink_query);
  basesink_class->propose_allocation =
      GST_DEBUG_FUNCPTR(gst_rdma_sink_propose_allocation);
  basesink_class->event = GST_DEBUG_FUNCPTR(gst_rdma_sink_event);
  basesink_class->prepare = GST_DEBUG_FUNCPTR(gst_rdma_sink_prepare);
  basesink_class->render = GST_DEBUG_FUNCPTR(gst_rdma_sink_render);

  GST_DEBUG_CATEGORY_INIT(gst_rdma_sink_debug, "rdmasink", 0, "RDMA sink");
}

static void gst_rdma_sink_init(GstRdmaSink *self)
{
  self->host = g_strdup(DEFAULT_HOST);
  self->port = GST_RDMA_DEFAULT_PORT;
  self->device_id = DEFAULT_DEVICE_ID;
  self->transport = GST_RDMA_DEFAULT_TRANSPORT;
  self->mechanism = GST_RDMA_DEFAULT_MECHANISM;
  self->backpressure = DEFAULT_BACKPRESSURE;
  self->wait_timeout = DEFAULT_WAIT_TIMEOUT;
  self->reconnect = DEFAULT_RECONNECT;
  self->connect_timeout = DEFAULT_CONNECT_TIMEOUT;
  self->upstream_live = TRUE;
  self->upstream_latency = GST_CLOCK_TIME_NONE;
  self->send_blocks = DEFAULT_SEND_BLOCKS;
  self->block_size = DEFAULT_BLOCK_SIZE;
  self->tos = GST_RDMA_DEFAULT_TOS;
  self->ack_timeout = GST_RDMA_DEFAULT_ACK_TIMEOUT;
  self->retry_count = DEFAULT_RETRY_COUNT;
  self->max_meta_size = GST_RDMA_DEFAULT_MAX_META_SIZE;
  self->comp_vector = GST_RDMA_DEFAULT_COMP_VECTOR;
  self->stats_interval = GST_RDMA_DEFAULT_STATS_INTERVAL;
  /* A last sample is one more reference to every buffer rendered, which
   * makes render copy it (it could be read afterwards): off by default so
   * buffers of the sink's pool go without a copy; turning it on is safe. */
  gst_base_sink_set_last_sample_enabled(GST_BASE_SINK(self), FALSE);
}

static void gst_rdma_sink_finalize(GObject *object)
{
  GstRdmaSink *self = GST_RDMA_SINK(object);

  g_free(self->host);
  g_free(self->uri_error);
  g_free(self->caps_str);
  gst_rdma_sink_headers_free(self);
  gst_rdma_sink_events_free(self);
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

/* Where each plain property lives (gstrdmaproperties.h).  "blocksize"
 * stores into block_size: see its spec. */
static const gsize fields[N_PROPERTIES] = {
    [PROP_HOST] = G_STRUCT_OFFSET(GstRdmaSink, host),
    [PROP_PORT] = G_STRUCT_OFFSET(GstRdmaSink, port),
    [PROP_DEVICE_ID] = G_STRUCT_OFFSET(GstRdmaSink, device_id),
    [PROP_TRANSPORT] = G_STRUCT_OFFSET(GstRdmaSink, transport),
    [PROP_MECHANISM] = G_STRUCT_OFFSET(GstRdmaSink, mechanism),
    [PROP_BACKPRESSURE] = G_STRUCT_OFFSET(GstRdmaSink, backpressure),
    [PROP_WAIT_TIMEOUT] = G_STRUCT_OFFSET(GstRdmaSink, wait_timeout),
    [PROP_RECONNECT] = G_STRUCT_OFFSET(GstRdmaSink, reconnect),
    [PROP_CONNECT_TIMEOUT] = G_STRUCT_OFFSET(GstRdmaSink, connect_timeout),
    [PROP_SEND_BLOCKS] = G_STRUCT_OFFSET(GstRdmaSink, send_blocks),
    [PROP_BLOCK_SIZE] = G_STRUCT_OFFSET(GstRdmaSink, block_size),
    [PROP_BLOCKSIZE] = G_STRUCT_OFFSET(GstRdmaSink, block_size),
    [PROP_READ_AHEAD] = G_STRUCT_OFFSET(GstRdmaSink, read_ahead),
    [PROP_TOS] = G_STRUCT_OFFSET(GstRdmaSink, tos),
    [PROP_ACK_TIMEOUT] = G_STRUCT_OFFSET(GstRdmaSink, ack_timeout),
    [PROP_RETRY_COUNT] = G_STRUCT_OFFSET(GstRdmaSink, retry_count),
    [PROP_COMP_VECTOR] = G_STRUCT_OFFSET(GstRdmaSink, comp_vector),
    [PROP_STATS_INTERVAL] = G_STRUCT_OFFSET(GstRdmaSink, stats_interval),
    [PROP_MAX_META_SIZE] = G_STRUCT_OFFSET(GstRdmaSink, max_meta_size),
};

static const GstRdmaPropertyTable property_table = {
    fields, N_PROPERTIES, G_STRUCT_OFFSET(GstRdmaSink, uri_error)};

static void gst_rdma_sink_set_property(GObject *object, guint prop_id,
                                       const GValue *value, GParamSpec *pspec)
{
  if (!gst_rdma_property_set(object, &property_table, prop_id, pspec, value))
    G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
}

static void gst_rdma_sink_get_property(GObject *object, guint prop_id,
                                       GValue *value, GParamSpec *pspec)
{
  if (prop_id == PROP_STATS) {
    /* Takes the object lock itself. */
    g_value_take_boxed(value, gst_rdma_sink_get_stats(GST_ELEMENT(object)));
    return;
  }
  if (!gst_rdma_property_get(object, &property_table, prop_id, pspec, value))
    G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
}

/* ------------------------------------------------------------ stats */

static GstStructure *gst_rdma_sink_get_stats(GstElement *element)
{
  GstRdmaSink *self = GST_RDMA_SINK(element);
  struct sbr_device_stats ds;
  GstRdmaConnection *conn;
  GstStructure *s;
  sbr_sender *sender = NULL;
  guint device;

  GST_OBJECT_LOCK(self);
  conn = self->conn ? gst_rdma_connection_ref(self->conn) : NULL;
  device = conn ? self->device : self->device_id;
  s = gst_structure_new(
      "rdmasink-stats", "device-id", G_TYPE_UINT, device, "zero-copy-buffers",
      G_TYPE_UINT64, self->zero_copy_buffers, "copied-buffers", G_TYPE_UINT64,
      self->copied_buffers, "reconnect-drops", G_TYPE_UINT64,
      self->reconnect_drops, "unmappable-drops", G_TYPE_UINT64,
      self->unmappable_drops, "refused-drops", G_TYPE_UINT64,
      self->refused_drops, "gap-drops", G_TYPE_UINT64, self->gap_drops,
      "gap-disconts", G_TYPE_UINT64, self->gap_disconts,
      "key-units-sent-upstream", G_TYPE_UINT64, self->key_units_sent_upstream,
      "headers-resent", G_TYPE_UINT64, self->headers_resent, "events-sent",
      G_TYPE_UINT64, self->events_sent, "metas-not-carried", G_TYPE_UINT64,
      self->metas_not_carried, NULL);
  GST_OBJECT_UNLOCK(self);

  memset(&ds, 0, sizeof ds);
  if (conn)
    sender = gst_rdma_connection_get_sender(conn);
  if (sender)
    sbr_sender_get_device_stats(sender, (uint8_t)device, &ds);
  gst_structure_set(
      s, "frames", G_TYPE_UINT64, (guint64)ds.frames, "blocks", G_TYPE_UINT64,
      (guint64)ds.blocks, "bytes", G_TYPE_UINT64, (guint64)ds.bytes, "drops",
      G_TYPE_UINT64, (guint64)ds.drops, "paused", G_TYPE_BOOLEAN,
      (gboolean)ds.paused, "paused-drops", G_TYPE_UINT64,
      (guint64)ds.paused_drops, "paused-ns", G_TYPE_UINT64,
      (guint64)ds.paused_ns, "refused", G_TYPE_BOOLEAN, (gboolean)ds.refused,
      "key-units-requested", G_TYPE_UINT64, (guint64)ds.key_units, NULL);
  if (conn) {
    gst_rdma_connection_fill_stats(conn, s);
    gst_rdma_connection_unref(conn);
  }
  return s;
}

/* ------------------------------------------------------- start/stop */

/* Connecting failed: called on the connection's thread, or by the
 * streaming thread that finds it failed; the error goes out once. */
/* A failure no retry fixes names its cause in the message itself, a
 * receiver's refusal the mismatch: "The RDMA receiver at A refused the
 * connection: the receiver runs the status-byte mechanism, the sender
 * sliding-window."  Timeouts and the like keep the short message, with what
 * the transport said in the debug text. */
void gst_rdma_sink_post_connect_error(GstRdmaSink *self,
                                      GstRdmaConnection *conn,
                                      const gchar *error)
{
  const gchar *address = gst_rdma_connection_get_address(conn);
  const gchar *description = gst_rdma_connection_get_description(conn);
  gchar *reason = NULL, *full = NULL;
  const gchar *refusal;
  gint code;

  if (!g_atomic_int_compare_and_exchange(&self->error_posted, 0, 1))
    return;
  code = gst_rdma_connection_get_error(conn, &reason, &full);
  if (full)
    error = full;
  refusal = reason ? strstr(reason, "refused the connection: ") : NULL;
  if (refusal && code == -EBUSY) {
    /* Retried until connect-timeout: every lane stayed in use. */
    GST_ELEMENT_ERROR(self, RESOURCE, BUSY,
                      ("The RDMA receiver at %s refused the connection: %s.",
                       address, refusal + strlen("refused the connection: ")),
                      ("%s (%s): %s", address, description, error));
  } else if (!gst_rdma_connection_error_is_fatal(code) || !reason) {
    GST_ELEMENT_ERROR(
        self, RESOURCE, OPEN_WRITE,
        ("Could not connect to the RDMA receiver at %s.", address),
        ("%s (%s): %s", address, description, error));
  } else if (refusal && code == -EACCES) {
    GST_ELEMENT_ERROR(self, RESOURCE, NOT_AUTHORIZED,
                      ("The RDMA receiver at %s refused the connection: %s.",
                       address, refusal + strlen("refused the connection: ")),
                      ("%s (%s): %s", address, description, error));
  } else if (refusal) {
    /* Another version, mechanism or geometry: the two ends' settings. */
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                      ("The RDMA receiver at %s refused the connection: %s.",
                       address, refusal + strlen("refused the connection: ")),
                      ("%s (%s): %s", address, description, error));
  } else {
    GST_ELEMENT_ERROR(
        self, RESOURCE, OPEN_WRITE,
        ("Could not connect to the RDMA receiver at %s: %s.", address, reason),
        ("%s (%s): %s", address, description, error));
  }
  g_free(reason);
  g_free(full);
}

static void gst_rdma_sink_connect_failed(GstElement *element,
                                         const gchar *error)
{
  GstRdmaSink *self = GST_RDMA_SINK(element);
  GstRdmaConnection *conn;

  GST_OBJECT_LOCK(self);
  conn = self->conn ? gst_rdma_connection_ref(self->conn) : NULL;
  GST_OBJECT_UNLOCK(self);
  if (conn) {
    gst_rdma_sink_post_connect_error(self, conn, error);
    gst_rdma_connection_unref(conn);
  }
}

static gboolean gst_rdma_sink_start(GstBaseSink *bsink)
{
  GstRdmaSink *self = GST_RDMA_SINK(bsink);
  GstRdmaConnectionConfig cfg;
  GstRdmaConnection *conn;
  GError *error = NULL;
  gboolean differs = FALSE;
  guint stats_interval;
  gchar *host;

  GST_OBJECT_LOCK(self);
  if (!gst_rdma_uri_error_check_locked(GST_ELEMENT(self), self->uri_error))
    return FALSE;
  host = g_strdup(self->host);
  cfg.transport = self->transport;
  cfg.mechanism = self->mechanism;
  cfg.host = host;
  cfg.port = self->port;
  cfg.send_blocks = self->send_blocks;
  cfg.block_size = self->block_size;
  cfg.connect_timeout_ms = self->connect_timeout;
  cfg.backpressure = self->backpressure;
  cfg.wait_timeout_ms = self->wait_timeout;
  cfg.read_ahead = self->read_ahead;
  cfg.tos = self->tos;
  cfg.ack_timeout = self->ack_timeout;
  cfg.retry_count = self->retry_count;
  cfg.comp_vector = self->comp_vector;
  self->device = (guint8)self->device_id;
  self->reconnect_enabled = self->reconnect;
  stats_interval = self->stats_interval;
  GST_OBJECT_UNLOCK(self);

  g_atomic_int_set(&self->flushing, 0);
  g_atomic_int_set(&self->error_posted, 0);
  self->caps_pending = self->caps_str != NULL;
  self->caps_generation = 0;
  self->discont_pending = TRUE;
  self->gap_pending = self->prepared = FALSE;
  self->warned_generation = 0;
  self->refused = FALSE;
  GST_OBJECT_LOCK(self);
  self->zero_copy_buffers = self->copied_buffers = 0;
  self->reconnect_drops = self->unmappable_drops = 0;
  self->refused_drops = 0;
  self->key_units_sent_upstream = 0;
  self->gap_drops = self->gap_disconts = 0;
  self->headers_resent = self->events_sent = 0;
  self->metas_not_carried = 0;
  GST_OBJECT_UNLOCK(self);
  self->extras_unused = FALSE;

  /* The connection is made on a thread of its own (a receiver in this
   * pipeline accepts only once PLAYING), so its errors come after the
   * change to PAUSED; but what no receiver can fix (no verbs back end, no
   * RDMA device) fails the state change itself, as a sink that can't open
   * its device does. */
  {
    char why[256];

    if (sbr_backend_check(gst_rdma_transport_to_sbr(cfg.transport), why,
                          sizeof why) < 0) {
      GST_ELEMENT_ERROR(
          self, RESOURCE, OPEN_WRITE,
          ("Could not connect to the RDMA receiver at %s:%u: %s", host,
           cfg.port, why),
          ("transport %s", gst_rdma_transport_nick(cfg.transport)));
      g_free(host);
      return FALSE;
    }
  }
  conn =
      gst_rdma_connection_open(&cfg, self->device, GST_ELEMENT(self),
                               gst_rdma_sink_connect_failed, &differs, &error);
  if (!conn) {
    GST_ELEMENT_ERROR(self, RESOURCE, BUSY, ("%s", error->message),
                      ("device-id %u, %s:%u", self->device, host, cfg.port));
    g_clear_error(&error);
    g_free(host);
    return FALSE;
  }
  if (differs)
    GST_ELEMENT_WARNING(
        self, RESOURCE, SETTINGS,
        ("The connection to %s is shared with an rdmasink that started with "
         "other settings; its settings apply.",
         gst_rdma_connection_get_address(conn)),
        ("send-blocks, block-size, connect-timeout, backpressure, "
         "wait-timeout and read-ahead are connection-wide"));
  g_free(host);

  GST_OBJECT_LOCK(self);
  self->conn = conn;
  self->allocator = gst_rdma_allocator_new(conn, self->device);
  GST_OBJECT_UNLOCK(self);
  gst_rdma_connection_set_key_unit_func(conn, self->device,
                                        gst_rdma_sink_key_unit_requested);

  /* Connecting may already have failed on its thread before self->conn was
   * set (so the callback found nothing to report): report it now. */
  {
    gchar *err = NULL;
    if (gst_rdma_connection_get_state(conn, NULL) ==
        GST_RDMA_CONNECTION_FAILED) {
      gst_rdma_connection_wait(conn, &self->flushing, NULL, &err);
      gst_rdma_sink_post_connect_error(self, conn, err ? err : "failed");
      g_free(err);
    }
  }

  self->ticker = gst_rdma_stats_ticker_start(GST_ELEMENT(self), stats_interval,
                                             gst_rdma_sink_get_stats);
  GST_DEBUG_OBJECT(self, "started: device %u on %s (%s)", self->device,
                   gst_rdma_connection_get_address(conn),
                   gst_rdma_connection_get_description(conn));
  return TRUE;
}

static gboolean gst_rdma_sink_stop(GstBaseSink *bsink)
{
  GstRdmaSink *self = GST_RDMA_SINK(bsink);
  GstRdmaConnection *conn;
  GstAllocator *allocator;

  gst_rdma_stats_ticker_stop(self->ticker);
  self->ticker = NULL;

  GST_OBJECT_LOCK(self);
  conn = self->conn;
  allocator = self->allocator;
  self->conn = NULL;
  self->allocator = NULL;
  GST_OBJECT_UNLOCK(self);

  /* Memories upstream still holds keep the connection (and their blocks)
   * alive through their own references. */
  if (allocator)
    gst_object_unref(allocator);
  if (conn)
    gst_rdma_connection_close(conn, self->device);
  GST_DEBUG_OBJECT(self, "stopped");
  return TRUE;
}

static gboolean gst_rdma_sink_unlock(GstBaseSink *bsink)
{
  GstRdmaSink *self = GST_RDMA_SINK(bsink);
  GstRdmaConnection *conn;

  g_atomic_int_set(&self->flushing, 1);
  GST_OBJECT_LOCK(self);
  conn = self->conn ? gst_rdma_connection_ref(self->conn) : NULL;
  GST_OBJECT_UNLOCK(self);
  /* Wakes a wait for the connection, and makes this device's waits for a
   * free send block end until unlock_stop: a wakeup alone would miss a
   * render on its way to such a wait (past its look at flushing), which
   * then waited with the preroll lock held, and the state change with it
   * (a pause while the receiver paused the device hung for wait-timeout). */
  if (conn) {
    gst_rdma_connection_interrupt(conn, self->device, TRUE);
    gst_rdma_connection_unref(conn);
  }
  return TRUE;
}

static gboolean gst_rdma_sink_unlock_stop(GstBaseSink *bsink)
{
  GstRdmaSink *self = GST_RDMA_SINK(bsink);
  GstRdmaConnection *conn;

  GST_OBJECT_LOCK(self);
  conn = self->conn ? gst_rdma_connection_ref(self->conn) : NULL;
  GST_OBJECT_UNLOCK(self);
  if (conn) {
    gst_rdma_connection_interrupt(conn, self->device, FALSE);
    gst_rdma_connection_unref(conn);
  }
  g_atomic_int_set(&self->flushing, 0);
  return TRUE;
}

/* ----------------------------------------------------------- stream */

/* Any media type, in system memory only.  The template can't say that (ANY
 * means any features too), so the CAPS query drops the structures of
 * upstream's filter that are in other memory (VA, DMABuf, CUDA, GL, ...),
 * so a decoder picks its system-memory caps, and the ACCEPT_CAPS query
 * refuses caps with a memory feature (gst_rdma_sink_query).
 * Sending such a buffer mapped would not do either: the receiver would
 * announce memory it doesn't have, and mapped hardware memory may carry
 * strides and tilings the caps don't describe.  Without a filter ANY is
 * all there is to say. */
static GstCaps *gst_rdma_sink_get_caps(GstBaseSink *bsink, GstCaps *filter)
{
  GstCaps *templ = gst_pad_get_pad_template_caps(GST_BASE_SINK_PAD(bsink));
  GstCaps *caps;

  if (!filter)
    return templ;
  caps = gst_caps_intersect_full(filter, templ, GST_CAPS_INTERSECT_FIRST);
  gst_caps_unref(templ);
  templ = caps;
  caps = gst_rdma_caps_system_memory_only(templ);
  gst_caps_unref(templ);
  GST_LOG_OBJECT(bsink, "filter %" GST_PTR_FORMAT ": %" GST_PTR_FORMAT, filter,
                 caps);
  return caps;
}

/* The default ACCEPT_CAPS answer compares with the unfiltered CAPS query,
 * ANY: memory features are checked here. */
static gboolean gst_rdma_sink_query(GstBaseSink *bsink, GstQuery *query)
{
  GstCaps *caps;
  gboolean ok;

  if (GST_QUERY_TYPE(query) != GST_QUERY_ACCEPT_CAPS)
    return GST_BASE_SINK_CLASS(parent_class)->query(bsink, query);
  gst_query_parse_accept_caps(query, &caps);
  ok = gst_rdma_caps_is_system_memory(caps);
  if (!ok)
    GST_DEBUG_OBJECT(bsink,
                     "refusing %" GST_PTR_FORMAT
                     ": rdmasink sends system memory only",
                     caps);
  gst_query_set_accept_caps_result(query, ok);
  return TRUE;
}

/* Is upstream live, and with what minimum latency (an encoder's, a live
 * source's)?  Asked when caps come, on the streaming thread, with
 * upstream linked and negotiated; both go with the caps, so a receiver
 * that stamps the camera's instant (capture, sender modes) reports the
 * latency those frames come with from the first one on.  A source that
 * doesn't answer counts as live, latency unknown: the receiver then
 * keeps the live default, as before. */
static void gst_rdma_sink_query_upstream(GstRdmaSink *self)
{
  GstQuery *query = gst_query_new_latency();
  gboolean live = TRUE;
  GstClockTime min = GST_CLOCK_TIME_NONE;

  if (gst_pad_peer_query(GST_BASE_SINK_PAD(self), query))
    gst_query_parse_latency(query, &live, &min, NULL);
  gst_query_unref(query);
  self->upstream_live = live;
  self->upstream_latency = live ? min : GST_CLOCK_TIME_NONE;
  GST_DEBUG_OBJECT(self, "upstream is %slive, latency %" GST_TIME_FORMAT,
                   live ? "" : "not ", GST_TIME_ARGS(self->upstream_latency));
}

static gboolean gst_rdma_sink_set_caps(GstBaseSink *bsink, GstCaps *caps)
{
  GstRdmaSink *self = GST_RDMA_SINK(bsink);

  g_free(self->caps_str);
  self->caps_str = gst_caps_to_string(caps);
  self->caps_pending = TRUE;
  self->has_video_info = gst_video_info_from_caps(&self->video_info, caps);
  gst_rdma_sink_headers_clear(self); /* a new stream: its own headers */
  gst_rdma_sink_query_upstream(self);
  GST_DEBUG_OBJECT(self, "caps %s: sent before the next buffer",
                   self->caps_str);
  return TRUE;
}

static gboolean gst_rdma_sink_propose_allocation(GstBaseSink *bsink,
                                                 GstQuery *query)
{
  GstRdmaSink *self = GST_RDMA_SINK(bsink);
  GstAllocationParams params;
  sbr_sender *sender = NULL;
  guint generation;
  GstAllocator *allocator;
  GstRdmaConnection *conn;
  GstVideoInfo info;
  GstCaps *caps;

  /* A query comes on upstream's thread, which a state change to READY
   * doesn't wait for: stop may clear self->conn meanwhile (UBSan caught
   * the NULL in post_connect_error under test_sender_not_allowed_is_refused).
   * A reference keeps it, and the sender, for the query's length. */
  GST_OBJECT_LOCK(self);
  conn = self->conn ? gst_rdma_connection_ref(self->conn) : NULL;
  allocator = self->allocator ? gst_object_ref(self->allocator) : NULL;
  GST_OBJECT_UNLOCK(self);
  /* The payload size comes from the receiver: without the connection there
   * is nothing to offer. */
  if (!conn || !allocator ||
      gst_rdma_sink_wait_ready(self, conn, &sender, &generation) !=
          READY_SEND) {
    if (conn)
      gst_rdma_connection_unref(conn);
    if (allocator)
      gst_object_unref(allocator);
    return FALSE;
  }
  /* Padded planes cross as they are (gstrdmaextras.c): a source with a
   * stride of its own (a capture driver, a decoder) needn't copy. */
  gst_query_add_allocation_meta(query, GST_VIDEO_META_API_TYPE, NULL);
  gst_allocation_params_init(&params);
  /* Block payloads are 64-byte aligned; ask for no more. */
  params.align = 63;
  gst_query_add_allocation_param(query, allocator, &params);
  /* And a pool of ours for video (elements that take the downstream pool,
   * videotestsrc, videoconvert, then allocate from it): its buffers are
   * never recycled, so an idle buffer pins no send block.  A pool needs
   * the buffer size, which only video caps give; for other caps upstream
   * makes its own pool over the allocator, whose buffers keep their
   * blocks while it recycles them (gstrdmaallocator.h). */
  gst_query_parse_allocation(query, &caps, NULL);
  if (caps && gst_video_info_from_caps(&info, caps)) {
    GstBufferPool *pool = gst_rdma_buffer_pool_new();
    GstStructure *config = gst_buffer_pool_get_config(pool);

    gst_buffer_pool_config_set_params(config, caps, (guint)info.size, 0, 0);
    gst_buffer_pool_config_set_allocator(config, allocator, &params);
    if (gst_buffer_pool_set_config(pool, config))
      gst_query_add_allocation_pool(query, pool, (guint)info.size, 0, 0);
    gst_object_unref(pool);
  }
  gst_object_unref(allocator);
  GST_DEBUG_OBJECT(self,
                   "offered the send-block allocator (%" G_GSIZE_FORMAT
                   " payload bytes per block)",
                   sbr_sender_block_payload_size(sender));
  gst_rdma_connection_unref(conn);
  return TRUE;
}

static void gst_rdma_sink_send_eos(GstRdmaSink *self)
{
  struct sbr_block_meta meta;
  sbr_sender *sender = NULL;
  guint generation;
  int ret;

  if (gst_rdma_sink_wait_ready(self, self->conn, &sender, &generation) !=
      READY_SEND) {
    GST_WARNING_OBJECT(self, "not connected: EOS not sent");
    return;
  }
  sbr_block_meta_init(&meta, self->device);
  meta.kind = SBR_KIND_EOS;
  /* Serialized events come with the preroll lock held, as render: a pause
   * while EOS waits for a free block waits for PLAYING, as a frame does. */
  while ((ret = gst_rdma_sink_send(self, sender, &meta, NULL, 0)) == -EINTR &&
         gst_base_sink_wait_preroll(GST_BASE_SINK(self)) == GST_FLOW_OK)
    GST_DEBUG_OBJECT(self, "PLAYING again: sending EOS");
  if (ret < 0) {
    GST_WARNING_OBJECT(self, "EOS not sent: %s", g_strerror(-ret));
    return;
  }
  /* EOS means everything before it was delivered. */
  ret = sbr_sender_flush(sender, EOS_FLUSH_TIMEOUT_MS);
  GST_DEBUG_OBJECT(self, "EOS sent for device %u, flush: %s", self->device,
                   ret == 0 ? "done" : g_strerror(-ret));
}

/* basesink hands a GAP over once its time has come (as it renders a
 * buffer): to the receiver, where it is pushed in its place.  Not waited
 * for: a receiver away or a sender paused loses a gap, which is only the
 * news that nothing comes. */
static void gst_rdma_sink_send_gap(GstRdmaSink *self, GstEvent *event)
{
  sbr_sender *sender = NULL;
  guint generation;

  if (self->conn && !self->caps_pending &&
      gst_rdma_sink_wait_ready(self, self->conn, &sender, &generation) ==
          READY_SEND &&
      self->caps_generation == generation)
    gst_rdma_sink_events_gap(self, event, sender);
}

static gboolean gst_rdma_sink_event(GstBaseSink *bsink, GstEvent *event)
{
  GstRdmaSink *self = GST_RDMA_SINK(bsink);

  switch (GST_EVENT_TYPE(event)) {
  case GST_EVENT_EOS:
    gst_rdma_sink_send_eos(self);
    break;
  case GST_EVENT_STREAM_START:
    gst_rdma_sink_events_stream_start(self, event);
    self->discont_pending = TRUE;
    break;
  case GST_EVENT_FLUSH_STOP:
    self->discont_pending = TRUE;
    break;
  case GST_EVENT_TAG:
    gst_rdma_sink_events_tag(self, event);
    break;
  case GST_EVENT_SEGMENT: {
    const GstSegment *segment;

    gst_event_parse_segment(event, &segment);
    gst_rdma_sink_events_segment(self, segment);
    break;
  }
  case GST_EVENT_GAP:
    gst_rdma_sink_send_gap(self, event);
    break;
  default:
    break;
  }
  return GST_BASE_SINK_CLASS(parent_class)->event(bsink, event);
}

static guint64 to_running_time(GstSegment *segment, GstClockTime t)
{
  guint64 rt;

  if (!GST_CLOCK_TIME_IS_VALID(t) || segment->format != GST_FORMAT_TIME)
    return SBR_TIME_NONE;
  rt = gst_segment_to_running_time(segment, GST_FORMAT_TIME, t);
  return GST_CLOCK_TIME_IS_VALID(rt) ? rt : SBR_TIME_NONE;
}

static void gst_rdma_sink_fill_meta(GstRdmaSink *self, GstBuffer *buf,
                                    struct sbr_block_meta *meta)
{
  GstSegment *segment = &GST_BASE_SINK(self)->segment;

  sbr_block_meta_init(meta, self->device);
  /* The receiver rebuilds a live timeline from running times: their
   * differences are what the stream means, whatever the segment. */
  meta->pts = to_running_time(segment, GST_BUFFER_PTS(buf));
  meta->dts = to_running_time(segment, GST_BUFFER_DTS(buf));
  if (GST_BUFFER_DURATION_IS_VALID(buf))
    meta->duration = GST_BUFFER_DURATION(buf);
  if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_DISCONT) ||
      self->discont_pending || self->gap_pending)
    meta->flags |= SBR_FLAG_DISCONT;
  if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_DELTA_UNIT))
    meta->flags |= SBR_FLAG_DELTA;
  if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_HEADER))
    meta->flags |= SBR_FLAG_HEADER;
  if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_MARKER))
    meta->flags |= SBR_FLAG_MARKER;
  meta->capture_time = gst_rdma_capture_time(
      GST_ELEMENT(self), buf,
      meta->pts == SBR_TIME_NONE ? GST_CLOCK_TIME_NONE : meta->pts);
}

/* The connection, for one attempt at a frame: TRUE with *sender usable,
 * else FALSE with what render_once returns instead (a lost connection's
 * GST_FLOW_OK drops the frame). */
static gboolean gst_rdma_sink_ready(GstRdmaSink *self, sbr_sender **sender,
                                    guint *generation, GstFlowReturn *flow)
{
  switch (gst_rdma_sink_wait_ready(self, self->conn, sender, generation)) {
  case READY_SEND:
    /* Unlocked before we had the sender (it may have been connecting, with
     * no sender to interrupt yet): nothing below would see it.  Once we
     * have it, an unlock that comes later interrupts it (unlock). */
    if (g_atomic_int_get(&self->flushing)) {
      *flow = GST_FLOW_FLUSHING;
      return FALSE;
    }
    if (self->warned_generation != 0 &&
        self->warned_generation != *generation + 1) {
      /* Back after an outage this sink warned about. */
      self->warned_generation = 0;
      GST_ELEMENT_INFO(self, RESOURCE, WRITE,
                       ("Reconnected to the RDMA receiver at %s.",
                        gst_rdma_connection_get_address(self->conn)),
                       (NULL));
    }
    return TRUE;
  case READY_LOST:
    *flow = gst_rdma_sink_connection_lost(self, *generation);
    return FALSE;
  case READY_FAILED:
    *flow = GST_FLOW_ERROR;
    return FALSE;
  case READY_FLUSHING:
  default:
    *flow = GST_FLOW_FLUSHING;
    return FALSE;
  }
}

static void gst_rdma_sink_count(GstRdmaSink *self, guint64 *counter)
{
  GST_OBJECT_LOCK(self);
  (*counter)++;
  GST_OBJECT_UNLOCK(self);
}

/* A buffer whose memory is a send block of ours (kind BLOCK or KEPT):
 * submitted as it is.  *copy when it can't go now and is to be copied
 * instead. */
static int gst_rdma_sink_submit_block(GstRdmaSink *self, sbr_sender *sender,
                                      GstRdmaMemoryKind kind,
                                      sbr_send_block *block,
                                      const struct sbr_block_meta *meta,
                                      gsize size, gboolean *copy)
{
  int ret;

  *copy = FALSE;
  if (kind == GST_RDMA_MEMORY_BLOCK) {
    ret = sbr_sender_submit(sender, block, meta, size);
    if (ret == -EINVAL)
      sbr_sender_abandon(sender, block);
  } else {
    /* Rendered again (videorate, imagefreeze), the previous WRITE may
     * still read the block: wait for it, bounded, and copy if it doesn't
     * come (a stalled link) or another sink submitted it meanwhile (a
     * tee).  -ENOTCONN: the frame is counted, the block still ours. */
    ret = sbr_sender_wait_block(sender, block, KEPT_WAIT_MS);
    if (ret == 0)
      ret = sbr_sender_submit_keep(sender, block, meta, size);
    if (ret == -ETIMEDOUT || ret == -EBUSY || ret == -EINVAL) {
      GST_DEBUG_OBJECT(self, "kept block can't go again now (%s): copied",
                       g_strerror(-ret));
      *copy = TRUE;
      return ret;
    }
  }
  if (ret == 0)
    gst_rdma_sink_count(self, &self->zero_copy_buffers);
  return ret;
}

/* Any other buffer, or one of ours that can't go now: copied into send
 * blocks.  FALSE when it can't be mapped: dropped, counted. */
static gboolean gst_rdma_sink_send_copy(GstRdmaSink *self, sbr_sender *sender,
                                        GstBuffer *buf,
                                        const struct sbr_block_meta *meta,
                                        int *ret)
{
  GstMapInfo map;

  if (!gst_buffer_map(buf, &map, GST_MAP_READ)) {
    /* Foreign memory that fails to map (our own never does: a memory is
     * submitted only when nobody can render it again). */
    GST_WARNING_OBJECT(self, "buffer can't be mapped: dropped");
    gst_rdma_sink_count(self, &self->unmappable_drops);
    return FALSE;
  }
  *ret = gst_rdma_sink_send(self, sender, meta, map.data, map.size);
  gst_buffer_unmap(buf, &map);
  if (*ret == 0)
    gst_rdma_sink_count(self, &self->copied_buffers);
  return TRUE;
}

/* The allocator's acquire failed for this buffer (no send block came):
 * backpressure, or a refusal. */
static GstFlowReturn gst_rdma_sink_no_block(GstRdmaSink *self,
                                            sbr_sender *sender)
{
  struct sbr_device_stats ds;

  sbr_sender_get_device_stats(sender, self->device, &ds);
  if (ds.refused)
    return gst_rdma_sink_refused(self);
  GST_LOG_OBJECT(self, "no send block came for this buffer: dropped");
  return GST_FLOW_OK;
}

/* A frame did not go out, whatever the reason (backpressure, a wait
 * timeout, a paused or refused device, no send block, foreign memory that
 * failed to map, an outage, a flush, basesink dropping it late).  The
 * receiver can't see such a drop: the frame took no packet number.  So
 * the device's next frame sent carries DISCONT, which tells a decoder over
 * there that references may be missing (rdmasrc then waits for a key
 * frame on an encoded stream). */
static void gst_rdma_sink_gap(GstRdmaSink *self)
{
  self->gap_pending = TRUE;
  gst_rdma_sink_count(self, &self->gap_drops);
}

/* buf's bytes as they are: its send block, or a copy.  FALSE when they
 * didn't go and render_once returns *flow at once; else *ret is the
 * send's result. */
static gboolean gst_rdma_sink_send_buffer(GstRdmaSink *self, sbr_sender *sender,
                                          GstBuffer *buf,
                                          const struct sbr_block_meta *meta,
                                          gsize size, int *ret,
                                          GstFlowReturn *flow)
{
  sbr_send_block *block = NULL;
  GstRdmaMemoryKind kind = gst_rdma_buffer_claim(buf, self->conn, &block);
  gboolean copy = TRUE;

  *ret = 0;
  if (kind == GST_RDMA_MEMORY_DROPPED) {
    *flow = gst_rdma_sink_no_block(self, sender);
    return FALSE;
  }
  /* Else a send block of ours goes as it is, any other memory (HEAP,
   * FOREIGN) is copied. */
  if (kind == GST_RDMA_MEMORY_BLOCK || kind == GST_RDMA_MEMORY_KEPT)
    *ret = gst_rdma_sink_submit_block(self, sender, kind, block, meta, size,
                                      &copy);
  if (copy && !gst_rdma_sink_send_copy(self, sender, buf, meta, ret)) {
    *flow = GST_FLOW_OK;
    return FALSE;
  }
  return TRUE;
}

/* One attempt at sending buf; *sent when it went out.  GST_FLOW_FLUSHING
 * means unlock() interrupted a wait (for the connection or for a free send
 * block) before the frame went out: render decides what that means. */
static GstFlowReturn gst_rdma_sink_render_once(GstRdmaSink *self,
                                               GstBuffer *buf, gboolean *sent)
{
  struct sbr_block_meta meta;
  sbr_sender *sender = NULL;
  GstBuffer *laid_out = NULL;
  guint generation = 0;
  gsize size = gst_buffer_get_size(buf);
  gboolean caps_sent, went;
  GstFlowReturn flow;
  int ret = 0;

  *sent = FALSE;
  if (!gst_rdma_sink_ready(self, &sender, &generation, &flow))
    return flow;
  flow = gst_rdma_sink_send_caps(self, sender, generation, &caps_sent);
  if (flow != GST_FLOW_OK || !caps_sent)
    return flow; /* without its caps the receiver can't use the frame */

  flow = gst_rdma_sink_events_send(self, sender, generation, &went);
  if (flow != GST_FLOW_OK || !went)
    return flow;
  gst_rdma_sink_fill_meta(self, buf, &meta);
  flow = gst_rdma_sink_headers_resend(self, sender, generation, buf, &meta);
  if (flow != GST_FLOW_OK || self->caps_pending)
    return flow; /* the headers before the frame, or neither */
  flow = gst_rdma_sink_events_send_frame(self, sender, generation, buf, &went,
                                         &laid_out);
  if (flow != GST_FLOW_OK || !went)
    return flow; /* its extras before the frame, or neither */
  if (laid_out) {
    /* Its padded layout couldn't go: the caps' one, copied. */
    gboolean mapped =
        gst_rdma_sink_send_copy(self, sender, laid_out, &meta, &ret);

    size = gst_buffer_get_size(laid_out);
    gst_buffer_unref(laid_out);
    if (!mapped)
      return GST_FLOW_OK;
  } else if (!gst_rdma_sink_send_buffer(self, sender, buf, &meta, size, &ret,
                                        &flow))
    return flow;

  if (ret == 0) {
    *sent = TRUE;
    self->discont_pending = self->extras_unused = FALSE;
    if (self->gap_pending) {
      self->gap_pending = FALSE;
      gst_rdma_sink_count(self, &self->gap_disconts);
    }
  }
  return gst_rdma_sink_handle_result(self, ret, size, sender, generation);
}

/* basesink's contract for a render that blocks: unlock() interrupts it for
 * a flush, a state change to READY and also PLAYING->PAUSED.  Only the first
 * two end the buffer; on a pause gst_base_sink_wait_preroll() waits (the
 * sink counts as prerolled meanwhile) and returns OK on PLAYING, and the
 * same buffer is tried again.  Returning FLUSHING there instead would stop
 * upstream's streaming task for good: a paused sender that was waiting
 * for a free block would never resume. */
static GstFlowReturn gst_rdma_sink_render(GstBaseSink *bsink, GstBuffer *buf)
{
  GstRdmaSink *self = GST_RDMA_SINK(bsink);
  GstFlowReturn flow;
  gboolean sent;

  self->prepared = FALSE;
  gst_rdma_sink_headers_note(self, buf);
  for (;;) {
    flow = gst_rdma_sink_render_once(self, buf, &sent);
    if (flow != GST_FLOW_FLUSHING)
      break;
    GST_DEBUG_OBJECT(self, "unlocked while sending: waiting for preroll");
    flow = gst_base_sink_wait_preroll(bsink);
    if (flow != GST_FLOW_OK)
      break;
    GST_DEBUG_OBJECT(self, "PLAYING again: sending the same buffer");
  }
  if (!sent)
    gst_rdma_sink_gap(self);
  return flow;
}

/* basesink calls prepare before it waits for the buffer's time, and drops
 * a buffer that is too late (max-lateness, QoS) without calling render:
 * another buffer prepared while one was never rendered is one of those
 * drops.  The preroll buffer is prepared twice (for preroll, then for
 * render): the same buffer with the same PTS is no drop. */
static GstFlowReturn gst_rdma_sink_prepare(GstBaseSink *bsink, GstBuffer *buf)
{
  GstRdmaSink *self = GST_RDMA_SINK(bsink);

  if (self->prepared && (buf != self->prepared_buf ||
                         GST_BUFFER_PTS(buf) != self->prepared_pts)) {
    GST_LOG_OBJECT(self, "the previous buffer was dropped late");
    gst_rdma_sink_gap(self);
  }
  self->prepared = TRUE;
  self->prepared_buf = buf; /* compared only, never dereferenced */
  self->prepared_pts = GST_BUFFER_PTS(buf);
  return GST_FLOW_OK;
}
