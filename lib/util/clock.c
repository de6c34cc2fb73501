/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* clock.c - time helpers and the polling back-off schedule. */
#include <errno.h>
#include <sys/prctl.h>
#include <time.h>

#include "util/clock.h"

static uint64_t ns_of(clockid_t id)
{
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t sbr__now_ns(void)
{
  return ns_of(CLOCK_MONOTONIC);
}

uint64_t sbr__realtime_ns(void)
{
  return ns_of(CLOCK_REALTIME);
}

void sbr__sleep_us(uint32_t us)
{
  struct timespec ts = {us / 1000000u, (long)(us % 1000000u) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

void sbr__sleep_until_ns(uint64_t t_ns)
{
  struct timespec ts = {(time_t)(t_ns / 1000000000u),
                        (long)(t_ns % 1000000000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
    ;
}

void sbr__deadline_after_us(struct timespec *ts, uint64_t us)
{
  clock_gettime(CLOCK_MONOTONIC, ts);
  uint64_t ns = (uint64_t)ts->tv_nsec + us * 1000u;
  ts->tv_sec += (time_t)(ns / 1000000000u);
  ts->tv_nsec = (long)(ns % 1000000000u);
}

void sbr__backoff_config_fill(struct sbr_backoff_config *cfg)
{
  /* Zero fields take the defaults documented in sbr.h. */
  if (cfg->spin_us == 0)
    cfg->spin_us = 20;
  if (cfg->min_sleep_us == 0)
    cfg->min_sleep_us = 10;
  if (cfg->max_sleep_us == 0)
    cfg->max_sleep_us = 1000;
  if (cfg->max_sleep_us < cfg->min_sleep_us)
    cfg->max_sleep_us = cfg->min_sleep_us;
}

void sbr__backoff_init(struct sbr__backoff *b,
                       const struct sbr_backoff_config *cfg)
{
  b->cfg = *cfg;
  sbr__backoff_config_fill(&b->cfg);
  sbr__backoff_reset(b);
}

void sbr__backoff_reset(struct sbr__backoff *b)
{
  b->idle_since_ns = 0;
  b->spinning = true;
  b->spins = 0;
  b->sleep_us = b->cfg.min_sleep_us;
}

/* The spin phase looks at the clock only every SPINS_PER_CLOCK_READ waits:
 * in a VM without a usable vDSO clock (the TCG test VM) clock_gettime is a
 * system call, and reading it on every spin made it the sender's most
 * frequent one (1.26 per block, strace). */
#define SPINS_PER_CLOCK_READ 16u

bool sbr__backoff_spin(struct sbr__backoff *b)
{
  if (b->idle_since_ns == 0) {
    b->idle_since_ns = sbr__now_ns();
    b->spins = 0;
  }
  if (!b->spinning)
    return false;
  if (++b->spins % SPINS_PER_CLOCK_READ != 0 ||
      sbr__now_ns() - b->idle_since_ns < (uint64_t)b->cfg.spin_us * 1000u) {
    sbr__cpu_relax();
    return true;
  }
  b->spinning = false;
  return false;
}

uint32_t sbr__backoff_next_sleep_us(struct sbr__backoff *b)
{
  uint32_t us = b->sleep_us;
  b->sleep_us *= 2;
  if (b->sleep_us > b->cfg.max_sleep_us)
    b->sleep_us = b->cfg.max_sleep_us;
  return us;
}

void sbr__backoff_wait(struct sbr__backoff *b)
{
  if (!sbr__backoff_spin(b))
    sbr__sleep_us(sbr__backoff_next_sleep_us(b));
}

void sbr__thread_precise_sleeps(void)
{
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); /* 1 us; best effort */
}

long sbr__thread_lower_slack(void)
{
  int old = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* best effort */
  return old;
}

void sbr__thread_restore_slack(long slack_ns)
{
  /* 0 would mean "the thread's default", not what it had: keep 1 then. */
  if (slack_ns > 0)
    prctl(PR_SET_TIMERSLACK, (unsigned long)slack_ns, 0, 0, 0);
}
