/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sbr-bench - in-process measurements sbr-perf can't make, for
 * tests/bench/run.py.  Sender and receiver run in this one process (threads),
 * so every timestamp is on one CLOCK_MONOTONIC.  Uses nothing but sbr.h.
 *
 *   sbr-bench timeline [options]
 *       Throughput delivered to the receiving application per --interval-ms,
 *       for --duration-ms.  With --hold-from-ms A --hold-to-ms B the
 *       receiver keeps (sbr_block_hold) the first block that arrives at or
 *       after A and releases it at B: the status-byte sender skips that one
 *       block, the sliding window can't ACK past it.
 *
 *   sbr-bench sync [options]
 *       Control-path latency at saturation.  A poller thread watches
 *       sbr_sender_get_stats() and reports
 *         status-byte:    each status READ (post -> completion; the library
 *                         accumulates the duration, the poller takes the
 *                         difference per READ, since at most one READ is in
 *                         flight at a time),
 *         sliding-window: each ACK (the receiving application releases block
 *                         k, which sends ACK k -> the sender's ACK thread has
 *                         counted it), i.e. the ACK path of the round trip
 *                         that frees a slot.
 *       The poller runs for both mechanisms, so both are disturbed alike;
 *       --poll-sleep-us N makes it sleep between polls (an ACK is then seen
 *       up to one poll interval late; the READ durations are the library's
 *       own and don't depend on it).
 *
 * Common options:
 *   --backend shm|verbs  --mechanism status-byte|sliding-window
 *   --address A (verbs, default 127.0.0.1)  --port N
 *   --blocks N (receive lane; the sender gets max(N,16) send blocks)
 *   --size BYTES (payload per block)  --read-ahead N  --rate BLOCKS_PER_S
 *   --status-batch BYTES (struct sbr_sender_config.status_batch_bytes)
 *   --pause-poll-us N (struct sbr_sender_config.pause_poll_us; 0 = the
 *   paper's sync-when-empty READs only; default: the library's)
 *   --spin-us/--min-sleep-us/--max-sleep-us N (struct sbr_backoff_config,
 *   both ends; default: the library's)  --timer-slack-ns N (prctl, all
 *   threads; default: the system's, 50 us on Linux)
 *
 * One JSON object on stdout.  Exit 0 when the run completed (the figures are
 * whatever they are), 1 when it could not run.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "sbr.h"

#define NS_PER_MS 1000000ull
#define NS_PER_US 1000ull
#define MAX_INTERVALS 4096
#define SEQ_RING (1u << 16) /* release timestamps, by seq */
#define HIST_SUB 4          /* histogram buckets per octave */
#define HIST_BUCKETS (64 * HIST_SUB)

struct opts {
  const char *mode;
  enum sbr_backend backend;
  enum sbr_mechanism mechanism;
  const char *address;
  uint16_t port;
  uint32_t blocks;
  uint32_t size;
  uint32_t read_ahead;
  uint32_t status_batch_bytes;
  int64_t pause_poll_us; /* -1 = the library's default */
  double rate;           /* blocks/s, 0 = flat out */
  uint32_t duration_ms;
  uint32_t interval_ms;
  uint32_t hold_from_ms, hold_to_ms; /* hold_to 0: no hold */
  uint32_t warmup_ms;                /* sync: ignore this much at the start */
  struct sbr_backoff_config backoff; /* both ends; 0 = library default */
  long timer_slack_ns;               /* -1: leave as is */
  uint32_t poll_sleep_us;            /* sync: poller pause, 0 = sched_yield */
};

static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
  struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
    ;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fputs("sbr-bench: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

/* ------------------------------------------------------------ histogram */

struct hist {
  uint64_t n, sum_ns, max_ns, min_ns;
  uint64_t bucket[HIST_BUCKETS]; /* b: [2^(b/4), 2^((b+1)/4)) ns */
};

static void hist_add(struct hist *h, uint64_t ns)
{
  if (h->n == 0 || ns < h->min_ns)
    h->min_ns = ns;
  h->n++;
  h->sum_ns += ns;
  if (ns > h->max_ns)
    h->max_ns = ns;
  int b = ns ? (int)floor(log2((double)ns) * HIST_SUB) : 0;
  if (b < 0)
    b = 0;
  if (b >= HIST_BUCKETS)
    b = HIST_BUCKETS - 1;
  h->bucket[b]++;
}

/* Quantile from the buckets: geometric middle of the bucket (within 9 %). */
static double hist_quantile_us(const struct hist *h, double q)
{
  if (!h->n)
    return 0;
  uint64_t want = (uint64_t)ceil(q * (double)h->n), seen = 0;
  if (want == 0)
    want = 1;
  for (int b = 0; b < HIST_BUCKETS; b++) {
    seen += h->bucket[b];
    if (seen >= want)
      return exp2((b + 0.5) / HIST_SUB) / 1e3;
  }
  return h->max_ns / 1e3;
}

static void hist_json(const char *name, const struct hist *h)
{
  printf("\"%s\":{\"n\":%" PRIu64 ",\"mean_us\":%.3f,\"min_us\":%.3f,"
         "\"p50_us\":%.3f,\"p90_us\":%.3f,\"p99_us\":%.3f,\"max_us\":%.3f,"
         "\"quarter_log2_ns_buckets\":[",
         name, h->n, h->n ? h->sum_ns / 1e3 / h->n : 0, h->min_ns / 1e3,
         hist_quantile_us(h, 0.5), hist_quantile_us(h, 0.9),
         hist_quantile_us(h, 0.99), h->max_ns / 1e3);
  int last = 0;
  for (int b = 0; b < HIST_BUCKETS; b++)
    if (h->bucket[b])
      last = b;
  for (int b = 0; b <= last; b++)
    printf("%s%" PRIu64, b ? "," : "", h->bucket[b]);
  printf("]}");
}

/* ------------------------------------------------------------ the run */

struct run {
  const struct opts *o;
  sbr_receiver *r;
  sbr_sender *s;
  _Atomic uint64_t t0; /* time 0 of the run, 0 before */
  uint64_t prod_start; /* the producer's first block */
  atomic_bool prod_stop, rx_stop, poll_stop;
  /* producer */
  uint64_t submitted, prod_drops;
  /* receiver */
  uint64_t rx_blocks, rx_bytes;
  uint64_t iv_bytes[MAX_INTERVALS], iv_blocks[MAX_INTERVALS];
  sbr_block *held;
  uint64_t held_at_ns, released_at_ns, held_seq;
  bool did_hold;
  uint64_t first_seq;
  bool seq_seen;
  uint64_t seq_errors;
  _Atomic uint64_t rel_ns[SEQ_RING]; /* when block seq was released */
  /* poller */
  struct hist sync_hist; /* status-byte: READ durations */
  struct hist ack_hist;  /* sliding-window: release -> ACK counted */
  uint64_t ack_unmatched;
  uint64_t polls;
};

static void *receiver_main(void *arg)
{
  struct run *run = arg;
  const struct opts *o = run->o;
  uint64_t iv_ns = (uint64_t)o->interval_ms * NS_PER_MS;
  while (!atomic_load(&run->rx_stop)) {
    sbr_block *b;
    int ret = sbr_receiver_next(run->r, 1, &b);
    uint64_t now = now_ns();
    uint64_t t0 = atomic_load(&run->t0);
    if (ret == 0) {
      const struct sbr_block_info *in = sbr_block_get_info(b);
      if (!run->seq_seen) {
        run->first_seq = in->seq;
        run->seq_seen = true;
      }
      run->rx_blocks++;
      run->rx_bytes += in->payload_len;
      if (t0 && now >= t0) {
        uint64_t k = (now - t0) / iv_ns;
        if (k < MAX_INTERVALS) {
          run->iv_bytes[k] += in->payload_len;
          run->iv_blocks[k]++;
        }
      }
      if (o->hold_to_ms && !run->did_hold && t0 && now >= t0 &&
          now - t0 >= (uint64_t)o->hold_from_ms * NS_PER_MS) {
        sbr_block_hold(b);
        run->held = b;
        run->did_hold = true;
        run->held_at_ns = now - t0;
        run->held_seq = in->seq;
      } else {
        atomic_store_explicit(&run->rel_ns[in->seq % SEQ_RING], now_ns(),
                              memory_order_release);
        sbr_block_release(b);
      }
    } else if (ret != -ETIMEDOUT && ret != -EINTR) {
      fprintf(stderr, "sbr-bench: receiving failed: %s\n", strerror(-ret));
      break;
    }
    if (run->held && now - t0 >= (uint64_t)o->hold_to_ms * NS_PER_MS) {
      run->released_at_ns = now_ns() - t0;
      atomic_store_explicit(&run->rel_ns[run->held_seq % SEQ_RING], now_ns(),
                            memory_order_release);
      sbr_block_release(run->held);
      run->held = NULL;
    }
  }
  if (run->held) {
    sbr_block_release(run->held);
    run->held = NULL;
  }
  return NULL;
}

static void *producer_main(void *arg)
{
  struct run *run = arg;
  const struct opts *o = run->o;
  uint64_t interval = o->rate > 0 ? (uint64_t)(1e9 / o->rate) : 0;
  uint64_t next = run->prod_start;
  while (!atomic_load(&run->prod_stop)) {
    if (interval) {
      sleep_until(next);
      next += interval;
    }
    sbr_send_block *b;
    int ret = sbr_sender_acquire(run->s, 0, &b);
    if (ret == -EAGAIN) {
      run->prod_drops++;
      continue;
    }
    if (ret < 0) {
      fprintf(stderr, "sbr-bench: acquire failed: %s\n", strerror(-ret));
      break;
    }
    /* Zero-copy fill without touching the payload: the transport is what
     * is measured, not the producer. */
    struct sbr_block_meta meta;
    sbr_block_meta_init(&meta, 0);
    meta.capture_time = 0;
    ret = sbr_sender_submit(run->s, b, &meta, o->size);
    if (ret < 0) {
      fprintf(stderr, "sbr-bench: submit failed: %s\n", strerror(-ret));
      sbr_sender_abandon(run->s, b);
      break;
    }
    run->submitted++;
  }
  return NULL;
}

static void *poller_main(void *arg)
{
  struct run *run = arg;
  const struct opts *o = run->o;
  uint64_t last_acks = 0, last_reads = 0, last_read_ns = 0;
  uint64_t warm_end = 0;
  while (!atomic_load(&run->poll_stop)) {
    struct sbr_sender_stats st;
    sbr_sender_get_stats(run->s, &st);
    uint64_t now = now_ns();
    uint64_t t0 = atomic_load(&run->t0);
    if (t0 && !warm_end)
      warm_end = t0 + (uint64_t)o->warmup_ms * NS_PER_MS;
    bool count = warm_end && now >= warm_end;
    if (st.sync_reads > last_reads) {
      uint64_t d = st.sync_reads - last_reads;
      uint64_t ns = st.sync_read_ns_total - last_read_ns;
      if (count)
        for (uint64_t i = 0; i < d; i++)
          hist_add(&run->sync_hist, ns / d);
      last_reads = st.sync_reads;
      last_read_ns = st.sync_read_ns_total;
    }
    if (st.acks > last_acks) {
      for (uint64_t k = last_acks; k < st.acks; k++) {
        uint64_t seq = k + (run->seq_seen ? run->first_seq : 0);
        uint64_t t = atomic_load_explicit(&run->rel_ns[seq % SEQ_RING],
                                          memory_order_acquire);
        if (t && t <= now) {
          if (count)
            hist_add(&run->ack_hist, now - t);
        } else {
          run->ack_unmatched++;
        }
      }
      last_acks = st.acks;
    }
    run->polls++;
    if (o->poll_sleep_us)
      usleep(o->poll_sleep_us);
    else
      sched_yield();
  }
  return NULL;
}

static void *connect_main(void *arg)
{
  struct run *run = arg;
  const struct opts *o = run->o;
  struct sbr_sender_config cfg;
  sbr_sender_config_init(&cfg);
  cfg.backend = o->backend;
  cfg.mechanism = o->mechanism;
  cfg.host = o->address;
  cfg.port = o->port;
  cfg.send_blocks = o->blocks > 16 ? o->blocks : 16;
  cfg.block_count_hint = o->blocks;
  cfg.read_ahead = o->read_ahead;
  cfg.status_batch_bytes = o->status_batch_bytes;
  if (o->pause_poll_us >= 0)
    cfg.pause_poll_us = (uint32_t)o->pause_poll_us;
  cfg.backpressure = SBR_BACKPRESSURE_WAIT;
  cfg.wait_timeout_ms = 20;
  cfg.backoff = o->backoff;
  char err[256];
  int ret = sbr_sender_new(&cfg, &run->s, err, sizeof err);
  if (ret < 0) {
    fprintf(stderr, "sbr-bench: connect failed: %s (%s)\n", strerror(-ret),
            err);
    run->s = NULL;
  }
  return NULL;
}

static void parse(int argc, char **argv, struct opts *o)
{
  memset(o, 0, sizeof *o);
  o->pause_poll_us = -1;
  o->backend = SBR_BACKEND_SHM;
  o->mechanism = SBR_MECH_STATUS_BYTE;
  o->address = "127.0.0.1";
  o->port = 7650;
  o->blocks = 16;
  o->size = 4096;
  o->duration_ms = 400;
  o->interval_ms = 10;
  o->warmup_ms = 100;
  o->timer_slack_ns = -1;
  if (argc < 2)
    die("usage: sbr-bench timeline|sync [options] (see the source)");
  o->mode = argv[1];
  if (strcmp(o->mode, "timeline") && strcmp(o->mode, "sync"))
    die("unknown mode %s", o->mode);
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v)
      die("%s needs a value", a);
    i++;
    if (!strcmp(a, "--backend")) {
      if (sbr_backend_from_name(v, &o->backend) < 0)
        die("bad backend %s", v);
    } else if (!strcmp(a, "--mechanism")) {
      if (sbr_mechanism_from_name(v, &o->mechanism) < 0)
        die("bad mechanism %s", v);
    } else if (!strcmp(a, "--address")) {
      o->address = v;
    } else if (!strcmp(a, "--port")) {
      o->port = (uint16_t)atoi(v);
    } else if (!strcmp(a, "--blocks")) {
      o->blocks = (uint32_t)atoi(v);
    } else if (!strcmp(a, "--size")) {
      o->size = (uint32_t)strtoul(v, NULL, 10);
    } else if (!strcmp(a, "--read-ahead")) {
      o->read_ahead = (uint32_t)atoi(v);
    } else if (!strcmp(a, "--status-batch")) {
      o->status_batch_bytes = (uint32_t)strtoul(v, NULL, 10);
    } else if (!strcmp(a, "--pause-poll-us")) {
      o->pause_poll_us = (int64_t)strtoul(v, NULL, 10);
    } else if (!strcmp(a, "--rate")) {
      o->rate = atof(v);
    } else if (!strcmp(a, "--duration-ms")) {
      o->duration_ms = (uint32_t)atoi(v);
    } else if (!strcmp(a, "--interval-ms")) {
      o->interval_ms = (uint32_t)atoi(v);
    } else if (!strcmp(a, "--hold-from-ms")) {
      o->hold_from_ms = (uint32_t)atoi(v);
    } else if (!strcmp(a, "--hold-to-ms")) {
      o->hold_to_ms = (uint32_t)atoi(v);
    } else if (!strcmp(a, "--warmup-ms")) {
      o->warmup_ms = (uint32_t)atoi(v);
    } else if (!strcmp(a, "--spin-us")) {
      o->backoff.spin_us = (uint32_t)atoi(v);
    } else if (!strcmp(a, "--min-sleep-us")) {
      o->backoff.min_sleep_us = (uint32_t)atoi(v);
    } else if (!strcmp(a, "--max-sleep-us")) {
      o->backoff.max_sleep_us = (uint32_t)atoi(v);
    } else if (!strcmp(a, "--poll-sleep-us")) {
      o->poll_sleep_us = (uint32_t)atoi(v);
    } else if (!strcmp(a, "--timer-slack-ns")) {
      o->timer_slack_ns = atol(v);
    } else {
      die("unknown option %s", a);
    }
  }
  if (o->blocks < 1 || o->interval_ms < 1 ||
      o->duration_ms / o->interval_ms >= MAX_INTERVALS)
    die("bad --blocks/--interval-ms/--duration-ms");
}

int main(int argc, char **argv)
{
  static struct opts o;
  parse(argc, argv, &o);
  static struct run run;
  run.o = &o;
  /* Timer slack is per thread and inherited: set before any thread. */
  if (o.timer_slack_ns >= 0 &&
      prctl(PR_SET_TIMERSLACK, (unsigned long)o.timer_slack_ns) != 0)
    die("PR_SET_TIMERSLACK: %s", strerror(errno));

  struct sbr_receiver_config rc;
  sbr_receiver_config_init(&rc);
  rc.backend = o.backend;
  rc.mechanism = o.mechanism;
  rc.address = o.backend == SBR_BACKEND_VERBS ? o.address : "0.0.0.0";
  rc.port = o.port;
  rc.block_count = o.blocks;
  rc.block_size = o.size + 72;
  rc.backoff = o.backoff;
  char err[256];
  int ret = sbr_receiver_new(&rc, &run.r, err, sizeof err);
  if (ret < 0)
    die("cannot listen: %s (%s)", strerror(-ret), err);

  /* The receiver accepts only while someone calls sbr_receiver_next. */
  pthread_t rx, prod, conn, poll;
  pthread_create(&rx, NULL, receiver_main, &run);
  pthread_create(&conn, NULL, connect_main, &run);
  pthread_join(conn, NULL);
  if (!run.s) {
    atomic_store(&run.rx_stop, true);
    pthread_join(rx, NULL);
    sbr_receiver_free(run.r);
    return 1;
  }
  bool sync = strcmp(o.mode, "sync") == 0;
  double cpu0 = (double)clock() / CLOCKS_PER_SEC;
  uint64_t t0 = now_ns();
  /* timeline: t = 0 is warmup_ms after the producer started, so the
   * baseline before the hold isn't the start-up transient. */
  if (!sync)
    t0 += (uint64_t)o.warmup_ms * NS_PER_MS;
  run.prod_start = now_ns();
  atomic_store(&run.t0, t0);
  pthread_create(&prod, NULL, producer_main, &run);
  if (sync)
    pthread_create(&poll, NULL, poller_main, &run);
  sleep_until(t0 + (uint64_t)o.duration_ms * NS_PER_MS);
  atomic_store(&run.prod_stop, true);
  pthread_join(prod, NULL);
  uint64_t t_end = now_ns();
  sbr_sender_flush(run.s, 3000);
  if (sync) {
    usleep(20000); /* the last ACKs */
    atomic_store(&run.poll_stop, true);
    pthread_join(poll, NULL);
  }
  double cpu_s = (double)clock() / CLOCKS_PER_SEC - cpu0;
  struct sbr_sender_stats st;
  sbr_sender_get_stats(run.s, &st);
  sbr_sender_free(run.s);
  atomic_store(&run.rx_stop, true);
  pthread_join(rx, NULL);
  struct sbr_receiver_stats rst;
  sbr_receiver_get_stats(run.r, &rst);
  sbr_receiver_free(run.r);

  double elapsed = (t_end - t0) / 1e9;
  printf("{\"mode\":\"%s\",\"backend\":\"%s\",\"mechanism\":\"%s\","
         "\"blocks\":%u,\"size\":%u,\"read_ahead\":%u,\"rate\":%.1f,"
         "\"spin_us\":%u,\"min_sleep_us\":%u,\"max_sleep_us\":%u,"
         "\"timer_slack_ns\":%ld,"
         "\"duration_ms\":%u,\"elapsed_s\":%.6f,\"submitted\":%" PRIu64
         ",\"producer_waits_timed_out\":%" PRIu64 ",\"rx_blocks\":%" PRIu64
         ",\"rx_bytes\":%" PRIu64 ",\"throughput_mbps\":%.3f,"
         "\"cpu_s\":%.3f,\"sender\":{\"blocks\":%" PRIu64
         ",\"sync_reads\":%" PRIu64 ",\"sync_read_mean_us\":%.3f,"
         "\"sync_read_max_us\":%.3f,\"held_skipped\":%" PRIu64
         ",\"busy_skipped\":%" PRIu64 ",\"no_free_waits\":%" PRIu64
         ",\"acks\":%" PRIu64 ",\"wr_posted\":%" PRIu64
         ",\"status_writes\":%" PRIu64 "},"
         "\"receiver\":{\"blocks\":%" PRIu64 ",\"rejected\":%" PRIu64
         ",\"acks_sent\":%" PRIu64 "}",
         o.mode, sbr_backend_name(o.backend), sbr_mechanism_name(o.mechanism),
         o.blocks, o.size, o.read_ahead, o.rate, o.backoff.spin_us,
         o.backoff.min_sleep_us, o.backoff.max_sleep_us,
         (long)prctl(PR_GET_TIMERSLACK), o.duration_ms, elapsed, run.submitted,
         run.prod_drops, run.rx_blocks, run.rx_bytes,
         elapsed > 0 ? run.rx_bytes / elapsed / 1e6 : 0, cpu_s, st.blocks,
         st.sync_reads,
         st.sync_reads ? st.sync_read_ns_total / 1e3 / st.sync_reads : 0,
         st.sync_read_ns_max / 1e3, st.held_skipped, st.busy_skipped,
         st.no_free_waits, st.acks, st.wr_posted, st.status_writes, rst.blocks,
         rst.rejected, rst.acks_sent);
  if (sync) {
    printf(",\"warmup_ms\":%u,", o.warmup_ms);
    hist_json("sync_read", &run.sync_hist);
    printf(",");
    hist_json("ack", &run.ack_hist);
    printf(",\"ack_unmatched\":%" PRIu64
           ",\"poll_sleep_us\":%u,\"polls\":%" PRIu64
           ",\"poll_interval_mean_us\":%.3f",
           run.ack_unmatched, o.poll_sleep_us, run.polls,
           run.polls ? elapsed * 1e6 / run.polls : 0);
  } else {
    printf(",\"interval_ms\":%u,\"hold_from_ms\":%u,\"hold_to_ms\":%u,"
           "\"held\":%s,\"held_at_ms\":%.3f,\"released_at_ms\":%.3f,"
           "\"interval_bytes\":[",
           o.interval_ms, o.hold_from_ms, o.hold_to_ms,
           run.did_hold ? "true" : "false", run.held_at_ns / 1e6,
           run.released_at_ns / 1e6);
    uint32_t n = o.duration_ms / o.interval_ms;
    for (uint32_t k = 0; k < n; k++)
      printf("%s%" PRIu64, k ? "," : "", run.iv_bytes[k]);
    printf("],\"interval_blocks\":[");
    for (uint32_t k = 0; k < n; k++)
      printf("%s%" PRIu64, k ? "," : "", run.iv_blocks[k]);
    printf("]");
  }
  printf("}\n");
  return 0;
}
