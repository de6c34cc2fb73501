/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-pause.c - per-device backpressure carried one-sidedly (the pause
 * bitmap the sender's status READ brings) and sharing the send blocks
 * between devices, in one process over the shm back end.  One behaviour
 * per test; the time bounds are hang checks, not measurements.  The
 * per-lane refused bitmap (device ownership) travels the same way and is
 * tested here too.
 */
#include <stdatomic.h>
#include <time.h>

#include "engine-fixture.h"

#define KIB 1024u
#define DEV_A 3
#define DEV_B 9

static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t ms_since(uint64_t t0_ns)
{
  return (now_ns() - t0_ns) / 1000000u;
}

/* Takes frames in on its own thread, verifies every payload byte and, for
 * devices with one producer (ordered), the frame numbers; releases at
 * once. */
struct collector {
  sbr_receiver *r;
  pthread_t thread;
  atomic_bool stop;
  atomic_uint got[SBR_MAX_DEVICES];
  unsigned next[SBR_MAX_DEVICES];
  bool unordered[SBR_MAX_DEVICES];   /* several producers: bytes only */
  atomic_uint lane[SBR_MAX_DEVICES]; /* lane id + 1 of the newest frame */
  atomic_uint lane_frames[8];        /* frames per lane id % 8 */
};

static void *collector_thread(void *arg)
{
  struct collector *c = arg;
  while (!atomic_load(&c->stop)) {
    struct sbr_frame f;
    int ret = sbr_receiver_next_frame(c->r, 20, &f);
    if (ret == -ETIMEDOUT)
      continue;
    ASSERT_OK(ret);
    unsigned d = f.info.device;
    unsigned frame = fixture_check_frame(&f);
    if (!c->unordered[d]) {
      ASSERT_MSG(frame == c->next[d], "device %u: frame %u, expected %u", d,
                 frame, c->next[d]);
      c->next[d]++;
    }
    atomic_store(&c->lane[d], f.info.lane_id + 1);
    atomic_fetch_add(&c->lane_frames[f.info.lane_id % 8], 1);
    atomic_fetch_add(&c->got[d], 1);
    sbr_frame_release(&f);
  }
  return NULL;
}

static void collector_start(struct collector *c, sbr_receiver *r)
{
  c->r = r;
  atomic_store(&c->stop, false);
  ASSERT(pthread_create(&c->thread, NULL, collector_thread, c) == 0);
}

/* Waits (hang check: 20 s) until device's frames have all arrived. */
static void collector_wait(struct collector *c, unsigned device, unsigned want)
{
  uint64_t t0 = now_ns();
  while (atomic_load(&c->got[device]) < want) {
    ASSERT_MSG(ms_since(t0) < 20000, "device %u: %u of %u frames arrived",
               device, atomic_load(&c->got[device]), want);
    usleep(1000);
  }
}

static void collector_stop(struct collector *c)
{
  atomic_store(&c->stop, true);
  pthread_join(c->thread, NULL);
}

static bool sender_sees_paused(sbr_sender *s, unsigned device)
{
  struct sbr_device_stats ds;
  sbr_sender_get_device_stats(s, (uint8_t)device, &ds);
  return ds.paused;
}

/* Sends device's frames (next is its next frame number), each once the
 * one before arrived at c, until the sender has seen device paused_dev's
 * bit become want; returns how many it sent.  Something must flow for the
 * sender to READ; one frame in flight at a time, so that a receive thread
 * starved on a loaded host never fills the lane (under DROP that would
 * drop frames this test doesn't expect to lose). */
static unsigned send_until_seen(struct collector *c, sbr_sender *s,
                                unsigned device, unsigned *next,
                                unsigned paused_dev, bool want)
{
  uint64_t t0 = now_ns();
  unsigned sent = 0;
  while (sender_sees_paused(s, paused_dev) != want) {
    ASSERT_MSG(ms_since(t0) < 20000,
               "the sender did not see device %u %s within 20 s", paused_dev,
               want ? "paused" : "resumed");
    ASSERT_OK(fixture_send(s, device, (*next)++, 300));
    collector_wait(c, device, *next);
    sent++;
    usleep(500);
  }
  return sent;
}

/* ------------------------------------------------------------------ */

/* DROP: a paused device's sends fail at once, counted as paused drops,
 * and another device on the same sender keeps delivering every frame. */
static void paused_device_drops_while_another_delivers(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 16, 4 * KIB);
  ASSERT_OK(sbr_receiver_pause_device(r, 1, true));
  ASSERT(sbr_receiver_device_paused(r, 1));
  ASSERT(!sbr_receiver_device_paused(r, 0));
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.send_blocks = 8;
  sc.backpressure = SBR_BACKPRESSURE_DROP;
  sbr_sender *s = fixture_sender(r, &sc);
  static struct collector c;
  memset(&c, 0, sizeof c);
  collector_start(&c, r);

  /* The lane opened with the bit set: the sender sees it once it READs. */
  unsigned next0 = 0;
  send_until_seen(&c, s, 0, &next0, 1, true);
  enum { TRIES = 50 };
  for (unsigned i = 0; i < TRIES; i++) {
    ASSERT_EQ(fixture_send(s, 1, 0, 300), -EAGAIN);
    ASSERT_OK(fixture_send(s, 0, next0++, 300));
    /* One frame of device 0 in flight at a time: under DROP, a lane
     * filled by a receive thread starved on a loaded host would drop
     * device 0's frames too, which is not what this test is about. */
    collector_wait(&c, 0, next0);
    sbr_send_block *b;
    ASSERT_EQ(sbr_sender_acquire(s, 1, &b), -EAGAIN);
    usleep(200);
  }
  ASSERT_OK(sbr_sender_flush(s, 5000));
  collector_wait(&c, 0, next0);
  collector_stop(&c);
  ASSERT_EQ(atomic_load(&c.got[1]), 0);

  struct sbr_device_stats d0, d1;
  sbr_sender_get_device_stats(s, 0, &d0);
  sbr_sender_get_device_stats(s, 1, &d1);
  ASSERT_EQ(d0.drops, 0);
  ASSERT_EQ(d0.paused_drops, 0);
  ASSERT(!d0.paused);
  ASSERT_EQ(d0.frames, next0);
  ASSERT_EQ(d1.paused_drops, 2 * TRIES);
  ASSERT_EQ(d1.drops, 2 * TRIES);
  ASSERT_EQ(d1.frames, 0);
  ASSERT(d1.paused);
  ASSERT(d1.paused_ns > 0);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

struct paced {
  sbr_sender *s;
  unsigned device, frames, pace_us;
  int ret;
  atomic_bool other_waits; /* set by the test around another's wait */
  atomic_uint during_wait; /* sends that returned while it was set */
};

/* Starts once the test is about to wait on the other device, and counts
 * its sends that returned while that wait went on: not how long they
 * took, which a loaded host decides. */
static void *paced_thread(void *arg)
{
  struct paced *p = arg;
  for (unsigned ms = 0; !atomic_load(&p->other_waits) && ms < 10000; ms++)
    usleep(1000);
  for (unsigned i = 0; i < p->frames; i++) {
    p->ret = fixture_send(p->s, p->device, i, 300);
    if (p->ret != 0)
      return NULL;
    if (atomic_load(&p->other_waits))
      atomic_fetch_add(&p->during_wait, 1);
    usleep(p->pace_us);
  }
  return NULL;
}

/* WAIT: a paused device's send waits out wait_timeout_ms and gives up
 * (-EAGAIN, a paused drop) while another device's frames go on, none of
 * them delayed by the waiting producer. */
static void paused_device_waits_then_gives_up(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 16, 4 * KIB);
  ASSERT_OK(sbr_receiver_pause_device(r, 1, true));
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.send_blocks = 8;
  sc.backpressure = SBR_BACKPRESSURE_WAIT;
  /* A send of device 2 held up behind the waiting producer returns only
   * when the wait ends: counted below, sends that returned during it. */
  sc.wait_timeout_ms = 2000;
  sbr_sender *s = fixture_sender(r, &sc);
  static struct collector c;
  memset(&c, 0, sizeof c);
  collector_start(&c, r);
  unsigned next0 = 0;
  send_until_seen(&c, s, 0, &next0, 1, true);

  struct paced p = {s, 2, 150, 2000, 0};
  pthread_t t;
  ASSERT(pthread_create(&t, NULL, paced_thread, &p) == 0);
  for (unsigned i = 0; i < 2; i++) {
    uint64_t t0 = now_ns();
    atomic_store(&p.other_waits, true);
    ASSERT_EQ(fixture_send(s, 1, 0, 300), -EAGAIN);
    atomic_store(&p.other_waits, false);
    ASSERT_MSG(ms_since(t0) >= 1600, "gave up after %llu ms, not ~2000",
               (unsigned long long)ms_since(t0));
  }
  pthread_join(t, NULL);
  ASSERT_OK(p.ret);
  /* Held up behind the waiting producer, device 2's sends would each
   * return only as a wait ended: one or two in all. */
  ASSERT_MSG(atomic_load(&p.during_wait) >= 10,
             "%u of device 2's %u sends returned while device 1 waited",
             atomic_load(&p.during_wait), p.frames);
  ASSERT_OK(sbr_sender_flush(s, 5000));
  collector_wait(&c, 2, 150);
  collector_wait(&c, 0, next0);
  collector_stop(&c);
  ASSERT_EQ(atomic_load(&c.got[1]), 0);
  struct sbr_device_stats d1, d2;
  sbr_sender_get_device_stats(s, 1, &d1);
  sbr_sender_get_device_stats(s, 2, &d2);
  ASSERT_EQ(d1.paused_drops, 2);
  ASSERT_EQ(d1.drops, 2);
  ASSERT_EQ(d2.drops, 0);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

struct one_send {
  sbr_sender *s;
  unsigned device;
  int ret;
  atomic_bool done;
};

static void *one_send_thread(void *arg)
{
  struct one_send *o = arg;
  o->ret = fixture_send(o->s, o->device, 0, 5000);
  atomic_store(&o->done, true);
  return NULL;
}

/* A producer waiting for a paused device resumes when the bit clears,
 * although nothing else is sent: the sender keeps READing for it. */
static void resume_wakes_a_waiting_producer(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 16, 4 * KIB);
  ASSERT_OK(sbr_receiver_pause_device(r, 1, true));
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.wait_timeout_ms = 30000;
  sbr_sender *s = fixture_sender(r, &sc);
  static struct collector c;
  memset(&c, 0, sizeof c);
  collector_start(&c, r);
  unsigned next0 = 0;
  send_until_seen(&c, s, 0, &next0, 1, true);
  uint64_t seen_paused = now_ns(); /* the sender saw it paused before */
  ASSERT_OK(sbr_sender_flush(s, 5000));

  struct one_send o = {.s = s, .device = 1};
  pthread_t t;
  ASSERT(pthread_create(&t, NULL, one_send_thread, &o) == 0);
  /* Until the producer has waited through forced READs that found the
   * device paused (and 100 ms at least), however long a loaded host
   * takes to get there. */
  struct sbr_sender_stats st0, st1;
  sbr_sender_get_stats(s, &st0);
  st1 = st0;
  uint64_t since = now_ns();
  do {
    ASSERT_MSG(ms_since(since) < 20000,
               "no forced READ while the producer "
               "waited (%llu)",
               (unsigned long long)st1.pause_reads);
    usleep(10000);
    sbr_sender_get_stats(s, &st1);
  } while (st1.pause_reads < st0.pause_reads + 2 || ms_since(since) < 100);
  ASSERT_MSG(!atomic_load(&o.done), "a paused device's send returned %d",
             o.ret);
  /* st0 stays what it was before the wait: the READ that finds the device
   * clear again may have been posted (and counted) before the resume,
   * its execution after it, so no READ need be counted after this point. */
  ASSERT_OK(sbr_receiver_pause_device(r, 1, false));
  ASSERT(!sbr_receiver_device_paused(r, 1));
  uint64_t t0 = now_ns();
  while (!atomic_load(&o.done))
    ASSERT_MSG(ms_since(t0) < 20000, "still waiting 20 s after the resume");
  pthread_join(t, NULL);
  ASSERT_OK(o.ret);
  collector_wait(&c, 1, 1);
  collector_stop(&c);
  sbr_sender_get_stats(s, &st1);
  ASSERT_MSG(st1.pause_reads > st0.pause_reads,
             "no forced READ while the producer waited (%llu)",
             (unsigned long long)st1.pause_reads);
  struct sbr_device_stats d1;
  sbr_sender_get_device_stats(s, 1, &d1);
  ASSERT(!d1.paused);
  ASSERT_EQ(d1.drops, 0);
  ASSERT_EQ(d1.frames, 1);
  /* From the READ that found it paused to the one that found it clear:
   * around the test's own view, whatever the CPU. */
  ASSERT_MSG(d1.paused_ns >= t0 - seen_paused, "paused for %llu ns only",
             (unsigned long long)d1.paused_ns);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* Sends device 0's frame *next, trying it again while it is dropped for
 * want of a free send block: with DROP that is -EAGAIN too, when the
 * sender thread, starved on a loaded host, has not had the blocks in
 * flight back yet.  Those drops are counted in *busy (the device's drops
 * must add up to them); a paused drop is not tried again.  Returns the
 * send's result. */
static int send_while_busy(sbr_sender *s, unsigned *next, unsigned *busy)
{
  for (;;) {
    struct sbr_device_stats before, after;
    sbr_sender_get_device_stats(s, 0, &before);
    int ret = fixture_send(s, 0, *next, 300);
    if (ret == 0)
      (*next)++;
    if (ret != -EAGAIN)
      return ret;
    sbr_sender_get_device_stats(s, 0, &after);
    if (after.paused_drops != before.paused_drops)
      return ret;
    /* Hang check: some 5 s without a send block coming back. */
    ASSERT_MSG(++*busy < 5000, "%u sends found no free send block", *busy);
    usleep(1000);
  }
}

/* Sends device 0's frames every 500 us after pausing it, on a lane far
 * larger than what is sent: the sender never runs out of free receive
 * blocks, so only a forced READ can show it the bit.  Returns how many
 * frames went out before the first paused drop (or `max` when none
 * came). */
static unsigned frames_until_refused(sbr_receiver *r, sbr_sender *s,
                                     unsigned *next, unsigned max,
                                     unsigned *busy)
{
  ASSERT_OK(sbr_receiver_pause_device(r, 0, true));
  for (unsigned i = 0; i < max; i++) {
    int ret = send_while_busy(s, next, busy);
    if (ret == -EAGAIN)
      return i;
    ASSERT_OK(ret);
    usleep(500);
  }
  return max;
}

/* DROP: a sender whose only device is paused sends nothing, so no READ
 * came to show it the resume: each send turned away keeps the forced
 * READs going a while, and a send after the resume goes out. */
static void paused_drop_sender_sees_resume_alone(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 16, 4 * KIB);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.backpressure = SBR_BACKPRESSURE_DROP;
  sbr_sender *s = fixture_sender(r, &sc);
  static struct collector c;
  memset(&c, 0, sizeof c);
  collector_start(&c, r);
  unsigned next = 0;
  ASSERT_OK(sbr_receiver_pause_device(r, 0, true));
  uint64_t t0 = now_ns();
  while (!sender_sees_paused(s, 0)) {
    ASSERT_MSG(ms_since(t0) < 20000, "the pause was not seen within 20 s");
    if (fixture_send(s, 0, next, 300) == 0)
      collector_wait(&c, 0, ++next);
    usleep(500);
  }
  /* Paused a while, dropping at a camera's pace: the READs that blocks
   * in flight brought are long over. */
  for (int i = 0; i < 20; i++) {
    ASSERT_EQ(fixture_send(s, 0, next, 300), -EAGAIN);
    usleep(10000);
  }
  ASSERT_OK(sbr_receiver_pause_device(r, 0, false));
  t0 = now_ns();
  int ret;
  while ((ret = fixture_send(s, 0, next, 300)) == -EAGAIN) {
    ASSERT_MSG(ms_since(t0) < 20000, "the resume was not seen within 20 s");
    usleep(10000); /* a camera's pace, not a busy loop */
  }
  ASSERT_OK(ret);
  collector_wait(&c, 0, ++next);
  collector_stop(&c);
  ASSERT(!sender_sees_paused(s, 0));
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* pause_poll_us (default 1 ms) forces a READ while blocks flow. */
static void forced_read_sees_pause_without_running_out(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 256, 4 * KIB);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.backpressure = SBR_BACKPRESSURE_DROP;
  ASSERT_EQ(sc.pause_poll_us, 1000); /* the default */
  sbr_sender *s = fixture_sender(r, &sc);
  static struct collector c;
  memset(&c, 0, sizeof c);
  collector_start(&c, r);
  unsigned next = 0, busy = 0;
  while (next < 20) {
    ASSERT_OK(send_while_busy(s, &next, &busy));
    usleep(500);
  }
  /* Without forced READs the bit would show after ~256 blocks, at the
   * sync-when-empty READ; with them, a few milliseconds of sending. */
  unsigned after = frames_until_refused(r, s, &next, 200, &busy);
  ASSERT_MSG(after < 64, "%u frames went out after the pause", after);
  ASSERT_OK(sbr_sender_flush(s, 5000));
  collector_wait(&c, 0, next);
  collector_stop(&c);
  struct sbr_sender_stats st;
  sbr_sender_get_stats(s, &st);
  ASSERT(st.pause_reads > 0);
  ASSERT_EQ(st.no_free_waits, 0);
  struct sbr_device_stats d0;
  sbr_sender_get_device_stats(s, 0, &d0);
  ASSERT(d0.paused);
  ASSERT_EQ(d0.paused_drops, 1);
  ASSERT_EQ(d0.drops, busy + 1); /* the retried ones and the paused one */
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* pause_poll_us = 0 is the paper's sender: one READ when it knows no free
 * block, and no other; then a pause shows only at such a READ. */
static void pause_poll_zero_reads_only_when_empty(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 256, 4 * KIB);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.backpressure = SBR_BACKPRESSURE_DROP;
  sc.pause_poll_us = 0;
  sbr_sender *s = fixture_sender(r, &sc);
  static struct collector c;
  memset(&c, 0, sizeof c);
  collector_start(&c, r);
  unsigned next = 0, busy = 0;
  for (; next < 120; next++) {
    int ret;
    if (next == 20)
      ASSERT_OK(sbr_receiver_pause_device(r, 0, true));
    /* DROP: a send block not yet back (the sender thread starved on a
     * loaded host) is -EAGAIN and a counted drop; try that frame again.
     * A pause seen would be one too, counted as paused_drops: none. */
    while ((ret = fixture_send(s, 0, next, 300)) == -EAGAIN && busy < 1000) {
      busy++;
      usleep(1000);
    }
    ASSERT_OK(ret);
    usleep(500);
  }
  ASSERT_OK(sbr_sender_flush(s, 5000));
  collector_wait(&c, 0, next);
  collector_stop(&c);
  struct sbr_sender_stats st;
  sbr_sender_get_stats(s, &st);
  ASSERT_EQ(st.pause_reads, 0);
  ASSERT_EQ(st.sync_reads, 1); /* the first, after connect (rule 7) */
  ASSERT_EQ(st.wr_posted,
            st.blocks + st.status_writes + st.sync_reads + st.pause_reads);
  struct sbr_device_stats d0;
  sbr_sender_get_device_stats(s, 0, &d0);
  ASSERT(!d0.paused);
  ASSERT_EQ(d0.paused_drops, 0);
  ASSERT_EQ(d0.drops, busy);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

struct hog {
  sbr_sender *s;
  size_t len;
  atomic_bool *stop;
  unsigned sent;
};

/* As fast as it can: the payload (frame 0's pattern) is made once. */
static void *hog_thread(void *arg)
{
  struct hog *h = arg;
  uint8_t *p = malloc(h->len);
  fixture_fill(p, h->len, DEV_A, 0);
  struct sbr_block_meta m;
  sbr_block_meta_init(&m, DEV_A);
  m.pts = 0;
  while (!atomic_load(h->stop)) {
    int ret = sbr_sender_send(h->s, &m, p, h->len);
    ASSERT_MSG(ret == 0 || ret == -EAGAIN, "device A: send returned %d", ret);
    h->sent += ret == 0;
  }
  free(p);
  return NULL;
}

/* Fairness: six producers of device A send one-block frames as fast as
 * they can; device B's frames need half the send blocks.  Without a share
 * per device A takes every block as it comes free (one at a time: a small
 * lane, one status WRITE per block) and B, waiting for eight at once,
 * waited 25-75 ms for some frames (the FIFO waiters before this change);
 * with it, under a millisecond.  B's 15 ms timeout is the check. */
static void busy_device_does_not_starve_another(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 8, 4 * KIB);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.send_blocks = 16;
  sc.status_batch_bytes = 1;
  sc.wait_timeout_ms = 15;
  sbr_sender *s = fixture_sender(r, &sc);
  size_t cap = sbr_sender_block_payload_size(s);
  static struct collector c;
  memset(&c, 0, sizeof c);
  c.unordered[DEV_A] = true;
  collector_start(&c, r);

  atomic_bool stop = false;
  enum { HOGS = 6 };
  struct hog h[HOGS];
  pthread_t t[HOGS];
  for (unsigned i = 0; i < HOGS; i++) {
    h[i] = (struct hog){s, cap, &stop, 0};
    ASSERT(pthread_create(&t[i], NULL, hog_thread, &h[i]) == 0);
  }
  usleep(20000); /* A owns the sender */
  enum { B_FRAMES = 100 };
  /* A frame of B that waited past its 15 ms is tried again and counted:
   * on a loaded shared host a few do (a starved thread, not the sender's
   * unfairness); without the per-device share most of them did. */
  unsigned late = 0;
  for (unsigned i = 0; i < B_FRAMES; i++) {
    int ret;
    while ((ret = fixture_send(s, DEV_B, i, 8 * cap)) == -EAGAIN &&
           late < B_FRAMES)
      late++;
    ASSERT_MSG(ret == 0, "device B's frame %u: %d (%s)", i, ret,
               strerror(-ret));
    usleep(1000);
  }
  ASSERT_MSG(late <= B_FRAMES / 10, "%u of device B's frames waited > 15 ms",
             late);
  atomic_store(&stop, true);
  unsigned a_sent = 0;
  for (unsigned i = 0; i < HOGS; i++) {
    pthread_join(t[i], NULL);
    a_sent += h[i].sent;
  }
  ASSERT_OK(sbr_sender_flush(s, 5000));
  collector_wait(&c, DEV_B, B_FRAMES);
  collector_wait(&c, DEV_A, a_sent);
  collector_stop(&c);
  struct sbr_device_stats db;
  sbr_sender_get_device_stats(s, DEV_B, &db);
  ASSERT_EQ(db.drops, late); /* each timed-out wait, then sent again */
  ASSERT_EQ(db.frames, B_FRAMES);
  ASSERT_MSG(a_sent > B_FRAMES, "device A sent only %u frames", a_sent);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* ------------------------------------------------- device refusals */

static bool sender_sees_refused(sbr_sender *s, unsigned device)
{
  struct sbr_device_stats ds;
  sbr_sender_get_device_stats(s, (uint8_t)device, &ds);
  return ds.refused;
}

/* The lane device's frames came on (waits for one). */
static uint32_t collector_lane(struct collector *c, unsigned device)
{
  uint64_t t0 = now_ns();
  while (atomic_load(&c->lane[device]) == 0) {
    ASSERT_MSG(ms_since(t0) < 20000, "no frame of device %u", device);
    usleep(1000);
  }
  return atomic_load(&c->lane[device]) - 1;
}

/* Sends device's frames every 500 us until one is refused (-EADDRINUSE);
 * every earlier one must go.  Returns the ms it took. */
static uint64_t send_until_refused(sbr_sender *s, unsigned device,
                                   unsigned *next)
{
  uint64_t t0 = now_ns();
  for (;;) {
    ASSERT_MSG(ms_since(t0) < 20000,
               "device %u still sent 20 s after the receiver refused it",
               device);
    int ret = fixture_send(s, device, *next, 300);
    if (ret == -EADDRINUSE)
      return ms_since(t0);
    ASSERT_MSG(ret == 0, "device %u frame %u: %d (%s)", device, *next, ret,
               strerror(-ret));
    (*next)++;
    usleep(500);
  }
}

/* Tries device's next frame every ms, nothing else flowing, until it goes:
 * the refused producer's own tries keep the forced READs coming.  Returns
 * the ms it took. */
static uint64_t send_until_accepted(sbr_sender *s, unsigned device,
                                    unsigned *next)
{
  uint64_t t0 = now_ns();
  for (;;) {
    ASSERT_MSG(ms_since(t0) < 20000,
               "device %u still refused 20 s after the receiver cleared it",
               device);
    int ret = fixture_send(s, device, *next, 300);
    if (ret == 0) {
      (*next)++;
      return ms_since(t0);
    }
    ASSERT_MSG(ret == -EADDRINUSE, "device %u: %d (%s) while refused", device,
               ret, strerror(-ret));
    usleep(1000);
  }
}

/* The receiver refuses a device on the sender's lane: within a bound the
 * device's sends and acquires fail at once with -EADDRINUSE, even with
 * WAIT backpressure, and are counted; another device goes on.  Cleared,
 * the device sends again, with nothing else flowing to cause READs. */
static void refused_device_fails_at_once_then_resumes(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 16, 4 * KIB);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.send_blocks = 8;
  sc.backpressure = SBR_BACKPRESSURE_WAIT;
  sc.wait_timeout_ms = 3000;
  sbr_sender *s = fixture_sender(r, &sc);
  static struct collector c;
  memset(&c, 0, sizeof c);
  collector_start(&c, r);

  unsigned next_a = 0, next_b = 0;
  ASSERT_OK(fixture_send(s, DEV_A, next_a++, 300));
  uint32_t lane = collector_lane(&c, DEV_A);
  ASSERT_EQ(sbr_receiver_refuse_device(r, lane + 1, DEV_A, true), -ENOENT);
  ASSERT_OK(sbr_receiver_refuse_device(r, lane, DEV_A, true));
  uint64_t took = send_until_refused(s, DEV_A, &next_a);
  /* pause_poll_us (1 ms) + two round trips.  The bound is the wait a
   * send that did not fail at once would wait out (the CPU a loaded host
   * gives decides the rest). */
  ASSERT_MSG(took < (uint64_t)sc.wait_timeout_ms,
             "the sender saw the refusal after %llu ms",
             (unsigned long long)took);
  ASSERT(sender_sees_refused(s, DEV_A));
  ASSERT(!sender_sees_refused(s, DEV_B));
  uint64_t t0 = now_ns();
  sbr_send_block *b;
  ASSERT_EQ(sbr_sender_acquire(s, DEV_A, &b), -EADDRINUSE);
  ASSERT_MSG(ms_since(t0) < (uint64_t)sc.wait_timeout_ms,
             "a refused acquire waited %llu ms",
             (unsigned long long)ms_since(t0));
  for (unsigned i = 0; i < 20; i++)
    ASSERT_OK(fixture_send(s, DEV_B, next_b++, 300));
  ASSERT_OK(sbr_sender_flush(s, 5000));
  collector_wait(&c, DEV_B, next_b);
  collector_wait(&c, DEV_A, next_a); /* everything sent before arrived */

  struct sbr_device_stats da;
  sbr_sender_get_device_stats(s, DEV_A, &da);
  ASSERT_EQ(da.refused_drops, 2);
  ASSERT_EQ(da.drops, 2);
  ASSERT_EQ(da.paused_drops, 0);
  ASSERT_EQ(da.frames, next_a);

  ASSERT_OK(sbr_receiver_refuse_device(r, lane, DEV_A, false));
  took = send_until_accepted(s, DEV_A, &next_a);
  ASSERT_MSG(took < (uint64_t)sc.wait_timeout_ms,
             "the sender saw the clear bit after %llu ms",
             (unsigned long long)took);
  ASSERT(!sender_sees_refused(s, DEV_A));
  ASSERT_OK(sbr_sender_flush(s, 5000));
  collector_wait(&c, DEV_A, next_a);
  collector_stop(&c);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* The bit is the lane's: another sender of the same device goes on, and
 * SBR_LANE_ALL clears it everywhere. */
static void refusal_is_per_lane(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 16, 4 * KIB);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.send_blocks = 8;
  sbr_sender *owner = fixture_sender(r, &sc);
  sbr_sender *other = fixture_sender(r, &sc);
  static struct collector c;
  memset(&c, 0, sizeof c);
  c.unordered[DEV_A] = true;
  collector_start(&c, r);

  unsigned next_o = 0, next_x = 1000;
  ASSERT_OK(fixture_send(owner, DEV_A, next_o++, 300));
  uint32_t owner_lane = collector_lane(&c, DEV_A);
  atomic_store(&c.lane[DEV_A], 0);
  ASSERT_OK(fixture_send(other, DEV_A, next_x++, 300));
  uint32_t other_lane = collector_lane(&c, DEV_A);
  ASSERT(owner_lane != other_lane);

  ASSERT_OK(sbr_receiver_refuse_device(r, other_lane, DEV_A, true));
  send_until_refused(other, DEV_A, &next_x);
  unsigned before = atomic_load(&c.lane_frames[owner_lane % 8]);
  for (unsigned i = 0; i < 20; i++) {
    ASSERT_OK(fixture_send(owner, DEV_A, next_o++, 300));
    usleep(500);
  }
  ASSERT(!sender_sees_refused(owner, DEV_A));
  ASSERT_OK(sbr_sender_flush(owner, 5000));
  uint64_t t0 = now_ns();
  while (atomic_load(&c.lane_frames[owner_lane % 8]) < before + 20) {
    ASSERT_MSG(ms_since(t0) < 20000, "the owner's frames did not arrive");
    usleep(1000);
  }

  ASSERT_OK(sbr_receiver_refuse_device(r, SBR_LANE_ALL, DEV_A, false));
  send_until_accepted(other, DEV_A, &next_x);
  ASSERT_OK(sbr_sender_flush(other, 5000));
  collector_wait(&c, DEV_A, (next_o - 0) + (next_x - 1000));
  collector_stop(&c);
  sbr_sender_free(other);
  sbr_sender_free(owner);
  sbr_receiver_free(r);
}

