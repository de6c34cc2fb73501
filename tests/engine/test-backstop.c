/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-backstop.c - the receiver's backstop for status bytes placed before
 * their data (docs/protocol.md, "Placement order"), over the shm back end.
 *
 * The forger (forger.h) plays a NIC that breaks the two-WRITE ordering: it
 * sets a receive block's status byte while the block still holds the
 * previous block of the lane, header and trailer intact, same epoch.  That
 * stale block is valid in every field but its sequence number, which is
 * behind the lane's next.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "wire/block.h"
#include "engine-fixture.h"
#include "engine/receiver-internal.h"
#include "forger.h"
#include "transport/test-hooks.h"

#define KIB 1024u
#define BLOCK (4 * KIB)

static sbr_receiver *new_receiver(uint16_t port)
{
  struct sbr_receiver_config rc;
  fixture_receiver_config(&rc, port, 4, BLOCK);
  return fixture_receiver_new(&rc);
}

/* WRITEs a one-block frame of `len` bytes of `fill` (data, then status). */
static void write_block(struct forger *f, uint32_t index, uint64_t seq,
                        uint8_t device, uint16_t packet, uint8_t fill)
{
  static uint8_t blk[BLOCK];
  const uint32_t len = 100;
  memset(blk + SBR__HEADER_SIZE, fill, len);
  struct sbr__header h = {.kind = SBR_KIND_DATA,
                          .device = device,
                          .flags = SBR_FLAG_FIRST | SBR_FLAG_LAST,
                          .packet = packet,
                          .epoch = f->lane.epoch,
                          .payload_len = len,
                          .seq = seq,
                          .frame_size = len};
  uint32_t n = (uint32_t)sbr__block_encode(blk, BLOCK, &h);
  ASSERT(n > 0);
  forge_write(f, blk, n, index);
}

/* The next block is seq, of device, filled with fill; released. */
static void expect_block(sbr_receiver *r, uint64_t seq, uint8_t device,
                         uint8_t fill)
{
  sbr_block *b;
  int ret = sbr_receiver_next(r, 5000, &b);
  ASSERT_MSG(ret == 0, "no block within 5 s: %d", ret);
  const struct sbr_block_info *in = sbr_block_get_info(b);
  ASSERT_EQ(in->seq, seq);
  ASSERT_EQ(in->device, device);
  ASSERT_EQ(in->payload_len, 100);
  for (uint32_t i = 0; i < in->payload_len; i++)
    ASSERT_EQ(in->payload[i], fill);
  sbr_block_release(b);
}

/* Several complete scans that deliver nothing. */
static void expect_nothing(sbr_receiver *r)
{
  for (int i = 0; i < 10; i++) {
    sbr_block *b;
    int ret = sbr_receiver_next(r, 20, &b);
    ASSERT_MSG(ret == -ETIMEDOUT, "block delivered: seq %" PRIu64,
               ret == 0 ? sbr_block_get_info(b)->seq : 0);
  }
}

static struct sbr_receiver_stats stats(sbr_receiver *r)
{
  struct sbr_receiver_stats st;
  ASSERT_OK(sbr_receiver_get_stats(r, &st));
  return st;
}

/* ------------------------------------------------------------------ */

static void stale_block_waits_for_its_data(void)
{
  sbr__stale_bound_ns = 60000000000ull; /* never, in this test */
  uint16_t port = fixture_port();
  sbr_receiver *r = new_receiver(port);
  struct forger f = {.port = port};
  forger_connect_pumping(&f, r);

  write_block(&f, 0, 0, 0, 0, 'A');
  expect_block(r, 0, 0, 'A');
  ASSERT_EQ(forge_read_status(&f, 0), 0);

  /* The lane's 5th block (seq 4) goes to receive block 0 again; its status
   * byte lands first, over block 0's old contents. */
  write_block(&f, 1, 1, 0, 1, 'B');
  write_block(&f, 2, 2, 0, 2, 'C');
  write_block(&f, 3, 3, 0, 3, 'D');
  expect_block(r, 1, 0, 'B');
  expect_block(r, 2, 0, 'C');
  expect_block(r, 3, 0, 'D');
  forge_status(&f, 0, 1);
  expect_nothing(r);
  struct sbr_receiver_stats st = stats(r);
  ASSERT_EQ(st.stale_seen, 1); /* seen once, left alone since */
  ASSERT_EQ(st.stale_dropped, 0);
  ASSERT_EQ(st.rejected, 0);
  ASSERT_EQ(forge_read_status(&f, 0), 1); /* not handed back either */

  /* Its data lands: delivered, once, as itself. */
  write_block(&f, 0, 4, 0, 4, 'E');
  expect_block(r, 4, 0, 'E');
  expect_nothing(r);
  struct sbr_device_stats d;
  ASSERT_OK(sbr_receiver_get_device_stats(r, 0, &d));
  ASSERT_EQ(d.blocks, 5);
  ASSERT_EQ(d.gaps, 0);
  ASSERT_EQ(d.rejected, 0);
  ASSERT_EQ(stats(r).stale_dropped, 0);

  sbr__transport_shm.close(f.conn);
  sbr_receiver_free(r);
}

