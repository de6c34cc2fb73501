/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-sched.c - the sender's path from a queued block to the wire, in one
 * process over the shm back end: a block queued while another is in flight
 * is posted behind it at once (not after its completion), and the blocks of
 * several devices' frames go out one fragment per device in turn.  The
 * order is observed (what the receiver got, which send blocks are still
 * out), never timed.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "engine-fixture.h"
#include "engine/sender-internal.h"

#define KIB 1024u

static void next_frame_ok(sbr_receiver *r, struct sbr_frame *f)
{
  int ret = sbr_receiver_next_frame(r, 10000, f);
  ASSERT_MSG(ret == 0, "no frame within 10 s: %d (%s)", ret, strerror(-ret));
}

static uint64_t posted_blocks(sbr_sender *s)
{
  struct sbr_sender_stats st;
  sbr_sender_get_stats(s, &st);
  return st.blocks;
}

/* Frame A is in flight: the shm NIC executes every WR half a second after
 * its post (the receiver sees A then) and completes it half a second
 * later.  Meanwhile the sender thread sleeps on A's completion, and no
 * timeout ends that sleep earlier.  Frame B is queued as soon as A landed.
 * B must be posted at once, behind A, so the sender has both send blocks
 * out when B is counted as posted.  Without the kick the sleeping thread
 * noticed B only at A's completion, reaped it first (freeing A's block),
 * and then posted B. */
static void block_queued_during_a_wait_is_posted_behind_it(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 8, 4 * KIB);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.send_blocks = 2;
  sc.backpressure = SBR_BACKPRESSURE_DROP;
  sc.pause_poll_us = 0; /* no forced READ to wake the sender */
  /* Nor a sleep's timeout: the sender thread sleeps until the completion. */
  sc.backoff.min_sleep_us = sc.backoff.max_sleep_us = 4000000;
  /* Executed after 0.5 s, completed after 1 s. */
  struct sbr__sender_knobs k = {.faults.delay_us = 1000000};
  sbr_sender *s = fixture_sender_knobs(r, &sc, &k);

  ASSERT_OK(fixture_send(s, 0, 0, 1000)); /* A, after the first status READ */
  struct sbr_frame f;
  next_frame_ok(r, &f);
  ASSERT_EQ(f.info.device, 0);
  ASSERT_EQ(fixture_check_frame(&f), 0);
  sbr_frame_release(&f);
  ASSERT_OK(fixture_send(s, 1, 0, 1000)); /* B, A's completion pending */
  while (posted_blocks(s) < 2)
    usleep(1000);
  sbr_send_block *b = NULL;
  int ret = sbr_sender_acquire(s, 2, &b);
  ASSERT_MSG(ret == -EAGAIN,
             "a send block was free when B was posted (%d): B waited for "
             "A's completion",
             ret);
  struct sbr_sender_stats st;
  sbr_sender_get_stats(s, &st);
  ASSERT_MSG(st.kicks >= 1, "the sender thread was never kicked");

  next_frame_ok(r, &f);
  ASSERT_EQ(f.info.device, 1);
  ASSERT_EQ(fixture_check_frame(&f), 0);
  sbr_frame_release(&f);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* Queues device 0's 5-block frame, device 1's 1-block frame and device
 * 2's 3-block frame, in that order, while the sender can't post anything
 * yet (its first status READ takes a second), and returns the devices of
 * the blocks in the order the receiver got them (seq order = post order),
 * checking that each device's packets come in order. */
static void post_order(enum sbr_send_order order, char *devices, size_t len)
{
  fixture_spans(false); /* the order of fragments is what this tests */
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 16, 4 * KIB);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.send_order = order;
  /* The first READ completes after 2 s. */
  struct sbr__sender_knobs k = {.faults.delay_us = 2000000};
  sbr_sender *s = fixture_sender_knobs(r, &sc, &k);
  size_t cap = sbr_sender_block_payload_size(s);
  ASSERT_OK(fixture_send(s, 0, 0, 4 * cap + 10)); /* 5 blocks */
  ASSERT_OK(fixture_send(s, 1, 0, 100));          /* 1 block */
  ASSERT_OK(fixture_send(s, 2, 0, 2 * cap + 10)); /* 3 blocks */
  ASSERT_EQ(posted_blocks(s), 0);                 /* all queued together */

  int packet[3] = {-1, -1, -1};
  size_t n = 0;
  for (; n < 9 && n + 1 < len; n++) {
    sbr_block *b;
    int ret = sbr_receiver_next(r, 10000, &b);
    ASSERT_MSG(ret == 0, "block %zu: %d", n, ret);
    const struct sbr_block_info *bi = sbr_block_get_info(b);
    ASSERT(bi->device < 3);
    ASSERT_EQ((int)bi->packet, packet[bi->device] + 1);
    packet[bi->device] = bi->packet;
    devices[n] = (char)('A' + bi->device);
    sbr_block_release(b);
  }
  devices[n] = 0;
  sbr_sender_free(s);
  sbr_receiver_free(r);
  fixture_spans(true);
}

