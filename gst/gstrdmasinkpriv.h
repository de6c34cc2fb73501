/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasinkpriv.h - rdmasink's instance, shared by the element
 * (gstrdmasink.c: properties, start/stop, caps, allocation, render) and
 * what a send's result means for the stream (gstrdmasinksend.c: waiting
 * for the connection, an outage, a refused device, the CAPS block).
 */
#ifndef __GST_RDMA_SINK_PRIV_H__
#define __GST_RDMA_SINK_PRIV_H__

#include <gst/gst.h>
#include <gst/video/video.h>
#include <sbr.h>

#include "gstrdmacommon.h"
#include "gstrdmaconnection.h"
#include "gstrdmaenums.h"
#include "gstrdmasink.h"

G_BEGIN_DECLS

GST_DEBUG_CATEGORY_EXTERN(gst_rdma_sink_debug);

/* The stream events kept and sent again on every new lane, in the order
 * they go (gstrdmasinkevents.c). */
enum {
  GST_RDMA_SINK_EVENT_TAGS_GLOBAL,
  GST_RDMA_SINK_EVENT_TAGS_STREAM,
  GST_RDMA_SINK_EVENT_SEGMENT,
  GST_RDMA_SINK_N_EVENTS
};

struct _GstRdmaSink {
  GstBaseSink parent;

  /* Properties (object lock). */
  gchar *host;
  gchar *uri_error; /* a uri that could not be set: start fails with it */
  guint port;
  guint device_id;
  GstRdmaTransport transport;
  GstRdmaMechanism mechanism;
  GstRdmaBackpressure backpressure;
  gint wait_timeout;
  gboolean reconnect;
  gint connect_timeout;
  guint send_blocks;
  guint block_size;
  guint read_ahead;
  gint tos;
  guint ack_timeout;
  guint retry_count;
  gint comp_vector;
  guint stats_interval;
  guint max_meta_size; /* bytes of a frame's extras on the wire */

  /* From start to stop; conn and allocator set/cleared under the object
   * lock because the stats thread reads them. */
  GstRdmaConnection *conn;
  GstAllocator *allocator;
  GstRdmaStatsTicker *ticker;
  guint8 device;              /* device_id as started */
  gboolean reconnect_enabled; /* reconnect as started */
  gint flushing;              /* atomic: unlock() in progress */
  gint error_posted;          /* atomic: the connect error went out once */

  /* Streaming thread only. */
  gchar *caps_str;               /* negotiated caps, for the CAPS block */
  gboolean caps_pending;         /* caps_str not sent yet */
  gboolean upstream_live;        /* with caps_str: upstream said it is live */
  GstClockTime upstream_latency; /* with caps_str: upstream's minimum */
  guint caps_generation;         /* connection generation they were sent on */
  gboolean discont_pending;      /* next frame starts a new stream */
  gboolean gap_pending;          /* a frame was dropped: the next one sent
                                    says so (DISCONT), whatever dropped it */
  gboolean prepared;             /* a buffer went through prepare and not yet
                                    render: basesink dropping it late leaves
                                    this set for the next prepare */
  guint warned_generation;       /* outage already warned about (+1) */
  gboolean refused;              /* the receiver refuses this device: warned */
  /* The stream's last run of HEADER buffers (gstrdmasinkheaders.c). */
  GPtrArray *headers;
  gsize headers_bytes;
  gboolean headers_open; /* the last buffer was a header: a run goes on */
  gboolean headers_due;  /* caps went on a new lane: headers next */
  gboolean headers_warned;
  /* The stream's events as they cross (gstrdmasinkevents.c): the newest
   * of each, whether they go before the next frame, the stream-start that
   * goes before every CAPS block, and whether a frame's extras went for a
   * frame that then didn't. */
  GstStructure *stream_events[GST_RDMA_SINK_N_EVENTS];
  gboolean events_pending;
  GstStructure *stream_start;
  gboolean extras_unused;
  gboolean events_warned;
  GstVideoInfo video_info; /* with caps_str, raw video: its layout ... */
  gboolean has_video_info; /* ... when it is */
  /* The buffer prepared (compared, not referenced) and its PTS. */
  const GstBuffer *prepared_buf;
  GstClockTime prepared_pts;

  /* Counters (object lock). */
  guint64 zero_copy_buffers;
  guint64 copied_buffers;
  guint64 reconnect_drops;
  guint64 unmappable_drops;
  guint64 refused_drops; /* buffers dropped: the device is refused */
  guint64 gap_drops;     /* frames dropped for any reason */
  guint64 gap_disconts;  /* frames sent DISCONT because of such drops */
  guint64 key_units_sent_upstream; /* GstForceKeyUnit pushed for the
                                      receiver (gstrdmasinkkeyunit.c) */
  guint64 headers_resent;          /* header buffers sent again on new
                                      lanes (gstrdmasinkheaders.c) */
  guint64 events_sent;             /* EVENT blocks (gstrdmasinkevents.c) */
  guint64 metas_not_carried;       /* metas no serializer writes out */

