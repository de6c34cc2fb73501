/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-transport.c - the transport interface between two processes.
 *
 * Usage: test-transport shm|verbs [test-name...]
 *
 * Only the ops interface is used, so the same tests run over the shm back
 * end here and over verbs inside the Soft-RoCE VM (address from
 * SBR_RDMA_ADDR, default 127.0.0.1).  Each test forks two processes, a
 * receiver (listen, accept a lane of BLOCKS x BLOCK_SIZE, check its memory)
 * and a sender (connect, post, poll); the main process never calls an op,
 * because a child may not use verbs its parent had opened (transport.h).
 * The two sides step through a test over a pair of pipes, one byte per
 * step, never by sleeping; each asserts its own side and the main process
 * checks both exit statuses.  A failing main process kills its children
 * (atexit), and a child never outlives 10 s (alarm).
 */
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "transport/transport.h"
#include "transport/test-hooks.h"
#ifdef SBR_HAVE_VERBS
#include "verbs-device.h"
#include "transport/verbs/verbs-caps.h"
#include "transport/verbs/verbs-internal.h"
#endif

#define BLOCKS 8
#define BLOCK_SIZE 4096
#define LANE_EPOCH 5
#define LANE_ID 7
/* Longest wait for one step of a test: generous, because under TCG in the
 * Soft-RoCE VM a loaded host can stall the emulated CPU for seconds.  No
 * test waits this long when things work. */
#define STEP_MS 15000

static const struct sbr__queue_caps caps = {
    .max_send_wr = 32, .max_recv_wr = 16, .max_inline = 64};
/* What tx_connect and rx_accept ask for: caps, or a test's own. */
static const struct sbr__queue_caps *side_caps = &caps;

static const struct sbr__transport_ops *ops; /* back end under test */
static bool is_shm;                          /* shm-only tests run */
static bool iwarp;                           /* over iWARP (verbs-device.h) */
static const char *rdma_addr = "127.0.0.1";  /* listen and connect here */
static uint16_t port_base;                   /* this run's ports start here */
static unsigned port_seq;                    /* next port offset */
static pid_t children[2];                    /* killed if main fails */

/* ------------------------------------------------------------ plumbing */

/* Memory a READ lands in: iWARP places a READ's response like a WRITE
 * and wants REMOTE_WRITE on its sink (siw doesn't check; hardware does). */
static int read_sink_access(void)
{
  return SBR__ACCESS_LOCAL_WRITE | (iwarp ? SBR__ACCESS_REMOTE_WRITE : 0);
}

static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double ms_since(uint64_t t0)
{
  return (double)(now_ns() - t0) / 1e6;
}

/* A port no other test of this run uses; runs with different pids mostly
 * get different ranges (17000..49999). */
static uint16_t fresh_port(void)
{
  return (uint16_t)(port_base + port_seq++);
}

static void kill_children(void)
{
  for (int i = 0; i < 2; i++) {
    if (children[i] > 0) {
      kill(children[i], SIGKILL);
      waitpid(children[i], NULL, 0);
      children[i] = 0;
    }
  }
}

static void log_to_stderr(void *data, enum sbr_log_level level, const char *msg)
{
  (void)data;
  fprintf(stderr, "   [pid %d] sbr %s: %s\n", (int)getpid(),
          level <= SBR_LOG_WARNING ? "warning" : "info", msg);
}

/* One side's view of a test: pipes to the other side, the port. */
struct link {
  int rd;        /* steps from the other side */
  int wr;        /* steps to it */
  uint16_t port; /* the receiver listens here */
  pid_t peer;    /* the other side's pid (receiver only: the sender's) */
};

static void step_send(const struct link *lk, char step)
{
  ASSERT_MSG(write(lk->wr, &step, 1) == 1, "telling the other process '%c': %s",
             step, strerror(errno));
}

static void step_wait(const struct link *lk, char step, const char *what)
{
  struct pollfd p = {.fd = lk->rd, .events = POLLIN};
  int r;
  do
    r = poll(&p, 1, STEP_MS);
  while (r < 0 && errno == EINTR);
  ASSERT_MSG(r == 1, "waited %d ms for %s ('%c')", STEP_MS, what, step);
  char got;
  ASSERT_MSG(read(lk->rd, &got, 1) == 1,
             "the other process exited while we waited for %s ('%c')", what,
             step);
  ASSERT_MSG(got == step, "waiting for %s: got step '%c', expected '%c'", what,
             got, step);
}

typedef void (*side_fn)(const struct link *lk);

/* Forks a process that runs side and exits 0 unless side asserted. */
static pid_t spawn(side_fn side, const struct link *lk, int close1, int close2)
{
  fflush(stderr);
  pid_t pid = fork();
  ASSERT_MSG(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    memset(children, 0, sizeof children); /* not ours to kill */
    alarm(10);                            /* never outlive a stuck test */
    if (close1 >= 0)
      close(close1);
    if (close2 >= 0)
      close(close2);
    side(lk);
    exit(0);
  }
  return pid;
}

