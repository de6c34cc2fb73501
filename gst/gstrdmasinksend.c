/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasinksend.c - rdmasink's sends on the streaming thread: waiting for
 * the shared connection, what a fill call's result means for the stream
 * (an outage with or without reconnect, a device the receiver refuses and
 * later takes, backpressure, errors) and the CAPS block each new
 * connection gets first.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <string.h>

#include "gstrdmasinkpriv.h"

#define GST_CAT_DEFAULT gst_rdma_sink_debug

/* Waits for conn's first connect if it is still in progress.  conn is
 * self->conn on the streaming thread (stop comes after it), or a reference
 * the caller holds elsewhere. */
ReadyResult gst_rdma_sink_wait_ready(GstRdmaSink *self, GstRdmaConnection *conn,
                                     sbr_sender **sender, guint *generation)
{
  gchar *error = NULL;
  GstRdmaConnectionState state;

  state = gst_rdma_connection_wait(conn, &self->flushing, generation, &error);
  switch (state) {
  case GST_RDMA_CONNECTION_CONNECTED:
    *sender = gst_rdma_connection_get_sender(conn);
    return READY_SEND;
  case GST_RDMA_CONNECTION_RECONNECTING:
    return READY_LOST;
  case GST_RDMA_CONNECTION_FAILED:
    gst_rdma_sink_post_connect_error(self, conn, error);
    g_free(error);
    return READY_FAILED;
  case GST_RDMA_CONNECTION_CONNECTING:
  default:
    return READY_FLUSHING;
  }
}

/* The connection is down: with reconnect, make sure it is being
 * re-established, warn once per outage, drop the frame; else fail. */
GstFlowReturn gst_rdma_sink_connection_lost(GstRdmaSink *self, guint generation)
{
  const gchar *address = gst_rdma_connection_get_address(self->conn);

  if (!self->reconnect_enabled) {
    GST_ELEMENT_ERROR(
        self, RESOURCE, WRITE,
        ("Lost the connection to the RDMA receiver at %s.", address),
        ("%s (%s); reconnect=false", address,
         gst_rdma_connection_get_description(self->conn)));
    return GST_FLOW_ERROR;
  }
  gst_rdma_connection_lost(self->conn);
  GST_OBJECT_LOCK(self);
  self->reconnect_drops++;
  GST_OBJECT_UNLOCK(self);
  if (self->warned_generation != generation + 1) {
    self->warned_generation = generation + 1;
    GST_ELEMENT_WARNING(
        self, RESOURCE, WRITE,
        ("Lost the connection to the RDMA receiver at %s, reconnecting.",
         address),
        ("%s (%s): frames of device %u are dropped and counted "
         "(reconnect-drops) until the receiver is back",
         address, gst_rdma_connection_get_description(self->conn),
         self->device));
  }
  return GST_FLOW_OK;
}

/* The receiver gives this device to another sender (-EADDRINUSE): warn
 * once per refusal, drop and count the buffer, carry on.  A
 * warning, not an error: the pipeline is a standby that takes over when
 * the other sender leaves. */
GstFlowReturn gst_rdma_sink_refused(GstRdmaSink *self)
{
  const gchar *address = gst_rdma_connection_get_address(self->conn);

  GST_OBJECT_LOCK(self);
  self->refused_drops++;
  GST_OBJECT_UNLOCK(self);
  if (!self->refused) {
    self->refused = TRUE;
    /* When it takes the device over, its stream starts with caps. */
    self->caps_pending = TRUE;
    GST_ELEMENT_WARNING_WITH_DETAILS(
        self, RESOURCE, BUSY,
        ("Device %u is already sent by another sender to %s; this sink's "
         "frames are dropped until it leaves.",
         self->device, address),
        ("the receiver refuses device %u from this connection (%s): frames "
         "are dropped and counted (refused-drops) and sent again once the "
         "receiver gives the device to this sender",
         self->device, gst_rdma_connection_get_description(self->conn)),
        ("device-id", G_TYPE_UINT, (guint)self->device, "address",
         G_TYPE_STRING, address, NULL));
  }
  GST_LOG_OBJECT(self, "device %u refused by the receiver: frame dropped",
                 self->device);
  return GST_FLOW_OK;
}

/* Something went out: if the device was refused, this sink has it now. */
static void gst_rdma_sink_accepted(GstRdmaSink *self)
{
  if (!self->refused)
    return;
  self->refused = FALSE;
  /* gst-launch prints an info message's debug string only: say it there
   * too. */
  GST_ELEMENT_INFO_WITH_DETAILS(
      self, RESOURCE, WRITE,
      ("The RDMA receiver at %s takes device %u from this sink now.",
       gst_rdma_connection_get_address(self->conn), self->device),
      ("device %u: the other sender left, this sink sends to %s again",
       self->device, gst_rdma_connection_get_address(self->conn)),
      ("device-id", G_TYPE_UINT, (guint)self->device, "address", G_TYPE_STRING,
       gst_rdma_connection_get_address(self->conn), NULL));
}

