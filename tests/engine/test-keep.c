/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-keep.c - kept send blocks (sbr_sender_submit_keep, _wait_block,
 * _release): a block submitted to be kept stays its caller's, readable
 * and out of the free list, until released; released in flight, it goes
 * back at its completion; a reconnect leaves it done, never free; over
 * shm a block placed directly is copied out of the lane first.  One
 * behaviour per test, sender and receiver in one process.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>

#include "engine-fixture.h"
#include "engine/sender-internal.h"

#define KIB 1024u
#define LEN 3000u

static void next_frame_ok(sbr_receiver *r, struct sbr_frame *f)
{
  int ret = sbr_receiver_next_frame(r, 5000, f);
  ASSERT_MSG(ret == 0, "no frame within 5 s: %d (%s)", ret, strerror(-ret));
}

static void receive_frame(sbr_receiver *r, unsigned device, unsigned frame)
{
  struct sbr_frame f;
  next_frame_ok(r, &f);
  ASSERT_EQ(f.info.device, device);
  ASSERT_EQ(fixture_check_frame(&f), frame);
  sbr_frame_release(&f);
}

/* Two send blocks, so a third acquire shows whether a kept one went back;
 * drop backpressure, so that acquire answers at once; copies only (direct
 * placement has its own test). */
static sbr_sender *two_block_sender(sbr_receiver *r, uint16_t port)
{
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.send_blocks = 2;
  sc.backpressure = SBR_BACKPRESSURE_DROP;
  struct sbr__sender_knobs k = {.copy_into_lane = true};
  return fixture_sender_knobs(r, &sc, &k);
}

static sbr_send_block *acquire_filled(sbr_sender *s, unsigned frame)
{
  sbr_send_block *b;
  ASSERT_OK(sbr_sender_acquire(s, 0, &b));
  fixture_fill(sbr_send_block_payload(b, NULL), LEN, 0, frame);
  return b;
}

static void submit_keep(sbr_sender *s, sbr_send_block *b, unsigned frame)
{
  struct sbr_block_meta m;
  sbr_block_meta_init(&m, 0);
  m.pts = (uint64_t)frame * 40000000u;
  ASSERT_OK(sbr_sender_submit_keep(s, b, &m, LEN));
}

static void assert_payload(sbr_send_block *b, unsigned frame)
{
  const uint8_t *p = sbr_send_block_payload(b, NULL);
  for (size_t i = 0; i < LEN; i++)
    ASSERT_MSG(p[i] == fixture_byte(0, frame, i),
               "kept block's byte %zu is not frame %u's", i, frame);
}

/* Both blocks taken (the kept one and another): a third acquire fails. */
static void assert_no_free_block(sbr_sender *s)
{
  sbr_send_block *c;
  ASSERT_EQ(sbr_sender_acquire(s, 0, &c), -EAGAIN);
}

/* Its WRITE completed and the frame arrived, a kept block is neither
 * reused nor changed: the other send block is all an acquire gets, the
 * payload is still the frame, and it can be sent again.  Released, it is
 * the block the next acquire gets. */
static void kept_block_is_not_reused_until_released(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 8, 16 * KIB);
  sbr_sender *s = two_block_sender(r, port);
  sbr_send_block *a = acquire_filled(s, 1);
  submit_keep(s, a, 1);
  receive_frame(r, 0, 1);
  ASSERT_OK(sbr_sender_wait_block(s, a, 5000));
  sbr_send_block *b;
  ASSERT_OK(sbr_sender_acquire(s, 0, &b));
  assert_no_free_block(s);
  assert_payload(a, 1);

  /* Sent a second time, as it is. */
  submit_keep(s, a, 1);
  receive_frame(r, 0, 1);
  ASSERT_OK(sbr_sender_wait_block(s, a, 5000));
  assert_payload(a, 1);
  assert_no_free_block(s);

  sbr_sender_release(s, a);
  sbr_send_block *c;
  ASSERT_OK(sbr_sender_acquire(s, 0, &c));
  ASSERT(c == a);
  sbr_sender_abandon(s, b);
  sbr_sender_abandon(s, c);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* Fills the receiver's 4-block lane with frames it holds, so the next
 * block stays queued (no free receive block) until they are released. */
static void fill_lane(sbr_sender *s, sbr_receiver *r, sbr_block **held)
{
  for (unsigned i = 0; i < 4; i++) {
    ASSERT_OK(fixture_send(s, 0, i, 100));
    ASSERT_OK(sbr_sender_flush(s, 5000));
    ASSERT_OK(sbr_receiver_next(r, 5000, &held[i]));
  }
}

/* Released while its WRITE is still to come (the lane is full), a kept
 * block is not free yet: the other block is all an acquire gets.  A
 * second submit meanwhile is refused (-EBUSY).  Once the WRITE completed
 * it is free, and its frame arrived intact. */
