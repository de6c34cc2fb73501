/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pace.c - learning each device's frame period; planning the next wait
 * (pace.h). */
#include <string.h>

#include "engine/pace.h"

void sbr__pace_init(struct sbr__pace *p)
{
  memset(p, 0, sizeof *p);
}

bool sbr__pace_periodic(const struct sbr__pace_dev *d)
{
  return d->last_ns != 0 && d->samples >= SBR__PACE_MIN_SAMPLES &&
         d->period_ns >= SBR__PACE_MIN_PERIOD_NS &&
         d->period_ns <= SBR__PACE_MAX_PERIOD_NS &&
         d->jitter_ns * 8 <= d->period_ns;
}

static uint64_t clamp_u64(uint64_t v, uint64_t lo, uint64_t hi)
{
  return v < lo ? lo : v > hi ? hi : v;
}

void sbr__pace_window(const struct sbr__pace *p, const struct sbr__pace_dev *d,
                      uint64_t *start, uint64_t *end)
{
  uint64_t quarter = d->period_ns / 4;
  uint64_t lead =
      clamp_u64(2 * d->jitter_ns + p->oversleep_ns + 2 * p->oversleep_dev_ns +
                    SBR__PACE_LEAD_BASE_NS,
                SBR__PACE_LEAD_MIN_NS, SBR__PACE_LEAD_MAX_NS);
  uint64_t after = clamp_u64(3 * d->jitter_ns + SBR__PACE_AFTER_BASE_NS,
                             SBR__PACE_AFTER_BASE_NS, SBR__PACE_AFTER_MAX_NS);
  if (lead > quarter)
    lead = quarter;
  if (after > quarter)
    after = quarter;
  uint64_t predicted = d->grid_ns + d->period_ns;
  *start = predicted - lead;
  *end = predicted + after;
}

/* Starts learning afresh from one interval ending at t_ns (or from
 * nothing). */
static void relearn(struct sbr__pace_dev *d, uint64_t interval_ns,
                    uint64_t t_ns)
{
  d->multiples = 0;
  d->outliers = 0;
  d->grid_ns = t_ns;
  if (interval_ns == 0) {
    d->samples = 0;
    return;
  }
  d->period_ns = interval_ns;
  d->jitter_ns = interval_ns / 4; /* pessimistic until intervals agree */
  d->samples = 1;
}

static void seed(struct sbr__pace_dev *d, uint64_t hint_ns)
{
  d->period_ns = hint_ns;
  d->jitter_ns = hint_ns / 16;
  d->samples = SBR__PACE_MIN_SAMPLES;
  d->multiples = 0;
  d->outliers = 0;
}

static void ewma(uint64_t *v, uint64_t sample)
{
  *v = (uint64_t)((int64_t)*v + ((int64_t)sample - (int64_t)*v) / 8);
}

