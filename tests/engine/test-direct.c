/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-direct.c - direct placement over shm (lib/engine/sender-direct.c):
 * a block from sbr_sender_acquire is a receive block of the lane, so a
 * frame is never copied between its producer and the receiver; what falls
 * back to a copy is counted, and a reconnect loses no frame a producer
 * holds.  One behaviour per test, sender and receiver in one process.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "engine-fixture.h"

#define KIB 1024u

static void next_frame_ok(sbr_receiver *r, struct sbr_frame *f)
{
  int ret = sbr_receiver_next_frame(r, 5000, f);
  ASSERT_MSG(ret == 0, "no frame within 5 s: %d (%s)", ret, strerror(-ret));
}

/* A sender whose waits only catch hangs: a slow host must not turn a
 * wait for a reserved block into a fallback. */
static sbr_sender *direct_sender(sbr_receiver *r, uint16_t port, bool copy)
{
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.wait_timeout_ms = 20000;
  struct sbr__sender_knobs k = {.copy_into_lane = copy};
  return fixture_sender_knobs(r, &sc, &k);
}

/* Acquires a block for device, fills it with frame's pattern and submits
 * it as one whole frame. */
static void fill_and_submit(sbr_sender *s, unsigned device, unsigned frame,
                            size_t len)
{
  sbr_send_block *b;
  ASSERT_OK(sbr_sender_acquire(s, (uint8_t)device, &b));
  size_t cap;
  uint8_t *p = sbr_send_block_payload(b, &cap);
  ASSERT(len <= cap);
  ASSERT(sbr__sender_block_from_payload(s, p) == b);
  ASSERT(sbr__sender_owns(s, p));
  fixture_fill(p, len, device, frame);
  struct sbr_block_meta m;
  sbr_block_meta_init(&m, (uint8_t)device);
  m.pts = (uint64_t)frame * 40000000u;
  ASSERT_OK(sbr_sender_submit(s, b, &m, len));
}

static void receive_frame(sbr_receiver *r, unsigned device, unsigned frame)
{
  struct sbr_frame f;
  next_frame_ok(r, &f);
  ASSERT_EQ(f.info.device, device);
  ASSERT_EQ(fixture_check_frame(&f), frame);
  ASSERT_MSG(f.copy == NULL, "the receiver copied frame %u", frame);
  sbr_frame_release(&f);
}

/* Every acquired frame goes out as its status byte alone: no data WRITE
 * is posted (nothing is copied into the lane), none falls back, and the
 * receiver hands the frame over in place.  With copy_into_lane (the path
 * before direct placement) every frame is a data WRITE. */
static void run_frames(bool copy, struct sbr_sender_stats *st)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 16, 64 * KIB);
  sbr_sender *s = direct_sender(r, port, copy);
  for (unsigned i = 0; i < 60; i++) {
    fill_and_submit(s, i % 3, i, 1000 + 777 * i);
    receive_frame(r, i % 3, i);
  }
  ASSERT_OK(sbr_sender_flush(s, 5000));
  /* A status READ is counted in wr_posted when posted and in sync_reads
   * or pause_reads when it completes, and the engine READs for its pool
   * for a while after the last acquire: wait for a moment with no READ in
   * flight (a hang bound; the counts can only agree then, and a data
   * WRITE would keep them apart for good). */
  for (int waited_ms = 0;; waited_ms++) {
    sbr_sender_get_stats(s, st);
    if (copy || waited_ms >= 5000 ||
        st->wr_posted == st->status_writes + st->sync_reads + st->pause_reads)
      break;
    usleep(1000);
  }
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

static void acquired_frames_are_never_copied(void)
{
  struct sbr_sender_stats st;
  run_frames(false, &st);
  ASSERT_EQ(st.blocks, 60);
  ASSERT_EQ(st.direct_blocks, 60);
  ASSERT_EQ(st.direct_fallbacks, 0);
  /* Status WRITEs and READs only: not one WRITE carried a payload. */
  ASSERT_EQ(st.wr_posted, st.status_writes + st.sync_reads + st.pause_reads);
  ASSERT_EQ(st.drops, 0);
}

static void copy_into_lane_copies_every_frame(void)
{
  struct sbr_sender_stats st;
  run_frames(true, &st);
  ASSERT_EQ(st.blocks, 60);
  ASSERT_EQ(st.direct_blocks, 0);
  ASSERT_EQ(st.direct_fallbacks, 0);
  ASSERT(st.wr_posted >= st.status_writes + 60);
}