/* Round robin: one block per device with blocks queued, in turn; a device
 * that runs out leaves the round.  B's small frame and C's first fragment
 * go out right after A's first, not after A's whole frame. */
static void devices_frames_are_interleaved_block_by_block(void)
{
  char got[16];
  post_order(SBR_SEND_ORDER_ROUND_ROBIN, got, sizeof got);
  ASSERT_MSG(strcmp(got, "ABCACACAA") == 0, "post order %s", got);
}

/* FIFO (the default): submit order, each frame whole. */
static void fifo_posts_frames_whole_in_submit_order(void)
{
  char got[16];
  struct sbr_sender_config defaults;
  sbr_sender_config_init(&defaults);
  post_order(defaults.send_order, got, sizeof got);
  ASSERT_MSG(strcmp(got, "AAAAABCCC") == 0, "post order %s", got);
}

/* Round robin: the receiver reassembles interleaved fragments per device,
 * and a small frame queued after a big one is delivered first, both byte
 * for byte. */
static void small_frame_overtakes_a_big_one(void)
{
  fixture_spans(false); /* the order of fragments is what this tests */
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 16, 4 * KIB);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.send_order = SBR_SEND_ORDER_ROUND_ROBIN;
  struct sbr__sender_knobs k = {.faults.delay_us = 2000000};
  sbr_sender *s = fixture_sender_knobs(r, &sc, &k);
  size_t cap = sbr_sender_block_payload_size(s);
  ASSERT_OK(fixture_send(s, 0, 7, 6 * cap + 1)); /* 7 blocks */
  ASSERT_OK(fixture_send(s, 1, 3, 200));
  ASSERT_EQ(posted_blocks(s), 0);

  struct sbr_frame f;
  next_frame_ok(r, &f);
  ASSERT_EQ(f.info.device, 1);
  ASSERT_EQ(fixture_check_frame(&f), 3);
  sbr_frame_release(&f);
  next_frame_ok(r, &f);
  ASSERT_EQ(f.info.device, 0);
  ASSERT_EQ(f.size, 6 * cap + 1);
  ASSERT_EQ(f.n_blocks, 7);
  ASSERT_EQ(fixture_check_frame(&f), 7);
  sbr_frame_release(&f);
  sbr_sender_free(s);
  sbr_receiver_free(r);
  fixture_spans(true);
}

/* Sends frames of 2 MiB, each to an idle sender (the previous one
 * delivered and flushed, then its thread seen out of the engine), and
 * counts those its producer posted (the sender's producer_posts went up)
 * and of those the ones already in the receiver's lane when
 * sbr_sender_send returned: found by a receive that doesn't wait.  Until
 * 20 were posted by their producer (100 frames at most; 20 frames with
 * sender_thread_posts): a loaded host's sender thread may wake into the
 * engine now and then, and then it posts, as before. */
static unsigned frames_landed_by_return(bool sender_thread_posts,
                                        uint64_t *own_posts)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 4, 4096 * KIB);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  struct sbr__sender_knobs k = {.sender_thread_posts = sender_thread_posts};
  sbr_sender *s = fixture_sender_knobs(r, &sc, &k);
  unsigned landed = 0, sent = 0;
  struct sbr_sender_stats before, after;
  sbr_sender_get_stats(s, &after);
  for (unsigned i = 0; i < 100; i++) {
    if (sender_thread_posts ? i >= 20 : after.producer_posts >= 20)
      break;
    sent++;
    ASSERT_OK(sbr_sender_flush(s, 10000));
    wait_sender_thread_idle(s);
    sbr_sender_get_stats(s, &before);
    ASSERT_OK(fixture_send(s, 0, i, 2048 * KIB));
    struct sbr_frame f;
    bool at_return = sbr_receiver_next_frame(r, 0, &f) == 0;
    sbr_sender_get_stats(s, &after);
    if (!at_return)
      next_frame_ok(r, &f);
    else if (after.producer_posts > before.producer_posts)
      landed++;
    ASSERT_EQ(fixture_check_frame(&f), i);
    sbr_frame_release(&f);
  }
  *own_posts = after.producer_posts;
  fprintf(stderr,
          "%u frames sent, %" PRIu64 " posted by their producer, %u of "
          "these in the lane at return (sender_thread_posts %d)\n",
          sent, after.producer_posts, landed, sender_thread_posts);
  sbr_sender_free(s);
  sbr_receiver_free(r);
  return landed;
}

/* A frame submitted to an idle sender is posted on the producer's thread,
 * and over shm an idle NIC copies it there too: it is in the receiver's
 * lane, status byte set, when the submit returns.  Before, the sender
 * thread had to wake to post it and then the NIC thread to copy it (0 or
 * 1 of 20 landed by then, against 19 now, on this host; 6 of 20 posted by
 * the sender thread land before the test looks).  Counted among the
 * frames their producer posted: at least 12 of 20 in the lane at return,
 * not all (a producer preempted before its copy leaves it to the NIC
 * thread, test below). */