/* sbr_sender_send that retries when another sink's unlock interrupted it
 * (the wakeup reaches every waiter on the shared sender). */
int gst_rdma_sink_send(GstRdmaSink *self, sbr_sender *sender,
                       const struct sbr_block_meta *meta, const void *data,
                       gsize size)
{
  int ret;

  do {
    ret = sbr_sender_send(sender, meta, data, size);
  } while (ret == -EINTR && !g_atomic_int_get(&self->flushing));
  return ret;
}

/* What a fill call's result means for the stream. */
GstFlowReturn gst_rdma_sink_handle_result(GstRdmaSink *self, int ret,
                                          gsize size, sbr_sender *sender,
                                          guint generation)
{
  switch (ret) {
  case 0:
    gst_rdma_sink_accepted(self);
    return GST_FLOW_OK;
  case -EADDRINUSE:
    return gst_rdma_sink_refused(self);
  case -EAGAIN:
    /* Backpressure: the library counted the drop. */
    GST_LOG_OBJECT(self, "no send block free: frame dropped");
    return GST_FLOW_OK;
  case -EINTR:
    return GST_FLOW_FLUSHING; /* unlock() while waiting for a block */
  case -ENOTCONN:
    return gst_rdma_sink_connection_lost(self, generation);
  case -EMSGSIZE:
    GST_ELEMENT_ERROR(self, RESOURCE, WRITE,
                      ("A frame of %" G_GSIZE_FORMAT
                       " bytes does not fit the send blocks.",
                       size),
                      ("%" G_GSIZE_FORMAT
                       " payload bytes per block; raise send-blocks on the "
                       "sink or block-size on the receiver",
                       sbr_sender_block_payload_size(sender)));
    return GST_FLOW_ERROR;
  default:
    GST_ELEMENT_ERROR(self, RESOURCE, WRITE,
                      ("Could not send to the RDMA receiver at %s.",
                       gst_rdma_connection_get_address(self->conn)),
                      ("%s", g_strerror(-ret)));
    return GST_FLOW_ERROR;
  }
}

/* Sends the CAPS block if this connection hasn't had it (first buffer,
 * renegotiation, reconnect: a new receiver knows nothing). */
GstFlowReturn gst_rdma_sink_send_caps(GstRdmaSink *self, sbr_sender *sender,
                                      guint generation, gboolean *sent)
{
  struct sbr_block_meta meta;
  GstFlowReturn flow;
  gboolean went;
  int ret;

  *sent = TRUE;
  if (!self->caps_str ||
      (!self->caps_pending && self->caps_generation == generation))
    return GST_FLOW_OK;
  /* The receiver opens the stream with the upstream's stream-start. */
  flow =
      gst_rdma_sink_events_send_stream_start(self, sender, generation, &went);
  if (flow != GST_FLOW_OK || !went) {
    *sent = FALSE;
    return flow;
  }
  sbr_block_meta_init(&meta, self->device);
  meta.kind = SBR_KIND_CAPS;
  /* The receiver's default for a stream nobody waits for in real time is
   * backpressure rather than drop-oldest: it learns which this is here,
   * with the caps, so it costs no round trip of its own. */
  if (!self->upstream_live)
    meta.flags |= SBR_FLAG_NOT_LIVE;
  /* A CAPS block's duration is the sender's upstream latency
   * (docs/protocol.md, "Block format"). */
  if (GST_CLOCK_TIME_IS_VALID(self->upstream_latency))
    meta.duration = self->upstream_latency;
  ret = gst_rdma_sink_send(self, sender, &meta, self->caps_str,
                           strlen(self->caps_str));
  if (ret == 0) {
    GST_DEBUG_OBJECT(self, "sent caps %s", self->caps_str);
    gst_rdma_sink_accepted(self);
    self->caps_pending = FALSE;
    self->caps_generation = generation;
    /* A new receiver (or new caps) starts a new stream over there,
     * which needs the stream's headers again (gstrdmasinkheaders.c). */
    self->discont_pending = TRUE;
    self->headers_due = TRUE;
    self->events_pending = gst_rdma_sink_events_any(self);
    return GST_FLOW_OK;
  }
  *sent = FALSE;
  if (ret == -EMSGSIZE) {
    GST_ELEMENT_ERROR(self, STREAM, FORMAT, ("The caps don't fit one block."),
                      ("%" G_GSIZE_FORMAT " bytes of caps, %" G_GSIZE_FORMAT
                       " payload bytes per block",
                       strlen(self->caps_str),
                       sbr_sender_block_payload_size(sender)));
    return GST_FLOW_ERROR;
  }
  return gst_rdma_sink_handle_result(self, ret, 0, sender, generation);
}