static void kept_block_released_in_flight_goes_back_at_completion(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 4, 16 * KIB);
  sbr_sender *s = two_block_sender(r, port);
  sbr_block *held[4];
  fill_lane(s, r, held);

  sbr_send_block *a = acquire_filled(s, 4);
  submit_keep(s, a, 4);
  ASSERT_EQ(sbr_sender_wait_block(s, a, 100), -ETIMEDOUT);
  struct sbr_block_meta m;
  sbr_block_meta_init(&m, 0);
  ASSERT_EQ(sbr_sender_submit_keep(s, a, &m, LEN), -EBUSY);
  sbr_sender_release(s, a);
  sbr_send_block *b;
  ASSERT_OK(sbr_sender_acquire(s, 0, &b));
  assert_no_free_block(s);

  for (unsigned i = 0; i < 4; i++)
    sbr_block_release(held[i]);
  receive_frame(r, 0, 4);
  ASSERT_OK(sbr_sender_flush(s, 5000));
  sbr_send_block *c;
  ASSERT_OK(sbr_sender_acquire(s, 0, &c));
  ASSERT(c == a);
  sbr_sender_abandon(s, b);
  sbr_sender_abandon(s, c);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* A kept block still queued when the connection fails is counted dropped
 * and left done, the caller's: not on the free list (after the reconnect
 * the other block is all an acquire gets), its payload intact, and sent
 * again on the new lane it arrives intact. */
static void reconnect_leaves_kept_block_done(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 4, 16 * KIB);
  sbr_sender *s = two_block_sender(r, port);
  sbr_block *held[4];
  fill_lane(s, r, held);
  sbr_send_block *a = acquire_filled(s, 4);
  submit_keep(s, a, 4);

  ASSERT_OK(sbr__sender_test_fail_qp(s));
  for (int i = 0; i < 1000 && sbr_sender_is_connected(s); i++)
    usleep(10000);
  ASSERT(!sbr_sender_is_connected(s));
  ASSERT_OK(sbr_sender_wait_block(s, a, 5000));
  assert_payload(a, 4);
  struct sbr_device_stats ds;
  sbr_sender_get_device_stats(s, 0, &ds);
  ASSERT_EQ(ds.drops, 1);
  for (unsigned i = 0; i < 4; i++)
    sbr_block_release(held[i]);

  struct fixture_pump pu = {.r = r};
  atomic_init(&pu.stop, false);
  pthread_t t;
  ASSERT(pthread_create(&t, NULL, fixture_pump_thread, &pu) == 0);
  char err[256];
  int ret = sbr_sender_reconnect(s, err, sizeof err);
  atomic_store(&pu.stop, true);
  pthread_join(t, NULL);
  ASSERT_MSG(ret == 0, "reconnect: %d %s", ret, err);

  sbr_send_block *b;
  ASSERT_OK(sbr_sender_acquire(s, 0, &b));
  assert_no_free_block(s);
  submit_keep(s, a, 4);
  receive_frame(r, 0, 4);
  ASSERT_OK(sbr_sender_wait_block(s, a, 5000));
  sbr_sender_release(s, a);
  sbr_send_block *c;
  ASSERT_OK(sbr_sender_acquire(s, 0, &c));
  ASSERT(c == a);
  sbr_sender_abandon(s, b);
  sbr_sender_abandon(s, c);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* Over shm a block placed directly lies in the receiver's lane, which
 * carries other frames once this one is consumed: kept, its frame is
 * copied into the block's own memory (counted once) and sent from there;
 * both it and the receive block it was written into (a pointer taken
 * before the submit) stay that frame while twenty frames pass through
 * the lane, and it goes again. */
static void kept_direct_block_is_copied_out_of_the_lane(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 16, 64 * KIB);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.wait_timeout_ms = 20000; /* a slow host must not force a fallback */
  sbr_sender *s = fixture_sender(r, &sc);

  sbr_send_block *a = acquire_filled(s, 1);
  uint8_t *in_lane = sbr_send_block_payload(a, NULL);
  submit_keep(s, a, 1);
  ASSERT(sbr_send_block_payload(a, NULL) != in_lane);
  assert_payload(a, 1);
  receive_frame(r, 0, 1);
  for (unsigned i = 2; i < 22; i++) {
    sbr_send_block *b = acquire_filled(s, i);
    struct sbr_block_meta m;
    sbr_block_meta_init(&m, 0);
    m.pts = (uint64_t)i * 40000000u;
    ASSERT_OK(sbr_sender_submit(s, b, &m, LEN));
    receive_frame(r, 0, i);
  }
  ASSERT_OK(sbr_sender_wait_block(s, a, 5000));
  assert_payload(a, 1);
  for (size_t i = 0; i < LEN; i++)
    ASSERT_MSG(in_lane[i] == fixture_byte(0, 1, i),
               "the kept frame's receive block was written: byte %zu", i);
  submit_keep(s, a, 1);
  receive_frame(r, 0, 1);
  ASSERT_OK(sbr_sender_wait_block(s, a, 5000));
  sbr_sender_release(s, a);
  ASSERT_OK(sbr_sender_flush(s, 5000));

  struct sbr_sender_stats st;
  sbr_sender_get_stats(s, &st);
  ASSERT_EQ(st.kept_copies, 1);
  ASSERT_EQ(st.direct_fallbacks, 0);
  ASSERT_EQ(st.direct_blocks, 20);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

int main(int argc, char **argv)
{
  static const struct test_entry tests[] = {
      {"kept_block_is_not_reused_until_released",
       kept_block_is_not_reused_until_released, ANY_BACKEND},
      {"kept_block_released_in_flight_goes_back_at_completion",
       kept_block_released_in_flight_goes_back_at_completion, ANY_BACKEND},
      {"reconnect_leaves_kept_block_done", reconnect_leaves_kept_block_done,
       ANY_BACKEND},
      {"kept_direct_block_is_copied_out_of_the_lane",
       kept_direct_block_is_copied_out_of_the_lane, ANY_BACKEND},
      {NULL, NULL, ANY_BACKEND},
  };
  return test_main(tests, argc, argv);
}
