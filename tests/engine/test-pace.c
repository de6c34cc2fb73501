/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* test-pace.c - the adaptive poll mode's model (lib/engine/pace.c): learning a
 * device's frame period from synthetic arrival times, and the wait it
 * plans.  No clock: every time is made up. */
#include "engine/pace.h"
#include "test.h"

#define MS 1000000ull
#define US 1000ull
#define T0 (1000 * MS) /* arbitrary start: times are never 0 */

/* Feeds n frames of device every period_ns, each off by a jitter taken
 * from a fixed pseudo-random sequence within +-jitter_ns.  Returns the
 * time of the last one. */
static uint64_t feed(struct sbr__pace *p, uint8_t device, uint64_t t0,
                     unsigned n, uint64_t period_ns, uint64_t jitter_ns,
                     uint64_t hint_ns)
{
  uint32_t x = 12345;
  uint64_t t = t0;
  for (unsigned i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    int64_t off = 0;
    if (jitter_ns)
      off = (int64_t)((x >> 8) % (2 * jitter_ns + 1)) - (int64_t)jitter_ns;
    t = t0 + i * period_ns + (uint64_t)off;
    sbr__pace_arrival(p, device, t, hint_ns, false);
  }
  return t;
}

static void steady_stream_is_learned(void)
{
  static struct sbr__pace p;
  sbr__pace_init(&p);
  feed(&p, 3, T0, 30, 40 * MS, 50 * US, 0);
  ASSERT(sbr__pace_periodic(&p.dev[3]));
  uint64_t period = p.dev[3].period_ns;
  ASSERT_MSG(period > 39600 * US && period < 40400 * US, "period %llu ns",
             (unsigned long long)period);
  ASSERT_EQ(sbr__pace_periodic_count(&p), 1);
}

static void learning_takes_a_few_frames(void)
{
  static struct sbr__pace p;
  sbr__pace_init(&p);
  feed(&p, 0, T0, 3, 40 * MS, 0, 0);
  ASSERT(!sbr__pace_periodic(&p.dev[0])); /* two intervals are not enough */
  feed(&p, 0, T0, 12, 40 * MS, 0, 0);
  ASSERT(sbr__pace_periodic(&p.dev[0]));
}

static void jittery_stream_is_not_periodic(void)
{
  static struct sbr__pace p;
  sbr__pace_init(&p);
  /* +-15 ms on 40 ms: nothing to predict. */
  feed(&p, 1, T0, 100, 40 * MS, 15 * MS, 0);
  ASSERT(!sbr__pace_periodic(&p.dev[1]));
}

static void skipped_frame_keeps_the_period(void)
{
  static struct sbr__pace p;
  sbr__pace_init(&p);
  uint64_t t = feed(&p, 2, T0, 20, 10 * MS, 0, 0);
  ASSERT(sbr__pace_periodic(&p.dev[2]));
  /* One frame lost: the next comes two periods later. */
  ASSERT_EQ(sbr__pace_arrival(&p, 2, t + 20 * MS, 0, false), SBR__PACE_MISSED);
  ASSERT(sbr__pace_periodic(&p.dev[2]));
  uint64_t period = p.dev[2].period_ns;
  ASSERT_MSG(period > 9900 * US && period < 10100 * US, "period %llu ns",
             (unsigned long long)period);
  /* And the one after is predicted again. */
  ASSERT_EQ(sbr__pace_arrival(&p, 2, t + 30 * MS, 0, false),
            SBR__PACE_PREDICTED);
}

static void late_frame_does_not_shift_the_grid(void)
{
  /* A sender that stalled once: its next frame is back on time. */
  static struct sbr__pace p;
  sbr__pace_init(&p);
  uint64_t t = feed(&p, 2, T0, 20, 10 * MS, 0, 0);
  ASSERT_EQ(sbr__pace_arrival(&p, 2, t + 14 * MS, 0, false), SBR__PACE_MISSED);
  ASSERT(sbr__pace_periodic(&p.dev[2]));
  ASSERT_EQ(sbr__pace_arrival(&p, 2, t + 20 * MS, 0, false),
            SBR__PACE_PREDICTED);
}

