/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-poll.c - the receiver's poll modes (enum sbr_poll_mode), sender and
 * receiver in one process over a real back end: shm on the host, verbs in
 * the Soft-RoCE VM.  Usage: test-poll shm|verbs [test-name...].
 *
 * One behaviour per test: each mode delivers a stream complete and in
 * order; adaptive sleeps when idle; adaptive learns a periodic stream's
 * period; adaptive costs far less CPU than busy.  CPU is the receiving
 * thread's (getrusage RUSAGE_THREAD), bounded generously: this host is
 * shared and noisy.  No test bounds latency (the benchmark measures it).
 */
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

#include "engine-fixture.h"

#define KIB 1024u
#define MS 1000000ull

static enum sbr_backend backend = SBR_BACKEND_SHM;
static const char *addr = "127.0.0.1";

static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
  struct timespec ts = {(time_t)(t / 1000000000u), (long)(t % 1000000000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
    ;
}

/* CPU time of the calling thread, ns. */
static uint64_t thread_cpu_ns(void)
{
  struct rusage ru;
  ASSERT(getrusage(RUSAGE_THREAD, &ru) == 0);
  return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
             1000000000u +
         ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) *
             1000u;
}

static sbr_receiver *new_receiver(enum sbr_poll_mode mode, uint16_t port,
                                  uint32_t blocks, uint32_t block_size)
{
  struct sbr_receiver_config rc;
  fixture_receiver_config(&rc, port, blocks, block_size);
  rc.backend = backend;
  rc.address = addr;
  rc.poll_mode = mode;
  sbr_receiver *r;
  char err[256];
  int ret = sbr_receiver_new(&rc, &r, err, sizeof err);
  ASSERT_MSG(ret == 0, "receiver on %s:%u: %d %s", addr, port, ret, err);
  return r;
}

static sbr_sender *new_sender(sbr_receiver *r, uint16_t port)
{
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.backend = backend;
  sc.host = addr;
  sc.send_blocks = 8;
  return fixture_sender(r, &sc);
}

/* Sends frames on its own thread: device d's frames (d < devices) in turn,
 * one every period_ns (absolute times, so the stream is periodic however
 * late a wake-up is), sizes varying up to max_size. */
struct stream {
  sbr_sender *s;
  unsigned devices, frames; /* frames per device */
  uint64_t period_ns;
  size_t max_size;
  pthread_t thread;
  int ret;
};

static size_t frame_size(const struct stream *st, unsigned device,
                         unsigned frame)
{
  if (st->max_size <= 1000)
    return st->max_size;
  return 1000 + (device * 7919u + frame * 104729u) % (st->max_size - 1000);
}

static void *stream_thread(void *arg)
{
  struct stream *st = arg;
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* a steady camera */
  uint64_t t = now_ns();
  for (unsigned i = 0; i < st->frames; i++) {
    for (unsigned d = 0; d < st->devices; d++) {
      st->ret = fixture_send(st->s, d, i, frame_size(st, d, i));
      if (st->ret != 0)
        return NULL;
    }
    t += st->period_ns;
    sleep_until(t);
  }
  return NULL;
}

static void stream_start(struct stream *st)
{
  ASSERT(pthread_create(&st->thread, NULL, stream_thread, st) == 0);
}

static void stream_join(struct stream *st)
{
  pthread_join(st->thread, NULL);
  ASSERT_MSG(st->ret == 0, "send failed: %d (%s)", st->ret, strerror(-st->ret));
}

/* A receiver in mode (16 blocks of 16 KiB) and a sender connected to it,
 * streaming st (its shape set by the caller) from its own thread. */
static sbr_receiver *stream_open(enum sbr_poll_mode mode, struct stream *st)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = new_receiver(mode, port, 16, 16 * KIB);
  st->s = new_sender(r, port);
  stream_start(st);
  return r;
}

static void stream_close(sbr_receiver *r, struct stream *st)
{
  sbr_sender_free(st->s);
  sbr_receiver_free(r);
}