enum sbr__pace_verdict sbr__pace_arrival(struct sbr__pace *p, uint8_t device,
                                         uint64_t now_ns, uint64_t hint_ns,
                                         bool after_sleep)
{
  struct sbr__pace_dev *d = &p->dev[device];
  enum sbr__pace_verdict verdict = SBR__PACE_UNPREDICTED;

  if (!d->listed) {
    d->listed = true;
    p->ids[p->n_ids++] = device; /* at most once per device: <= 256 */
  }
  if (sbr__pace_periodic(d)) {
    uint64_t start, end;
    sbr__pace_window(p, d, &start, &end);
    verdict = !after_sleep && now_ns >= start && now_ns <= end
                  ? SBR__PACE_PREDICTED
                  : SBR__PACE_MISSED;
  }
  if (hint_ns != d->hint_ns) {
    /* A new hint is trusted at once; learning goes on from there and
     * overrules it if the frames disagree. */
    d->hint_ns = hint_ns;
    if (hint_ns)
      seed(d, hint_ns);
  }
  if (d->last_ns == 0 || now_ns <= d->last_ns) {
    d->last_ns = now_ns ? now_ns : 1;
    d->grid_ns = d->last_ns;
    return verdict;
  }
  uint64_t dt = now_ns - d->last_ns;
  d->last_ns = now_ns;
  if (dt > SBR__PACE_MAX_PERIOD_NS) {
    /* A pause or a new stream: what we knew may be stale. */
    relearn(d, 0, now_ns);
    if (d->hint_ns)
      seed(d, d->hint_ns);
    return verdict;
  }
  if (d->samples == 0) {
    relearn(d, dt, now_ns);
    return verdict;
  }
  /* Where the frame should have been on the grid of the frames so far:
   * senders pace by a clock (a live source captures at fixed instants),
   * so one late frame does not move the next ones. */
  uint64_t since = now_ns > d->grid_ns ? now_ns - d->grid_ns : 0;
  uint64_t k = (since + d->period_ns / 2) / d->period_ns;
  if (k == 0)
    k = 1;
  uint64_t expected = d->grid_ns + k * d->period_ns;
  int64_t e = (int64_t)now_ns - (int64_t)expected;
  uint64_t abs_e = (uint64_t)(e < 0 ? -e : e);
  if (k > 8 || abs_e > d->period_ns / 4) {
    /* An outlier (the sender or its host stalled): stay on the grid and
     * count it against the jitter; three in a row mean the grid is
     * wrong. */
    if (++d->outliers >= 3) {
      relearn(d, dt, now_ns);
      return verdict;
    }
    d->grid_ns = expected;
    ewma(&d->jitter_ns, d->period_ns / 4);
    return verdict;
  }
  d->outliers = 0;
  if (k >= 2) {
    /* Frames skipped (the sender dropped them, or we did).  Always k
     * periods means the period is k times what we believe (a hint at
     * twice the real rate). */
    if (++d->multiples >= 4) {
      relearn(d, dt, now_ns);
      return verdict;
    }
  } else {
    d->multiples = 0;
  }
  /* A phase-locked loop: the grid follows a quarter of the error, the
   * period an eighth of it per period. */
  d->grid_ns = (uint64_t)((int64_t)expected + e / 4);
  d->period_ns = (uint64_t)((int64_t)d->period_ns + e / (8 * (int64_t)k));
  ewma(&d->jitter_ns, abs_e);
  if (d->samples < UINT32_MAX)
    d->samples++;
  return verdict;
}

void sbr__pace_plan(const struct sbr__pace *p, uint64_t now_ns,
                    struct sbr__pace_plan *out)
{
  uint64_t next_start = UINT64_MAX, open_end = 0;
  uint32_t active = 0;
  bool irregular = false;

  for (uint32_t i = 0; i < p->n_ids; i++) {
    const struct sbr__pace_dev *d = &p->dev[p->ids[i]];
    if (d->last_ns == 0 || now_ns - d->last_ns > SBR__PACE_QUIET_NS)
      continue;
    active++;
    if (!sbr__pace_periodic(d)) {
      irregular = true;
      continue;
    }
    uint64_t start, end;
    sbr__pace_window(p, d, &start, &end);
    if (now_ns > end) {
      irregular = true; /* overdue: skipped a frame, late, or stopped */
      continue;
    }
    if (now_ns >= start) {
      if (open_end == 0)
        open_end = end; /* the first open window is the one polled */
      continue;
    }
    if (start < next_start)
      next_start = start;
  }
  out->active = active;
  if (open_end) {
    out->action = SBR__PACE_SPIN;
    out->until_ns = open_end;
    return;
  }
  /* A frame in assembly: its next fragment comes behind the one found (a
   * big frame's blocks follow each other, interleaved with other devices'
   * when the sender serves them in turns), not at a window; sleeping to
   * the next window let it wait up to max_sleep_us. */
  out->action = active && !irregular && p->assembling == 0 ? SBR__PACE_SLEEP
                                                           : SBR__PACE_BACKOFF;
  out->until_ns = next_start;
}

void sbr__pace_overslept(struct sbr__pace *p, uint64_t late_ns)
{
  /* A preempted wake-up can be milliseconds late: count at most 400 us. */
  if (late_ns > 400000)
    late_ns = 400000;
  int64_t err = (int64_t)late_ns - (int64_t)p->oversleep_ns;
  p->oversleep_ns = (uint64_t)((int64_t)p->oversleep_ns + err / 8);
  int64_t dev = err < 0 ? -err : err;
  p->oversleep_dev_ns = (uint64_t)((int64_t)p->oversleep_dev_ns +
                                   (dev - (int64_t)p->oversleep_dev_ns) / 8);
}

uint32_t sbr__pace_periodic_count(const struct sbr__pace *p)
{
  uint32_t n = 0;
  for (uint32_t i = 0; i < p->n_ids; i++)
    n += sbr__pace_periodic(&p->dev[p->ids[i]]);
  return n;
}
