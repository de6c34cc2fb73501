/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasrcpad.h - one device's src pad of rdmasrc: its queue, its own
 * streaming thread (a pad task) and its share of the lane.
 *
 * Threads: rdmasrc's receive thread is the only producer (admit, queue_*,
 * set_eos); the pad task is the only consumer and the only thread that
 * pushes on the pad; state changes call start/pause/stop/flush.  Everything
 * here is guarded by the pad's own lock, so one stuck consumer blocks only
 * its own pad task, never the receive thread or another pad.
 */
#ifndef __GST_RDMA_SRC_PAD_H__
#define __GST_RDMA_SRC_PAD_H__

#include <gst/base/gstflowcombiner.h>
#include <gst/gst.h>

#include "gstrdmaenums.h"

G_BEGIN_DECLS

#define GST_TYPE_RDMA_SRC_PAD (gst_rdma_src_pad_get_type())
G_DECLARE_FINAL_TYPE(GstRdmaSrcPad, gst_rdma_src_pad, GST, RDMA_SRC_PAD, GstPad)

/* Lane blocks a device has out (wrapped in buffers queued here or
 * downstream).  Shared with the memories' free callbacks, which may run
 * after the pad is gone: a g_atomic_rc_box. */
typedef struct {
  gint blocks; /* atomic */
} GstRdmaBlockCount;

/* The element's flow combiner, shared by its pads under one lock. */
typedef struct {
  GMutex lock;
  GstFlowCombiner *combiner;
} GstRdmaSharedFlow;

GstRdmaSrcPad *gst_rdma_src_pad_new(GstPadTemplate *templ, guint device,
                                    GstRdmaOverBudget policy,
                                    GstRdmaSharedFlow *flow);
guint gst_rdma_src_pad_get_device(GstRdmaSrcPad *pad);
/* The counter that wrapped blocks of this device add to (not referenced). */
GstRdmaBlockCount *gst_rdma_src_pad_block_count(GstRdmaSrcPad *pad);

/* What admit decided for a frame of the device. */
typedef enum {
  GST_RDMA_ADMIT_WRAP, /* zero-copy: wrap the lane blocks */
  GST_RDMA_ADMIT_COPY, /* over budget: copy the frame, release the blocks */
} GstRdmaAdmit;

/* Receive thread: makes room for a frame of n_blocks lane blocks under a
 * budget of budget blocks, by the pad's policy: drop-oldest drops queued
 * frames (and queues at most budget frames); copy and pause copy the new
 * frame and drop the oldest only when max_queued frames are queued.
 * *over_budget tells whether the device is over its budget (the pause
 * policy's signal). */
GstRdmaAdmit gst_rdma_src_pad_admit(GstRdmaSrcPad *pad, guint n_blocks,
                                    guint budget, guint max_queued,
                                    gboolean *over_budget);
/* Receive thread: queues a buffer (the pad task pushes it) or a serialized
 * event (never dropped).  Take ownership. */
void gst_rdma_src_pad_queue_buffer(GstRdmaSrcPad *pad, GstBuffer *buf,
                                   guint lane_blocks, gboolean copied);
void gst_rdma_src_pad_queue_event(GstRdmaSrcPad *pad, GstEvent *event);
/* Why a frame was dropped on arrival. */
typedef enum {
  GST_RDMA_DROP_NOT_PLAYING,
  GST_RDMA_DROP_ENDED,
  /* Padded planes whose layout was lost on the way (extras over
   * max-meta-size, a layout that didn't fit the caps): read in the caps'
   * layout they would be garbage. */
  GST_RDMA_DROP_NO_LAYOUT,
} GstRdmaDropReason;
/* Counts a frame dropped on arrival; the next one goes with DISCONT. */
void gst_rdma_src_pad_count_drop(GstRdmaSrcPad *pad, GstRdmaDropReason why);
/* Receive thread: frames of the device were lost before the next one
 * (its packet number jumped): that one is queued with DISCONT. */
void gst_rdma_src_pad_note_gap(GstRdmaSrcPad *pad);
/* Has the stream ended (EOS queued, or downstream returned EOS)? */
gboolean gst_rdma_src_pad_is_eos(GstRdmaSrcPad *pad);
/* Is the pad dropping delta frames until the next key frame (after a
 * gap on a stream that waits for key frames)? */
gboolean gst_rdma_src_pad_waiting_for_key(GstRdmaSrcPad *pad);
/* Has a stream started on the pad (stream-start sent or queued) since it
 * was made or since the last end_stream?  A pad requested before its
 * camera came, or kept across READY, has none. */