static void frame_in_window_is_predicted_and_early_one_missed(void)
{
  static struct sbr__pace p;
  sbr__pace_init(&p);
  uint64_t t = feed(&p, 4, T0, 20, 40 * MS, 0, 0);
  ASSERT_EQ(sbr__pace_arrival(&p, 4, t + 40 * MS + 10 * US, 0, false),
            SBR__PACE_PREDICTED);
  t += 40 * MS + 10 * US;
  /* 5 ms early: outside the window. */
  ASSERT_EQ(sbr__pace_arrival(&p, 4, t + 35 * MS, 0, false), SBR__PACE_MISSED);
}

static void frame_found_right_after_a_sleep_is_missed(void)
{
  /* It may have waited for us during the sleep: not a prediction. */
  static struct sbr__pace p;
  sbr__pace_init(&p);
  uint64_t t = feed(&p, 4, T0, 20, 40 * MS, 0, 0);
  ASSERT_EQ(sbr__pace_arrival(&p, 4, t + 40 * MS, 0, true), SBR__PACE_MISSED);
}

static void hint_predicts_from_the_second_frame(void)
{
  static struct sbr__pace p;
  sbr__pace_init(&p);
  sbr__pace_arrival(&p, 5, T0, 33333333, false);
  ASSERT(sbr__pace_periodic(&p.dev[5]));
  ASSERT_EQ(sbr__pace_arrival(&p, 5, T0 + 33333333, 33333333, false),
            SBR__PACE_PREDICTED);
}

static void hint_at_twice_the_rate_is_overruled(void)
{
  static struct sbr__pace p;
  sbr__pace_init(&p);
  /* Hint says 10 ms, frames come every 20 ms. */
  feed(&p, 6, T0, 40, 20 * MS, 0, 10 * MS);
  ASSERT(sbr__pace_periodic(&p.dev[6]));
  uint64_t period = p.dev[6].period_ns;
  ASSERT_MSG(period > 19 * MS && period < 21 * MS, "period %llu ns",
             (unsigned long long)period);
}

static void plan_sleeps_until_the_next_window(void)
{
  static struct sbr__pace p;
  sbr__pace_init(&p);
  uint64_t t = feed(&p, 0, T0, 20, 40 * MS, 0, 0);
  struct sbr__pace_plan plan;
  sbr__pace_plan(&p, t + 1 * MS, &plan);
  ASSERT_EQ(plan.action, SBR__PACE_SLEEP);
  uint64_t start, end;
  sbr__pace_window(&p, &p.dev[0], &start, &end);
  ASSERT_EQ(plan.until_ns, start);
  ASSERT(start < t + 40 * MS && start >= t + 40 * MS - SBR__PACE_LEAD_MAX_NS);
  /* Inside the window: poll. */
  sbr__pace_plan(&p, t + 40 * MS, &plan);
  ASSERT_EQ(plan.action, SBR__PACE_SPIN);
  ASSERT_EQ(plan.until_ns, end);
}

static void plan_wakes_for_the_earliest_device(void)
{
  /* Two senders out of phase: the next window is the other device's. */
  static struct sbr__pace p;
  sbr__pace_init(&p);
  feed(&p, 0, T0, 20, 40 * MS, 0, 0);
  uint64_t t1 = feed(&p, 1, T0 + 15 * MS, 20, 40 * MS, 0, 0);
  struct sbr__pace_plan plan;
  sbr__pace_plan(&p, t1 + 1 * MS, &plan);
  ASSERT_EQ(plan.action, SBR__PACE_SLEEP);
  uint64_t start0, end0;
  sbr__pace_window(&p, &p.dev[0], &start0, &end0);
  ASSERT_EQ(plan.until_ns, start0); /* device 0 is due first */
  ASSERT(start0 < t1 + 40 * MS);
}