/* With drop backpressure an acquire doesn't wait for a reserved block:
 * the first one after connecting finds none yet (the status READ that
 * reserves them has not even been posted), is copied, counted, and
 * arrives intact all the same. */
static void acquire_that_cannot_wait_copies_and_counts_it(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 16, 64 * KIB);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.backpressure = SBR_BACKPRESSURE_DROP;
  sbr_sender *s = fixture_sender(r, &sc);
  fill_and_submit(s, 1, 0, 5000);
  receive_frame(r, 1, 0);
  ASSERT_OK(sbr_sender_flush(s, 5000));
  struct sbr_sender_stats st;
  sbr_sender_get_stats(s, &st);
  ASSERT_EQ(st.direct_fallbacks, 1);
  ASSERT_EQ(st.direct_blocks, 0);
  ASSERT_EQ(st.drops, 0);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* A stream that waits (backpressure WAIT: non-live) waits for a receive
 * block rather than copy: with every block of the lane held by the
 * receiver, an acquire waits until the receiver releases one, and the
 * frame is placed in it, not copied (B6: flat out, two frames in three
 * were copied when the wait ended after two looks at the lane). */
struct release_later {
  struct sbr_frame *frames;
  unsigned n;
};

static void *release_after_a_while(void *arg)
{
  struct release_later *rl = arg;
  usleep(300 * 1000); /* long past the engine's looks at the lane */
  for (unsigned i = 0; i < rl->n; i++)
    sbr_frame_release(&rl->frames[i]);
  return NULL;
}

static void waiting_acquire_places_in_the_block_the_receiver_frees(void)
{
  enum { LANE = 4 };
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, LANE, 64 * KIB);
  sbr_sender *s = direct_sender(r, port, false);
  struct sbr_frame held[LANE];
  for (unsigned i = 0; i < LANE; i++) {
    fill_and_submit(s, 0, i, 3000);
    next_frame_ok(r, &held[i]);
    ASSERT_EQ(fixture_check_frame(&held[i]), i);
  }
  struct release_later rl = {held, LANE};
  pthread_t t;
  ASSERT_EQ(pthread_create(&t, NULL, release_after_a_while, &rl), 0);
  fill_and_submit(s, 0, LANE, 3000); /* waits for the releases */
  receive_frame(r, 0, LANE);
  pthread_join(t, NULL);
  struct sbr_sender_stats st;
  sbr_sender_get_stats(s, &st);
  ASSERT_EQ(st.direct_fallbacks, 0);
  ASSERT_EQ(st.direct_blocks, LANE + 1);
  ASSERT_EQ(st.drops, 0);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* Blocks producers hold across a reconnect point into the old lane.  The
 * lane goes (its receiver is freed), the producers go on writing into
 * their blocks, the sender reconnects to a new receiver, and then they
 * submit: every frame arrives intact on the new lane (copied there,
 * counted), and the next frames are placed directly again. */
static void reconnect_delivers_held_frames_intact(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 16, 64 * KIB);
  sbr_sender *s = direct_sender(r, port, false);
  fill_and_submit(s, 0, 0, 3000);
  receive_frame(r, 0, 0);

  enum { HELD = 3 };
  sbr_send_block *held[HELD];
  uint8_t *payload[HELD];
  size_t len[HELD];
  for (unsigned k = 0; k < HELD; k++) {
    ASSERT_OK(sbr_sender_acquire(s, (uint8_t)k, &held[k]));
    payload[k] = sbr_send_block_payload(held[k], NULL);
    len[k] = 2000 + 1000 * k;
    /* Half now, half after the lane is gone. */
    fixture_fill(payload[k], len[k], k, 10 + k);
    memset(payload[k] + len[k] / 2, 0xa5, len[k] - len[k] / 2);
  }
  struct sbr_sender_stats st0;
  sbr_sender_get_stats(s, &st0);
  ASSERT_EQ(st0.direct_blocks, 1);

  sbr_receiver_free(r);
  /* The sender notices when it next posts: a copy through the old lane. */
  int ret = 0;
  for (int i = 0; i < 500 && ret != -ENOTCONN; i++) {
    ret = fixture_send(s, 9, 0, 100);
    usleep(10000);
  }
  ASSERT_EQ(ret, -ENOTCONN);
  for (unsigned k = 0; k < HELD; k++) {
    uint8_t *p = payload[k];
    for (size_t i = len[k] / 2; i < len[k]; i++)
      p[i] = fixture_byte(k, 10 + k, i);
  }

  r = fixture_receiver(port, 16, 64 * KIB);
  struct fixture_pump pu = {.r = r};
  atomic_init(&pu.stop, false);
  pthread_t t;
  ASSERT(pthread_create(&t, NULL, fixture_pump_thread, &pu) == 0);
  char err[256];
  ret = sbr_sender_reconnect(s, err, sizeof err);
  atomic_store(&pu.stop, true);
  pthread_join(t, NULL);
  ASSERT_MSG(ret == 0, "reconnect: %d %s", ret, err);

  for (unsigned k = 0; k < HELD; k++) {
    struct sbr_block_meta m;
    sbr_block_meta_init(&m, (uint8_t)k);
    m.pts = (uint64_t)(10 + k) * 40000000u;
    ASSERT_OK(sbr_sender_submit(s, held[k], &m, len[k]));
  }
  for (unsigned k = 0; k < HELD; k++)
    receive_frame(r, k, 10 + k);
  fill_and_submit(s, 0, 20, 4000);
  receive_frame(r, 0, 20);
  ASSERT_OK(sbr_sender_flush(s, 5000));

  struct sbr_sender_stats st;
  sbr_sender_get_stats(s, &st);
  ASSERT_EQ(st.reconnects, 1);
  ASSERT_EQ(st.direct_fallbacks, HELD);
  ASSERT_EQ(st.direct_blocks, 2);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* An acquired block given back unsent returns its receive block to the
 * pool: a lane of 4 (a pool of 2) serves any number of such abandons
 * and then still places frames directly. */