  /* Atomic: a key-unit request is on its way upstream, and whether one
   * of those it answers asked for all headers. */
  gint key_unit_pending;
  gint key_unit_headers;
};

typedef enum {
  READY_SEND, /* connected: *sender is usable */
  READY_LOST, /* reconnecting: drop the frame */
  READY_FLUSHING,
  READY_FAILED,
} ReadyResult;

/* gstrdmasink.c: the "serialize-meta" signal's id. */
extern guint gst_rdma_sink_serialize_meta_signal;

/* gstrdmasink.c: the connect error, posted once (any thread). */
void gst_rdma_sink_post_connect_error(GstRdmaSink *self,
                                      GstRdmaConnection *conn,
                                      const gchar *error);

/* gstrdmasinkkeyunit.c: the receiver asked for a key unit of our device
 * (GstRdmaConnectionKeyUnitFunc, libsbr's sender thread): an upstream
 * GstForceKeyUnit goes from GStreamer's thread pool, at once. */
void gst_rdma_sink_key_unit_requested(GstElement *element,
                                      gboolean all_headers);

/* gstrdmasinkheaders.c, streaming thread: note every buffer that comes
 * to render (HEADER ones are kept), clear on new caps and at start, and
 * after the caps went on a new lane (headers_due), resend the kept ones
 * before next, stamped from next_meta (whose DISCONT the first header
 * takes over). */
void gst_rdma_sink_headers_note(GstRdmaSink *self, GstBuffer *buf);
void gst_rdma_sink_headers_clear(GstRdmaSink *self);
void gst_rdma_sink_headers_free(GstRdmaSink *self);
GstFlowReturn gst_rdma_sink_headers_resend(GstRdmaSink *self,
                                           sbr_sender *sender, guint generation,
                                           GstBuffer *next,
                                           struct sbr_block_meta *next_meta);

/* gstrdmasinkevents.c, streaming thread: keep a TAG event, a
 * stream-start, a segment's rates (they go before the next frame); send
 * what is pending (before a frame; set again after the caps on a new
 * lane: events_any), the stream-start (before a CAPS block), a frame's
 * extras (right before it) and a GAP (at once). */
void gst_rdma_sink_events_tag(GstRdmaSink *self, GstEvent *event);
void gst_rdma_sink_events_stream_start(GstRdmaSink *self, GstEvent *event);
void gst_rdma_sink_events_segment(GstRdmaSink *self, const GstSegment *segment);
void gst_rdma_sink_events_free(GstRdmaSink *self);
gboolean gst_rdma_sink_events_any(GstRdmaSink *self);
/* The send functions: *went when the block went (or never will, said
 * once); when it didn't, what it comes before doesn't go either and the
 * flow is what render returns.  send_frame's *laid_out: the frame in the
 * caps' layout, to send instead, when its padded layout can't cross. */
GstFlowReturn gst_rdma_sink_events_send(GstRdmaSink *self, sbr_sender *sender,
                                        guint generation, gboolean *went);
GstFlowReturn gst_rdma_sink_events_send_stream_start(GstRdmaSink *self,
                                                     sbr_sender *sender,
                                                     guint generation,
                                                     gboolean *went);
GstFlowReturn gst_rdma_sink_events_send_frame(GstRdmaSink *self,
                                              sbr_sender *sender,
                                              guint generation, GstBuffer *buf,
                                              gboolean *went,
                                              GstBuffer **laid_out);
void gst_rdma_sink_events_gap(GstRdmaSink *self, GstEvent *event,
                              sbr_sender *sender);

/* gstrdmasinksend.c, streaming thread. */
ReadyResult gst_rdma_sink_wait_ready(GstRdmaSink *self, GstRdmaConnection *conn,
                                     sbr_sender **sender, guint *generation);
GstFlowReturn gst_rdma_sink_connection_lost(GstRdmaSink *self,
                                            guint generation);
GstFlowReturn gst_rdma_sink_refused(GstRdmaSink *self);
int gst_rdma_sink_send(GstRdmaSink *self, sbr_sender *sender,
                       const struct sbr_block_meta *meta, const void *data,
                       gsize size);
GstFlowReturn gst_rdma_sink_handle_result(GstRdmaSink *self, int ret,
                                          gsize size, sbr_sender *sender,
                                          guint generation);
GstFlowReturn gst_rdma_sink_send_caps(GstRdmaSink *self, sbr_sender *sender,
                                      guint generation, gboolean *sent);

G_END_DECLS

#endif /* __GST_RDMA_SINK_PRIV_H__ */
