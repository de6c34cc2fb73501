/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* test-span.c - spanning blocks end to end over shm (docs/protocol.md,
 * "Spanning blocks"): a frame larger than a block arrives as ONE block,
 * its payload contiguous; the lane's status bytes say 1 and SPAN while
 * it is out, 2 while held, 0 after; without a run of free blocks, or to a
 * receiver that doesn't take spans, frames go as fragments. */
#include <errno.h>
#include <string.h>

#include "engine-fixture.h"
#include "engine/receiver-internal.h"
#include "engine/sender-internal.h"

#define KIB 1024u
#define BS (4 * KIB)
#define CAP (BS - SBR__BLOCK_OVERHEAD)

static void next_frame_ok(sbr_receiver *r, struct sbr_frame *f)
{
  int ret = sbr_receiver_next_frame(r, 5000, f);
  ASSERT_MSG(ret == 0, "no frame within 5 s: %d (%s)", ret, strerror(-ret));
}

static const uint8_t *lane_status(sbr_receiver *r)
{
  ASSERT(r->lanes != NULL);
  return (const uint8_t *)r->lanes->mem.status;
}

static struct sbr_sender_stats sender_stats(sbr_sender *s)
{
  struct sbr_sender_stats st;
  sbr_sender_get_stats(s, &st);
  return st;
}

/* One frame of three blocks' payload: one block, k = 3 lane blocks, the
 * status bytes 1 3 3 while it is out, 2 2 2 held, 0 0 0 released. */
static void big_frame_is_one_block(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 16, BS);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sbr_sender *s = fixture_sender(r, &sc);
  size_t len = 3 * BS - SBR__BLOCK_OVERHEAD; /* exactly 3 receive blocks */
  ASSERT_OK(fixture_send(s, 2, 0, len));
  struct sbr_frame f;
  next_frame_ok(r, &f);
  ASSERT_EQ(f.n_blocks, 1);
  ASSERT_EQ(f.size, len);
  ASSERT_EQ(f.info.payload_len, len);
  ASSERT_EQ(f.info.flags & (SBR_FLAG_FIRST | SBR_FLAG_LAST),
            SBR_FLAG_FIRST | SBR_FLAG_LAST);
  ASSERT_EQ(f.info.flags & SBR__FLAG_SPAN, 0); /* the wire's, not the app's */
  ASSERT_EQ(sbr_block_lane_blocks(f.blocks[0]), 3);
  ASSERT_EQ(fixture_check_frame(&f), 0);
  uint32_t at = f.info.index;
  const uint8_t *st = lane_status(r);
  ASSERT_EQ(st[at], SBR__STATUS_DATA);
  ASSERT_EQ(st[at + 1], SBR__STATUS_SPAN);
  ASSERT_EQ(st[at + 2], SBR__STATUS_SPAN);
  sbr_block_hold(f.blocks[0]);
  for (uint32_t j = 0; j < 3; j++)
    ASSERT_EQ(st[at + j], SBR__STATUS_HELD);
  sbr_frame_release(&f);
  for (uint32_t j = 0; j < 3; j++)
    ASSERT_EQ(st[at + j], SBR__STATUS_EMPTY);
  struct sbr_sender_stats ss = sender_stats(s);
  ASSERT_EQ(ss.span_frames, 1);
  ASSERT_EQ(ss.span_fallbacks, 0);
  ASSERT_EQ(ss.blocks, 1);
  struct sbr_receiver_stats rs;
  sbr_receiver_get_stats(r, &rs);
  ASSERT_EQ(rs.rejected, 0);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* Frames of every size from a byte to ten blocks, with small ones
 * between, round the lane many times: each arrives whole and in order,
 * every big one as one block unless the sender found no run of free
 * blocks (its fallback, counted: which frames meet one depends on when
 * the receiver's releases land, ci6's ASan run had one), and no span
 * wraps past the lane's end (the receiver would reject it). */
