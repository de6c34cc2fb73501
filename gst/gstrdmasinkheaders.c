/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasinkheaders.c - rdmasink's stream headers, sent again on every
 * new lane (docs/protocol.md, flag HEADER).
 *
 * A decoder needs a stream's headers (H.264 SPS/PPS of a byte-stream sent
 * once at its start, Vorbis and Opus setup packets) before any frame.  A
 * receiver that starts, restarts or takes the stream over after they went
 * by would never decode it.  The caps cross again on every new lane; the
 * headers now do too: the sink keeps the last run of HEADER-flagged
 * buffers (a HEADER buffer after a frame starts a new run: the encoder
 * sent new headers) and, after the caps on a new lane, sends them before
 * the next frame, stamped with its time so the receiver's timeline goes
 * on from it.  Not when that next frame is itself a header: the stream
 * brings its own (h264parse config-interval=-1 puts SPS/PPS in every key
 * frame).  New caps start a new stream, whose headers are its own.
 *
 * Bounded: MAX_HEADERS buffers of MAX_HEADER_BYTES in all; a run longer
 * keeps its first ones (the setup packets come first), warned once.
 * Streaming thread only, like caps_str.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstrdmasinkpriv.h"

#define GST_CAT_DEFAULT gst_rdma_sink_debug

#define MAX_HEADERS 16
#define MAX_HEADER_BYTES (4u << 20)

void gst_rdma_sink_headers_clear(GstRdmaSink *self)
{
  if (self->headers)
    g_ptr_array_set_size(self->headers, 0);
  self->headers_bytes = 0;
  self->headers_open = FALSE;
  self->headers_due = FALSE;
}

void gst_rdma_sink_headers_free(GstRdmaSink *self)
{
  g_clear_pointer(&self->headers, g_ptr_array_unref);
}

void gst_rdma_sink_headers_note(GstRdmaSink *self, GstBuffer *buf)
{
  gsize size;

  if (!GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_HEADER)) {
    self->headers_open = FALSE;
    return;
  }
  if (!self->headers)
    self->headers =
        g_ptr_array_new_with_free_func((GDestroyNotify)gst_mini_object_unref);
  if (!self->headers_open) {
    g_ptr_array_set_size(self->headers, 0);
    self->headers_bytes = 0;
    self->headers_open = TRUE;
  }
  size = gst_buffer_get_size(buf);
  if (self->headers->len >= MAX_HEADERS ||
      self->headers_bytes + size > MAX_HEADER_BYTES) {
    if (!self->headers_warned) {
      GST_WARNING_OBJECT(self,
                         "more than %u stream headers or %u bytes of them: "
                         "a new receiver gets the first %u (%" G_GSIZE_FORMAT
                         " bytes)",
                         MAX_HEADERS, MAX_HEADER_BYTES, self->headers->len,
                         self->headers_bytes);
      self->headers_warned = TRUE;
    }
    return;
  }
  g_ptr_array_add(self->headers, gst_buffer_ref(buf));
  self->headers_bytes += size;
}

GstFlowReturn gst_rdma_sink_headers_resend(GstRdmaSink *self,
                                           sbr_sender *sender, guint generation,
                                           GstBuffer *next,
                                           struct sbr_block_meta *next_meta)
{
  struct sbr_block_meta meta;
  guint n;

  if (!self->headers_due)
    return GST_FLOW_OK;
  self->headers_due = FALSE;
  n = self->headers ? self->headers->len : 0;
  if (n == 0 || GST_BUFFER_FLAG_IS_SET(next, GST_BUFFER_FLAG_HEADER))
    return GST_FLOW_OK;
  for (guint i = 0; i < n; i++) {
    GstBuffer *h = g_ptr_array_index(self->headers, i);
    GstMapInfo map;
    int ret;

    meta = *next_meta;
    meta.flags &= (guint8) ~(SBR_FLAG_DELTA | SBR_FLAG_DISCONT);
    meta.flags |= SBR_FLAG_HEADER;
    if (i == 0)
      meta.flags |= SBR_FLAG_DISCONT; /* a new stream over there */
    meta.duration = SBR_TIME_NONE;
    if (!gst_buffer_map(h, &map, GST_MAP_READ))
      continue; /* it mapped when it went the first time: not expected */
    ret = gst_rdma_sink_send(self, sender, &meta, map.data, map.size);
    gst_buffer_unmap(h, &map);
    if (ret != 0) {
      /* All of them before the next frame, or the caps and all of them
       * again: a receiver needs the whole set. */
      self->caps_pending = TRUE;
      return gst_rdma_sink_handle_result(self, ret, 0, sender, generation);
    }
  }
  /* The first header said where the new stream starts, and that frames
   * were dropped before it (a reconnect's, counted as the frame's would
   * be): the frame after them is DISCONT only if upstream says so.
   * rdmasrc waits for a key frame past the headers either way. */
  if (!GST_BUFFER_FLAG_IS_SET(next, GST_BUFFER_FLAG_DISCONT)) {
    next_meta->flags &= (guint8)~SBR_FLAG_DISCONT;
    self->discont_pending = FALSE;
    if (self->gap_pending) {
      self->gap_pending = FALSE;
      GST_OBJECT_LOCK(self);
      self->gap_disconts++;
      GST_OBJECT_UNLOCK(self);
    }
  }
  GST_DEBUG_OBJECT(self, "sent the stream's %u header(s) again", n);
  GST_OBJECT_LOCK(self);
  self->headers_resent += n;
  GST_OBJECT_UNLOCK(self);
  return GST_FLOW_OK;
}