static void plan_counts_the_devices_heard_from(void)
{
  /* Two devices with open windows at once: the first one's window is
   * polled, and both count; a device quiet for longer than QUIET_NS
   * doesn't (the receiver polls one camera's window only: receiver.c). */
  static struct sbr__pace p;
  sbr__pace_init(&p);
  feed(&p, 0, T0, 20, 40 * MS, 0, 0);
  uint64_t t = feed(&p, 1, T0, 20, 40 * MS, 0, 0);
  struct sbr__pace_plan plan;
  sbr__pace_plan(&p, t + 40 * MS, &plan);
  ASSERT_EQ(plan.action, SBR__PACE_SPIN);
  uint64_t start0, end0;
  sbr__pace_window(&p, &p.dev[0], &start0, &end0);
  ASSERT_EQ(plan.until_ns, end0);
  ASSERT_EQ(plan.active, 2);
  /* Device 1 stops; device 0 goes on past QUIET_NS. */
  uint64_t t0 = feed(&p, 0, t + 40 * MS, 40, 40 * MS, 0, 0);
  ASSERT(t0 - t > SBR__PACE_QUIET_NS);
  sbr__pace_plan(&p, t0 + 1 * MS, &plan);
  ASSERT_EQ(plan.action, SBR__PACE_SLEEP);
  ASSERT_EQ(plan.active, 1);
}

static void plan_backs_off_for_an_irregular_device(void)
{
  static struct sbr__pace p;
  sbr__pace_init(&p);
  uint64_t t = feed(&p, 0, T0, 20, 40 * MS, 0, 0);
  feed(&p, 1, T0, 20, 40 * MS, 15 * MS, 0);
  struct sbr__pace_plan plan;
  sbr__pace_plan(&p, t + 1 * MS, &plan);
  ASSERT_EQ(plan.action, SBR__PACE_BACKOFF);
  /* ...but wakes for device 0's window. */
  uint64_t start, end;
  sbr__pace_window(&p, &p.dev[0], &start, &end);
  ASSERT_EQ(plan.until_ns, start);
}

static void plan_backs_off_when_a_frame_is_overdue(void)
{
  static struct sbr__pace p;
  sbr__pace_init(&p);
  uint64_t t = feed(&p, 0, T0, 20, 40 * MS, 0, 0);
  struct sbr__pace_plan plan;
  /* Past the longest window: the frame is overdue. */
  sbr__pace_plan(&p, t + 41 * MS + SBR__PACE_AFTER_MAX_NS, &plan);
  ASSERT_EQ(plan.action, SBR__PACE_BACKOFF);
}

static void plan_backs_off_while_a_frame_is_assembling(void)
{
  /* A big frame's first fragment was found: the rest follows it, so the
   * receiver polls (back-off) instead of sleeping to the next window. */
  static struct sbr__pace p;
  sbr__pace_init(&p);
  uint64_t t = feed(&p, 0, T0, 20, 40 * MS, 0, 0);
  struct sbr__pace_plan plan;
  p.assembling = 1;
  sbr__pace_plan(&p, t + 1 * MS, &plan);
  ASSERT_EQ(plan.action, SBR__PACE_BACKOFF);
  uint64_t start, end;
  sbr__pace_window(&p, &p.dev[0], &start, &end);
  ASSERT_EQ(plan.until_ns, start); /* still woken for the window */
  p.assembling = 0;
  sbr__pace_plan(&p, t + 1 * MS, &plan);
  ASSERT_EQ(plan.action, SBR__PACE_SLEEP);
}

static void plan_backs_off_when_idle(void)
{
  static struct sbr__pace p;
  sbr__pace_init(&p);
  struct sbr__pace_plan plan;
  sbr__pace_plan(&p, T0, &plan);
  ASSERT_EQ(plan.action, SBR__PACE_BACKOFF);
  ASSERT_EQ(plan.until_ns, UINT64_MAX);
  /* A stream that stopped long ago no longer counts. */
  uint64_t t = feed(&p, 0, T0, 20, 40 * MS, 0, 0);
  sbr__pace_plan(&p, t + 2000 * MS, &plan);
  ASSERT_EQ(plan.action, SBR__PACE_BACKOFF);
  ASSERT_EQ(plan.until_ns, UINT64_MAX);
}

/* Twelve cameras' frames land in a burst, in a changing order: a device's
 * frame is often most of a millisecond off its grid.  Its window reaches
 * 3 x jitter past the prediction (not 400 us), so a frame still 1 ms late
 * is polled for rather than waited for in the back-off's sleeps. */