static void spans_of_every_size_go_round_the_lane(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 16, BS);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.send_blocks = 32;
  sbr_sender *s = fixture_sender(r, &sc);
  unsigned spans = 0, fragmented = 0;
  for (unsigned i = 0; i < 120; i++) {
    size_t len = (i % 3 == 2) ? 100 : 1 + (size_t)(i * 977u) % (10 * CAP);
    ASSERT_OK(fixture_send(s, 1, i, len));
    struct sbr_frame f;
    next_frame_ok(r, &f);
    ASSERT_EQ(fixture_check_frame(&f), i);
    ASSERT_EQ(f.size, len);
    if (f.n_blocks != 1) {
      ASSERT_EQ(f.n_blocks, (uint32_t)((len + CAP - 1) / CAP));
      fragmented++;
      sbr_frame_release(&f);
      continue;
    }
    uint32_t k = sbr_block_lane_blocks(f.blocks[0]);
    ASSERT_EQ(k, sbr__span_blocks(BS, len));
    ASSERT(f.info.index + k <= 16);
    spans += k > 1;
    sbr_frame_release(&f);
  }
  struct sbr_sender_stats ss = sender_stats(s);
  ASSERT_EQ(ss.span_frames, spans);
  ASSERT_EQ(ss.span_fallbacks, fragmented);
  ASSERT(spans > 0);
  struct sbr_receiver_stats rs;
  sbr_receiver_get_stats(r, &rs);
  ASSERT_EQ(rs.rejected, 0);
  struct sbr_device_stats ds;
  sbr_receiver_get_device_stats(r, 1, &ds);
  ASSERT_EQ(ds.gaps, 0); /* a span takes one packet number */
  ASSERT_EQ(ds.frames, 120);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* A receiver that predates spans (its accept says no features): the
 * same frames go as fragments, as before, and arrive intact. */
static void older_receiver_gets_fragments(void)
{
  fixture_spans(false);
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 16, BS);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sbr_sender *s = fixture_sender(r, &sc);
  fixture_spans(true); /* the lane is accepted: it keeps what it said */
  ASSERT_EQ(s->lane.features & SBR__FEATURE_SPAN, 0);
  for (unsigned i = 0; i < 20; i++) {
    ASSERT_OK(fixture_send(s, 0, i, 3 * CAP + 10));
    struct sbr_frame f;
    next_frame_ok(r, &f);
    ASSERT_EQ(f.n_blocks, 4);
    ASSERT_EQ(fixture_check_frame(&f), i);
    for (uint32_t k = 0; k < f.n_blocks; k++)
      ASSERT_EQ(sbr_block_lane_blocks(f.blocks[k]), 1);
    sbr_frame_release(&f);
  }
  struct sbr_sender_stats ss = sender_stats(s);
  ASSERT_EQ(ss.span_frames, 0);
  ASSERT_EQ(ss.blocks, 80);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* The lane's free blocks are enough for the frame's fragments but no run
 * is long enough for its span (the application holds blocks 2 and 5):
 * it goes as fragments at once rather than wait for a run that may never
 * come, and the next frame spans again once the blocks are back. */
static void no_run_means_fragments(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 8, BS);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sbr_sender *s = fixture_sender(r, &sc);
  sbr_block *b[8];
  for (unsigned i = 0; i < 8; i++) {
    ASSERT_OK(fixture_send(s, 0, i, 100));
    ASSERT_OK(sbr_receiver_next(r, 5000, &b[i]));
    ASSERT_EQ(sbr_block_get_info(b[i])->index, i);
  }
  for (unsigned i = 0; i < 8; i++)
    if (i != 2 && i != 5)
      sbr_block_release(b[i]);
  size_t len = 2 * BS - SBR__BLOCK_OVERHEAD + 1; /* a span of 3 */
  ASSERT_EQ(sbr__span_blocks(BS, len), 3);
  ASSERT_OK(fixture_send(s, 0, 8, len));
  struct sbr_frame f;
  next_frame_ok(r, &f);
  ASSERT_EQ(f.n_blocks, 3);
  ASSERT_EQ(fixture_check_frame(&f), 8);
  sbr_frame_release(&f);
  struct sbr_sender_stats ss = sender_stats(s);
  ASSERT_EQ(ss.span_frames, 0);
  ASSERT_EQ(ss.span_fallbacks, 1);
  sbr_block_release(b[2]);
  sbr_block_release(b[5]);
  ASSERT_OK(fixture_send(s, 0, 9, len));
  next_frame_ok(r, &f);
  ASSERT_EQ(f.n_blocks, 1);
  ASSERT_EQ(fixture_check_frame(&f), 9);
  sbr_frame_release(&f);
  ASSERT_EQ(sender_stats(s).span_frames, 1);
  struct sbr_device_stats ds;
  sbr_receiver_get_device_stats(r, 0, &ds);
  ASSERT_EQ(ds.gaps, 0);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* Spans held by the application hold their k blocks; the sender writes
 * around them (runs elsewhere, never into a continuation block). */
