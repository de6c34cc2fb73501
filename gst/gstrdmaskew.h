/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmaskew.h - follows a sender's clock: maps the times a sender stamps
 * its frames with (its running time, or its capture time) onto this
 * pipeline's running time, from the frames' arrivals, whatever the rates of
 * the two clocks.  One GstRdmaSkew per sender clock: rdmasrc keeps one
 * per device, as the rdmasinks of one connection (lane) may be pipelines
 * with clocks and base times of their own; the algorithm and why it is
 * robust: gstrdmaskew.c.
 *
 * Not thread safe: one thread observes (rdmasrc's receive thread); a reader
 * of the getters from another thread takes the caller's lock.
 */
#ifndef __GST_RDMA_SKEW_H__
#define __GST_RDMA_SKEW_H__

#include <gst/gst.h>

G_BEGIN_DECLS

/* Sender time per lower-envelope window: long enough for a window to hold
 * a frame that met no queueing (25 at 25 fps), short enough that the line
 * follows a rate within seconds. */
#define GST_RDMA_SKEW_WINDOW (1 * GST_SECOND)
/* ... and at least this many frames: at 1 fps or less a window of one
 * frame would be that frame's jitter, not a minimum. */
#define GST_RDMA_SKEW_WINDOW_SAMPLES 8
/* Windows the line is fitted through: 32 s of history puts a 100 ppm rate
 * within a few ppm under milliseconds of jitter, and a drifting oscillator
 * (temperature) is followed within half a minute. */
#define GST_RDMA_SKEW_N_WINDOWS 32
/* A frame further than this off the estimated mapping (either way) does
 * not fit it: an absurd sender time, a frame held up this long, or the
 * first frame of a new base (the sender paused, restarted, jumped). */
#define GST_RDMA_SKEW_JUMP_THRESHOLD (500 * GST_MSECOND)
/* The sender time over which frames off the mapping have to agree with
 * one another, and arrive at the pace of their sender times, before they
 * are a new base rather than outliers or a burst. */
#define GST_RDMA_SKEW_CONFIRM_SPAN (200 * GST_MSECOND)
/* Rates beyond this are no oscillator (real ones are within 100 ppm, test
 * clocks within 1 %): a fit beyond it is clamped and counted. */
#define GST_RDMA_SKEW_MAX_RATE_PPM 50000.0
/* Corrections of the mapping are spread out at most this fast (of the
 * sender time elapsed): 0.5 %, 200 us a frame at 25 fps, so that a
 * downstream sink sees a steady frame pace rather than steps. */
#define GST_RDMA_SKEW_SLEW_PPM 5000.0
/* A correction larger than this is no drift to spread out but a move of
 * the envelope: the mapping steps (forward: DISCONT; back: the output
 * holds until the mapping catches up, never going back). */
#define GST_RDMA_SKEW_STEP_THRESHOLD (50 * GST_MSECOND)

typedef enum {
  GST_RDMA_SKEW_FLAG_NONE = 0,
  /* The mapping starts or jumps forward here (first frame, after a
   * reset, a new base, a step): the caller sets GST_BUFFER_FLAG_DISCONT. */
  GST_RDMA_SKEW_FLAG_DISCONT = 1 << 0,
  /* The sample did not fit the mapping (counted in outliers once it turns
   * out not to be a new base): stamped from its arrival, not learnt from. */
  GST_RDMA_SKEW_FLAG_OFF_MAPPING = 1 << 1,
  /* A new base was detected at this frame (also DISCONT). */
  GST_RDMA_SKEW_FLAG_REBASED = 1 << 2,
} GstRdmaSkewFlags;

typedef struct {
  guint64 observed;     /* samples given to observe */
  guint64 outliers;     /* samples off the mapping that were no new base */
  guint64 invalid;      /* sender times that are no time (NONE, > G_MAXINT64) */
  guint64 rebases;      /* new bases detected (pause, restart, jump) */
  guint64 rate_clamps;  /* fits beyond GST_RDMA_SKEW_MAX_RATE_PPM */
  guint64 level_shifts; /* the envelope moved by less than a jump */
  guint64 steps;        /* the mapping stepped rather than slewed */
  guint64 resets;       /* gst_rdma_skew_reset calls */
} GstRdmaSkewStats;

/* One lower-envelope point: the smallest arrival - sender time of a window
 * and the sender time it was seen at. */
typedef struct {
  GstClockTime sender_time;
  gint64 delay;
} GstRdmaSkewPoint;

/* One output stream fed from an estimator shared by several streams of
 * one sender clock (their sender times interleave).  Its output never
 * goes back, and it sees a DISCONT at its first frame and the first after
 * the mapping started again or jumped forward.  Fields are private. */
typedef struct {
  gboolean started;
  guint generation_seen;
  GstClockTime last_out;
} GstRdmaSkewStream;

/* Caller-allocated (embedded in the device's state); fields are private. */
typedef struct {
  /* Lower envelope: closed windows (a ring) and the open one. */
  GstRdmaSkewPoint windows[GST_RDMA_SKEW_N_WINDOWS];
  guint n_windows, next_window;
  gboolean window_open;
  GstClockTime window_start;
  guint window_samples;
  GstRdmaSkewPoint window_min;

  /* The fitted line: delay(s) = line_delay + line_slope * (s - line_time),
   * delay = arrival - sender time. */
  gboolean have_line;
  GstClockTime line_time;
  gint64 line_delay;
  gdouble line_slope;
  gboolean have_rate;    /* the slope comes from a fit (or the last base's) */
  guint slope_windows;   /* minima the slope was fitted through */
  gboolean rate_clamped; /* the last fit was beyond the plausible */

  /* The applied mapping, slewed towards the line: sender time map_time is
   * local map_out, and on at 1 + line_slope. */
  gboolean have_mapping;
  GstClockTime map_time, map_out;

  /* Bumped where the mapping starts or jumps forward: streams flag
   * DISCONT at their next frame. */
  guint generation;
  /* gst_rdma_skew_observe's stream. */
  GstRdmaSkewStream own_stream;

  /* Samples off the mapping, until they turn out a new base or outliers. */
  guint n_suspects;
  gint suspect_side; /* +1 later than the mapping, -1 earlier */
  GstClockTime suspect_time, suspect_arrival;

  GstRdmaSkewStats stats;
} GstRdmaSkew;

void gst_rdma_skew_init(GstRdmaSkew *skew);

/* Forgets the sender's clock (a reconnect, another sender, a new segment
 * of our own running time): the next sample starts a new mapping, flagged
 * DISCONT, and output is monotonic again from there.  Counters stay. */
void gst_rdma_skew_reset(GstRdmaSkew *skew);

/* One frame: sender_time as the sender stamped it (a time that only goes
 * forward: DTS when there is one, else PTS, or the capture time), arrival
 * our running time when it arrived.  Returns sender_time on our running
 * timeline (never below the previous return since the last reset); flags
 * (may be NULL) says whether it is a DISCONT and how the sample was
 * taken. */
GstClockTime gst_rdma_skew_observe(GstRdmaSkew *skew, GstClockTime sender_time,
                                   GstClockTime arrival,
                                   GstRdmaSkewFlags *flags);

/* gst_rdma_skew_observe for one of several streams sharing the estimator
 * (cameras of one sender clock): the guard and DISCONT are the stream's.
 * Sender times may interleave across streams (a device's frame captured a
 * little before another's): each is mapped as it is. */
GstClockTime gst_rdma_skew_observe_stream(GstRdmaSkew *skew,
                                          GstRdmaSkewStream *stream,
                                          GstClockTime sender_time,
                                          GstClockTime arrival,
                                          GstRdmaSkewFlags *flags);

/* A stream starts again: its next output is a DISCONT, and may be below
 * its last (its pad flushed, its segment restarted).  gst_rdma_skew_reset
 * does this for observe's own stream only. */
void gst_rdma_skew_stream_init(GstRdmaSkewStream *stream);

/* Another time of the frame last observed (its PTS when DTS was
 * observed) through the current mapping, without learning from it and
 * without the monotonic guard.  NONE before the first sample. */
GstClockTime gst_rdma_skew_map(const GstRdmaSkew *skew,
                               GstClockTime sender_time);

/* The sender's clock rate against ours, in ppm: +10000 when it runs 1 %
 * fast.  0 until the first fit. */
gdouble gst_rdma_skew_get_rate_ppm(const GstRdmaSkew *skew);

/* Our running time minus the sender's time at the last sample through the
 * applied mapping (0 before the first sample). */
GstClockTimeDiff gst_rdma_skew_get_offset(const GstRdmaSkew *skew);

/* TRUE once the rate comes from a fit of at least two windows. */
gboolean gst_rdma_skew_has_rate(const GstRdmaSkew *skew);

void gst_rdma_skew_get_stats(const GstRdmaSkew *skew, GstRdmaSkewStats *stats);

G_END_DECLS

#endif /* __GST_RDMA_SKEW_H__ */
