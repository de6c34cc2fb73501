/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* test-clock.c - the polling back-off schedule (lib/util/clock.c): spin, then
 * sleep from min_sleep_us doubling to max_sleep_us, reset by progress. */
#include <unistd.h>

#include "util/clock.h"
#include "test.h"

static struct sbr__backoff make_backoff(uint32_t spin_us, uint32_t min_us,
                                        uint32_t max_us)
{
  struct sbr_backoff_config cfg = {spin_us, min_us, max_us};
  struct sbr__backoff b;
  sbr__backoff_init(&b, &cfg);
  return b;
}

static void spin_reads_the_clock_every_sixteenth_wait(void)
{
  /* The spin phase is long over after 2 ms, but only the 16th wait looks at
   * the clock (a system call in the test VM); it is the first to sleep. */
  struct sbr__backoff b = make_backoff(1, 10, 40);
  sbr__backoff_wait(&b); /* starts the idle period */
  usleep(2000);
  for (int i = 2; i < 16; i++) {
    sbr__backoff_wait(&b);
    ASSERT_MSG(b.spinning && b.sleep_us == 10, "wait %d slept", i);
  }
  sbr__backoff_wait(&b);
  ASSERT(!b.spinning);
  ASSERT_EQ(b.sleep_us, 20);
}

static void sleeps_double_up_to_the_ceiling_and_reset_restarts(void)
{
  struct sbr__backoff b = make_backoff(1, 10, 40);
  sbr__backoff_wait(&b);
  usleep(2000);
  while (b.spinning)
    sbr__backoff_wait(&b);
  ASSERT_EQ(b.sleep_us, 20); /* slept 10 */
  sbr__backoff_wait(&b);
  ASSERT_EQ(b.sleep_us, 40); /* slept 20 */
  sbr__backoff_wait(&b);
  ASSERT_EQ(b.sleep_us, 40); /* slept 40: the ceiling */
  sbr__backoff_reset(&b);
  ASSERT(b.spinning);
  ASSERT_EQ(b.sleep_us, 10);
  ASSERT_EQ(b.idle_since_ns, 0);
}

static void zero_config_takes_the_documented_defaults(void)
{
  struct sbr_backoff_config cfg = {0, 0, 0};
  sbr__backoff_config_fill(&cfg);
  ASSERT_EQ(cfg.spin_us, 20);
  ASSERT_EQ(cfg.min_sleep_us, 10);
  ASSERT_EQ(cfg.max_sleep_us, 1000);
  struct sbr_backoff_config inverted = {5, 500, 100};
  sbr__backoff_config_fill(&inverted);
  ASSERT_EQ(inverted.max_sleep_us, 500);
}

int main(int argc, char **argv)
{
  static const struct test_entry tests[] = {
      {"spin_reads_the_clock_every_sixteenth_wait",
       spin_reads_the_clock_every_sixteenth_wait, ANY_BACKEND},
      {"sleeps_double_up_to_the_ceiling_and_reset_restarts",
       sleeps_double_up_to_the_ceiling_and_reset_restarts, ANY_BACKEND},
      {"zero_config_takes_the_documented_defaults",
       zero_config_takes_the_documented_defaults, ANY_BACKEND},
      {NULL, NULL, ANY_BACKEND},
  };
  return test_main(tests, argc, argv);
}