/* Waits for child i; a side that failed printed its FAIL line already. */
static void reap(int i, const char *name, bool killed_ok, uint64_t deadline)
{
  int st;
  for (;;) {
    pid_t r = waitpid(children[i], &st, WNOHANG);
    if (r == children[i])
      break;
    ASSERT_MSG(r == 0, "waitpid: %s", strerror(errno));
    ASSERT_MSG(now_ns() < deadline, "the %s process is stuck", name);
    usleep(1000);
  }
  children[i] = 0;
  if (killed_ok && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
    return;
  ASSERT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0,
             "the %s process failed (%s %d); its FAIL line is above", name,
             WIFEXITED(st) ? "exit status" : "signal",
             WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* Runs a receiver and a sender side in two processes joined by pipes.
 * The sender is forked first so the receiver knows its pid. */
static void run_pair(side_fn receiver, side_fn sender, bool sender_killed)
{
  int to_rx[2], to_tx[2];
  ASSERT_MSG(pipe(to_rx) == 0 && pipe(to_tx) == 0, "pipe: %s", strerror(errno));
  uint16_t port = fresh_port();
  struct link tx = {.rd = to_tx[0], .wr = to_rx[1], .port = port};
  children[1] = spawn(sender, &tx, to_rx[0], to_tx[1]);
  struct link rx = {
      .rd = to_rx[0], .wr = to_tx[1], .port = port, .peer = children[1]};
  children[0] = spawn(receiver, &rx, to_tx[0], to_rx[1]);
  for (int i = 0; i < 2; i++) {
    close(to_rx[i]);
    close(to_tx[i]);
  }
  uint64_t deadline = now_ns() + 3ull * STEP_MS * 1000000u;
  reap(1, "sender", sender_killed, deadline);
  reap(0, "receiver", false, deadline);
}

/* Runs one side alone, in its own process like the others. */
static void run_solo(side_fn side)
{
  struct link lk = {.rd = -1, .wr = -1, .port = fresh_port()};
  children[0] = spawn(side, &lk, -1, -1);
  reap(0, "test", false, now_ns() + 3ull * STEP_MS * 1000000u);
}

/* Byte i of the data written to block b: never zero, differs per block. */
static uint8_t pattern(uint32_t b, uint32_t i)
{
  return (uint8_t)((i * 7 + b * 13) % 255 + 1);
}

static uint8_t status_load(const struct sbr__lane_mem *mem, uint32_t i)
{
  return atomic_load_explicit((_Atomic uint8_t *)(uintptr_t)&mem->status[i],
                              memory_order_acquire);
}

static void status_store(const struct sbr__lane_mem *mem, uint32_t i, uint8_t v)
{
  atomic_store_explicit((_Atomic uint8_t *)(uintptr_t)&mem->status[i], v,
                        memory_order_release);
}

/* Collects exactly n completions within STEP_MS. */
static void poll_exactly(struct sbr__conn *c, struct sbr__wc *wc, int n,
                         const char *what)
{
  uint64_t t0 = now_ns();
  int got = 0;
  while (got < n) {
    int r = ops->poll_cq(c, wc + got, n - got);
    ASSERT_MSG(r >= 0, "poll_cq while waiting for %s: %d (%s)", what, r,
               strerror(-r));
    got += r;
    if (got < n) {
      ASSERT_MSG(ms_since(t0) < STEP_MS, "%s: %d of %d completions after %d ms",
                 what, got, n, STEP_MS);
      usleep(50);
    }
  }
}

/* Polls for ms milliseconds and fails on any completion. */
static void expect_no_completion(struct sbr__conn *c, int ms, const char *what)
{
  uint64_t t0 = now_ns();
  while (ms_since(t0) < ms) {
    struct sbr__wc wc;
    int r = ops->poll_cq(c, &wc, 1);
    ASSERT_MSG(r == 0,
               "%s: poll_cq returned %d (wr_id %" PRIu64 ", status %d), "
               "expected nothing",
               what, r, r > 0 ? wc.wr_id : 0, r > 0 ? (int)wc.status : 0);
    usleep(1000);
  }
}

/* ------------------------------------------------------- receiver side */

struct rx_end {
  struct sbr__listener *l;    /* listening on the test's port */
  struct sbr__conn *c;        /* the accepted lane's connection */
  struct sbr__lane_desc lane; /* as accepted */
  struct sbr__lane_mem mem;   /* the lane's memory */
};

/* Listens and tells the other side ('L'). */
static void rx_listen(struct rx_end *rx, const struct link *lk)
{
  char err[256] = "";
  memset(rx, 0, sizeof *rx);
  int r = ops->listen(rdma_addr, lk->port, &rx->l, err, sizeof err);
  ASSERT_MSG(r == 0, "listen on port %u: %d (%s)", lk->port, r, err);
  step_send(lk, 'L');
}

/* Accepts the next connect request (events of earlier lanes are skipped). */
static void rx_accept(struct rx_end *rx)
{
  struct sbr__listen_event ev;
  uint64_t t0 = now_ns();
  for (;;) {
    ASSERT_OK(ops->get_event(rx->l, 100, &ev));
    if (ev.type == SBR__EV_CONNECT_REQUEST)
      break;
    ASSERT_MSG(ms_since(t0) < STEP_MS, "no connect request within %d ms",
               STEP_MS);
  }
  memset(&rx->lane, 0, sizeof rx->lane);
  rx->lane.mechanism = ev.req.mechanism;
  rx->lane.epoch = LANE_EPOCH;
  rx->lane.block_size = BLOCK_SIZE;
  rx->lane.block_count = BLOCKS;
  rx->lane.lane_id = LANE_ID;
  rx->lane.pause_offset = sbr__pause_offset_for(BLOCKS);
  rx->lane.refused_offset = sbr__refused_offset_for(BLOCKS);
  ASSERT_OK(
      ops->accept(rx->l, &ev.req, side_caps, &rx->lane, &rx->c, &rx->mem));
  ASSERT_MSG(rx->mem.blocks && rx->mem.status, "accept gave no lane memory");
  ASSERT_MSG(rx->lane.blocks_rkey != rx->lane.status_rkey,
             "blocks and status share an rkey (0x%x)", rx->lane.blocks_rkey);
}

static void rx_close(struct rx_end *rx)
{
  ops->close(rx->c);
  ops->close_listener(rx->l);
}

/* Spins (acquire loads) until status byte i is want, as a receiver does.
 * Tight for the first 10 ms, so a status byte that overtook its data would
 * likely be caught reading the block early; the listener is serviced now
 * and then, and nothing may happen on it. */
static void rx_wait_status(struct rx_end *rx, uint32_t i, uint8_t want)
{
  uint64_t t0 = now_ns();
  for (unsigned spins = 1; status_load(&rx->mem, i) != want; spins++) {
    if (spins % 4096 != 0)
      continue;
    double ms = ms_since(t0);
    ASSERT_MSG(ms < STEP_MS,
               "status byte %u is %u, never became %u within %d ms", i,
               status_load(&rx->mem, i), want, STEP_MS);
    struct sbr__listen_event ev;
    ASSERT_OK(ops->get_event(rx->l, 0, &ev));
    ASSERT_MSG(ev.type == SBR__EV_NONE,
               "listener event %d while waiting for data", ev.type);
    if (ms > 10)
      usleep(20);
  }
}

/* Each byte is loaded once: a byte that lands late must be reported with
 * the value that was seen, not the one that is there by the time we print. */
static void rx_expect_block(const struct rx_end *rx, uint32_t b)
{
  const volatile uint8_t *p = rx->mem.blocks + (size_t)b * BLOCK_SIZE;
  for (uint32_t i = 0; i < BLOCK_SIZE; i++) {
    uint8_t v = p[i];
    ASSERT_MSG(v == pattern(b, i),
               "block %u byte %u is 0x%02x, expected 0x%02x (data not there "
               "when its status byte or completion was)",
               b, i, v, pattern(b, i));
  }
}

static void rx_expect_zero_block(const struct rx_end *rx, uint32_t b,
                                 const char *why)
{
  const volatile uint8_t *p = rx->mem.blocks + (size_t)b * BLOCK_SIZE;
  for (uint32_t i = 0; i < BLOCK_SIZE; i++) {
    uint8_t v = p[i];
    ASSERT_MSG(v == 0, "block %u byte %u is 0x%02x, expected 0: %s", b, i, v,
               why);
  }
}

/* --------------------------------------------------------- sender side */

struct tx_end {
  struct sbr__conn *c;        /* connection to the receiver */
  struct sbr__lane_desc lane; /* the lane it gave us */
  uint8_t *buf;               /* BLOCKS * BLOCK_SIZE local bytes */
  struct sbr__mr *mr;         /* buf's registration */
};

/* Connects (the receiver listens already) and registers buf. */
static void tx_connect(struct tx_end *tx, const struct link *lk,
                       enum sbr_mechanism mech,
                       const struct sbr__fault_injection *faults)
{
  uint8_t priv[SBR__CONNECT_PRIV_SIZE];
  sbr__connect_priv_encode(priv, (uint8_t)mech, BLOCK_SIZE, BLOCKS);
  char err[256] = "";
  memset(tx, 0, sizeof *tx);
  int r = ops->connect(rdma_addr, lk->port, NULL, priv, sizeof priv, side_caps,
                       STEP_MS, &tx->c, &tx->lane, err, sizeof err);
  ASSERT_MSG(r == 0, "connect to port %u: %d (%s)", lk->port, r, err);
  sbr__transport_inject_faults(ops, tx->c, faults);
  ASSERT_EQ(tx->lane.mechanism, mech);
  ASSERT_EQ(tx->lane.block_count, BLOCKS);
  ASSERT_EQ(tx->lane.block_size, BLOCK_SIZE);
  ASSERT_EQ(tx->lane.epoch, LANE_EPOCH);
  ASSERT_EQ(tx->lane.lane_id, LANE_ID);
  size_t len = (size_t)BLOCKS * BLOCK_SIZE;
  tx->buf = aligned_alloc(4096, len);
  ASSERT(tx->buf);
  memset(tx->buf, 0, len);
  ASSERT_OK(ops->reg_mr(tx->c, tx->buf, len, read_sink_access(), &tx->mr));
}

static void tx_close(struct tx_end *tx)
{
  ops->dereg_mr(tx->mr);
  ops->close(tx->c);
  free(tx->buf);
}

/* Fills local block b of tx->buf with pattern(b, ...). */
static void tx_fill(struct tx_end *tx, uint32_t b)
{
  for (uint32_t i = 0; i < BLOCK_SIZE; i++)
    tx->buf[(size_t)b * BLOCK_SIZE + i] = pattern(b, i);
}

/* WRITE of local block b into receive block b. */
static struct sbr__wr tx_block_write(struct tx_end *tx, uint32_t b,
                                     uint64_t wr_id, bool signaled)
{
  return (struct sbr__wr){
      .wr_id = wr_id,
      .opcode = SBR__OP_WRITE,
      .local_addr = tx->buf + (size_t)b * BLOCK_SIZE,
      .length = BLOCK_SIZE,
      .lkey = tx->mr->lkey,
      .remote_addr = tx->lane.blocks_addr + (uint64_t)b * BLOCK_SIZE,
      .rkey = tx->lane.blocks_rkey,
      .signaled = signaled,
  };
}

/* The status-byte chain: block b's data (unsignaled), then its status byte
 * 1, inline and signaled.  The byte source is overwritten right after the
 * post: inline means it was copied already. */
static void tx_post_block_and_status(struct tx_end *tx, uint32_t b)
{
  uint8_t one = 1;
  struct sbr__wr chain[2] = {
      tx_block_write(tx, b, 1, false),
      {.wr_id = 2,
       .opcode = SBR__OP_WRITE,
       .local_addr = &one,
       .length = 1,
       .remote_addr = tx->lane.status_addr + b,
       .rkey = tx->lane.status_rkey,
       .signaled = true,
       .inline_data = true},
  };
  ASSERT_OK(ops->post_send(tx->c, chain, 2));
  one = 0xee;
  struct sbr__wc wc;
  poll_exactly(tx->c, &wc, 1, "the status WRITE");
  ASSERT_EQ(wc.wr_id, 2);
  ASSERT_EQ(wc.opcode, SBR__OP_WRITE);
  ASSERT_MSG(wc.status == SBR__WC_SUCCESS,
             "status WRITE completed with %d "
             "(vendor_err 0x%x)",
             (int)wc.status, wc.vendor_err);
}

/* ----------------------------------------------------------------- tests */

/* 1. The status byte, written inline after the data on the same chain,
 * never becomes visible before the data; one signaled WR, one completion. */
static void write_then_inline_status_rx(const struct link *lk)
{
  struct rx_end rx;
  rx_listen(&rx, lk);
  rx_accept(&rx);
  rx_wait_status(&rx, 3, 1);
  rx_expect_block(&rx, 3);
  rx_expect_zero_block(&rx, 2, "the WRITE spilled before its target");
  rx_expect_zero_block(&rx, 4, "the WRITE spilled past its target");
  for (uint32_t i = 0; i < BLOCKS; i++)
    if (i != 3)
      ASSERT_MSG(status_load(&rx.mem, i) == 0, "status byte %u changed", i);
  step_send(lk, 'V');
  step_wait(lk, 'D', "the sender to finish");
  rx_close(&rx);
}

static void write_then_inline_status_tx(const struct link *lk)
{
  struct tx_end tx;
  step_wait(lk, 'L', "the receiver to listen");
  tx_connect(&tx, lk, SBR_MECH_STATUS_BYTE, NULL);
  tx_fill(&tx, 3);
  tx_post_block_and_status(&tx, 3);
  step_wait(lk, 'V', "the receiver to verify block 3");
  expect_no_completion(tx.c, 20, "the unsignaled data WRITE");
  step_send(lk, 'D');
  tx_close(&tx);
}

static void test_write_then_inline_status(void)
{
  run_pair(write_then_inline_status_rx, write_then_inline_status_tx, false);
}

/* 2. A READ of the status array returns what the receiver stored. */
/* A signaled READ of len status bytes from offset into tx->buf + at. */
static struct sbr__wr status_read(const struct tx_end *tx, uint64_t wr_id,
                                  uint32_t at, uint32_t offset, uint32_t len)
{
  return (struct sbr__wr){
      .wr_id = wr_id,
      .opcode = SBR__OP_READ,
      .local_addr = tx->buf + at,
      .length = len,
      .lkey = tx->mr->lkey,
      .remote_addr = tx->lane.status_addr + offset,
      .rkey = tx->lane.status_rkey,
      .signaled = true,
  };
}

static void read_status_array_rx(const struct link *lk)
{
  struct rx_end rx;
  rx_listen(&rx, lk);
  rx_accept(&rx);
  for (uint32_t i = 0; i < BLOCKS; i++)
    status_store(&rx.mem, i, (uint8_t)i);
  step_send(lk, 'S');
  step_wait(lk, 'D', "the sender to read");
  rx_close(&rx);
}

static void read_status_array_tx(const struct link *lk)
{
  struct tx_end tx;
  step_wait(lk, 'L', "the receiver to listen");
  tx_connect(&tx, lk, SBR_MECH_STATUS_BYTE, NULL);
  step_wait(lk, 'S', "the receiver to set its status bytes");
  memset(tx.buf, 0xab, 128);
  struct sbr__wr chain[2] = {
      status_read(&tx, 1, 0, 0, BLOCKS),
      status_read(&tx, 2, 64, 2, 4), /* a part of it, at an offset */
  };
  ASSERT_OK(ops->post_send(tx.c, chain, 2));
  struct sbr__wc wc[2];
  poll_exactly(tx.c, wc, 2, "two status READs");
  for (int i = 0; i < 2; i++) {
    ASSERT_EQ(wc[i].wr_id, i + 1);
    ASSERT_EQ(wc[i].opcode, SBR__OP_READ);
    ASSERT_MSG(wc[i].status == SBR__WC_SUCCESS,
               "READ %d completed with %d (vendor_err 0x%x)", i + 1,
               (int)wc[i].status, wc[i].vendor_err);
  }
  for (uint32_t i = 0; i < BLOCKS; i++)
    ASSERT_MSG(tx.buf[i] == i, "status byte %u read as %u, expected %u", i,
               tx.buf[i], i);
  ASSERT_MSG(tx.buf[BLOCKS] == 0xab, "READ wrote past its length");
  for (uint32_t i = 0; i < 4; i++)
    ASSERT_MSG(tx.buf[64 + i] == 2 + i,
               "READ at offset 2: byte %u is %u, expected %u", i,
               tx.buf[64 + i], 2 + i);
  ASSERT_MSG(tx.buf[68] == 0xab, "offset READ wrote past its length");
  step_send(lk, 'D');
  tx_close(&tx);
}

static void test_read_status_array(void)
{
  run_pair(read_status_array_rx, read_status_array_tx, false);
}

/* 2b. Protocol v2: the pause bitmap and, after it, the lane's refused
 * bitmap follow the status bytes in the same region, so the one READ the
 * sender does brings all three; the region ends right after the refused
 * bitmap (a READ one byte longer fails). */
static uint8_t bitmap_byte(uint32_t i)
{
  return (uint8_t)(0x81u ^ (i * 29u));
}

static uint8_t refused_byte(uint32_t i)
{
  return (uint8_t)(0x42u ^ (i * 13u));
}

static void pause_bitmap_rx(const struct link *lk)
{
  struct rx_end rx;
  rx_listen(&rx, lk);
  rx_accept(&rx);
  ASSERT_EQ(rx.lane.pause_offset, sbr__pause_offset_for(BLOCKS));
  for (uint32_t i = 0; i < BLOCKS; i++)
    status_store(&rx.mem, i, (uint8_t)(i % 3));
  for (uint32_t i = 0; i < SBR__PAUSE_BITMAP_SIZE; i++)
    status_store(&rx.mem, rx.lane.pause_offset + i, bitmap_byte(i));
  for (uint32_t i = 0; i < SBR__REFUSED_BITMAP_SIZE; i++)
    status_store(&rx.mem, rx.lane.refused_offset + i, refused_byte(i));
  step_send(lk, 'S');
  step_wait(lk, 'D', "the sender to read");
  rx_close(&rx);
}

static void pause_bitmap_read_with_status_tx(const struct link *lk)
{
  struct tx_end tx;
  step_wait(lk, 'L', "the receiver to listen");
  tx_connect(&tx, lk, SBR_MECH_STATUS_BYTE, NULL);
  ASSERT_EQ(tx.lane.pause_offset, sbr__pause_offset_for(BLOCKS));
  ASSERT_EQ(tx.lane.refused_offset, sbr__refused_offset_for(BLOCKS));
  uint32_t len = sbr__lane_status_len(&tx.lane);
  ASSERT_EQ(len, tx.lane.refused_offset + SBR__REFUSED_BITMAP_SIZE);
  step_wait(lk, 'S', "the receiver to set status bytes and bitmaps");
  memset(tx.buf, 0xab, 2 * len);
  struct sbr__wr rd = status_read(&tx, 1, 0, 0, len);
  ASSERT_OK(ops->post_send(tx.c, &rd, 1));
  struct sbr__wc wc;
  poll_exactly(tx.c, &wc, 1, "the status + bitmap READ");
  ASSERT_MSG(wc.status == SBR__WC_SUCCESS,
             "READ of status bytes and bitmap (%u bytes) completed with %d "
             "(vendor_err 0x%x)",
             len, (int)wc.status, wc.vendor_err);
  for (uint32_t i = 0; i < BLOCKS; i++)
    ASSERT_EQ(tx.buf[i], i % 3);
  for (uint32_t i = 0; i < SBR__PAUSE_BITMAP_SIZE; i++)
    ASSERT_MSG(tx.buf[tx.lane.pause_offset + i] == bitmap_byte(i),
               "bitmap byte %u read as 0x%02x, expected 0x%02x", i,
               tx.buf[tx.lane.pause_offset + i], bitmap_byte(i));
  for (uint32_t i = 0; i < SBR__REFUSED_BITMAP_SIZE; i++)
    ASSERT_MSG(tx.buf[tx.lane.refused_offset + i] == refused_byte(i),
               "refused bitmap byte %u read as 0x%02x, expected 0x%02x", i,
               tx.buf[tx.lane.refused_offset + i], refused_byte(i));
  ASSERT_MSG(tx.buf[len] == 0xab, "READ wrote past its length");
  /* The region is exactly that long (the QP goes to error: last). */
  rd = status_read(&tx, 2, len, 0, len + 1);
  ASSERT_OK(ops->post_send(tx.c, &rd, 1));
  /* The refusal may also end the connection before the failed READ
   * reaches the CQ: iWARP answers with a TERMINATE, and poll_cq then says
   * -ENOTCONN once the CQ is empty (verbs-device.h).  Either is a
   * failure of the READ. */
  uint64_t t0 = now_ns();
  int r;
  while ((r = ops->poll_cq(tx.c, &wc, 1)) == 0) {
    ASSERT_MSG(ms_since(t0) < STEP_MS,
               "the READ past the bitmaps: no "
               "completion after %d ms",
               STEP_MS);
    usleep(50);
  }
  ASSERT_MSG(r == 1 || r == -ENOTCONN,
             "poll_cq while waiting for the READ past the bitmaps: %d", r);
  ASSERT_MSG(r < 0 || wc.status != SBR__WC_SUCCESS,
             "READ of %u bytes, one past the status region, succeeded",
             len + 1);
  step_send(lk, 'D');
  tx_close(&tx);
}

static void test_pause_bitmap_read_with_status(void)
{
  run_pair(pause_bitmap_rx, pause_bitmap_read_with_status_tx, false);
}

/* 2c. The bitmap is the receiver's alone.  One verbs MR can't forbid a
 * WRITE into a part of it (there the engine never does); the shm NIC
 * refuses it, so an engine that broke the rule fails the shm tests. */
static void bitmap_write_rx(const struct link *lk)
{
  struct rx_end rx;
  rx_listen(&rx, lk);
  rx_accept(&rx);
  for (uint32_t i = 0; i < SBR__PAUSE_BITMAP_SIZE; i++)
    status_store(&rx.mem, rx.lane.pause_offset + i, bitmap_byte(i));
  step_send(lk, 'S');
  step_wait(lk, 'D', "the sender's WRITE into the bitmap to fail");
  for (uint32_t i = 0; i < SBR__PAUSE_BITMAP_SIZE; i++)
    ASSERT_MSG(status_load(&rx.mem, rx.lane.pause_offset + i) == bitmap_byte(i),
               "bitmap byte %u changed to 0x%02x by the sender", i,
               status_load(&rx.mem, rx.lane.pause_offset + i));
  for (uint32_t i = 0; i < BLOCKS; i++)
    ASSERT_MSG(status_load(&rx.mem, i) == 0, "status byte %u changed", i);
  rx_close(&rx);
}

static void bitmap_write_refused_tx(const struct link *lk)
{
  struct tx_end tx;
  step_wait(lk, 'L', "the receiver to listen");
  tx_connect(&tx, lk, SBR_MECH_STATUS_BYTE, NULL);
  step_wait(lk, 'S', "the receiver to set its bitmap");
  uint8_t zeros[8] = {0};
  /* Starts on the last status byte and runs into the padding. */
  struct sbr__wr wr = {.wr_id = 5,
                       .opcode = SBR__OP_WRITE,
                       .local_addr = zeros,
                       .length = sizeof zeros,
                       .remote_addr = tx.lane.status_addr + BLOCKS - 1,
                       .rkey = tx.lane.status_rkey,
                       .signaled = true,
                       .inline_data = true};
  ASSERT_OK(ops->post_send(tx.c, &wr, 1));
  struct sbr__wc wc;
  poll_exactly(tx.c, &wc, 1, "the WRITE past the status bytes");
  ASSERT_MSG(wc.status != SBR__WC_SUCCESS,
             "a WRITE past the status bytes succeeded");
  step_send(lk, 'D');
  tx_close(&tx);
}

static void test_bitmap_write_refused(void)
{
  run_pair(bitmap_write_rx, bitmap_write_refused_tx, false);
}

/* Receiver side for the tests where the sender only needs a lane: accept,
 * put a marker in block 0, wait until the sender is done. */
static void idle_lane_rx(const struct link *lk)
{
  struct rx_end rx;
  rx_listen(&rx, lk);
  rx_accept(&rx);
  memset(rx.mem.blocks, 0x5c, 64);
  step_send(lk, 'S');
  step_wait(lk, 'D', "the sender to finish");
  rx_close(&rx);
}

/* 3. Rule 8: the blocks region is REMOTE_WRITE only, so READing it fails
 * and returns none of the receiver's data. */
static void read_of_blocks_region_fails_tx(const struct link *lk)
{
  struct tx_end tx;
  step_wait(lk, 'L', "the receiver to listen");
  tx_connect(&tx, lk, SBR_MECH_STATUS_BYTE, NULL);
  step_wait(lk, 'S', "the receiver to mark block 0");
  struct sbr__wr rd = {.wr_id = 9,
                       .opcode = SBR__OP_READ,
                       .local_addr = tx.buf,
                       .length = 64,
                       .lkey = tx.mr->lkey,
                       .remote_addr = tx.lane.blocks_addr,
                       .rkey = tx.lane.blocks_rkey,
                       .signaled = true};
  ASSERT_OK(ops->post_send(tx.c, &rd, 1));
  struct sbr__wc wc;
  poll_exactly(tx.c, &wc, 1, "the READ of the blocks region");
  ASSERT_EQ(wc.wr_id, 9);
  ASSERT_MSG(wc.status != SBR__WC_SUCCESS,
             "READ of the REMOTE_WRITE-only blocks region succeeded");
  for (int i = 0; i < 64; i++)
    ASSERT_MSG(tx.buf[i] == 0,
               "failed READ still delivered byte %d (0x%02x) of block 0", i,
               tx.buf[i]);
  step_send(lk, 'D');
  tx_close(&tx);
}

static void test_read_of_blocks_region_fails(void)
{
#ifdef SBR_HAVE_VERBS
  if (!is_shm && test_verbs_is_siw())
    test_verbs_skip("siw serves READs of memory registered without "
                    "REMOTE_READ (verbs-device.h)");
#endif
  run_pair(idle_lane_rx, read_of_blocks_region_fails_tx, false);
}

/* 4. A WRITE that crosses the end of the blocks region, or names a wrong
 * rkey, completes in error and changes nothing.  One connection per case:
 * the first error leaves the QP in error. */
enum { BAD_BOUNDS, BAD_RKEY, BAD_CASES };

static void bad_write_rx(const struct link *lk)
{
  struct rx_end rx;
  rx_listen(&rx, lk);
  for (int bad = 0; bad < BAD_CASES; bad++) {
    rx_accept(&rx);
    step_wait(lk, 'D', "the sender's bad WRITE to fail");
    for (uint32_t b = 0; b < BLOCKS; b++)
      rx_expect_zero_block(&rx, b,
                           bad == BAD_BOUNDS
                               ? "an out-of-bounds WRITE landed"
                               : "a WRITE with a bad rkey landed");
    ops->close(rx.c);
  }
  ops->close_listener(rx.l);
}

static void bad_write_tx(const struct link *lk)
{
  step_wait(lk, 'L', "the receiver to listen");
  for (int bad = 0; bad < BAD_CASES; bad++) {
    struct tx_end tx;
    tx_connect(&tx, lk, SBR_MECH_STATUS_BYTE, NULL);
    tx_fill(&tx, 0);
    struct sbr__wr wr = tx_block_write(&tx, 0, 4, true);
    wr.length = 200;
    if (bad == BAD_BOUNDS)
      wr.remote_addr = tx.lane.blocks_addr + BLOCKS * BLOCK_SIZE - 100;
    else
      wr.rkey = tx.lane.blocks_rkey ^ 0x00a5a500;
    ASSERT_OK(ops->post_send(tx.c, &wr, 1));
    struct sbr__wc wc;
    poll_exactly(tx.c, &wc, 1, "the bad WRITE");
    ASSERT_EQ(wc.wr_id, 4);
    if (iwarp && wc.status == SBR__WC_SUCCESS) {
      /* iWARP completed the WRITE once sent; the receiver's refusal ends
       * the connection, so a READ of the lane's status behind it fails
       * (verbs-device.h).  It succeeds if the WRITE was placed. */
      struct sbr__wr rd = {.wr_id = 5,
                           .opcode = SBR__OP_READ,
                           .local_addr = tx.buf + BLOCKS * BLOCK_SIZE - 1,
                           .length = 1,
                           .lkey = tx.mr->lkey,
                           .remote_addr = tx.lane.status_addr,
                           .rkey = tx.lane.status_rkey,
                           .signaled = true};
      int r = ops->post_send(tx.c, &rd, 1);
      uint64_t t0 = now_ns();
      while (r == 0 && (r = ops->poll_cq(tx.c, &wc, 1)) == 0) {
        ASSERT_MSG(ms_since(t0) < STEP_MS, "no completion for the READ");
        usleep(50);
      }
      /* A post refused (the QP is in error already) or the connection
       * gone before the READ's flush reached the CQ: refused as well. */
      if (r < 0)
        wc.status = SBR__WC_ERROR;
      else
        ASSERT_EQ(wc.wr_id, 5);
    }
    ASSERT_MSG(wc.status != SBR__WC_SUCCESS, "%s succeeded",
               bad == BAD_BOUNDS ? "WRITE across the end of the blocks region"
                                 : "WRITE with a wrong rkey");
    step_send(lk, 'D');
    tx_close(&tx);
  }
}

static void test_bad_rkey_or_bounds_fails(void)
{
  run_pair(bad_write_rx, bad_write_tx, false);
}

/* 5. Sliding-window plumbing: each WRITE WITH IMMEDIATE consumes one posted
 * receive, in order, with its imm; the receiver's SEND lands in the
 * receive the sender posted. */
static const char ack_msg[8] = "ACK:0-3";

static void write_imm_and_ack_rx(const struct link *lk)
{
  struct rx_end rx;
  rx_listen(&rx, lk);
  rx_accept(&rx);
  uint8_t *rbuf = calloc(4, 16);
  struct sbr__mr *mr;
  ASSERT(rbuf);
  ASSERT_OK(ops->reg_mr(rx.c, rbuf, 64, SBR__ACCESS_LOCAL_WRITE, &mr));
  for (uint32_t i = 0; i < 4; i++)
    ASSERT_OK(ops->post_recv(rx.c, 100 + i, rbuf + 16 * i, 16, mr));
  step_send(lk, 'R');

  struct sbr__wc wc[4];
  poll_exactly(rx.c, wc, 4, "four WRITE_IMM receives");
  for (uint32_t i = 0; i < 4; i++) {
    ASSERT_MSG(wc[i].status == SBR__WC_SUCCESS,
               "receive %u completed with %d (vendor_err 0x%x)", i,
               (int)wc[i].status, wc[i].vendor_err);
    ASSERT_EQ(wc[i].opcode, SBR__OP_RECV);
    ASSERT_EQ(wc[i].wr_id, 100 + i);
    ASSERT_MSG(wc[i].has_imm, "receive %u has no immediate", i);
    ASSERT_EQ(wc[i].imm_data, i);
    ASSERT_EQ(wc[i].byte_len, BLOCK_SIZE);
    rx_expect_block(&rx, i); /* the data is there once its receive is */
  }

  struct sbr__wr send = {.wr_id = 200,
                         .opcode = SBR__OP_SEND,
                         .local_addr = (void *)ack_msg,
                         .length = sizeof ack_msg,
                         .signaled = true,
                         .inline_data = true};
  ASSERT_OK(ops->post_send(rx.c, &send, 1));
  poll_exactly(rx.c, wc, 1, "the ACK SEND");
  ASSERT_EQ(wc[0].wr_id, 200);
  ASSERT_EQ(wc[0].opcode, SBR__OP_SEND);
  ASSERT_MSG(wc[0].status == SBR__WC_SUCCESS,
             "ACK SEND completed with %d (vendor_err 0x%x)", (int)wc[0].status,
             wc[0].vendor_err);
  step_wait(lk, 'D', "the sender to get the ACK");
  ops->dereg_mr(mr);
  free(rbuf);
  rx_close(&rx);
}

static void write_imm_and_ack_tx(const struct link *lk)
{
  struct tx_end tx;
  step_wait(lk, 'L', "the receiver to listen");
  tx_connect(&tx, lk, SBR_MECH_SLIDING_WINDOW, NULL);
  uint8_t *ack = tx.buf + (BLOCKS - 1) * BLOCK_SIZE;
  memset(ack, 0xab, 64);
  ASSERT_OK(ops->post_recv(tx.c, 900, ack, 64, tx.mr));
  struct sbr__wr chain[4];
  for (uint32_t i = 0; i < 4; i++) {
    tx_fill(&tx, i);
    chain[i] = tx_block_write(&tx, i, i, i == 3);
    chain[i].opcode = SBR__OP_WRITE_IMM;
    chain[i].imm_data = i;
  }
  step_wait(lk, 'R', "the receiver to post its receives");
  ASSERT_OK(ops->post_send(tx.c, chain, 4));

  /* Two completions, in either order: the last WRITE_IMM, the ACK. */
  struct sbr__wc wc[2];
  poll_exactly(tx.c, wc, 2, "the WRITE_IMM chain and the ACK");
  const struct sbr__wc *w = wc[0].opcode == SBR__OP_RECV ? &wc[1] : &wc[0];
  const struct sbr__wc *r = wc[0].opcode == SBR__OP_RECV ? &wc[0] : &wc[1];
  ASSERT_EQ(w->opcode, SBR__OP_WRITE_IMM);
  ASSERT_EQ(w->wr_id, 3);
  ASSERT_MSG(w->status == SBR__WC_SUCCESS,
             "WRITE_IMM completed with %d (vendor_err 0x%x)", (int)w->status,
             w->vendor_err);
  ASSERT_EQ(r->opcode, SBR__OP_RECV);
  ASSERT_EQ(r->wr_id, 900);
  ASSERT_MSG(r->status == SBR__WC_SUCCESS,
             "ACK receive completed with %d (vendor_err 0x%x)", (int)r->status,
             r->vendor_err);
  ASSERT_EQ(r->byte_len, sizeof ack_msg);
  for (size_t i = 0; i < sizeof ack_msg; i++)
    ASSERT_MSG(ack[i] == (uint8_t)ack_msg[i],
               "ACK byte %zu is 0x%02x, expected 0x%02x ('%c')", i, ack[i],
               (uint8_t)ack_msg[i], ack_msg[i]);
  ASSERT_MSG(ack[sizeof ack_msg] == 0xab, "the ACK overran its length");
  expect_no_completion(tx.c, 20, "the unsignaled WRITE_IMMs");
  step_send(lk, 'D');
  tx_close(&tx);
}

static void test_write_imm_and_ack(void)
{
#ifdef SBR_HAVE_VERBS
  if (iwarp)
    test_verbs_skip("iWARP has no RDMA WRITE with immediate data");
#endif
  run_pair(write_imm_and_ack_rx, write_imm_and_ack_tx, false);
}

/* 5b. A sliding-window sender on an iWARP device, against a receiver that
 * accepts the lane (one older than SBR_REFUSAL_DEVICE, here the raw back
 * end): the sender stops at once with the reason instead of posting a
 * WRITE with immediate the device refuses and reconnecting in a loop. */
static void sliding_window_on_iwarp_rx(const struct link *lk)
{
  struct rx_end rx;
  rx_listen(&rx, lk);
  rx_accept(&rx);
  ASSERT_EQ(rx.lane.mechanism, SBR_MECH_SLIDING_WINDOW);
  step_wait(lk, 'D', "the sender's verdict");
  rx_close(&rx);
}

static void sliding_window_on_iwarp_tx(const struct link *lk)
{
  step_wait(lk, 'L', "the listener");
  struct sbr_sender_config cfg;
  sbr_sender_config_init(&cfg);
  cfg.backend = SBR_BACKEND_VERBS;
  cfg.mechanism = SBR_MECH_SLIDING_WINDOW;
  cfg.host = rdma_addr;
  cfg.port = lk->port;
  cfg.connect_timeout_ms = 20000;
  sbr_sender *s = NULL;
  char err[256] = "";
  uint64_t t0 = now_ns();
  int ret = sbr_sender_new(&cfg, &s, err, sizeof err);
  fprintf(stderr, "sender: %d after %.0f ms: %s\n", ret, ms_since(t0), err);
  ASSERT_MSG(ret == -EPROTONOSUPPORT && !s, "sender got %d (%s)", ret, err);
  ASSERT_MSG(strstr(err, "iWARP") && strstr(err, "use status-byte"),
             "the error does not say why: %s", err);
  /* One attempt, not retries until the 20 s connect timeout. */
  ASSERT_MSG(ms_since(t0) < 10000, "the sender took %.0f ms", ms_since(t0));
  step_send(lk, 'D');
}

static void test_sliding_window_sender_on_iwarp_stops(void)
{
  if (!iwarp) {
#ifdef SBR_HAVE_VERBS
    test_verbs_skip("needs an iWARP device (the VM's --family siw)");
#else
    exit(77);
#endif
  }
  run_pair(sliding_window_on_iwarp_rx, sliding_window_on_iwarp_tx, false);
}

/* 6. The status-byte receiver's claim: data arrives with no receive posted.
 * The count is then shown to count by posting one. */
static void receiver_posts_no_receives_rx(const struct link *lk)
{
  struct rx_end rx;
  rx_listen(&rx, lk);
  rx_accept(&rx);
  rx_wait_status(&rx, 0, 1);
  rx_expect_block(&rx, 0);
  ASSERT_MSG(ops->posted_recv_count(rx.c) == 0,
             "posted_recv_count is %" PRIu64 " on a receiver that posted none",
             ops->posted_recv_count(rx.c));
  uint8_t buf[16];
  struct sbr__mr *mr;
  ASSERT_OK(ops->reg_mr(rx.c, buf, sizeof buf, SBR__ACCESS_LOCAL_WRITE, &mr));
  ASSERT_OK(ops->post_recv(rx.c, 1, buf, sizeof buf, mr));
  ASSERT_MSG(ops->posted_recv_count(rx.c) == 1,
             "posted_recv_count is %" PRIu64 " after one post_recv",
             ops->posted_recv_count(rx.c));
  step_send(lk, 'V');
  step_wait(lk, 'D', "the sender to finish");
  ops->dereg_mr(mr);
  rx_close(&rx);
}

static void receiver_posts_no_receives_tx(const struct link *lk)
{
  struct tx_end tx;
  step_wait(lk, 'L', "the receiver to listen");
  tx_connect(&tx, lk, SBR_MECH_STATUS_BYTE, NULL);
  tx_fill(&tx, 0);
  tx_post_block_and_status(&tx, 0);
  step_wait(lk, 'V', "the receiver to count its receives");
  step_send(lk, 'D');
  tx_close(&tx);
}

static void test_receiver_posts_no_receives(void)
{
  run_pair(receiver_posts_no_receives_rx, receiver_posts_no_receives_tx, false);
}

/* 7. A sender that dies (SIGKILL, no goodbye) is reported as DISCONNECTED
 * for its lane.  The receiver side kills it; the main process reaps it. */
static void disconnect_reported_tx(const struct link *lk)
{
  struct tx_end tx;
  step_wait(lk, 'L', "the receiver to listen");
  tx_connect(&tx, lk, SBR_MECH_STATUS_BYTE, NULL);
  step_send(lk, 'C');
  for (;;)
    pause(); /* until killed */
}

static void disconnect_reported_rx(const struct link *lk)
{
  struct rx_end rx;
  rx_listen(&rx, lk);
  rx_accept(&rx);
  step_wait(lk, 'C', "the sender to connect");
  struct sbr__listen_event ev;
  ASSERT_OK(ops->get_event(rx.l, 50, &ev));
  ASSERT_MSG(ev.type == SBR__EV_NONE,
             "listener event %d while the sender is alive", ev.type);

  ASSERT_MSG(kill(lk->peer, SIGKILL) == 0, "kill sender %d: %s", (int)lk->peer,
             strerror(errno));
  uint64_t t0 = now_ns();
  do {
    ASSERT_MSG(ms_since(t0) < STEP_MS,
               "no DISCONNECTED within %d ms of the sender's death", STEP_MS);
    ASSERT_OK(ops->get_event(rx.l, 100, &ev));
  } while (ev.type == SBR__EV_NONE);
  ASSERT_MSG(ev.type == SBR__EV_DISCONNECTED, "got event %d, not DISCONNECTED",
             ev.type);
  ASSERT_MSG(ev.conn == rx.c, "DISCONNECTED names another conn");
  rx_close(&rx);
}

static void test_disconnect_reported(void)
{
  run_pair(disconnect_reported_rx, disconnect_reported_tx, true);
}

/* 8. Connecting where nobody listens fails soon after the timeout, with a
 * message that names the port. */
static void connect_refused_is_clear(const struct link *lk)
{
  uint16_t port = lk->port;
  uint8_t priv[SBR__CONNECT_PRIV_SIZE];
  sbr__connect_priv_encode(priv, SBR_MECH_STATUS_BYTE, 0, 0);
  char err[256] = "", want[16];
  struct sbr__conn *c = NULL;
  struct sbr__lane_desc lane;
  uint64_t t0 = now_ns();
  int r = ops->connect(rdma_addr, port, NULL, priv, sizeof priv, &caps, 300, &c,
                       &lane, err, sizeof err);
  double ms = ms_since(t0);
  ASSERT_MSG(r < 0, "connect to port %u, where nobody listens, returned %d",
             port, r);
  ASSERT_MSG(c == NULL, "failed connect still returned a conn");
  snprintf(want, sizeof want, "%u", port);
  ASSERT_MSG(strstr(err, want), "error message \"%s\" does not name port %s",
             err, want);
  ASSERT_MSG(ms < 2000, "connect with a 300 ms timeout took %.0f ms", ms);
  fprintf(stderr, "   connect said: %s (%d, %.0f ms)\n", err, r, ms);
}

static void test_connect_refused_is_clear(void)
{
  run_solo(connect_refused_is_clear);
}

/* Waits for the next listener event of type (others are skipped). */
static void rx_wait_event(struct rx_end *rx, enum sbr__listen_event_type type,
                          struct sbr__listen_event *ev, const char *what)
{
  uint64_t t0 = now_ns();
  for (;;) {
    ASSERT_OK(ops->get_event(rx->l, 100, ev));
    if (ev->type == type)
      return;
    ASSERT_MSG(ev->type != SBR__EV_CONNECT_REQUEST &&
                   ev->type != SBR__EV_BAD_REQUEST,
               "waiting for %s: got connect event %d", what, (int)ev->type);
    ASSERT_MSG(ms_since(t0) < STEP_MS, "no %s within %d ms", what, STEP_MS);
  }
}

/* A sender's connect: returns its result, errbuf and how long it took. */
static int tx_try_connect(const struct link *lk, enum sbr_mechanism mech,
                          char *err, size_t errlen, double *ms)
{
  uint8_t priv[SBR__CONNECT_PRIV_SIZE];
  sbr__connect_priv_encode(priv, (uint8_t)mech, BLOCK_SIZE, BLOCKS);
  struct sbr__conn *c = NULL;
  struct sbr__lane_desc lane;
  uint64_t t0 = now_ns();
  int r = ops->connect(rdma_addr, lk->port, NULL, priv, sizeof priv, &caps,
                       STEP_MS, &c, &lane, err, errlen);
  *ms = ms_since(t0);
  ASSERT_MSG(r < 0 || c != NULL, "connect returned 0 without a conn");
  if (r == 0)
    ops->close(c);
  return r;
}

/* 8b. Protocol v2: a v1 sender (same magic, version byte 1) never becomes
 * a connect request: the back end hands it to the engine as a bad request
 * (reason "version", both versions), the engine refuses it, and the sender
 * hears why at once instead of timing out. */
static void v1_sender_rx(const struct link *lk)
{
  struct rx_end rx;
  struct sbr__listen_event ev;
  rx_listen(&rx, lk);
  rx_wait_event(&rx, SBR__EV_BAD_REQUEST, &ev, "the v1 request");
  ASSERT_EQ(ev.req.refusal.reason, SBR_REFUSAL_VERSION);
  ASSERT_EQ(ev.req.refusal.receiver_value, SBR__PRIV_VERSION);
  ASSERT_EQ(ev.req.refusal.sender_value, 1);
  ASSERT_MSG(!ev.req.refusal.retryable, "a version refusal is retryable");
  ASSERT_MSG(ev.req.peer[0] != '\0', "a bad request names no peer");
  ops->reject(rx.l, &ev.req, &ev.req.refusal);
  step_wait(lk, 'D', "the v1 sender's connect to fail");
  ops->close_listener(rx.l);
}

/* shm's connect refuses to send what it can't decode itself, so the v1
 * request goes out by hand (the setup datagram of shm-connection.c). */
static void v1_sender_shm(const struct link *lk, const uint8_t *priv,
                          size_t len)
{
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ASSERT(fd >= 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int n = snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "sbr-shm:%u",
                   (unsigned)lk->port);
  ASSERT_MSG(connect(fd, (struct sockaddr *)&sa,
                     (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
                                 (size_t)n)) == 0,
             "connect to the shm listener: %s", strerror(errno));
  uint8_t msg[4 + SBR__CONNECT_PRIV_SIZE] = {'C', 0, 0, 0};
  memcpy(msg + 4, priv, len);
  ASSERT(send(fd, msg, 4 + len, 0) == (ssize_t)(4 + len));
  struct pollfd p = {.fd = fd, .events = POLLIN};
  ASSERT_MSG(poll(&p, 1, STEP_MS / 2) == 1, "no answer to a v1 request");
  uint8_t answer[64];
  ssize_t r = recv(fd, answer, sizeof answer, 0);
  ASSERT_MSG(r >= 1 && answer[0] == 'R',
             "a v1 request got %zd bytes (first '%c'), not a refusal", r,
             r >= 1 ? answer[0] : '?');
  struct sbr__refusal why;
  ASSERT_MSG(sbr__reject_priv_decode(answer + 4, (size_t)r - 4, &why) == 0,
             "the refusal of a v1 request says no reason (%zd bytes)", r);
  ASSERT_EQ(why.reason, SBR_REFUSAL_VERSION);
  ASSERT_EQ(why.sender_value, 1);
  close(fd);
}

static void v1_sender_tx(const struct link *lk)
{
  step_wait(lk, 'L', "the receiver to listen");
  uint8_t priv[SBR__CONNECT_PRIV_SIZE];
  sbr__connect_priv_encode(priv, SBR_MECH_STATUS_BYTE, BLOCK_SIZE, BLOCKS);
  priv[4] = 1;
  if (is_shm) {
    v1_sender_shm(lk, priv, sizeof priv);
    step_send(lk, 'D');
    return;
  }
  char err[256] = "";
  struct sbr__conn *c = NULL;
  struct sbr__lane_desc lane;
  uint64_t t0 = now_ns();
  int r = ops->connect(rdma_addr, lk->port, NULL, priv, sizeof priv, &caps,
                       STEP_MS, &c, &lane, err, sizeof err);
  ASSERT_MSG(c == NULL, "failed connect still returned a conn");
  ASSERT_MSG(r == -EPROTONOSUPPORT, "a v1 sender got %d (%s)", r, err);
  ASSERT_MSG(ms_since(t0) < STEP_MS / 2,
             "the v1 sender was not refused but timed out (%s)", err);
  ASSERT_MSG(strstr(err, "protocol version 2, the sender 1"),
             "the refusal does not name both versions: %s", err);
  fprintf(stderr, "   v1 connect said: %s (%d)\n", err, r);
  step_send(lk, 'D');
}

static void test_v1_sender_is_refused(void)
{
  run_pair(v1_sender_rx, v1_sender_tx, false);
}

/* 8c. A refusal carries its reason in the reject's private data (verbs:
 * rdma_reject, the REJECTED event; shm: the 'R' message): a mechanism
 * mismatch fails the sender's connect at once with -EPROTONOSUPPORT and a
 * message naming both mechanisms and the receiver. */
static void refusal_reason_rx(const struct link *lk)
{
  struct rx_end rx;
  struct sbr__listen_event ev;
  rx_listen(&rx, lk);
  rx_wait_event(&rx, SBR__EV_CONNECT_REQUEST, &ev, "the connect request");
  ASSERT_EQ(ev.req.mechanism, SBR_MECH_SLIDING_WINDOW);
  struct sbr__refusal why;
  sbr__refusal_set(&why, SBR_REFUSAL_MECHANISM, SBR_MECH_STATUS_BYTE,
                   ev.req.mechanism);
  ops->reject(rx.l, &ev.req, &why);
  step_wait(lk, 'D', "the sender's connect to fail");
  ops->close_listener(rx.l);
}

static void refusal_reason_tx(const struct link *lk)
{
  char err[256] = "", want[16];
  double ms;
  step_wait(lk, 'L', "the receiver to listen");
  int r = tx_try_connect(lk, SBR_MECH_SLIDING_WINDOW, err, sizeof err, &ms);
  ASSERT_MSG(r == -EPROTONOSUPPORT, "refused for its mechanism: %d (%s)", r,
             err);
  ASSERT_MSG(ms < STEP_MS / 2, "the refusal took %.0f ms (%s)", ms, err);
  ASSERT_MSG(strstr(err, "the receiver runs the status-byte mechanism, the "
                         "sender sliding-window"),
             "the refusal does not name both mechanisms: %s", err);
  snprintf(want, sizeof want, "%u", lk->port);
  ASSERT_MSG(strstr(err, want), "the refusal does not name port %s: %s", want,
             err);
  fprintf(stderr, "   refused: %s (%d, %.0f ms)\n", err, r, ms);
  step_send(lk, 'D');
}

static void test_refusal_reason_reaches_sender(void)
{
  run_pair(refusal_reason_rx, refusal_reason_tx, false);
}

/* 8d. A retryable refusal (every lane in use) stays retryable: -EBUSY, and
 * the next connect of the same sender is accepted. */
static void refusal_retryable_rx(const struct link *lk)
{
  struct rx_end rx;
  struct sbr__listen_event ev;
  rx_listen(&rx, lk);
  rx_wait_event(&rx, SBR__EV_CONNECT_REQUEST, &ev, "the first request");
  struct sbr__refusal why;
  sbr__refusal_set(&why, SBR_REFUSAL_LANES_FULL, 8, 0);
  ASSERT_MSG(why.retryable, "lanes-full is not retryable");
  ops->reject(rx.l, &ev.req, &why);
  rx_accept(&rx);
  step_wait(lk, 'D', "the sender to finish");
  rx_close(&rx);
}

static void refusal_retryable_tx(const struct link *lk)
{
  char err[256] = "";
  double ms;
  step_wait(lk, 'L', "the receiver to listen");
  int r = tx_try_connect(lk, SBR_MECH_STATUS_BYTE, err, sizeof err, &ms);
  ASSERT_MSG(r == -EBUSY, "refused for full lanes: %d (%s)", r, err);
  ASSERT_MSG(strstr(err, "all 8 lanes of the receiver are in use"),
             "the refusal does not say why: %s", err);
  fprintf(stderr, "   refused: %s (%d, %.0f ms)\n", err, r, ms);
  struct tx_end tx;
  tx_connect(&tx, lk, SBR_MECH_STATUS_BYTE, NULL);
  step_send(lk, 'D');
  tx_close(&tx);
}

static void test_refusal_retryable_stays_retryable(void)
{
  run_pair(refusal_retryable_rx, refusal_retryable_tx, false);
}

/* 9. shm: an injected round trip of 150 ms is a floor for a READ, but
 * WRITEs are pipelined: 8 back to back take about one round trip, not 8
 * (the 7 round trips between the two, over a second, are what a loaded
 * host's scheduling may add; 20 ms left it 140 ms). */
#define DELAY_US 150000

static void injected_delay_tx(const struct link *lk)
{
  struct tx_end tx;
  struct sbr__fault_injection faults = {.delay_us = DELAY_US};
  step_wait(lk, 'L', "the receiver to listen");
  tx_connect(&tx, lk, SBR_MECH_STATUS_BYTE, &faults);

  struct sbr__wr rd = {.wr_id = 1,
                       .opcode = SBR__OP_READ,
                       .local_addr = tx.buf,
                       .length = BLOCKS,
                       .lkey = tx.mr->lkey,
                       .remote_addr = tx.lane.status_addr,
                       .rkey = tx.lane.status_rkey,
                       .signaled = true};
  struct sbr__wc wc[BLOCKS];
  step_wait(lk, 'S', "the receiver to be ready");
  uint64_t t0 = now_ns();
  ASSERT_OK(ops->post_send(tx.c, &rd, 1));
  poll_exactly(tx.c, wc, 1, "the delayed READ");
  double read_ms = ms_since(t0);
  ASSERT_MSG(wc[0].status == SBR__WC_SUCCESS, "READ failed: %d",
             (int)wc[0].status);
  ASSERT_MSG(read_ms >= DELAY_US / 1000.0,
             "READ completed after %.2f ms, inside the %d ms round trip",
             read_ms, DELAY_US / 1000);

  struct sbr__wr chain[BLOCKS];
  for (uint32_t b = 0; b < BLOCKS; b++)
    chain[b] = tx_block_write(&tx, b, 10 + b, true);
  t0 = now_ns();
  ASSERT_OK(ops->post_send(tx.c, chain, BLOCKS));
  poll_exactly(tx.c, wc, BLOCKS, "eight delayed WRITEs");
  double ms = ms_since(t0);
  for (uint32_t b = 0; b < BLOCKS; b++) {
    ASSERT_EQ(wc[b].wr_id, 10 + b); /* in order */
    ASSERT_EQ(wc[b].status, SBR__WC_SUCCESS);
  }
  ASSERT_MSG(ms >= DELAY_US / 1000.0,
             "WRITEs completed after %.2f ms, inside the %d ms round trip", ms,
             DELAY_US / 1000);
  ASSERT_MSG(ms < BLOCKS * DELAY_US / 1000.0,
             "8 WRITEs took %.1f ms: one round trip each, not pipelined", ms);
  fprintf(stderr, "   READ round trip %.1f ms; 8 WRITEs %.1f ms\n", read_ms,
          ms);
  step_send(lk, 'D');
  tx_close(&tx);
}

static void test_injected_delay(void)
{
  run_pair(idle_lane_rx, injected_delay_tx, false);
}

/* 10. shm: fail_after_wrs = 3 fails the third WR; the QP is then in error,
 * so the rest, and a WR posted afterwards, are flushed, not executed. */
static void injected_error_rx(const struct link *lk)
{
  struct rx_end rx;
  rx_listen(&rx, lk);
  rx_accept(&rx);
  step_wait(lk, 'D', "the sender's WRs to complete");
  rx_expect_block(&rx, 0);
  rx_expect_block(&rx, 1);
  for (uint32_t b = 2; b < 6; b++)
    rx_expect_zero_block(&rx, b, "a failed or flushed WRITE landed");
  rx_close(&rx);
}

static void injected_error_tx(const struct link *lk)
{
  struct tx_end tx;
  struct sbr__fault_injection faults = {.fail_after_wrs = 3};
  step_wait(lk, 'L', "the receiver to listen");
  tx_connect(&tx, lk, SBR_MECH_STATUS_BYTE, &faults);
  struct sbr__wr chain[5];
  for (uint32_t b = 0; b < 5; b++) {
    tx_fill(&tx, b);
    chain[b] = tx_block_write(&tx, b, b + 1, true);
  }
  ASSERT_OK(ops->post_send(tx.c, chain, 5));
  struct sbr__wc wc[5];
  poll_exactly(tx.c, wc, 5, "five WRITEs, the third failing");
  static const enum sbr__wc_status want[5] = {SBR__WC_SUCCESS, SBR__WC_SUCCESS,
                                              SBR__WC_ERROR, SBR__WC_FLUSH,
                                              SBR__WC_FLUSH};
  for (int i = 0; i < 5; i++) {
    ASSERT_EQ(wc[i].wr_id, i + 1);
    ASSERT_MSG(wc[i].status == want[i], "WR %d completed with %d, expected %d",
               i + 1, (int)wc[i].status, (int)want[i]);
  }
  ASSERT_MSG(wc[2].vendor_err != 0, "the injected error has no vendor_err");

  struct sbr__wr late = tx_block_write(&tx, 5, 6, false);
  ASSERT_OK(ops->post_send(tx.c, &late, 1));
  poll_exactly(tx.c, wc, 1, "a WR posted after the error");
  ASSERT_EQ(wc[0].wr_id, 6);
  ASSERT_MSG(wc[0].status == SBR__WC_FLUSH,
             "a WR posted on a QP in error completed with %d, not FLUSH",
             (int)wc[0].status);
  step_send(lk, 'D');
  tx_close(&tx);
}

static void test_injected_error(void)
{
  run_pair(injected_error_rx, injected_error_tx, false);
}

/* 11. The receiver closing its lane reaches the sender: poll_cq turns
 * negative (the connection is gone) and nothing posted afterwards succeeds.
 * No hang, no crash. */
static void receiver_leaves_rx(const struct link *lk)
{
  struct rx_end rx;
  rx_listen(&rx, lk);
  rx_accept(&rx);
  /* On verbs, closing before the connection is established is a failed
   * connect, not a departure: wait until the sender is connected. */
  step_wait(lk, 'C', "the sender to connect");
  ops->close(rx.c);
  step_send(lk, 'X');
  step_wait(lk, 'D', "the sender to notice");
  ops->close_listener(rx.l);
}

static void receiver_leaves_tx(const struct link *lk)
{
  struct tx_end tx;
  step_wait(lk, 'L', "the receiver to listen");
  tx_connect(&tx, lk, SBR_MECH_STATUS_BYTE, NULL);
  step_send(lk, 'C');
  step_wait(lk, 'X', "the receiver to close its lane");
  uint64_t t0 = now_ns();
  struct sbr__wc wc;
  int r;
  while ((r = ops->poll_cq(tx.c, &wc, 1)) == 0) {
    ASSERT_MSG(ms_since(t0) < STEP_MS,
               "poll_cq still 0 %d ms after the receiver left", STEP_MS);
    usleep(1000);
  }
  ASSERT_MSG(r < 0,
             "poll_cq returned a completion (wr_id %" PRIu64
             ") with nothing posted",
             wc.wr_id);
  struct sbr__wr wr = tx_block_write(&tx, 0, 1, true);
  if (ops->post_send(tx.c, &wr, 1) == 0) {
    t0 = now_ns();
    while (ms_since(t0) < 200) {
      r = ops->poll_cq(tx.c, &wc, 1);
      ASSERT_MSG(r <= 0 || wc.status != SBR__WC_SUCCESS,
                 "a WRITE to a receiver that left succeeded");
    }
  }
  step_send(lk, 'D');
  tx_close(&tx);
}

static void test_receiver_leaves(void)
{
  run_pair(receiver_leaves_rx, receiver_leaves_tx, false);
}

/* 12. shm: a send queue slot is freed only by a polled completion that
 * covers it, as on verbs (rule 6): a full queue refuses posts with -ENOMEM
 * even after the NIC executed everything, until the completion is polled. */
static void send_queue_full_tx(const struct link *lk)
{
  struct tx_end tx;
  step_wait(lk, 'L', "the receiver to listen");
  tx_connect(&tx, lk, SBR_MECH_STATUS_BYTE, NULL);
  step_wait(lk, 'S', "the receiver to be ready");
  struct sbr__wr chain[32];
  ASSERT(caps.max_send_wr == 32);
  for (int i = 0; i < 32; i++)
    chain[i] = tx_block_write(&tx, (uint32_t)i % BLOCKS, (uint64_t)i, i == 31);
  ASSERT_OK(ops->post_send(tx.c, chain, 32));
  usleep(50000); /* let the NIC run them all: it must not matter */
  int r = ops->post_send(tx.c, chain, 1);
  ASSERT_MSG(r == -ENOMEM,
             "post_send on a full send queue returned %d, expected -ENOMEM", r);
  struct sbr__wc wc;
  poll_exactly(tx.c, &wc, 1, "the signaled last WR");
  ASSERT_EQ(wc.wr_id, 31);
  ASSERT_OK(ops->post_send(tx.c, chain, 32)); /* all 32 slots are free */
  poll_exactly(tx.c, &wc, 1, "the second round");
  step_send(lk, 'D');
  tx_close(&tx);
}

static void test_send_queue_full_until_polled(void)
{
  run_pair(idle_lane_rx, send_queue_full_tx, false);
}

/* 14. Fabric settings reach the QPs and the lane still streams: the
 * sender's TOS (both QPs' traffic class), ACK timeout and retry count,
 * the receiver's own ACK timeout, and an explicit NUMA node for the lane memory
 * (the VM has one node: the binding is made and harmless).  Over shm only the
 * binding applies (no QP). */
#define FABRIC_TOS 96    /* DSCP 24 (CS3) */
#define FABRIC_RX_TOS 32 /* DSCP 8, the receiver's own: not what counts */
/* Longer than the default (15), never shorter: a try of 4.096 us x 2^12
 * could time out on the VM's emulated CPU under load and fail the QP. */
#define FABRIC_TX_ACK 16
#define FABRIC_RX_ACK 17
#define FABRIC_RETRY 5

/* The QP's timeout, retry count and traffic class (verbs only). */
static void expect_qp(struct sbr__conn *c, uint8_t timeout, uint8_t retry,
                      uint8_t tclass, const char *side)
{
#ifdef SBR_HAVE_VERBS
  if (is_shm)
    return;
  if (iwarp) {
    /* iWARP's QPs have no ACK timeout, retry count or GRH: TCP carries
     * the TOS and does the retransmitting. */
    fprintf(stderr, "   %s: QP attributes not checked over iWARP\n", side);
    return;
  }
  struct ibv_qp_attr attr;
  struct ibv_qp_init_attr init;
  memset(&attr, 0, sizeof attr);
  ASSERT_MSG(
      ibv_query_qp(c->id->qp, &attr,
                   IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_AV,
                   &init) == 0,
      "%s: ibv_query_qp: %s", side, strerror(errno));
  ASSERT_MSG(attr.qp_state == IBV_QPS_RTS, "%s: QP in state %d, not RTS", side,
             (int)attr.qp_state);
  ASSERT_MSG(attr.timeout == timeout, "%s: QP ACK timeout %u, expected %u",
             side, attr.timeout, timeout);
  ASSERT_MSG(attr.retry_cnt == retry, "%s: QP retry count %u, expected %u",
             side, attr.retry_cnt, retry);
  ASSERT_MSG(attr.ah_attr.grh.traffic_class == tclass,
             "%s: QP traffic class %u, expected %u (the TOS)", side,
             attr.ah_attr.grh.traffic_class, tclass);
#else
  (void)c, (void)timeout, (void)retry, (void)tclass, (void)side;
#endif
}

static void fabric_settings_reach_the_qp_rx(const struct link *lk)
{
  struct sbr__fabric f;
  sbr__fabric_defaults(&f);
  /* Another TOS than the sender's: on RoCE the lane's QP takes the
   * connect request's traffic class, so the sender's is the one seen. */
  f.tos = FABRIC_RX_TOS;
  f.ack_timeout = FABRIC_RX_ACK;
  f.numa_node = 0;
  struct sbr__queue_caps mine = caps;
  mine.fabric = &f;
  side_caps = &mine;
  uint64_t bound = atomic_load(&sbr__fabric_numa_bound);
  struct rx_end rx;
  rx_listen(&rx, lk);
  rx_accept(&rx);
  ASSERT_MSG(atomic_load(&sbr__fabric_numa_bound) > bound,
             "the lane memory was not bound to node 0");
  for (uint32_t b = 0; b < BLOCKS; b++) {
    rx_wait_status(&rx, b, 1);
    rx_expect_block(&rx, b);
  }
  /* The passive side reaches RTS once established: the blocks landed. */
  expect_qp(rx.c, FABRIC_RX_ACK, FABRIC_RETRY, FABRIC_TOS, "receiver");
  step_send(lk, 'V');
  step_wait(lk, 'D', "the sender to finish");
  rx_close(&rx);
}

static void fabric_settings_reach_the_qp_tx(const struct link *lk)
{
  struct sbr__fabric f;
  sbr__fabric_defaults(&f);
  f.tos = FABRIC_TOS;
  f.ack_timeout = FABRIC_TX_ACK;
  f.retry_count = FABRIC_RETRY;
  struct sbr__queue_caps mine = caps;
  mine.fabric = &f;
  side_caps = &mine;
  struct tx_end tx;
  step_wait(lk, 'L', "the receiver to listen");
  tx_connect(&tx, lk, SBR_MECH_STATUS_BYTE, NULL);
  expect_qp(tx.c, FABRIC_TX_ACK, FABRIC_RETRY, FABRIC_TOS, "sender");
  for (uint32_t b = 0; b < BLOCKS; b++) {
    tx_fill(&tx, b);
    tx_post_block_and_status(&tx, b);
  }
  step_wait(lk, 'V', "the receiver to verify the blocks");
  step_send(lk, 'D');
  tx_close(&tx);
}

static void test_fabric_settings_reach_the_qp(void)
{
  run_pair(fabric_settings_reach_the_qp_rx, fabric_settings_reach_the_qp_tx,
           false);
}

/* --------------------------------------------------------------- main */

/* 13. wait_cq sleeps (no completion due: it lasts about its timeout) and
 * wakes for a completion: over shm with a 300 ms injected round trip, when
 * the completion becomes pollable, not before and not at the timeout. */
static void wait_cq_sleeps_until_a_completion_tx(const struct link *lk)
{
  struct sbr__fault_injection delay = {.delay_us = 300000};
  struct tx_end tx;
  step_wait(lk, 'L', "the receiver to listen");
  tx_connect(&tx, lk, SBR_MECH_STATUS_BYTE, is_shm ? &delay : NULL);
  step_wait(lk, 'S', "the receiver to accept");
  struct sbr__wc wc;

  uint64_t t0 = now_ns();
  ops->arm_cq(tx.c);
  ASSERT_EQ(ops->poll_cq(tx.c, &wc, 1), 0);
  ops->wait_cq(tx.c, 200000);
  double idle_ms = ms_since(t0);
  ASSERT_MSG(idle_ms >= 100,
             "wait_cq with nothing due returned after %.1f ms "
             "of its 200",
             idle_ms);

  struct sbr__wr read = status_read(&tx, 9, 0, 0, BLOCKS);
  t0 = now_ns();
  ASSERT_OK(ops->post_send(tx.c, &read, 1));
  int waits = 0;
  for (;;) {
    ops->arm_cq(tx.c);
    int n = ops->poll_cq(tx.c, &wc, 1);
    ASSERT_MSG(n >= 0, "poll_cq: %d", n);
    if (n == 1)
      break;
    ASSERT_MSG(++waits <= 4, "still no completion after %d waits", waits - 1);
    ops->wait_cq(tx.c, 10 * 1000 * 1000);
  }
  double took_ms = ms_since(t0);
  ASSERT_EQ(wc.wr_id, 9);
  ASSERT_EQ(wc.status, SBR__WC_SUCCESS);
  ASSERT_MSG(took_ms < 5000, "the READ's completion woke nobody: %.0f ms",
             took_ms);
  if (is_shm)
    ASSERT_MSG(took_ms >= 290,
               "completion seen %.1f ms after post, before "
               "the injected 300 ms round trip",
               took_ms);
  step_send(lk, 'D');
  tx_close(&tx);
}

static void test_wait_cq_sleeps_until_a_completion(void)
{
  run_pair(idle_lane_rx, wait_cq_sleeps_until_a_completion_tx, false);
}

/* 1b. A device with no inline room (here forced by configuration, with
 * windows off too: what rdmasink meets on a NIC without inline data): the
 * status byte still lands after the data, from the value it had at post
 * time (tx_post_block_and_status overwrites it right after the post).
 * Over verbs the WR really went through a bounce slot; over shm the
 * variables mean nothing and the test is test 1 again. */
static void inline_forced_to_zero_tx(const struct link *lk)
{
  write_then_inline_status_tx(lk);
#ifdef SBR_HAVE_VERBS
  if (!is_shm)
    ASSERT_MSG(atomic_load(&sbr__verbs_bounced) >= 1,
               "the status WRITE was posted inline, not from a bounce slot");
#endif
}
static void test_inline_forced_to_zero(void)
{
  setenv("SBR_VERBS_MAX_INLINE", "0", 1);
  setenv("SBR_VERBS_WINDOWS", "0", 1);
  run_pair(write_then_inline_status_rx, inline_forced_to_zero_tx, false);
}

/* 22. shm: the status-byte receiver's sleep (sleep_prepare, sleep_wait)
 * is ended by the sender's status WRITE, and never misses one.  Round
 * after round the receiver announces its sleep, looks at the byte and
 * sleeps with a 10 s timeout while the sender writes the byte at a varying
 * moment of that sequence (before the announcement, between it and the
 * look, between the look and the futex, during the sleep).  A lost wake-up
 * is a sleep that ran to its timeout: none may. */
#define WAKE_ROUNDS 3000
#define WAKE_TIMEOUT_NS (10ull * 1000000000u)

static void status_write_wakes_sleeper_rx(const struct link *lk)
{
  struct rx_end rx;
  rx_listen(&rx, lk);
  rx_accept(&rx);
  ASSERT(ops->sleep_prepare && ops->sleep_wait && ops->sleep_end);
  unsigned woken = 0, looked = 0;
  uint32_t x = 54321;
  for (uint32_t k = 0; k < WAKE_ROUNDS; k++) {
    uint32_t b = k % BLOCKS;
    step_send(lk, 'n'); /* the sender may write block b's byte now */
    /* Now and then a late announcement, so the write also comes first. */
    x = x * 1103515245u + 12345u;
    uint64_t until = now_ns() + (x >> 16) % 60000u;
    if (k % 3 == 0)
      while (now_ns() < until)
        ;
    for (;;) {
      uint32_t token = ops->sleep_prepare(rx.c);
      if (status_load(&rx.mem, b) == 1) {
        ops->sleep_end(rx.c);
        looked++;
        break;
      }
      uint64_t t0 = now_ns();
      int ret = ops->sleep_wait(rx.c, token, t0 + WAKE_TIMEOUT_NS);
      ops->sleep_end(rx.c);
      ASSERT_MSG(ret == 1,
                 "round %u: slept %.0f ms to the timeout with the status "
                 "byte %s: a lost wake-up",
                 k, ms_since(t0),
                 status_load(&rx.mem, b) == 1 ? "written" : "not written");
      woken++;
    }
    status_store(&rx.mem, b, 0);
  }
  fprintf(stderr, "   %u rounds: %u sleeps woken, %u found at the look\n",
          WAKE_ROUNDS, woken, looked);
  /* Most writes come while the receiver sleeps (the sender waits for the
   * step, then a little more): a wake that never comes would show as a
   * timeout above, a wake that always comes early as no sleep at all. */
  ASSERT_MSG(woken > 0, "the receiver never slept on the byte");
  step_wait(lk, 'D', "the sender to finish");
  rx_close(&rx);
}

static void status_write_wakes_sleeper_tx(const struct link *lk)
{
  struct tx_end tx;
  step_wait(lk, 'L', "the receiver to listen");
  tx_connect(&tx, lk, SBR_MECH_STATUS_BYTE, NULL);
  uint32_t x = 12345;
  for (uint32_t k = 0; k < WAKE_ROUNDS; k++) {
    uint32_t b = k % BLOCKS;
    step_wait(lk, 'n', "the receiver's next round");
    /* 0 to ~60 us of spinning: the write lands anywhere in the
     * receiver's announce-look-sleep sequence. */
    x = x * 1103515245u + 12345u;
    uint64_t until = now_ns() + (x >> 16) % 60000u;
    if (k % 4 != 0)
      while (now_ns() < until)
        ;
    tx_fill(&tx, b);
    tx_post_block_and_status(&tx, b);
  }
  step_send(lk, 'D');
  tx_close(&tx);
}

static void test_status_write_wakes_sleeper(void)
{
  run_pair(status_write_wakes_sleeper_rx, status_write_wakes_sleeper_tx, false);
}

/* SHM_ONLY rows need the shm back end's fault injection. */
static const struct test_entry all_tests[] = {
    {"write_then_inline_status", test_write_then_inline_status, ANY_BACKEND},
    {"inline_forced_to_zero", test_inline_forced_to_zero, ANY_BACKEND},
    {"fabric_settings_reach_the_qp", test_fabric_settings_reach_the_qp,
     ANY_BACKEND},
    {"read_status_array", test_read_status_array, ANY_BACKEND},
    {"pause_bitmap_read_with_status", test_pause_bitmap_read_with_status,
     ANY_BACKEND},
    {"bitmap_write_refused", test_bitmap_write_refused, SHM_ONLY},
    {"read_of_blocks_region_fails", test_read_of_blocks_region_fails,
     ANY_BACKEND},
    {"bad_rkey_or_bounds_fails", test_bad_rkey_or_bounds_fails, ANY_BACKEND},
    {"write_imm_and_ack", test_write_imm_and_ack, ANY_BACKEND},
    {"sliding_window_sender_on_iwarp_stops",
     test_sliding_window_sender_on_iwarp_stops, ANY_BACKEND},
    {"receiver_posts_no_receives", test_receiver_posts_no_receives,
     ANY_BACKEND},
    {"disconnect_reported", test_disconnect_reported, ANY_BACKEND},
    {"connect_refused_is_clear", test_connect_refused_is_clear, ANY_BACKEND},
    {"v1_sender_is_refused", test_v1_sender_is_refused, ANY_BACKEND},
    {"refusal_reason_reaches_sender", test_refusal_reason_reaches_sender,
     ANY_BACKEND},
    {"refusal_retryable_stays_retryable",
     test_refusal_retryable_stays_retryable, ANY_BACKEND},
    {"receiver_leaves", test_receiver_leaves, ANY_BACKEND},
    {"injected_delay", test_injected_delay, SHM_ONLY},
    {"injected_error", test_injected_error, SHM_ONLY},
    {"send_queue_full_until_polled", test_send_queue_full_until_polled,
     SHM_ONLY},
    {"wait_cq_sleeps_until_a_completion",
     test_wait_cq_sleeps_until_a_completion, ANY_BACKEND},
    {"status_write_wakes_sleeper", test_status_write_wakes_sleeper, SHM_ONLY},
    {NULL, NULL, ANY_BACKEND},
};

int main(int argc, char **argv)
{
  enum sbr_backend backend;
  if (test_parse_backend(argc, argv, &backend, &rdma_addr) < 0)
    return 2;
  ops = sbr__transport_get(backend);
  if (!ops) {
    fprintf(stderr, "the %s back end is not built in; skipping\n", argv[1]);
    return 77; /* meson: skipped */
  }
  is_shm = backend == SBR_BACKEND_SHM;
#ifdef SBR_HAVE_VERBS
  iwarp = !is_shm && test_verbs_is_iwarp();
#endif
  port_base = (uint16_t)(17000 + (getpid() % 1000) * 32);
  signal(SIGPIPE, SIG_IGN); /* a dead peer shows as a failed write */
  atexit(kill_children);
  sbr_set_log_handler(log_to_stderr, NULL);

  return test_main_over_backend(all_tests, backend, argc, argv);
}