gboolean gst_rdma_src_pad_has_stream(GstRdmaSrcPad *pad);
/* The stream events were stored on the pad directly (before it was
 * added): it has a stream, not ended. */
void gst_rdma_src_pad_mark_stream(GstRdmaSrcPad *pad);
/* Receive thread: a new stream starts on the pad (after EOS). */
void gst_rdma_src_pad_clear_eos(GstRdmaSrcPad *pad);
/* Lane blocks out plus frames queued: how full the device's share is. */
guint gst_rdma_src_pad_usage(GstRdmaSrcPad *pad);
/* The pause policy: the device's sender was told to stop (or go on). */
void gst_rdma_src_pad_set_paused(GstRdmaSrcPad *pad, gboolean paused);
gboolean gst_rdma_src_pad_is_paused(GstRdmaSrcPad *pad);
GstRdmaOverBudget gst_rdma_src_pad_get_policy(GstRdmaSrcPad *pad);
/* Receive thread: the policy this pad's stream calls for (its sender said
 * whether it is live), and whether frames over the share are held back in
 * the lane rather than copied or dropped (a stream that isn't live);
 * ignored once the pad's property was set. */
void gst_rdma_src_pad_set_default_policy(GstRdmaSrcPad *pad,
                                         GstRdmaOverBudget policy,
                                         gboolean hold_back);
/* The pad's timestamp-mode once set, else dflt (the element's). */
GstRdmaTimestampMode gst_rdma_src_pad_timestamp_mode(GstRdmaSrcPad *pad,
                                                     GstRdmaTimestampMode dflt);

/* Waiting for key frames after a gap: after any gap (a frame dropped by
 * the sender, lost on the way, dropped here, a new lane, a late join), a
 * stream whose frames carry DELTA_UNIT, or whose caps are neither
 * video/x-raw nor audio/x-raw, is pushed again from its next key frame;
 * the deltas before it are dropped (waiting-for-key-drops).  The pad's
 * wait-for-keyframe property, else rdmasrc's, which this sets (ignored
 * once the pad's own was set). */
#define GST_RDMA_SRC_DEFAULT_WAIT_FOR_KEYFRAME TRUE
void gst_rdma_src_pad_set_default_wait_for_keyframe(GstRdmaSrcPad *pad,
                                                    gboolean wait);

/* State changes.  start: the pad task runs and pushes (PLAYING); pause:
 * it waits without pushing and queued buffers are dropped (a live source
 * produces nothing while PAUSED); stop: the task ends (PAUSED->READY,
 * downstream is READY so no push blocks). */
void gst_rdma_src_pad_start(GstRdmaSrcPad *pad);
void gst_rdma_src_pad_pause(GstRdmaSrcPad *pad);
void gst_rdma_src_pad_stop(GstRdmaSrcPad *pad);

/* Held, the task queues but doesn't push: a pad not yet on the element
 * (rdmasrc exposes it off the receive thread, then lets it go). */
void gst_rdma_src_pad_set_held(GstRdmaSrcPad *pad, gboolean held);

/* With the task stopped: the stream is over (a new one starts with new
 * stream events); nothing is queued. */
void gst_rdma_src_pad_end_stream(GstRdmaSrcPad *pad);

/* Lateness above this is an outage (a sender that stalled, then sent its
 * backlog), not the transport's jitter: it is not noted below, so it
 * raises no latency (rdmasrc's SECTION). */
#define GST_RDMA_SRC_OUTAGE_LATENESS (250 * GST_MSECOND)

/* Receive thread: a frame of the device arrived late after its PTS (our
 * running time at arrival minus its PTS: the first frame of a stream is
 * stamped with its arrival and later ones keep the sender's spacing, so
 * this is the transport's jitter).  TRUE when the latency to report grew
 * by more than a quarter over what was last reported: post a latency
 * message so the pipeline asks again. */
gboolean gst_rdma_src_pad_note_lateness(GstRdmaSrcPad *pad, GstClockTime late);
/* The minimum latency the pad's LATENCY query answers: twice the worst
 * lateness seen plus 2 ms for the hand-off and push, rounded up to 1 ms;
 * remembered as reported. */
GstClockTime gst_rdma_src_pad_latency(GstRdmaSrcPad *pad);

/* Per-device counters into s (queued, lane-blocks, copies, drops-*,
 * waiting-for-key-drops). */
void gst_rdma_src_pad_add_stats(GstRdmaSrcPad *pad, GstStructure *s);

G_END_DECLS

#endif /* __GST_RDMA_SRC_PAD_H__ */
