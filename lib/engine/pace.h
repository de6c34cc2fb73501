/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pace.h - the adaptive poll mode's model of when frames land.
 *
 * Video is periodic.  For every device the receiver locks onto the grid
 * of its frames (first fragments found): a period and a phase that follow
 * each frame's error by 1/8 and 1/4 (a phase-locked loop), and an EWMA of
 * the error's size (the jitter).  A frame more than a quarter period off
 * is an outlier: the grid stays (a sender paced by a clock doesn't shift
 * its later frames), three in a row start the learning again.  A device
 * whose period is stable (enough frames, jitter under an eighth of the
 * period) has a predicted next arrival, grid + period, and a window
 * around it; the receiver sleeps
 * until the earliest window of any device opens (in sleeps no longer than
 * the back-off's ceiling) and polls through it.
 * Devices that aren't periodic (still learning, jittery, or overdue) make it
 * fall back to the back-off schedule.  docs/design.md, "Waiting for a
 * frame", explains the choices.
 *
 * Pure bookkeeping: no clock, no locks; times come from the caller.  The
 * receiver thread is the only user (the hints live in the receiver).
 */
#ifndef SBR_PACE_H
#define SBR_PACE_H

#include <stdbool.h>
#include <stdint.h>

#include "sbr.h"

/* A period is learned from this many intervals (a hint counts as them). */
#define SBR__PACE_MIN_SAMPLES 4u
/* Periods outside this range are not predicted (below: the windows would
 * merge into a spin; above: the back-off costs nothing anyway). */
#define SBR__PACE_MIN_PERIOD_NS 1000000ull
#define SBR__PACE_MAX_PERIOD_NS 1000000000ull
/* A device silent for this long no longer counts as active. */
#define SBR__PACE_QUIET_NS 1000000000ull
/* Window before the predicted arrival: 2 x jitter + the timer's measured
 * overshoot (mean + 2 x mean deviation) + 20 us, clamped; after it: 3 x jitter
 * + 100 us, clamped. The clamps bound the spin per frame to 2.4 ms at worst.
 * After reaches further than before: twelve cameras captured together land
 * one after another over a few milliseconds, in an order that changes from
 * frame to frame, so each device's frame lands up to a burst late; a
 * 400 us clamp closed the windows of the burst's last frames before they
 * landed, and those then waited in the back-off's sleeps (issue #11). */
#define SBR__PACE_LEAD_BASE_NS 20000ull
#define SBR__PACE_LEAD_MIN_NS 30000ull
#define SBR__PACE_LEAD_MAX_NS 400000ull
#define SBR__PACE_AFTER_BASE_NS 100000ull
#define SBR__PACE_AFTER_MAX_NS 2000000ull

struct sbr__pace_dev {
  uint64_t last_ns;   /* when its latest frame was found; 0 = never */
  uint64_t grid_ns;   /* where that frame belonged on the learned grid */
  uint64_t period_ns; /* EWMA (1/8) of the interval between frames */
  uint64_t jitter_ns; /* EWMA (1/8) of |interval - period| */
  uint64_t hint_ns;   /* the hint last applied (0 = none) */
  uint32_t samples;   /* intervals learned since the last reset */
  uint8_t multiples;  /* consecutive intervals of k >= 2 periods */
  uint8_t outliers;   /* consecutive frames far off the grid */
  bool listed;        /* in sbr__pace.ids */
};

struct sbr__pace {
  struct sbr__pace_dev dev[SBR_MAX_DEVICES];
  uint8_t ids[SBR_MAX_DEVICES]; /* devices seen, first seen first */
  uint32_t n_ids;
  /* Frames whose first fragment was found and whose last wasn't yet (the
   * receiver keeps it): their next fragments are on their way, so the
   * plan doesn't sleep to the next window while there are any. */
  uint32_t assembling;
  uint64_t oversleep_ns;     /* EWMA (1/8) of how late a timed sleep woke */
  uint64_t oversleep_dev_ns; /* EWMA (1/8) of its deviation */
};

enum sbr__pace_verdict {
  SBR__PACE_UNPREDICTED, /* the device had no stable period */
  SBR__PACE_PREDICTED,   /* found while polling inside its window */
  SBR__PACE_MISSED,      /* stable period, found outside the window (early,
                            late, or waiting for us when we woke) */
};

enum sbr__pace_action {
  SBR__PACE_SPIN,    /* a window is open: poll */
  SBR__PACE_SLEEP,   /* every active device is periodic: sleep until */
  SBR__PACE_BACKOFF, /* something isn't: back off, but wake by until */
};

struct sbr__pace_plan {
  enum sbr__pace_action action;
  uint64_t until_ns; /* SLEEP/BACKOFF: earliest window start, or
                        UINT64_MAX; SPIN: when the open window closes */
  uint32_t active;   /* devices heard from lately */
};

void sbr__pace_init(struct sbr__pace *p);
bool sbr__pace_periodic(const struct sbr__pace_dev *d);
/* d's next window (d must be periodic). */
void sbr__pace_window(const struct sbr__pace *p, const struct sbr__pace_dev *d,
                      uint64_t *start, uint64_t *end);
/* A frame of device was found at now_ns; hint_ns is the device's period
 * hint (0 = none); after_sleep: found by the first scan after a timed
 * sleep, so it may have landed while we slept.  Judges the prediction,
 * then learns from the interval. */
enum sbr__pace_verdict sbr__pace_arrival(struct sbr__pace *p, uint8_t device,
                                         uint64_t now_ns, uint64_t hint_ns,
                                         bool after_sleep);
/* What to do at now_ns when nothing was found. */
void sbr__pace_plan(const struct sbr__pace *p, uint64_t now_ns,
                    struct sbr__pace_plan *out);
/* A sleep meant to end at a window's start woke late_ns after it. */
void sbr__pace_overslept(struct sbr__pace *p, uint64_t late_ns);
/* Devices whose period is stable now. */
uint32_t sbr__pace_periodic_count(const struct sbr__pace *p);

#endif