/* Takes frames on this thread until every device has all of them: each
 * complete (pattern checked) and in order.  Returns this thread's CPU
 * time spent doing it; *learned (if given) counts the frames after which
 * device 0's learned period was within 10 % of the stream's. */
static uint64_t receive_all(sbr_receiver *r, const struct stream *st,
                            unsigned *learned)
{
  unsigned next[SBR_MAX_DEVICES] = {0};
  unsigned got = 0, want = st->devices * st->frames;
  uint64_t cpu0 = thread_cpu_ns(), last = now_ns();
  while (got < want) {
    struct sbr_frame f;
    int ret = sbr_receiver_next_frame(r, 100, &f);
    if (ret == -ETIMEDOUT) {
      /* A hang bound on progress, not on the whole stream: a busy
       * receiver in a one-CPU VM the host starves (CI, beside the host
       * suites) shares the CPU its sender needs, and took 2 s a frame. */
      ASSERT_MSG(now_ns() - last < 60000 * MS, "%u of %u frames, none for 60 s",
                 got, want);
      continue;
    }
    ASSERT_OK(ret);
    last = now_ns();
    if (f.info.kind != SBR_KIND_DATA) {
      sbr_frame_release(&f);
      continue;
    }
    unsigned d = f.info.device;
    ASSERT_MSG(d < st->devices, "frame of device %u", d);
    unsigned frame = fixture_check_frame(&f);
    ASSERT_MSG(frame == next[d], "device %u: frame %u, expected %u", d, frame,
               next[d]);
    ASSERT_EQ(f.size, frame_size(st, d, frame));
    next[d]++;
    got++;
    sbr_frame_release(&f);
    if (learned && d == 0) {
      struct sbr_device_stats ds;
      sbr_receiver_get_device_stats(r, 0, &ds);
      if (ds.period_ns > st->period_ns * 9 / 10 &&
          ds.period_ns < st->period_ns * 11 / 10)
        (*learned)++;
    }
  }
  return thread_cpu_ns() - cpu0;
}

static void stream_is_delivered_in_order(enum sbr_poll_mode mode)
{
  /* 16 KiB blocks, frames up to 40 KB: some take three fragments; 120
   * frames of 20 KB on average round the 16-block lane about ten times. */
  struct stream st = {
      .devices = 3, .frames = 40, .period_ns = 2 * MS, .max_size = 40000};
  sbr_receiver *r = stream_open(mode, &st);
  receive_all(r, &st, NULL);
  stream_join(&st);
  struct sbr_receiver_stats rs;
  sbr_receiver_get_stats(r, &rs);
  ASSERT_EQ(rs.rejected, 0);
  for (unsigned d = 0; d < st.devices; d++) {
    struct sbr_device_stats ds;
    sbr_receiver_get_device_stats(r, (uint8_t)d, &ds);
    ASSERT_EQ(ds.gaps, 0);
    ASSERT_EQ(ds.drops, 0);
    ASSERT_EQ(ds.frames, st.frames);
  }
  fprintf(stderr,
          "%s: %" PRIu64 " sleeps, %.1f ms asleep, %.1f ms awake; "
          "frames predicted %" PRIu64 " missed %" PRIu64 " unpredicted %" PRIu64
          "\n",
          sbr_poll_mode_name(mode), rs.poll_sleeps, rs.poll_sleep_ns / 1e6,
          rs.poll_busy_ns / 1e6, rs.frames_predicted, rs.frames_missed,
          rs.frames_unpredicted);
  stream_close(r, &st);
}

static void busy_delivers_in_order(void)
{
  stream_is_delivered_in_order(SBR_POLL_BUSY);
}

static void adaptive_delivers_in_order(void)
{
  stream_is_delivered_in_order(SBR_POLL_ADAPTIVE);
}

static void backoff_delivers_in_order(void)
{
  stream_is_delivered_in_order(SBR_POLL_BACKOFF);
}

