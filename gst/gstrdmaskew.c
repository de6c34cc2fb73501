/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmaskew.c - follows a sender's clock (gstrdmaskew.h).
 *
 * The problem.  A frame stamped s by the sender (its running time or its
 * capture time) arrives at our running time a.  With the sender's clock
 * running at its own rate,
 *
 *     a = offset + (1 + r) * s + q,      q >= 0,
 *
 * where r is the rate of our clock against the sender's minus one (-1 %
 * when the sender runs 1 % fast) and q the frame's queueing and scheduling
 * delay: arrivals are late, never early, and a few are very late (a stall,
 * then a burst of frames at once).  Mapping s by "first arrival + sender
 * differences" (what rdmasrc does today) ignores r: PTS - arrival drifts by r
 * for ever (36 s a hour at 1 %, 86 ms a day at 1 ppm).
 *
 * The estimate.  Let delay d = a - s.  Its lower envelope, offset + r * s,
 * is what the frames that met no queueing show; jitter only ever adds to
 * it.  So:
 *
 *   1. Windowed minima.  Sender time is cut into windows of
 *      GST_RDMA_SKEW_WINDOW; each keeps its smallest d and the s it was
 *      seen at.  A window's minimum is a frame that met (nearly) no delay:
 *      jitter, late frames and bursts (all above the envelope) never move
 *      it, whatever their size or how many.  rtpjitterbuffer's skew
 *      estimate (mode=slave) rests on the same observation, with a running
 *      minimum over a sliding window that it smooths; here the minima are
 *      kept as points.
 *   2. A line through the minima, at each window's close.  First a robust
 *      one (Theil-Sen: the median of the slopes between pairs, the median
 *      intercept), which up to 29 % of wild minima do not move; then least
 *      squares through the minima within 1 ms + 3 x the median residual of
 *      it, over the last GST_RDMA_SKEW_N_WINDOWS windows, which averages
 *      the minima's scatter out (a few ppm over 32 s at 1 ms of scatter).
 *      A minimum above the line is a window whose every frame was held up
 *      (a stall); one below it, since no frame is early, the envelope
 *      moving down: neither tilts the line.  The slope is r, clamped to
 *      GST_RDMA_SKEW_MAX_RATE_PPM and the clamp counted: a "clock" 50 %
 *      off is no oscillator.
 *   3. Level shifts.  When the newest LEVEL_WINDOWS minima all sit off the
 *      line through the older ones the same way (by 5 ms + 3 x their
 *      scatter), the envelope moved by less than a jump: the sender's
 *      running time stood still for 300 ms, or skipped ahead.  The older
 *      windows are forgotten and the line starts again from the newest
 *      ones, at the rate it had (the oscillator did not change): fitting
 *      through both levels would tilt it for a whole history.  A slope
 *      from fewer windows only replaces one fitted through more once it
 *      has SLOPE_WINDOWS_TO_REPLACE of its own.  Counted in level_shifts.
 *   4. A slewed mapping.  The output is not the line itself, which moves
 *      by a little at each refit, but a mapping that runs at the line's
 *      rate and closes the distance to the line at most
 *      GST_RDMA_SKEW_SLEW_PPM of the sender time elapsed (200 us a frame at
 *      25 fps): the frame pace downstream stays steady.  A distance beyond
 *      GST_RDMA_SKEW_STEP_THRESHOLD (a level shift, a start on a late first
 *      frame) is no drift to spread over minutes: the mapping steps, with
 *      a DISCONT when forward.  Output is never below the last output (a
 *      guard: after a step back it holds until the mapping catches up), so
 *      PTS never steps back.
 *
 * The line sits on the fastest arrivals, so PTS - arrival stays within
 * [-jitter, ~+1 ms] after convergence, for days, whatever r is.
 *
 * Samples off the mapping.  A sample more than GST_RDMA_SKEW_JUMP_THRESHOLD
 * off the applied mapping (either way; the mapping rather than the line so
 * that output stays within the threshold of arrivals even when the line is
 * clamped) is one of: an absurd sender time (a jump of hours, a capture
 * time in 1970), a frame held up that long (a burst after a stall), or the
 * first frame of a new base (the sender's pipeline paused, so its running
 * time stood still while ours went on; it restarted; its clock jumped).
 * Such a sample is stamped at its arrival (bounded, monotonic, the right
 * time for a new base) and not learnt from.  It becomes a new base only
 * when the samples off the mapping have agreed for
 * GST_RDMA_SKEW_CONFIRM_SPAN of sender time: same side, sender time going
 * forward and arrivals keeping pace with it (at least half its pace: a
 * burst's arrivals do not advance, a pause's do).  Then the envelope starts
 * again from that frame (the rate is kept: a pause does not change the
 * sender's oscillator; the windows are re-estimated), flagged REBASED and
 * DISCONT, and counted in rebases.  Samples off the mapping that come to
 * nothing (the next sample fits, or they disagree) are counted in outliers:
 * a single absurd time costs one frame stamped at its arrival and nothing
 * else.  A sender time that is no time (NONE, beyond G_MAXINT64) is stamped
 * at its arrival and counted in invalid.  A sender whose rate is absurd
 * (50 % off) falls the threshold off its mapping again and again, each
 * time a new base (a DISCONT, counted); its output stays within about the
 * threshold of its arrivals and monotonic.
 *
 * DISCONT.  Reported where the mapping starts or jumps forward: the first
 * sample, the first after gst_rdma_skew_reset, a new base (on the frame
 * that confirms it; the CONFIRM_SPAN of frames before it carry their
 * arrival times, on the new base already), a forward step.  Never for
 * jitter, bursts, outliers or corrections, which the slew spreads out.
 *
 * Streams.  One estimator may serve several cameras of one sender clock,
 * which pool their frames into the envelope (rdmasrc keeps one per device
 * instead: the devices of one lane may be pipelines with clocks and base
 * times of their own, which one envelope would mix).  Their sender times
 * interleave (one camera captures a little after another, frames arrive
 * in either order), so the guard and DISCONT are per stream
 * (GstRdmaSkewStream, a device): a frame older than the newest is mapped
 * as it is, without moving the mapping, and a stream flags DISCONT at its
 * first frame after the mapping started again or jumped forward (the
 * estimator's generation).  gst_rdma_skew_observe is the one-stream
 * case.
 *
 * Why not a running minimum with smoothing (rtpjitterbuffer)?  That
 * estimates the offset, not the rate, and lags the envelope by its
 * smoothing; at 1 % a lag of seconds is tens of ms.  A line through
 * minima predicts the envelope between refits, so the mapping follows the
 * sender's rate exactly once the slope is known (two windows), and its
 * rate and offset are what the stats report.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstrdmaskew.h"

#include <stdlib.h>
#include <string.h>

GST_DEBUG_CATEGORY_STATIC(gst_rdma_skew_debug);
#define GST_CAT_DEFAULT gst_rdma_skew_debug

/* Least squares leaves out the minima this far off the robust line, plus
 * 3 x the median residual: windows whose every frame was held up, or the
 * first of a moved envelope. */
#define HELD_UP_WINDOW_MARGIN (1 * GST_MSECOND)
/* While samples off the mapping are not yet CONFIRM_SPAN apart, arrivals
 * may lag their sender times by this much before the candidate base is
 * dropped (scheduling jitter between two frames of a paused sender). */
#define PACE_TOLERANCE (50 * GST_MSECOND)
/* The envelope moved when this many of the newest minima are off the line
 * through the older ones by more than this (plus 3 x their scatter), all
 * the same way: 3 s, so that one window held up (a stall) is no move. */
#define LEVEL_WINDOWS 3
#define LEVEL_SHIFT_MARGIN (5 * GST_MSECOND)
/* Windows a new slope needs to replace one from more windows. */
#define SLOPE_WINDOWS_TO_REPLACE 8

/* Rounded to the nearest ns, without libm (the plugin links none), and
 * held within half the range of gint64 so that absurd sender times
 * (G_MAXINT64 away) saturate rather than overflow the sums they go into. */
static gint64 round_ns(gdouble x)
{
  const gdouble limit = (gdouble)(G_MAXINT64 / 2);

  x = CLAMP(x, -limit, limit);
  return (gint64)(x >= 0 ? x + 0.5 : x - 0.5);
}

static gboolean is_time(GstClockTime t)
{
  return GST_CLOCK_TIME_IS_VALID(t) && t <= G_MAXINT64;
}

/* The slope of delay against sender time for a sender rate in ppm. */
static gdouble slope_for_ppm(gdouble ppm)
{
  return 1.0 / (1.0 + ppm / 1e6) - 1.0;
}

static gdouble ppm_for_slope(gdouble slope)
{
  return (1.0 / (1.0 + slope) - 1.0) * 1e6;
}

static gint64 line_delay_at(const GstRdmaSkew *skew, GstClockTime s)
{
  gint64 ds = (gint64)s - (gint64)skew->line_time;

  return skew->line_delay + (gint64)round_ns(skew->line_slope * (gdouble)ds);
}

/* sender time s through the applied mapping, unguarded. */
static gint64 mapping_at(const GstRdmaSkew *skew, GstClockTime s)
{
  gint64 ds = (gint64)s - (gint64)skew->map_time;

  return (gint64)skew->map_out +
         (gint64)round_ns((1.0 + skew->line_slope) * (gdouble)ds);
}

static GstClockTime time_from(gint64 t)
{
  return t < 0 ? 0 : (GstClockTime)t;
}

void gst_rdma_skew_init(GstRdmaSkew *skew)
{
  static gsize debug_done = 0;

  if (g_once_init_enter(&debug_done)) {
    GST_DEBUG_CATEGORY_INIT(gst_rdma_skew_debug, "rdmaskew", 0,
                            "rdmasrc's estimate of a sender's clock");
    g_once_init_leave(&debug_done, 1);
  }
  memset(skew, 0, sizeof *skew);
  gst_rdma_skew_stream_init(&skew->own_stream);
}

void gst_rdma_skew_stream_init(GstRdmaSkewStream *stream)
{
  stream->started = FALSE;
  stream->generation_seen = 0;
  stream->last_out = GST_CLOCK_TIME_NONE;
}

void gst_rdma_skew_reset(GstRdmaSkew *skew)
{
  GstRdmaSkewStats stats = skew->stats;
  guint generation = skew->generation;

  gst_rdma_skew_init(skew);
  skew->stats = stats;
  skew->stats.resets++;
  /* Other streams of the estimator see the new mapping as a DISCONT. */
  skew->generation = generation + 1;
}

static int compare_doubles(const void *a, const void *b)
{
  gdouble x = *(const gdouble *)a, y = *(const gdouble *)b;

  return (x > y) - (x < y);
}

static gdouble median(gdouble *v, guint n)
{
  qsort(v, n, sizeof v[0], compare_doubles);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct {
  gdouble mean_x, mean_y, slope;
  gdouble spread; /* median |residual| */
  guint n_used;
} LineFit;

static gdouble fit_residual(const LineFit *fit, gdouble x, gdouble y)
{
  return y - fit->mean_y - fit->slope * (x - fit->mean_x);
}

/* Least squares through the used points; the slope stays prior_slope
 * unless fit_slope and the points span some sender time. */
static void fit_points(const gdouble *x, const gdouble *y, const gboolean *used,
                       guint n, gboolean fit_slope, gdouble prior_slope,
                       LineFit *fit)
{
  gdouble sxx = 0, sxy = 0, abs_residual[GST_RDMA_SKEW_N_WINDOWS];
  guint n_res = 0;

  fit->mean_x = fit->mean_y = 0;
  fit->n_used = 0;
  fit->slope = prior_slope;
  for (guint i = 0; i < n; i++) {
    if (!used[i])
      continue;
    fit->mean_x += x[i];
    fit->mean_y += y[i];
    fit->n_used++;
  }
  fit->mean_x /= fit->n_used;
  fit->mean_y /= fit->n_used;
  for (guint i = 0; i < n; i++) {
    if (!used[i])
      continue;
    sxx += (x[i] - fit->mean_x) * (x[i] - fit->mean_x);
    sxy += (x[i] - fit->mean_x) * (y[i] - fit->mean_y);
  }
  if (fit_slope && fit->n_used >= 2 && sxx > 0)
    fit->slope = sxy / sxx;

  for (guint i = 0; i < n; i++)
    if (used[i])
      abs_residual[n_res++] = ABS(fit_residual(fit, x[i], y[i]));
  fit->spread = median(abs_residual, n_res);
}

/* A line that the minima of held-up windows do not pull: the median of the
 * slopes between pairs of points (Theil-Sen: up to 29 % of the points may
 * be anywhere) and the median intercept. */
static void fit_median_line(const gdouble *x, const gdouble *y, guint n,
                            gboolean fit_slope, gdouble prior_slope,
                            LineFit *fit)
{
  gdouble
      pair_slopes[GST_RDMA_SKEW_N_WINDOWS * (GST_RDMA_SKEW_N_WINDOWS - 1) / 2];
  gdouble intercepts[GST_RDMA_SKEW_N_WINDOWS];
  guint n_pairs = 0;

  fit->slope = prior_slope;
  if (fit_slope) {
    for (guint i = 0; i < n; i++)
      for (guint j = i + 1; j < n; j++)
        if (x[j] != x[i])
          pair_slopes[n_pairs++] = (y[j] - y[i]) / (x[j] - x[i]);
    if (n_pairs > 0)
      fit->slope = median(pair_slopes, n_pairs);
  }
  for (guint i = 0; i < n; i++)
    intercepts[i] = y[i] - fit->slope * x[i];
  fit->mean_x = 0;
  fit->mean_y = median(intercepts, n);
  fit->n_used = n;
}

/* A robust line first (fit_median_line), then least squares (which
 * averages the minima's scatter out, where the median only picks one)
 * through the minima within 1 ms + 3 x the median residual of it.  Above:
 * held-up windows, whose every frame was late.  Below: no frame is ever
 * early, so the envelope itself moved down (the sender's time skipped
 * ahead), which level_moved takes up once it lasts; until then one such
 * minimum, the newest, would tilt the whole line. */
static void fit_envelope(const gdouble *x, const gdouble *y, gboolean *used,
                         guint n, gboolean fit_slope, gdouble prior_slope,
                         LineFit *fit)
{
  gdouble abs_residual[GST_RDMA_SKEW_N_WINDOWS], cut;
  guint n_dropped = 0;

  for (guint i = 0; i < n; i++)
    used[i] = TRUE;
  fit_median_line(x, y, n, fit_slope, prior_slope, fit);
  for (guint i = 0; i < n; i++)
    abs_residual[i] = ABS(fit_residual(fit, x[i], y[i]));
  cut = (gdouble)HELD_UP_WINDOW_MARGIN + 3.0 * median(abs_residual, n);
  for (guint i = 0; i < n; i++) {
    if (ABS(fit_residual(fit, x[i], y[i])) > cut) {
      used[i] = FALSE;
      n_dropped++;
    }
  }
  if (n_dropped > 0)
    GST_LOG("fit without %u windows of %u off the envelope", n_dropped, n);
  fit_points(x, y, used, n, fit_slope, fit->slope, fit);
}

/* The newest LEVEL_WINDOWS minima all off the line through the older ones,
 * the same way: the envelope moved (the sender's time stood still or
 * skipped by less than the jump threshold, a route changed).  Fitting
 * through both levels would tilt the line for a whole history. */
static gboolean level_moved(const gdouble *x, const gdouble *y, guint n,
                            gdouble slope, gdouble *moved_by)
{
  gboolean used[GST_RDMA_SKEW_N_WINDOWS];
  LineFit older;
  gdouble cut;
  guint above = 0, below = 0;

  if (n < LEVEL_WINDOWS + 4)
    return FALSE;
  fit_envelope(x, y, used, n - LEVEL_WINDOWS, TRUE, slope, &older);
  cut = (gdouble)LEVEL_SHIFT_MARGIN + 3.0 * older.spread;
  *moved_by = 0;
  for (guint i = n - LEVEL_WINDOWS; i < n; i++) {
    gdouble r = fit_residual(&older, x[i], y[i]);
    above += r > cut;
    below += r < -cut;
    *moved_by += r / LEVEL_WINDOWS;
  }
  return above == LEVEL_WINDOWS || below == LEVEL_WINDOWS;
}

/* The line through the kept minima, at each window's close. */
static void fit_line(GstRdmaSkew *skew)
{
  GstRdmaSkewPoint chrono[GST_RDMA_SKEW_N_WINDOWS];
  gdouble x[GST_RDMA_SKEW_N_WINDOWS], y[GST_RDMA_SKEW_N_WINDOWS];
  gboolean used[GST_RDMA_SKEW_N_WINDOWS];
  const GstRdmaSkewPoint *newest;
  guint n = skew->n_windows;
  gboolean fit_slope;
  gdouble moved_by;
  LineFit fit;

  /* Oldest first, relative to the newest minimum: doubles keep sub-ns
   * precision there. */
  for (guint i = 0; i < n; i++)
    chrono[i] =
        skew->windows[(skew->next_window + GST_RDMA_SKEW_N_WINDOWS - n + i) %
                      GST_RDMA_SKEW_N_WINDOWS];
  newest = &chrono[n - 1];
  for (guint i = 0; i < n; i++) {
    x[i] =
        (gdouble)((gint64)chrono[i].sender_time - (gint64)newest->sender_time);
    y[i] = (gdouble)(chrono[i].delay - newest->delay);
  }

  if (level_moved(x, y, n, skew->line_slope, &moved_by)) {
    GST_INFO("the envelope moved by %.1f ms: forgetting %u older windows",
             moved_by / GST_MSECOND, n - LEVEL_WINDOWS);
    skew->stats.level_shifts++;
    for (guint i = 0; i < LEVEL_WINDOWS; i++) {
      chrono[i] = chrono[n - LEVEL_WINDOWS + i];
      x[i] = x[n - LEVEL_WINDOWS + i];
      y[i] = y[n - LEVEL_WINDOWS + i];
      skew->windows[i] = chrono[i];
    }
    n = skew->n_windows = LEVEL_WINDOWS;
    skew->next_window = n;
    newest = &chrono[n - 1];
  }

  /* A slope from fewer windows does not replace one from more (after a new
   * base or a level shift the rate of the same oscillator stays), until
   * they are enough to follow a rate that changes. */
  fit_slope = n >= 2 && n >= MIN(skew->slope_windows, SLOPE_WINDOWS_TO_REPLACE);
  fit_envelope(x, y, used, n, fit_slope, skew->line_slope, &fit);
  if (fit_slope) {
    skew->slope_windows = n;
    skew->have_rate = TRUE;
  }

  if (ABS(ppm_for_slope(fit.slope)) > GST_RDMA_SKEW_MAX_RATE_PPM) {
    gdouble ppm = ppm_for_slope(fit.slope);

    /* Warned once a run of clamped fits, not at every window. */
    GST_CAT_LEVEL_LOG(GST_CAT_DEFAULT,
                      skew->rate_clamped ? GST_LEVEL_DEBUG : GST_LEVEL_WARNING,
                      NULL,
                      "the sender's clock runs %.0f ppm off ours: no "
                      "oscillator does, clamped to %.0f",
                      ppm, GST_RDMA_SKEW_MAX_RATE_PPM);
    skew->stats.rate_clamps++;
    skew->rate_clamped = TRUE;
    fit.slope = slope_for_ppm(ppm > 0 ? GST_RDMA_SKEW_MAX_RATE_PPM
                                      : -GST_RDMA_SKEW_MAX_RATE_PPM);
  } else {
    skew->rate_clamped = FALSE;
  }
  GST_DEBUG("%u windows: rate %.1f ppm, delay %" G_GINT64_FORMAT
            " ns at sender time %" GST_TIME_FORMAT "%s",
            n, ppm_for_slope(fit.slope), newest->delay + round_ns(fit.mean_y),
            GST_TIME_ARGS((GstClockTime)((gint64)newest->sender_time +
                                         round_ns(fit.mean_x))),
            fit_slope ? "" : " (rate kept)");
  skew->line_slope = fit.slope;
  skew->line_time =
      time_from((gint64)newest->sender_time + round_ns(fit.mean_x));
  skew->line_delay = newest->delay + round_ns(fit.mean_y);
  skew->have_line = TRUE;
}

/* Lower envelope: the sample into the open window; a window closes at the
 * first sample GST_RDMA_SKEW_WINDOW of sender time after it opened (a gap
 * in sender time closes it at the next sample) once it has
 * GST_RDMA_SKEW_WINDOW_SAMPLES. */
static void add_to_envelope(GstRdmaSkew *skew, GstClockTime s, gint64 delay)
{
  if (skew->window_open && s >= skew->window_start &&
      s - skew->window_start >= (GstClockTime)GST_RDMA_SKEW_WINDOW &&
      skew->window_samples >= GST_RDMA_SKEW_WINDOW_SAMPLES) {
    skew->windows[skew->next_window] = skew->window_min;
    skew->next_window = (skew->next_window + 1) % GST_RDMA_SKEW_N_WINDOWS;
    if (skew->n_windows < GST_RDMA_SKEW_N_WINDOWS)
      skew->n_windows++;
    skew->window_open = FALSE;
    fit_line(skew);
  }
  if (!skew->window_open) {
    skew->window_open = TRUE;
    skew->window_start = s;
    skew->window_samples = 0;
    skew->window_min.sender_time = s;
    skew->window_min.delay = delay;
  } else if (delay < skew->window_min.delay) {
    skew->window_min.sender_time = s;
    skew->window_min.delay = delay;
  }
  skew->window_samples++;
  /* Until a window closes, the line is the open window's minimum at the
   * rate we have (none, or the last base's). */
  if (skew->n_windows == 0) {
    skew->line_time = skew->window_min.sender_time;
    skew->line_delay = skew->window_min.delay;
    skew->have_line = TRUE;
  }
}

/* A new mapping from this sample: at its arrival. */
static void start_mapping(GstRdmaSkew *skew, GstClockTime s,
                          GstClockTime arrival, gint64 delay)
{
  skew->n_windows = 0;
  skew->next_window = 0;
  skew->window_open = FALSE;
  skew->n_suspects = 0;
  add_to_envelope(skew, s, delay);
  skew->have_mapping = TRUE;
  skew->map_time = s;
  skew->map_out = arrival;
  skew->generation++;
}

/* The stream's monotonic guard and DISCONT, on every output. */
static GstClockTime emit(const GstRdmaSkew *skew, GstRdmaSkewStream *stream,
                         GstClockTime out, GstRdmaSkewFlags *flags)
{
  if (!stream->started || stream->generation_seen != skew->generation) {
    *flags |= GST_RDMA_SKEW_FLAG_DISCONT;
    stream->started = TRUE;
    stream->generation_seen = skew->generation;
  }
  if (GST_CLOCK_TIME_IS_VALID(stream->last_out) && out < stream->last_out)
    out = stream->last_out;
  stream->last_out = out;
  return out;
}

/* The mapping moves to s at the line's rate and closes in on the line,
 * at most the slew's share of the sender time elapsed; a distance beyond
 * GST_RDMA_SKEW_STEP_THRESHOLD it jumps (a DISCONT for the streams when
 * forward). */
static void advance_mapping(GstRdmaSkew *skew, GstClockTime s)
{
  gint64 predicted, target, error, limit;
  gdouble elapsed;

  elapsed = (gdouble)(s - skew->map_time);
  predicted = mapping_at(skew, s);
  target = (gint64)s + line_delay_at(skew, s);
  error = target - predicted;
  skew->map_time = s;
  if (ABS(error) > (gint64)GST_RDMA_SKEW_STEP_THRESHOLD) {
    GST_INFO("the mapping steps by %.1f ms", (gdouble)error / GST_MSECOND);
    skew->stats.steps++;
    skew->map_out = time_from(target);
    if (error > 0)
      skew->generation++;
    return;
  }
  limit = round_ns(elapsed * GST_RDMA_SKEW_SLEW_PPM / 1e6);
  skew->map_out = time_from(predicted + CLAMP(error, -limit, limit));
}

/* A sample off the mapping: a new base once the samples off it agree. */
static gboolean confirms_new_base(GstRdmaSkew *skew, GstClockTime s,
                                  GstClockTime arrival, gint side)
{
  gint64 span, arrival_span;
  gboolean keeps_pace;

  /* A sender time a little before the candidate's (another stream's
   * frame) neither confirms nor drops it. */
  if (skew->n_suspects > 0 && side == skew->suspect_side &&
      s < skew->suspect_time &&
      skew->suspect_time - s <= (GstClockTime)PACE_TOLERANCE) {
    skew->n_suspects++;
    return FALSE;
  }
  if (skew->n_suspects > 0 && side == skew->suspect_side &&
      s >= skew->suspect_time) {
    span = (gint64)(s - skew->suspect_time);
    arrival_span = (gint64)arrival - (gint64)skew->suspect_arrival;
    /* Arrivals keep pace with sender times: not a burst (arrivals stand
     * still), not another absurd time (sender time leaps). */
    keeps_pace = 2 * (arrival_span + (gint64)PACE_TOLERANCE) >= span &&
                 arrival_span <= 2 * span + (gint64)PACE_TOLERANCE;
    if (keeps_pace) {
      skew->n_suspects++;
      return span >= (gint64)GST_RDMA_SKEW_CONFIRM_SPAN &&
             2 * arrival_span >= span;
    }
  }
  /* A new candidate: the earlier ones came to nothing. */
  skew->stats.outliers += skew->n_suspects;
  skew->n_suspects = 1;
  skew->suspect_side = side;
  skew->suspect_time = s;
  skew->suspect_arrival = arrival;
  return FALSE;
}

GstClockTime gst_rdma_skew_observe(GstRdmaSkew *skew, GstClockTime sender_time,
                                   GstClockTime arrival,
                                   GstRdmaSkewFlags *flags)
{
  g_return_val_if_fail(skew != NULL, GST_CLOCK_TIME_NONE);

  return gst_rdma_skew_observe_stream(skew, &skew->own_stream, sender_time,
                                      arrival, flags);
}

GstClockTime gst_rdma_skew_observe_stream(GstRdmaSkew *skew,
                                          GstRdmaSkewStream *stream,
                                          GstClockTime sender_time,
                                          GstClockTime arrival,
                                          GstRdmaSkewFlags *flags)
{
  GstRdmaSkewFlags unused;
  gint64 delay;
  gdouble residual;
  GstClockTime out;

  if (!flags)
    flags = &unused;
  *flags = GST_RDMA_SKEW_FLAG_NONE;
  g_return_val_if_fail(skew != NULL && stream != NULL, GST_CLOCK_TIME_NONE);
  g_return_val_if_fail(is_time(arrival), GST_CLOCK_TIME_NONE);

  skew->stats.observed++;
  if (!is_time(sender_time)) {
    skew->stats.invalid++;
    *flags |= GST_RDMA_SKEW_FLAG_OFF_MAPPING;
    return emit(skew, stream, arrival, flags);
  }
  delay = (gint64)arrival - (gint64)sender_time;

  if (!skew->have_mapping) {
    start_mapping(skew, sender_time, arrival, delay);
    GST_DEBUG("sender time %" GST_TIME_FORMAT
              " is running time %" GST_TIME_FORMAT " here",
              GST_TIME_ARGS(sender_time), GST_TIME_ARGS(arrival));
    return emit(skew, stream, arrival, flags);
  }

  /* Off the applied mapping (within the slew of the line, normally) by
   * more than the threshold either way: against the mapping rather than
   * the line so that what is returned stays within the threshold of
   * arrivals even when the line is clamped.  In doubles: an absurd sender
   * time may be G_MAXINT64 away. */
  residual =
      (gdouble)arrival - ((gdouble)skew->map_out +
                          (1.0 + skew->line_slope) *
                              ((gdouble)sender_time - (gdouble)skew->map_time));
  if (ABS(residual) > (gdouble)GST_RDMA_SKEW_JUMP_THRESHOLD) {
    if (confirms_new_base(skew, sender_time, arrival, residual > 0 ? 1 : -1)) {
      GST_INFO("new base: sender time %" GST_TIME_FORMAT
               " is %s our mapping by %.3f s",
               GST_TIME_ARGS(sender_time), residual > 0 ? "behind" : "ahead of",
               ABS(residual) / GST_SECOND);
      skew->stats.rebases++;
      start_mapping(skew, sender_time, arrival, delay);
      *flags |= GST_RDMA_SKEW_FLAG_REBASED;
      return emit(skew, stream, arrival, flags);
    }
    GST_LOG("sender time %" GST_TIME_FORMAT " off the mapping by %.3f s",
            GST_TIME_ARGS(sender_time), residual / GST_SECOND);
    *flags |= GST_RDMA_SKEW_FLAG_OFF_MAPPING;
    return emit(skew, stream, arrival, flags);
  }

  /* It fits: whatever was off the mapping before was outliers. */
  skew->stats.outliers += skew->n_suspects;
  skew->n_suspects = 0;

  add_to_envelope(skew, sender_time, delay);
  if (sender_time > skew->map_time) {
    advance_mapping(skew, sender_time);
    out = skew->map_out;
  } else {
    /* Not past the newest sample (another stream's frame captured a little
     * before, a repeated or reordered time): through the mapping as it
     * is; the stream's guard holds a stream's output. */
    out = time_from(mapping_at(skew, sender_time));
  }
  return emit(skew, stream, out, flags);
}

GstClockTime gst_rdma_skew_map(const GstRdmaSkew *skew,
                               GstClockTime sender_time)
{
  g_return_val_if_fail(skew != NULL, GST_CLOCK_TIME_NONE);

  if (!skew->have_mapping || !is_time(sender_time))
    return GST_CLOCK_TIME_NONE;
  return time_from(mapping_at(skew, sender_time));
}

gdouble gst_rdma_skew_get_rate_ppm(const GstRdmaSkew *skew)
{
  g_return_val_if_fail(skew != NULL, 0.0);

  return skew->have_line ? ppm_for_slope(skew->line_slope) : 0.0;
}

GstClockTimeDiff gst_rdma_skew_get_offset(const GstRdmaSkew *skew)
{
  g_return_val_if_fail(skew != NULL, 0);

  if (!skew->have_mapping)
    return 0;
  return (GstClockTimeDiff)skew->map_out - (GstClockTimeDiff)skew->map_time;
}

gboolean gst_rdma_skew_has_rate(const GstRdmaSkew *skew)
{
  g_return_val_if_fail(skew != NULL, FALSE);

  return skew->have_rate;
}

void gst_rdma_skew_get_stats(const GstRdmaSkew *skew, GstRdmaSkewStats *stats)
{
  g_return_if_fail(skew != NULL && stats != NULL);

  *stats = skew->stats;
}