static void stale_block_never_replaced_is_dropped_after_the_bound(void)
{
  sbr__stale_bound_ns = 60000000000ull;
  uint16_t port = fixture_port();
  sbr_receiver *r = new_receiver(port);
  struct forger f = {.port = port};
  forger_connect_pumping(&f, r);

  write_block(&f, 0, 0, 0, 0, 'A');
  expect_block(r, 0, 0, 'A');
  /* Device 0's next block (seq 1) never lands, only its status byte;
   * device 1's blocks behind it go on. */
  forge_status(&f, 0, 1);
  write_block(&f, 1, 2, 1, 0, 'x');
  write_block(&f, 2, 3, 1, 1, 'y');
  expect_block(r, 2, 1, 'x');
  expect_block(r, 3, 1, 'y');
  struct sbr_receiver_stats st = stats(r);
  ASSERT_EQ(st.stale_seen, 1);
  ASSERT_EQ(st.stale_dropped, 0);
  ASSERT_EQ(forge_read_status(&f, 0), 1);

  /* The bound passes: dropped, counted, and handed back to the sender. */
  sbr__stale_bound_ns = 100000000ull;
  for (int i = 0; i < 500 && stats(r).stale_dropped == 0; i++) {
    sbr_block *b;
    ASSERT_EQ(sbr_receiver_next(r, 10, &b), -ETIMEDOUT);
  }
  st = stats(r);
  ASSERT_EQ(st.stale_seen, 1);
  ASSERT_EQ(st.stale_dropped, 1);
  ASSERT_EQ(st.rejected, 1);
  ASSERT_EQ(forge_read_status(&f, 0), 0);

  /* The lane goes on; device 0's lost packet is a gap. */
  write_block(&f, 3, 4, 0, 2, 'z');
  expect_block(r, 4, 0, 'z');
  struct sbr_device_stats d;
  ASSERT_OK(sbr_receiver_get_device_stats(r, 0, &d));
  ASSERT_EQ(d.blocks, 2);
  ASSERT_EQ(d.gaps, 1);
  ASSERT_OK(sbr_receiver_get_device_stats(r, 1, &d));
  ASSERT_EQ(d.blocks, 2);
  ASSERT_EQ(d.gaps, 0);

  sbr__transport_shm.close(f.conn);
  sbr_receiver_free(r);
}

struct producer {
  sbr_sender *s;
  unsigned device, frames;
};

static void *producer_thread(void *arg)
{
  struct producer *p = arg;
  for (unsigned i = 0; i < p->frames; i++) {
    /* 100 B .. ~9.9 KiB: one to three blocks of this lane. */
    size_t len = 100 + (size_t)((i * 1237u + p->device * 311u) % 9800u);
    ASSERT_OK(fixture_send(p->s, p->device, i, len));
  }
  return NULL;
}

/* The other side of the backstop: an honest sender, whose status bytes
 * always land after their data, never looks stale, however many laps of
 * a small ring it makes and however its devices' blocks interleave. */