/* A connected sender that stopped sending: over a quiet second the
 * adaptive receiver's thread sleeps (wake-ups of the back-off's 1 ms at
 * most) and uses a few per cent of a core (under 15 %, see below). */
static void adaptive_sleeps_when_idle(void)
{
  /* A short periodic stream first, so the quiet follows a learned one. */
  struct stream st = {
      .devices = 1, .frames = 20, .period_ns = 10 * MS, .max_size = 1000};
  sbr_receiver *r = stream_open(SBR_POLL_ADAPTIVE, &st);
  receive_all(r, &st, NULL);
  stream_join(&st);

  struct sbr_receiver_stats before, after;
  sbr_receiver_get_stats(r, &before);
  uint64_t cpu0 = thread_cpu_ns(), t0 = now_ns();
  while (now_ns() - t0 < 1000 * MS) {
    sbr_block *b;
    ASSERT_EQ(sbr_receiver_next(r, 100, &b), -ETIMEDOUT);
  }
  uint64_t cpu = thread_cpu_ns() - cpu0, wall = now_ns() - t0;
  sbr_receiver_get_stats(r, &after);
  double pct = 100.0 * (double)cpu / (double)wall;
  uint64_t sleeps = after.poll_sleeps - before.poll_sleeps;
  double asleep_ms = (after.poll_sleep_ns - before.poll_sleep_ns) / 1e6;
  fprintf(stderr,
          "idle: %.2f %% of a core, %" PRIu64 " sleeps, %.0f ms asleep\n", pct,
          sleeps, asleep_ms);
  /* Generous: 3.7-4.3 % measured on this 2-core KVM guest, where each of
   * the ~1,000 timed wake-ups costs the thread ~40 us; 5 % failed under
   * the load of a parallel test run.  A spinning receiver takes 100 %, and
   * the sleep figures below pin the behaviour down. */
  ASSERT_MSG(pct < 15.0, "an idle adaptive receiver used %.1f %% of a core",
             pct);
  ASSERT_MSG(asleep_ms > 500, "asleep only %.0f ms of the quiet second",
             asleep_ms);
  ASSERT_MSG(sleeps <= 2000, "%" PRIu64 " wake-ups in the quiet second",
             sleeps);
  stream_close(r, &st);
}

/* 100 fps for two seconds: the adaptive receiver learns the 10 ms period
 * and finds frames inside their predicted window.  With this 2-core host
 * lightly loaded 70-80 % are; with both cores busy (other jobs) the
 * sender's own wake-ups come late, its stream stops being periodic and as
 * few as 10 % are.  So the bounds only say that it learned: the period was
 * right (within 10 %) after at least a quarter of the frames, and some
 * frames were found polling inside their window. */
static void adaptive_learns_a_periodic_stream(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = new_receiver(SBR_POLL_ADAPTIVE, port, 16, 16 * KIB);
  /* A second lane, idle: with one lane whose writer wakes the receiver
   * (shm) adaptive sleeps to the window with no 1 ms ceiling
   * (adaptive_sleeps_to_the_window_of_its_only_lane); with several it
   * paces with the ceiling, as over verbs. */
  sbr_sender *idle = new_sender(r, port);
  struct stream st = {.s = new_sender(r, port),
                      .devices = 1,
                      .frames = 200,
                      .period_ns = 10 * MS,
                      .max_size = 1000};
  stream_start(&st);
  uint64_t t0 = now_ns();
  unsigned learned = 0;
  uint64_t cpu = receive_all(r, &st, &learned);
  uint64_t wall = now_ns() - t0;
  stream_join(&st);
  struct sbr_receiver_stats rs;
  struct sbr_device_stats ds;
  sbr_receiver_get_stats(r, &rs);
  sbr_receiver_get_device_stats(r, 0, &ds);
  fprintf(stderr,
          "100 fps: period %.3f ms (right after %u frames), predicted "
          "%" PRIu64 " missed %" PRIu64 " unpredicted %" PRIu64 ", %" PRIu64
          " sleeps, cpu %.2f %%\n",
          ds.period_ns / 1e6, learned, rs.frames_predicted, rs.frames_missed,
          rs.frames_unpredicted, rs.poll_sleeps,
          100.0 * (double)cpu / (double)wall);
  ASSERT_EQ(rs.frames_predicted + rs.frames_missed + rs.frames_unpredicted,
            st.frames);
  ASSERT_MSG(learned * 4 >= st.frames,
             "the period was right after only %u of %u frames", learned,
             st.frames);
  ASSERT_MSG(rs.frames_predicted * 20 >= st.frames,
             "only %" PRIu64 " of %u frames predicted", rs.frames_predicted,
             st.frames);
  sbr_sender_free(idle);
  stream_close(r, &st);
}