static void abandoned_block_goes_back_to_the_pool(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 4, 16 * KIB);
  sbr_sender *s = direct_sender(r, port, false);
  for (unsigned i = 0; i < 20; i++) {
    sbr_send_block *a, *b;
    ASSERT_OK(sbr_sender_acquire(s, 0, &a));
    ASSERT_OK(sbr_sender_acquire(s, 0, &b));
    sbr_sender_abandon(s, a);
    sbr_sender_abandon(s, b);
  }
  fill_and_submit(s, 0, 1, 1000);
  receive_frame(r, 0, 1);
  ASSERT_OK(sbr_sender_flush(s, 5000));
  struct sbr_sender_stats st;
  sbr_sender_get_stats(s, &st);
  ASSERT_EQ(st.direct_blocks, 1);
  ASSERT_EQ(st.direct_fallbacks, 0);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* The sliding window's slot is known only when a block is posted: it
 * keeps copying, and says so by placing nothing. */
static void sliding_window_keeps_copying(void)
{
  uint16_t port = fixture_port();
  struct sbr_receiver_config rc;
  fixture_receiver_config(&rc, port, 16, 16 * KIB);
  rc.mechanism = SBR_MECH_SLIDING_WINDOW;
  sbr_receiver *r = fixture_receiver_new(&rc);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.mechanism = SBR_MECH_SLIDING_WINDOW;
  sbr_sender *s = fixture_sender(r, &sc);
  for (unsigned i = 0; i < 5; i++) {
    fill_and_submit(s, 0, i, 1000);
    receive_frame(r, 0, i);
  }
  ASSERT_OK(sbr_sender_flush(s, 5000));
  struct sbr_sender_stats st;
  sbr_sender_get_stats(s, &st);
  ASSERT_EQ(st.blocks, 5);
  ASSERT_EQ(st.direct_blocks, 0);
  ASSERT_EQ(st.direct_fallbacks, 0);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

int main(int argc, char **argv)
{
  static const struct test_entry tests[] = {
      {"acquired_frames_are_never_copied", acquired_frames_are_never_copied,
       ANY_BACKEND},
      {"copy_into_lane_copies_every_frame", copy_into_lane_copies_every_frame,
       ANY_BACKEND},
      {"acquire_that_cannot_wait_copies_and_counts_it",
       acquire_that_cannot_wait_copies_and_counts_it, ANY_BACKEND},
      {"waiting_acquire_places_in_the_block_the_receiver_frees",
       waiting_acquire_places_in_the_block_the_receiver_frees, ANY_BACKEND},
      {"reconnect_delivers_held_frames_intact",
       reconnect_delivers_held_frames_intact, ANY_BACKEND},
      {"abandoned_block_goes_back_to_the_pool",
       abandoned_block_goes_back_to_the_pool, ANY_BACKEND},
      {"sliding_window_keeps_copying", sliding_window_keeps_copying,
       ANY_BACKEND},
      {NULL, NULL, ANY_BACKEND},
  };
  return test_main(tests, argc, argv);
}
