/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmakeyunit.h - rdmasrc asking a device's sender for a key unit,
 * one-sidedly (docs/protocol.md, "Key units"): for an upstream
 * GstForceKeyUnit that reached the device's pad, and on its own after a
 * gap in an encoded stream (#GstRdmaSrc:request-keyframe).
 *
 * Threads: requests come from any thread (a pad's event handler, the
 * receive thread); the receive thread tells of the frames that answer
 * them.  The state is the device's key_units, under the object lock, but
 * for asked_us, which the receive thread reads atomically at every frame.
 */
#ifndef __GST_RDMA_KEY_UNIT_H__
#define __GST_RDMA_KEY_UNIT_H__

#include <gst/gst.h>
#include <sbr.h>

#include "gstrdmasrc.h"
#include "gstrdmasrcdevice.h"

G_BEGIN_DECLS

/* Why rdmasrc asks. */
typedef enum {
  GST_RDMA_KEY_UNIT_UPSTREAM, /* a GstForceKeyUnit from downstream */
  GST_RDMA_KEY_UNIT_GAP,      /* frames were lost: references are gone */
} GstRdmaKeyUnitReason;

/* A request outstanding this long without a key frame may be made again
 * (the sender may predate the feature, or its encoder may ignore it). */
#define GST_RDMA_KEY_UNIT_TIMEOUT (1 * GST_SECOND)

/* Asks device's sender (the lane that owns it, else every lane) for a key
 * unit, unless one is outstanding (asked, no key frame of the device
 * since, for less than GST_RDMA_KEY_UNIT_TIMEOUT): one request at a time
 * per device, whatever asks.  A GAP request is made only when
 * #GstRdmaSrc:request-keyframe is on.  TRUE when a request went out or
 * one is outstanding; FALSE when the device has no pad or no lane can
 * take it (the sliding-window mechanism, a receiver not started, senders
 * older than the feature).  Any thread. */
gboolean gst_rdma_src_request_key_unit(GstRdmaSrc *self, guint device,
                                       GstRdmaKeyUnitReason reason,
                                       gboolean all_headers);

/* The device pad's event handler: an upstream force-key-unit event (any
 * other event: FALSE, not taken).  Takes the event when it returns TRUE. */
gboolean gst_rdma_src_key_unit_event(GstRdmaSrc *self, guint device,
                                     GstEvent *event);

/* Receive thread, for each frame of device queued on its pad, as stamped
 * into buf: a key frame answers the outstanding request; a DISCONT delta
 * frame of an encoded stream (its references lost: a gap, a late join)
 * asks for one (reason GAP). */
void gst_rdma_src_key_unit_frame(GstRdmaSrc *self, guint device,
                                 GstBuffer *buf);

/* The device's key-unit fields of its stats structure (object lock):
 * key-units-requested (made), -upstream and -after-gaps (why), -merged
 * (asked while one was outstanding, not made), -answered (key frames that
 * came while one was), key-unit-round-trip (ns, request to that key
 * frame, the newest; 0 none yet). */
void gst_rdma_src_key_unit_add_stats(const GstRdmaSrcDevice *dev,
                                     GstStructure *s);

G_END_DECLS

#endif /* __GST_RDMA_KEY_UNIT_H__ */
