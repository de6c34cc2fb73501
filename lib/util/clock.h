/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* clock.h - monotonic time and the polling back-off.  The status-byte
 * receiver is passive: it has no completion to wake on, so it polls
 * (docs/design.md, "Waiting for a frame"); the back-off keeps an idle
 * poller nearly free and bounds the delay a busy one adds. */
#ifndef SBR_CLOCK_H
#define SBR_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "sbr.h"

uint64_t sbr__now_ns(void);      /* CLOCK_MONOTONIC */
uint64_t sbr__realtime_ns(void); /* CLOCK_REALTIME, for capture times */
void sbr__sleep_us(uint32_t us);
/* Sleeps until CLOCK_MONOTONIC reaches t_ns (absolute: no drift from the
 * time it takes to get here). */
void sbr__sleep_until_ns(uint64_t t_ns);
/* *ts = CLOCK_MONOTONIC now + us, for timed waits on condition variables
 * made with that clock. */
void sbr__deadline_after_us(struct timespec *ts, uint64_t us);

void sbr__backoff_config_fill(struct sbr_backoff_config *cfg);

/* For the library's own threads (sender, ACK, shm NIC): Linux stretches
 * every sleep by the thread's timer slack (50 us by default), which turned
 * the back-off's 10 us naps into ~90 us and made sync READs wait for it. */
void sbr__thread_precise_sleeps(void);
/* For a caller's thread that the library sleeps on for a while: set its
 * timer slack to 1 ns and return the old value, which
 * sbr__thread_restore_slack puts back. */
long sbr__thread_lower_slack(void);
void sbr__thread_restore_slack(long slack_ns);

struct sbr__backoff {
  struct sbr_backoff_config cfg;
  uint64_t idle_since_ns; /* 0 = not idle: the next wait starts spinning */
  uint32_t spins;         /* waits since the clock was last read */
  bool spinning;          /* still within spin_us of idle_since_ns */
  uint32_t sleep_us;      /* next sleep length once spinning is over */
};

void sbr__backoff_init(struct sbr__backoff *b,
                       const struct sbr_backoff_config *cfg);
/* Something happened: the next wait spins again. */
void sbr__backoff_reset(struct sbr__backoff *b);
/* Nothing happened: spin (cpu relax) or sleep, per the schedule. */
void sbr__backoff_wait(struct sbr__backoff *b);
/* The same in two halves, for a waiter that sleeps on an event with the
 * schedule's sleep as its timeout: spin returns true (after a cpu relax)
 * while the spin phase lasts; next_sleep_us is the next sleep's length and
 * moves the schedule on. */
bool sbr__backoff_spin(struct sbr__backoff *b);
uint32_t sbr__backoff_next_sleep_us(struct sbr__backoff *b);

/* Tell the CPU we are spinning (pause on x86, yield on arm64). */
static inline void sbr__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Rule 2: after seeing a status byte the NIC wrote, order later loads of the
 * block after it (rdma-core's udma_from_device_barrier). */
static inline void sbr__from_device_barrier(void)
{
#if defined(__x86_64__) || defined(__i386__)
  __asm__ __volatile__("lfence" ::: "memory");
#elif defined(__aarch64__)
  __asm__ __volatile__("dmb oshld" ::: "memory");
#else
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
}

#endif