/* devices cameras at 50 fps, frames each, on one shm lane into an
 * adaptive receiver: its stats, printed. */
static struct sbr_receiver_stats one_lane_at_50_fps(unsigned devices,
                                                    unsigned frames)
{
  struct stream st = {.devices = devices,
                      .frames = frames,
                      .period_ns = 20 * MS,
                      .max_size = 1000};
  sbr_receiver *r = stream_open(SBR_POLL_ADAPTIVE, &st);
  receive_all(r, &st, NULL);
  stream_join(&st);
  struct sbr_receiver_stats rs;
  sbr_receiver_get_stats(r, &rs);
  fprintf(stderr,
          "50 fps, %u camera(s), one lane: %" PRIu64 " sleeps, %" PRIu64
          " woken; frames predicted %" PRIu64 " missed %" PRIu64
          " unpredicted %" PRIu64 "\n",
          devices, rs.poll_sleeps, rs.poll_sleeps_woken, rs.frames_predicted,
          rs.frames_missed, rs.frames_unpredicted);
  stream_close(r, &st);
  return rs;
}

/* One lane over shm, whose status WRITEs end the receiver's sleep:
 * adaptive sleeps to the next window in one go, with no 1 ms ceiling (a
 * frame that comes early ends the sleep), and polls through the window,
 * as a woken thread's wake-up is most of a frame's latency (B9).  Counted,
 * not timed: a 1 ms ceiling would cost about 20 sleeps a 20 ms frame (the
 * 10 ms look for connects and a frame's wake-up: 3-4), and without the
 * window no frame would be found polling in it. */
static void adaptive_sleeps_to_the_window_of_its_only_lane(void)
{
  struct sbr_receiver_stats rs = one_lane_at_50_fps(1, 100);
  ASSERT_MSG(rs.poll_sleeps <= 8 * 100, "%" PRIu64 " sleeps for 100 frames",
             rs.poll_sleeps);
  /* Without the window: none (each frame is found after the sleep it
   * ended).  With it, 10-30 % on this host beside two VMs, 90 % quiet. */
  ASSERT_MSG(rs.frames_predicted >= 3,
             "only %" PRIu64 " of 100 frames found polling in their window",
             rs.frames_predicted);
}

/* Three cameras captured together on that one lane: their frames land in
 * a burst that one wake-up serves, and polling beside the writer took the
 * core it needed (B9, twelve cameras), so adaptive sleeps until a burst
 * wakes it and polls no window.  Counted, not timed: few frames are found
 * in their window (a burst's second and third frames may be, found by the
 * scan right after the first one's wake-up: 0-4 of 180; polling, 126-150),
 * most bursts end a sleep (half: a loaded host may run the receiver after
 * the burst landed; polling, 8-25 of 60 did), and the sleeps stay as few
 * as one camera's. */
static void adaptive_polls_no_window_for_cameras_sharing_its_lane(void)
{
  struct sbr_receiver_stats rs = one_lane_at_50_fps(3, 60);
  ASSERT_MSG(rs.frames_predicted * 4 <= 180,
             "%" PRIu64 " of 180 frames found polling in their window",
             rs.frames_predicted);
  ASSERT_MSG(rs.poll_sleeps_woken * 2 >= 60,
             "%" PRIu64 " of 60 bursts ended a sleep", rs.poll_sleeps_woken);
  ASSERT_MSG(rs.poll_sleeps <= 8 * 60, "%" PRIu64 " sleeps for 60 bursts",
             rs.poll_sleeps);
}

