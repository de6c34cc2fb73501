/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasrcframe.h - a received frame as a GstBuffer: zero-copy over the
 * receive blocks (held while the buffer lives) or copied out of the lane,
 * and its timestamps mapped from the sender's running time onto ours.
 * rdmasrc's receive thread calls these; the memories' free callbacks run
 * on any thread, possibly after the element is gone.
 */
#ifndef __GST_RDMA_SRC_FRAME_H__
#define __GST_RDMA_SRC_FRAME_H__

#include <gst/gst.h>
#include <sbr.h>

#include "gstrdmasrcpad.h"

G_BEGIN_DECLS

/* Receive blocks out (queued or downstream), in all and per lane: max-held
 * bounds each lane's, as every sender has a lane of its own (one holding
 * its blocks mustn't turn another's frames into copies).  Shared by the
 * members of a receiver and by the memories' free callbacks (a
 * g_atomic_rc_box: new/unref below). */
typedef struct {
  gint count;        /* atomic: all lanes */
  GHashTable *lanes; /* lane id -> its count (a g_atomic_rc_box of gint,
                        referenced by each memory); the receive thread's */
} GstRdmaHeldCounter;

GstRdmaHeldCounter *gst_rdma_held_counter_new(void);
void gst_rdma_held_counter_unref(GstRdmaHeldCounter *held);
/* Receive thread: blocks of lane out now. */
guint gst_rdma_held_counter_lane(GstRdmaHeldCounter *held, guint32 lane);

/* Makes the buffer of a frame and takes the frame.  Unless copy (or the
 * library already copied it), one read-only memory per receive block,
 * each block marked held (status 2) and counted in held and of_device
 * until its memory is freed.  *lane_blocks: blocks the buffer keeps. */
GstBuffer *gst_rdma_frame_to_buffer(struct sbr_frame *frame, gboolean copy,
                                    GstRdmaHeldCounter *held,
                                    GstRdmaBlockCount *of_device,
                                    guint *lane_blocks);

/* One device's mapping of sender times onto this pipeline's running time
 * (the first frame, and the first after a reconnect, a discontinuity
 * back in time, a pause of the sender's pipeline or of ours, is stamped
 * with our running time at its arrival; later ones keep their distance
 * from it).  have_base = FALSE makes the next frame a new base. */
typedef struct {
  gboolean have_base;
  guint32 lane_id;
  guint16 epoch;
  guint64 base_in;       /* sender running time of the base frame */
  GstClockTime base_out; /* our running time at its arrival */
  guint64 last_in;       /* last sender time seen (DTS, else PTS) */
  /* Capture time minus PTS, as long as it stays put; a sender whose
   * pipeline paused shows as a jump of it (confirmed by the next frame, so
   * one frame with a capture time from another clock changes nothing). */
  gboolean have_offset;
  gint64 offset;
  gboolean jump_pending;
  gint64 jump_offset;
} GstRdmaTimeMap;

/* The sender's capture clock ran this much further than its running time
 * (over two frames in a row): its pipeline was paused (or stalled), so its
 * running times no longer map onto ours by their distance. */
#define GST_RDMA_SENDER_PAUSE_THRESHOLD (500 * GST_MSECOND)

/* Stamps buf (PTS, DTS, duration, DISCONT/DELTA_UNIT, the capture time as
 * a "timestamp/x-unix" reference timestamp meta) from what the frame's
 * first block carries; now is our running time. */
void gst_rdma_frame_stamp(GstRdmaTimeMap *map,
                          const struct sbr_block_info *info, GstClockTime now,
                          GstBuffer *buf);

G_END_DECLS

#endif /* __GST_RDMA_SRC_FRAME_H__ */
