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
#include <sbr.h>

#include "gstrdmacommon.h"
#include "gstrdmaconnection.h"
#include "gstrdmaenums.h"
#include "gstrdmasink.h"

G_BEGIN_DECLS

GST_DEBUG_CATEGORY_EXTERN(gst_rdma_sink_debug);

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
  gchar *caps_str;          /* negotiated caps, for the CAPS block */
  gboolean caps_pending;    /* caps_str not sent yet */
  gboolean upstream_live;   /* with caps_str: upstream said it is live */
  guint caps_generation;    /* connection generation they were sent on */
  gboolean discont_pending; /* next frame starts a new stream */
  guint warned_generation;  /* outage already warned about (+1) */
  gboolean refused;         /* the receiver refuses this device: warned */

  /* Counters (object lock). */
  guint64 zero_copy_buffers;
  guint64 copied_buffers;
  guint64 reconnect_drops;
  guint64 unmappable_drops;
  guint64 refused_drops; /* buffers dropped: the device is refused */
};

typedef enum {
  READY_SEND, /* connected: *sender is usable */
  READY_LOST, /* reconnecting: drop the frame */
  READY_FLUSHING,
  READY_FAILED,
} ReadyResult;

/* gstrdmasink.c: the connect error, posted once (any thread). */
void gst_rdma_sink_post_connect_error(GstRdmaSink *self,
                                      GstRdmaConnection *conn,
                                      const gchar *error);

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