static void idle_sender_posts_on_the_producers_thread(void)
{
  uint64_t own_posts;
  unsigned landed = frames_landed_by_return(false, &own_posts);
  ASSERT_MSG(own_posts >= 20,
             "producers posted %" PRIu64 " of up to 100 frames, each sent "
             "to an idle sender",
             own_posts);
  ASSERT_MSG(landed >= 12,
             "only %u of 20 frames their producer posted were in the lane "
             "when the submit returned",
             landed);
}

/* sender_thread_posts keeps the old path: the producer never posts. */
static void sender_thread_posts_leaves_posting_to_the_thread(void)
{
  uint64_t producer_posts;
  frames_landed_by_return(true, &producer_posts);
  ASSERT_EQ(producer_posts, 0);
}

static atomic_int stall_next_claim; /* the next claimed chain stalls */
static atomic_int stalled;          /* a producer sleeps in its claim now */
static atomic_int claim_go_on;      /* the test lets it go on */

/* Until the test has seen what it waits for, not for a time a loaded host
 * may not give it (30 s at most: longer than the test's waits). */
static void stall_claim(void)
{
  if (atomic_exchange(&stall_next_claim, 0)) {
    atomic_store(&stalled, 1);
    for (unsigned ms = 0; !atomic_load(&claim_go_on) && ms < 30000; ms++)
      usleep(1000);
    atomic_store(&stalled, 0);
  }
}

static void *send_frame_1_of_device_0(void *arg)
{
  ASSERT_OK(fixture_send(arg, 0, 1, 256 * KIB));
  return NULL;
}

/* A producer copies its own frame (shm, idle NIC) after it dropped the
 * engine's lock, and a NIC thread that finds such a claim not started yet
 * takes it over.  So a producer stalled (preempted, slow) between its post
 * and its copy holds up no other camera: while it sleeps there,
 * another camera's frame is posted and both frames land, its own first
 * (RC order), byte for byte.  With the copy under engine_lock nothing was
 * even posted meanwhile; with a claim nobody else may execute, nothing
 * landed.  (A stall in the middle of a copy still holds the chains queued
 * behind it: the order of one QP.) */
static void producer_stalled_before_its_copy_holds_up_nobody(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 8, 512 * KIB);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sbr_sender *s = fixture_sender(r, &sc);
  struct sbr_frame f;
  ASSERT_OK(fixture_send(s, 0, 0, 256 * KIB)); /* the first status READ */
  next_frame_ok(r, &f);
  sbr_frame_release(&f);
  ASSERT_OK(sbr_sender_flush(s, 10000));
  wait_sender_thread_idle(s);

  sbr__shm_test_claim_hook = stall_claim;
  atomic_store(&stall_next_claim, 1);
  pthread_t a;
  ASSERT_OK(pthread_create(&a, NULL, send_frame_1_of_device_0, s));
  for (int i = 0; i < 10000 && !atomic_load(&stalled); i++)
    usleep(1000);
  ASSERT_MSG(atomic_load(&stalled), "device 0's producer never claimed its "
                                    "chain");
  ASSERT_OK(fixture_send(s, 1, 0, 1000));
  ASSERT_EQ(sbr_receiver_next_frame(r, 10000, &f), 0);
  ASSERT_EQ(f.info.device, 0);
  ASSERT_EQ(fixture_check_frame(&f), 1);
  sbr_frame_release(&f);
  ASSERT_EQ(sbr_receiver_next_frame(r, 10000, &f), 0);
  ASSERT_EQ(f.info.device, 1);
  ASSERT_EQ(fixture_check_frame(&f), 0);
  sbr_frame_release(&f);
  ASSERT_MSG(atomic_load(&stalled),
             "the frames landed only once device 0's producer went on");
  atomic_store(&claim_go_on, 1);
  pthread_join(a, NULL);
  sbr__shm_test_claim_hook = NULL;
  ASSERT_OK(sbr_sender_flush(s, 10000)); /* the claim was given back */
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

int main(int argc, char **argv)
{
  static const struct test_entry tests[] = {
      {"block_queued_during_a_wait_is_posted_behind_it",
       block_queued_during_a_wait_is_posted_behind_it, ANY_BACKEND},
      {"devices_frames_are_interleaved_block_by_block",
       devices_frames_are_interleaved_block_by_block, ANY_BACKEND},
      {"fifo_posts_frames_whole_in_submit_order",
       fifo_posts_frames_whole_in_submit_order, ANY_BACKEND},
      {"small_frame_overtakes_a_big_one", small_frame_overtakes_a_big_one,
       ANY_BACKEND},
      {"idle_sender_posts_on_the_producers_thread",
       idle_sender_posts_on_the_producers_thread, ANY_BACKEND},
      {"sender_thread_posts_leaves_posting_to_the_thread",
       sender_thread_posts_leaves_posting_to_the_thread, ANY_BACKEND},
      {"producer_stalled_before_its_copy_holds_up_nobody",
       producer_stalled_before_its_copy_holds_up_nobody, ANY_BACKEND},
      {NULL, NULL, ANY_BACKEND},
  };
  return test_main(tests, argc, argv);
}