/* The sliding window has no region the sender READs. */
static void sliding_window_cannot_pause(void)
{
  uint16_t port = fixture_port();
  struct sbr_receiver_config rc;
  fixture_receiver_config(&rc, port, 8, 4 * KIB);
  rc.mechanism = SBR_MECH_SLIDING_WINDOW;
  sbr_receiver *r;
  ASSERT_OK(sbr_receiver_new(&rc, &r, NULL, 0));
  ASSERT_EQ(sbr_receiver_pause_device(r, 4, true), -ENOTSUP);
  ASSERT(!sbr_receiver_device_paused(r, 4));
  ASSERT_EQ(sbr_receiver_refuse_device(r, SBR_LANE_ALL, 4, true), -ENOTSUP);
  sbr_receiver_free(r);
}

int main(int argc, char **argv)
{
  static const struct test_entry tests[] = {
      {"paused_device_drops_while_another_delivers",
       paused_device_drops_while_another_delivers, ANY_BACKEND},
      {"paused_device_waits_then_gives_up", paused_device_waits_then_gives_up,
       ANY_BACKEND},
      {"resume_wakes_a_waiting_producer", resume_wakes_a_waiting_producer,
       ANY_BACKEND},
      {"paused_drop_sender_sees_resume_alone",
       paused_drop_sender_sees_resume_alone, ANY_BACKEND},
      {"forced_read_sees_pause_without_running_out",
       forced_read_sees_pause_without_running_out, ANY_BACKEND},
      {"pause_poll_zero_reads_only_when_empty",
       pause_poll_zero_reads_only_when_empty, ANY_BACKEND},
      {"busy_device_does_not_starve_another",
       busy_device_does_not_starve_another, ANY_BACKEND},
      {"refused_device_fails_at_once_then_resumes",
       refused_device_fails_at_once_then_resumes, ANY_BACKEND},
      {"refusal_is_per_lane", refusal_is_per_lane, ANY_BACKEND},
      {"sliding_window_cannot_pause", sliding_window_cannot_pause, ANY_BACKEND},
      {NULL, NULL, ANY_BACKEND},
  };
  return test_main(tests, argc, argv);
}