/* The receiving thread's CPU for one second of the 100 fps stream, and
 * how often it slept. */
static double stream_cpu_pct(enum sbr_poll_mode mode, uint64_t *sleeps)
{
  struct stream st = {
      .devices = 1, .frames = 100, .period_ns = 10 * MS, .max_size = 1000};
  sbr_receiver *r = stream_open(mode, &st);
  uint64_t t0 = now_ns();
  uint64_t cpu = receive_all(r, &st, NULL);
  uint64_t wall = now_ns() - t0;
  stream_join(&st);
  struct sbr_receiver_stats rs;
  sbr_receiver_get_stats(r, &rs);
  *sleeps = rs.poll_sleeps;
  stream_close(r, &st);
  return 100.0 * (double)cpu / (double)wall;
}

/* Adaptive sleeps between frames where busy spins.  Counted, not timed:
 * on a loaded 2-core host busy itself may get only a few % of a core, so
 * a ratio of the two CPU figures says more about the load than the mode
 * (adaptive 1.6 % against busy 5 % seen at load 19).  The CPU bound is an
 * absolute one that load can only help. */
static void adaptive_costs_far_less_than_busy(void)
{
  uint64_t busy_sleeps, adaptive_sleeps;
  double busy = stream_cpu_pct(SBR_POLL_BUSY, &busy_sleeps);
  double adaptive = stream_cpu_pct(SBR_POLL_ADAPTIVE, &adaptive_sleeps);
  fprintf(stderr,
          "100 fps, receiving thread: busy %.1f %% (%" PRIu64
          " sleeps), adaptive %.2f %% (%" PRIu64 " sleeps)\n",
          busy, busy_sleeps, adaptive, adaptive_sleeps);
  /* busy sleeps only while no lane is open (the listener's poll). */
  ASSERT_MSG(busy_sleeps * 10 < adaptive_sleeps,
             "busy slept %" PRIu64 " times, adaptive %" PRIu64, busy_sleeps,
             adaptive_sleeps);
  ASSERT_MSG(adaptive_sleeps >= 50,
             "adaptive slept %" PRIu64 " times in "
             "100 frames",
             adaptive_sleeps);
  ASSERT_MSG(adaptive < 25.0, "adaptive took %.2f %% of a core", adaptive);
}

/* One camera at 25 fps: over shm the sender's status WRITE ends the
 * receiving thread's sleep, so a frame that lands while it sleeps is
 * found at once rather than when the sleep ends (up to 1 ms; more in
 * backoff's schedule).  Counted, not timed: in backoff mode nearly every
 * frame lands during a sleep, so most sleeps that a frame ends must have
 * been ended by it (the bound is half the frames: a loaded host may run
 * the receiver late, after the frame landed).  Adaptive may instead find
 * a frame polling in its predicted window: together, most frames.  Over
 * verbs nothing wakes the receiver (a one-sided peer can't): none is. */