static void late_frame_of_a_burst_is_still_polled_for(void)
{
  static struct sbr__pace p;
  sbr__pace_init(&p);
  feed(&p, 0, T0, 40, 40 * MS, 800 * US, 0);
  const struct sbr__pace_dev *d = &p.dev[0];
  ASSERT(sbr__pace_periodic(d));
  ASSERT_MSG(d->jitter_ns >= 300 * US, "jitter %llu ns",
             (unsigned long long)d->jitter_ns);
  uint64_t predicted = d->grid_ns + d->period_ns;
  struct sbr__pace_plan plan;
  sbr__pace_plan(&p, predicted + 1 * MS, &plan);
  ASSERT_EQ(plan.action, SBR__PACE_SPIN);
  ASSERT(plan.until_ns > predicted + 1 * MS);
  /* Past 3 x jitter + 100 us it is overdue: back off. */
  sbr__pace_plan(&p, predicted + 3 * d->jitter_ns + 101 * US, &plan);
  ASSERT_EQ(plan.action, SBR__PACE_BACKOFF);
}

static void window_is_bounded(void)
{
  /* However jittery (within validity) and late the timer, a window spins
   * at most LEAD_MAX + AFTER_MAX. */
  static struct sbr__pace p;
  sbr__pace_init(&p);
  p.dev[0] = (struct sbr__pace_dev){.last_ns = T0,
                                    .period_ns = 1000 * MS,
                                    .jitter_ns = 100 * MS,
                                    .samples = 10,
                                    .listed = true};
  for (int i = 0; i < 100; i++)
    sbr__pace_overslept(&p, 10 * MS);
  ASSERT(sbr__pace_periodic(&p.dev[0]));
  uint64_t start, end;
  sbr__pace_window(&p, &p.dev[0], &start, &end);
  ASSERT(end - start <= SBR__PACE_LEAD_MAX_NS + SBR__PACE_AFTER_MAX_NS);
}

int main(int argc, char **argv)
{
  static const struct test_entry tests[] = {
      {"steady_stream_is_learned", steady_stream_is_learned, ANY_BACKEND},
      {"learning_takes_a_few_frames", learning_takes_a_few_frames, ANY_BACKEND},
      {"jittery_stream_is_not_periodic", jittery_stream_is_not_periodic,
       ANY_BACKEND},
      {"skipped_frame_keeps_the_period", skipped_frame_keeps_the_period,
       ANY_BACKEND},
      {"late_frame_does_not_shift_the_grid", late_frame_does_not_shift_the_grid,
       ANY_BACKEND},
      {"frame_in_window_is_predicted_and_early_one_missed",
       frame_in_window_is_predicted_and_early_one_missed, ANY_BACKEND},
      {"frame_found_right_after_a_sleep_is_missed",
       frame_found_right_after_a_sleep_is_missed, ANY_BACKEND},
      {"hint_predicts_from_the_second_frame",
       hint_predicts_from_the_second_frame, ANY_BACKEND},
      {"hint_at_twice_the_rate_is_overruled",
       hint_at_twice_the_rate_is_overruled, ANY_BACKEND},
      {"plan_sleeps_until_the_next_window", plan_sleeps_until_the_next_window,
       ANY_BACKEND},
      {"plan_wakes_for_the_earliest_device", plan_wakes_for_the_earliest_device,
       ANY_BACKEND},
      {"plan_counts_the_devices_heard_from", plan_counts_the_devices_heard_from,
       ANY_BACKEND},
      {"plan_backs_off_for_an_irregular_device",
       plan_backs_off_for_an_irregular_device, ANY_BACKEND},
      {"plan_backs_off_when_a_frame_is_overdue",
       plan_backs_off_when_a_frame_is_overdue, ANY_BACKEND},
      {"plan_backs_off_while_a_frame_is_assembling",
       plan_backs_off_while_a_frame_is_assembling, ANY_BACKEND},
      {"plan_backs_off_when_idle", plan_backs_off_when_idle, ANY_BACKEND},
      {"late_frame_of_a_burst_is_still_polled_for",
       late_frame_of_a_burst_is_still_polled_for, ANY_BACKEND},
      {"window_is_bounded", window_is_bounded, ANY_BACKEND},
      {NULL, NULL, ANY_BACKEND},
  };
  return test_main(tests, argc, argv);
}