static void held_spans_are_written_around(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 16, BS);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.send_blocks = 32;
  sbr_sender *s = fixture_sender(r, &sc);
  size_t len = 3 * BS - SBR__BLOCK_OVERHEAD;
  struct sbr_frame held[3];
  for (unsigned i = 0; i < 3; i++) {
    ASSERT_OK(fixture_send(s, 0, i, len));
    next_frame_ok(r, &held[i]);
    ASSERT_EQ(held[i].n_blocks, 1);
    sbr_block_hold(held[i].blocks[0]);
  }
  for (unsigned i = 3; i < 40; i++) {
    ASSERT_OK(fixture_send(s, 0, i, i % 2 ? len : 200));
    struct sbr_frame f;
    next_frame_ok(r, &f);
    ASSERT_EQ(fixture_check_frame(&f), i);
    for (unsigned h = 0; h < 3; h++) {
      uint32_t a = held[h].info.index, c = f.info.index;
      ASSERT(c + sbr_block_lane_blocks(f.blocks[0]) <= a || c >= a + 3);
    }
    sbr_frame_release(&f);
  }
  for (unsigned i = 0; i < 3; i++) {
    ASSERT_EQ(fixture_check_frame(&held[i]), i); /* never overwritten */
    sbr_frame_release(&held[i]);
  }
  struct sbr_receiver_stats rs;
  sbr_receiver_get_stats(r, &rs);
  ASSERT_EQ(rs.rejected, 0);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* A frame queued behind a one-block frame, both while the engine was busy
 * (engine_lock held: no producer posts, the sender thread waits), still
 * spans: the engine takes the small frame's block, then the big frame
 * whole.  Taking the queue's blocks in one run used to take the big
 * frame's fragments with it (the TSan flake of held_spans_are_written_
 * around: a frame queued between the engine's look at the queue's head
 * and its take went as fragments, uncounted). */
static void frame_queued_behind_a_block_spans(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 16, BS);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.send_blocks = 32;
  sbr_sender *s = fixture_sender(r, &sc);
  size_t len = 3 * BS - SBR__BLOCK_OVERHEAD;
  wait_sender_thread_idle(s);
  pthread_mutex_lock(&s->engine_lock);
  ASSERT_OK(fixture_send(s, 0, 0, 200));
  ASSERT_OK(fixture_send(s, 0, 1, len));
  ASSERT_OK(fixture_send(s, 0, 2, 200));
  pthread_mutex_unlock(&s->engine_lock);
  for (unsigned i = 0; i < 3; i++) {
    struct sbr_frame f;
    next_frame_ok(r, &f);
    ASSERT_EQ(fixture_check_frame(&f), i);
    ASSERT_EQ(f.n_blocks, 1);
    ASSERT_EQ(sbr_block_lane_blocks(f.blocks[0]), i == 1 ? 3 : 1);
    sbr_frame_release(&f);
  }
  struct sbr_sender_stats ss = sender_stats(s);
  ASSERT_EQ(ss.span_frames, 1);
  ASSERT_EQ(ss.span_fallbacks, 0);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* The defaults (16 x 1 MiB lanes, 16 send blocks): 1080p and 4K NV12
 * frames each arrive as one block. */
static void hd_and_4k_frames_at_the_defaults(void)
{
  uint16_t port = fixture_port();
  struct sbr_receiver_config rc;
  sbr_receiver_config_init(&rc);
  rc.backend = SBR_BACKEND_SHM;
  rc.port = port;
  sbr_receiver *r = fixture_receiver_new(&rc);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sbr_sender *s = fixture_sender(r, &sc);
  static const size_t sizes[] = {1920 * 1080 * 3 / 2, 3840 * 2160 * 3 / 2};
  for (unsigned i = 0; i < 6; i++) {
    size_t len = sizes[i % 2];
    ASSERT_OK(fixture_send(s, 3, i, len));
    struct sbr_frame f;
    next_frame_ok(r, &f);
    ASSERT_EQ(f.n_blocks, 1);
    ASSERT_EQ(f.size, len);
    ASSERT_EQ(sbr_block_lane_blocks(f.blocks[0]), i % 2 ? 12 : 3);
    ASSERT_EQ(fixture_check_frame(&f), i);
    sbr_frame_release(&f);
  }
  ASSERT_EQ(sender_stats(s).span_frames, 6);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

int main(int argc, char **argv)
{
  static const struct test_entry tests[] = {
      {"big_frame_is_one_block", big_frame_is_one_block, ANY_BACKEND},
      {"spans_of_every_size_go_round_the_lane",
       spans_of_every_size_go_round_the_lane, ANY_BACKEND},
      {"older_receiver_gets_fragments", older_receiver_gets_fragments,
       ANY_BACKEND},
      {"no_run_means_fragments", no_run_means_fragments, ANY_BACKEND},
      {"held_spans_are_written_around", held_spans_are_written_around,
       ANY_BACKEND},
      {"frame_queued_behind_a_block_spans", frame_queued_behind_a_block_spans,
       ANY_BACKEND},
      {"hd_and_4k_frames_at_the_defaults", hd_and_4k_frames_at_the_defaults,
       ANY_BACKEND},
      {NULL, NULL, ANY_BACKEND},
  };
  return test_main(tests, argc, argv);
}