static void honest_sender_is_never_stale(void)
{
  sbr__stale_bound_ns = 1000000000ull;
  const unsigned frames = 200;
  uint16_t port = fixture_port();
  sbr_receiver *r = new_receiver(port);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.send_order = SBR_SEND_ORDER_ROUND_ROBIN;
  sc.wait_timeout_ms = 30000; /* only a hang fails: the host may be busy */
  sbr_sender *s = fixture_sender(r, &sc);
  struct producer p[2] = {{s, 0, frames}, {s, 1, frames}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    ASSERT(pthread_create(&t[i], NULL, producer_thread, &p[i]) == 0);
  unsigned next[2] = {0, 0};
  while (next[0] < frames || next[1] < frames) {
    struct sbr_frame f;
    int ret = sbr_receiver_next_frame(r, 30000, &f);
    ASSERT_MSG(ret == 0, "no frame within 30 s: %d (%u, %u received)", ret,
               next[0], next[1]);
    ASSERT(f.info.device < 2);
    ASSERT_EQ(fixture_check_frame(&f), next[f.info.device]);
    next[f.info.device]++;
    sbr_frame_release(&f);
  }
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  struct sbr_receiver_stats st = stats(r);
  ASSERT_EQ(st.stale_seen, 0);
  ASSERT_EQ(st.stale_dropped, 0);
  ASSERT_EQ(st.rejected, 0);
  for (uint8_t d = 0; d < 2; d++) {
    struct sbr_device_stats ds;
    ASSERT_OK(sbr_receiver_get_device_stats(r, d, &ds));
    ASSERT_EQ(ds.frames, frames);
    ASSERT_EQ(ds.gaps, 0);
  }
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

static atomic_int status_stall_armed; /* the next run of 3 stalls */
static atomic_int status_stalled;     /* its WRITE sleeps part-way now */
static atomic_int status_go_on;       /* the test lets it go on */

/* After the first byte of a three-byte status WRITE (a run of three
 * blocks): sleeps until the test lets it go on (30 s at most), as a copy
 * preempted there would. */
static void stall_status_run(uint32_t stored, uint32_t len)
{
  if (len == 3 && stored == 1 && atomic_exchange(&status_stall_armed, 0)) {
    atomic_store(&status_stalled, 1);
    for (unsigned ms = 0; !atomic_load(&status_go_on) && ms < 30000; ms++)
      usleep(1000);
  }
}

static void *send_three_fragments(void *arg)
{
  /* Three blocks of this lane, fragments (spans are off). */
  ASSERT_OK(fixture_send(arg, 0, 1, 2 * BLOCK + 1000));
  return NULL;
}

/* The shm NIC's copy of a run's status bytes stalls after the first (a
 * preempted thread) while the receiver scans, many full scans: what shows
 * is the run's first block, and the frame arrives whole once the copy
 * goes on, none of its blocks stale.  Stored last to first, the run's last
 * fragment showed alone, was delivered past the other two after one more
 * scan, and those were then dropped as stale: the frame was lost. */
static void run_stalled_part_way_keeps_its_order(void)
{
  sbr__stale_bound_ns = 1000000000ull;
  fixture_spans(false);
  uint16_t port = fixture_port();
  struct sbr_receiver_config rc;
  fixture_receiver_config(&rc, port, 8, BLOCK);
  rc.poll_mode = SBR_POLL_BUSY; /* scans all along the stall */
  sbr_receiver *r = fixture_receiver_new(&rc);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.wait_timeout_ms = 30000;
  sbr_sender *s = fixture_sender(r, &sc);
  struct sbr_frame f;
  ASSERT_OK(fixture_send(s, 0, 0, 100)); /* the lane's first block */
  ASSERT_EQ(sbr_receiver_next_frame(r, 30000, &f), 0);
  ASSERT_EQ(fixture_check_frame(&f), 0);
  sbr_frame_release(&f);
  ASSERT_OK(sbr_sender_flush(s, 30000));

  sbr__shm_test_status_hook = stall_status_run;
  atomic_store(&status_stall_armed, 1);
  pthread_t t;
  ASSERT(pthread_create(&t, NULL, send_three_fragments, s) == 0);
  for (int i = 0; i < 30000 && !atomic_load(&status_stalled); i++)
    usleep(1000);
  ASSERT_MSG(atomic_load(&status_stalled), "the run's status WRITE never came");
  /* Scans while it stalls: with the run's last block shown alone, two of
   * them deliver it past the others. */
  int ret = sbr_receiver_next_frame(r, 300, &f);
  ASSERT_MSG(ret == -ETIMEDOUT, "a frame during the stall: %d", ret);
  atomic_store(&status_go_on, 1);
  ASSERT_EQ(sbr_receiver_next_frame(r, 30000, &f), 0);
  ASSERT_EQ(fixture_check_frame(&f), 1);
  sbr_frame_release(&f);
  pthread_join(t, NULL);
  /* Nothing in flight before the hook goes: the NIC thread reads it for
   * every status byte it stores (ThreadSanitizer, ci9 of session 17: a
   * WRITE still executing when it was cleared). */
  ASSERT_OK(sbr_sender_flush(s, 30000));
  sbr__shm_test_status_hook = NULL;
  struct sbr_receiver_stats st = stats(r);
  ASSERT_EQ(st.stale_seen, 0);
  ASSERT_EQ(st.stale_dropped, 0);
  struct sbr_device_stats ds;
  ASSERT_OK(sbr_receiver_get_device_stats(r, 0, &ds));
  ASSERT_EQ(ds.frames, 2);
  ASSERT_EQ(ds.gaps, 0);
  sbr_sender_free(s);
  sbr_receiver_free(r);
  fixture_spans(true);
}

int main(int argc, char **argv)
{
  static const struct test_entry tests[] = {
      {"stale_block_waits_for_its_data", stale_block_waits_for_its_data,
       ANY_BACKEND},
      {"stale_block_never_replaced_is_dropped_after_the_bound",
       stale_block_never_replaced_is_dropped_after_the_bound, ANY_BACKEND},
      {"honest_sender_is_never_stale", honest_sender_is_never_stale,
       ANY_BACKEND},
      {"run_stalled_part_way_keeps_its_order",
       run_stalled_part_way_keeps_its_order, SHM_ONLY},
      {NULL, NULL, ANY_BACKEND},
  };
  return test_main(tests, argc, argv);
}