static void stream_wakes_the_receiver(enum sbr_poll_mode mode)
{
  struct stream st = {
      .devices = 1, .frames = 50, .period_ns = 40 * MS, .max_size = 1000};
  sbr_receiver *r = stream_open(mode, &st);
  receive_all(r, &st, NULL);
  stream_join(&st);
  struct sbr_receiver_stats rs;
  sbr_receiver_get_stats(r, &rs);
  fprintf(stderr,
          "25 fps %s: %" PRIu64 " sleeps, %" PRIu64 " woken, %" PRIu64
          " timed out; frames predicted %" PRIu64 " missed %" PRIu64
          " unpredicted %" PRIu64 "\n",
          sbr_poll_mode_name(mode), rs.poll_sleeps, rs.poll_sleeps_woken,
          rs.poll_sleeps_timed_out, rs.frames_predicted, rs.frames_missed,
          rs.frames_unpredicted);
  ASSERT(rs.poll_sleeps_woken + rs.poll_sleeps_timed_out <= rs.poll_sleeps);
  if (backend != SBR_BACKEND_SHM) {
    ASSERT_EQ(rs.poll_sleeps_woken, 0);
  } else if (mode == SBR_POLL_BACKOFF) {
    ASSERT_MSG(rs.poll_sleeps_woken * 2 >= st.frames,
               "%" PRIu64 " of %u frames ended a sleep", rs.poll_sleeps_woken,
               st.frames);
  } else {
    ASSERT_MSG((rs.poll_sleeps_woken + rs.frames_predicted) * 2 >= st.frames,
               "%" PRIu64 " of %u frames ended a sleep, %" PRIu64
               " found in their window",
               rs.poll_sleeps_woken, st.frames, rs.frames_predicted);
    ASSERT_MSG(rs.poll_sleeps_woken > 0, "no frame ended a sleep");
  }
  stream_close(r, &st);
}

static void backoff_is_woken_by_a_frame(void)
{
  stream_wakes_the_receiver(SBR_POLL_BACKOFF);
}

static void adaptive_is_woken_by_a_frame(void)
{
  stream_wakes_the_receiver(SBR_POLL_ADAPTIVE);
}

static void unknown_mode_is_refused(void)
{
  struct sbr_receiver_config rc;
  fixture_receiver_config(&rc, fixture_port(), 8, 4 * KIB);
  rc.backend = backend;
  rc.address = addr;
  rc.poll_mode = (enum sbr_poll_mode)7;
  sbr_receiver *r = NULL;
  ASSERT_EQ(sbr_receiver_new(&rc, &r, NULL, 0), -EINVAL);
  enum sbr_poll_mode m;
  ASSERT_OK(sbr_poll_mode_from_name("busy", &m));
  ASSERT_EQ(m, SBR_POLL_BUSY);
  ASSERT_EQ(sbr_poll_mode_from_name("spin", &m), -EINVAL);
  sbr_receiver_config_init(&rc);
  ASSERT_EQ(rc.poll_mode, SBR_POLL_ADAPTIVE);
}

/* SHM_ONLY rows: CPU comparisons mean nothing on the VM's emulated CPU. */
static const struct test_entry all_tests[] = {
    {"busy_delivers_in_order", busy_delivers_in_order, ANY_BACKEND},
    {"adaptive_delivers_in_order", adaptive_delivers_in_order, ANY_BACKEND},
    {"backoff_delivers_in_order", backoff_delivers_in_order, ANY_BACKEND},
    {"adaptive_sleeps_when_idle", adaptive_sleeps_when_idle, SHM_ONLY},
    {"adaptive_learns_a_periodic_stream", adaptive_learns_a_periodic_stream,
     SHM_ONLY},
    {"adaptive_sleeps_to_the_window_of_its_only_lane",
     adaptive_sleeps_to_the_window_of_its_only_lane, SHM_ONLY},
    {"adaptive_polls_no_window_for_cameras_sharing_its_lane",
     adaptive_polls_no_window_for_cameras_sharing_its_lane, SHM_ONLY},
    {"adaptive_costs_far_less_than_busy", adaptive_costs_far_less_than_busy,
     SHM_ONLY},
    {"backoff_is_woken_by_a_frame", backoff_is_woken_by_a_frame, ANY_BACKEND},
    {"adaptive_is_woken_by_a_frame", adaptive_is_woken_by_a_frame, ANY_BACKEND},
    {"unknown_mode_is_refused", unknown_mode_is_refused, SHM_ONLY},
    {NULL, NULL, ANY_BACKEND},
};

int main(int argc, char **argv)
{
  if (test_parse_backend(argc, argv, &backend, &addr) < 0)
    return 2;
  return test_main_over_backend(all_tests, backend, argc, argv);
}
