/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasrcframe.h - a received frame as a GstBuffer: zero-copy over the
 * receive blocks (held while the buffer lives) or copied out of the lane,
 * and its timestamps mapped onto our running time in the element's
 * timestamp mode.
 * rdmasrc's receive thread calls these; the memories' free callbacks run
 * on any thread, possibly after the element is gone.
 */
#ifndef __GST_RDMA_SRC_FRAME_H__
#define __GST_RDMA_SRC_FRAME_H__

#include <gst/gst.h>
#include <sbr.h>

#include "gstrdmaenums.h"
#include "gstrdmaskew.h"
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
 * library already copied it), one read-only memory per block (a frame
 * larger than a lane block is one spanning block from a sender of this
 * library: one memory), each block marked held (status 2) and its lane
 * blocks counted in held and of_device until its memory is freed.
 * *lane_blocks: the lane's blocks the buffer keeps. */
GstBuffer *gst_rdma_frame_to_buffer(struct sbr_frame *frame, gboolean copy,
                                    GstRdmaHeldCounter *held,
                                    GstRdmaBlockCount *of_device,
                                    guint *lane_blocks);

/* The lane's blocks a frame's blocks hold (a spanning block holds k). */
guint gst_rdma_frame_lane_blocks(const struct sbr_frame *frame);
/* A copy of the frame's payload (the frame stays the caller's). */
GBytes *gst_rdma_frame_copy_bytes(const struct sbr_frame *frame);

/* One device's mapping of sender times onto this pipeline's running time
 * (rdmasrc's SECTION, "Timestamps"; gst_rdma_frame_stamp).  One estimator
 * per device, not per lane: rdmasinks of several sender pipelines, each
 * with its own clock and base time, may share one lane.  The receive
 * thread's; reset = TRUE (or a new lane or epoch, a DISCONT back in time)
 * starts it again at the next frame, which is DISCONT. */
typedef struct {
  gboolean reset;
  GstRdmaTimestampMode mode;
  gboolean started; /* a frame was stamped since the last start */
  guint32 lane_id;
  guint16 epoch;
  guint64 last_in;         /* last sender time seen (DTS, else PTS) */
  GstClockTime last_out;   /* last PTS out: capture and arrival never go back */
  guint64 capture_invalid; /* capture times no live frame has (capture) */
  /* Observed in every mode, so the stats say how the sender's clock runs
   * whatever the mode; its output stamps only in skew mode. */
  GstRdmaSkew skew;
} GstRdmaTimeMap;

/* What the stats show of a mapping: copied under the element's object
 * lock by the receive thread after each frame, read under it. */
typedef struct {
  GstRdmaTimestampMode mode;
  gdouble rate_ppm;
  gint64 clock_offset;
  gboolean has_rate;
  guint64 capture_invalid;
  GstRdmaSkewStats skew;
} GstRdmaTimeStats;

/* A capture time further than this before our wall clock, or
 * GST_RDMA_CAPTURE_MAX_AHEAD after it, is no live frame's capture instant
 * (a wall clock off by that much, a time from 1970): in capture mode the
 * frame is stamped with its arrival and counted (capture-invalid). */
#define GST_RDMA_CAPTURE_MAX_AGE (10 * GST_SECOND)
#define GST_RDMA_CAPTURE_MAX_AHEAD (1 * GST_SECOND)

void gst_rdma_time_map_init(GstRdmaTimeMap *map);
void gst_rdma_time_map_get_stats(const GstRdmaTimeMap *map,
                                 GstRdmaTimeStats *stats);

/* A sender time that comes with no frame (a GAP event's) on our running
 * time: as the device's last frame was mapped, moved by the difference
 * (sender mode: as it is); our running time now before any frame. */
GstClockTime gst_rdma_time_map_peek(const GstRdmaTimeMap *map,
                                    GstRdmaTimestampMode mode,
                                    guint64 sender_time, GstClockTime now);

/* Stamps buf (PTS, DTS, duration, DISCONT/DELTA_UNIT, the capture time as
 * a "timestamp/x-unix" reference timestamp meta) from what the frame's
 * first block carries, in mode; now is our running time at the frame's
 * arrival and wall_now our wall clock (ns since 1970) at the same
 * instant. */
void gst_rdma_frame_stamp(GstRdmaTimeMap *map, GstRdmaTimestampMode mode,
                          const struct sbr_block_info *info, GstClockTime now,
                          guint64 wall_now, GstBuffer *buf);

G_END_DECLS

#endif /* __GST_RDMA_SRC_FRAME_H__ */
