/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-rogue.c - a rogue client against a real receiver (issue #12 item 2).
 * Usage: test-rogue shm|verbs [test-name...] (verbs: SBR_RDMA_ADDR, default
 * 127.0.0.1).
 *
 * Every test runs a receiver (sbr_receiver_new), an honest sender
 * (sbr_sender_new, device HONEST_DEV, pattern payloads, some frames in two
 * fragments) streaming on one lane from start to end, and a rogue on a
 * second lane made with the internal transport API: ops->connect with
 * hand-made private data, then WRITE/READ work requests built by hand into
 * the lane's blocks and status bytes with the rkeys of the accept private
 * data.  One misbehaviour per test.  Each asserts what the receiver did
 * (stats rejected / per-device counters / refusals / lane closes), that
 * nothing of the rogue's was delivered unless the test says so, and that
 * every honest frame arrived intact and in order, during and after.
 */
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "wire/block.h"
#include "wire/byteorder.h"
#include "engine-fixture.h"
#include "engine/receiver-internal.h"
#include "engine/sender-internal.h"
#include "transport/transport.h"
#include "transport/nic-counters.h"
#ifdef SBR_HAVE_VERBS
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "transport/verbs/verbs-keys.h"
#include "verbs-device.h"
#endif

#define BLOCKS 16
#define BLOCK_SIZE 4096
#define HONEST_DEV 5
#define ROGUE_DEV 42
#define MASKED_DEV 200 /* not in the receiver's device mask */
/* A hang, not a slow machine: the emulated VM beside a loaded host took
 * the honest lane over 10 s to start (ci3 of session 12, its verbs suite
 * 3.5 times as long as on a quiet host). */
#define HANG_MS 30000

static enum sbr_backend backend = SBR_BACKEND_SHM;
static const char *addr = "127.0.0.1";
static const struct sbr__transport_ops *ops;
static bool iwarp; /* the device completes WRITEs locally (verbs-device.h) */
static const struct sbr__queue_caps rogue_caps = {
    .max_send_wr = 8, .max_recv_wr = 1, .max_inline = 64};

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

static uint64_t ms_since(uint64_t t0_ns)
{
  return (now_ns() - t0_ns) / 1000000u;
}

/* ------------------------------------------------- the honest side */

/* Takes frames on its own thread: the honest device's are checked byte by
 * byte and in order; anything else is the rogue's, counted and kept. */
struct collector {
  sbr_receiver *r;
  pthread_t thread;
  atomic_bool stop;
  atomic_uint honest;     /* honest frames, all verified, in order */
  atomic_uint rogue;      /* frames of any other device */
  atomic_uint rogue_last; /* packet number of the newest of those */
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
    if (f.info.device == HONEST_DEV) {
      unsigned frame = fixture_check_frame(&f);
      ASSERT_MSG(frame == atomic_load(&c->honest),
                 "honest frame %u arrived, expected %u", frame,
                 atomic_load(&c->honest));
      atomic_fetch_add(&c->honest, 1);
    } else {
      atomic_store(&c->rogue_last, f.info.packet);
      atomic_fetch_add(&c->rogue, 1);
    }
    sbr_frame_release(&f);
  }
  return NULL;
}

/* Sends the honest device's frames every 500 us until told to stop. */
struct streamer {
  sbr_sender *s;
  pthread_t thread;
  atomic_bool stop;
  atomic_uint sent;
  atomic_int ret; /* read by world_finish while the thread runs */
};

static size_t honest_size(unsigned frame)
{
  return frame % 3 == 2 ? 6000 : 300 + frame % 1000; /* 6000: 2 blocks */
}

static void *streamer_thread(void *arg)
{
  struct streamer *st = arg;
  while (!atomic_load(&st->stop)) {
    unsigned i = atomic_load(&st->sent);
    int ret = fixture_send(st->s, HONEST_DEV, i, honest_size(i));
    atomic_store(&st->ret, ret);
    if (ret != 0)
      return NULL;
    atomic_fetch_add(&st->sent, 1);
    usleep(500);
  }
  return NULL;
}

struct world {
  uint16_t port;
  sbr_receiver *r;
  struct collector c;
  struct streamer st;
  unsigned rogue_lanes; /* rogue lanes opened (closed by the end) */
};

static void stats(struct world *w, struct sbr_receiver_stats *s)
{
  ASSERT_OK(sbr_receiver_get_stats(w->r, s));
}

/* The next world's receiver's max_frame_size (0: its default). */
static uint32_t world_max_frame_size;
/* The next world's receiver's probe_after_ms (0: no probes).  Only the
 * tests of probing probe: elsewhere a probe READ a loaded host's siw left
 * unanswered for 2 s closed the rogue's lane mid-test (CI: a rogue WRITE
 * failed 53 s into invalid_block_warnings_are_rate_limited), a verdict
 * on the CPU the VM got, not on what the test checks. */
static uint32_t world_probe_after_ms;

static void world_start(struct world *w)
{
  memset(w, 0, sizeof *w);
  w->port = fixture_port();
  struct sbr_receiver_config rc;
  fixture_receiver_config(&rc, w->port, BLOCKS, BLOCK_SIZE);
  rc.backend = backend;
  rc.address = addr;
  if (world_max_frame_size)
    rc.max_frame_size = world_max_frame_size;
  rc.probe_after_ms = world_probe_after_ms;
  rc.device_mask[MASKED_DEV / 8] &= (uint8_t) ~(1u << (MASKED_DEV % 8));
  char err[256];
  int ret = sbr_receiver_new(&rc, &w->r, err, sizeof err);
  ASSERT_MSG(ret == 0, "receiver on %s:%u: %d %s", addr, w->port, ret, err);
  w->c.r = w->r;
  ASSERT(pthread_create(&w->c.thread, NULL, collector_thread, &w->c) == 0);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, w->port);
  sc.backend = backend;
  sc.host = addr;
  sc.send_blocks = 8;
  /* The honest frames must all arrive: a starved receiver thread makes
   * a send wait, never drop (the default 1 s wait gave -EAGAIN there);
   * HANG_MS still catches a lane that stopped. */
  sc.wait_timeout_ms = HANG_MS;
  ret = sbr_sender_new(&sc, &w->st.s, err, sizeof err);
  ASSERT_MSG(ret == 0, "honest sender: %d %s", ret, err);
  ASSERT(pthread_create(&w->st.thread, NULL, streamer_thread, &w->st) == 0);
  /* The honest lane is streaming before the rogue comes. */
  uint64_t t0 = now_ns();
  while (atomic_load(&w->c.honest) < 10)
    ASSERT_MSG(ms_since(t0) < HANG_MS, "the honest lane did not start");
}

/* Waits until stats field `field` reaches want. */
#define WAIT_STAT(w, field, want)                                              \
  do {                                                                         \
    uint64_t t0_ = now_ns();                                                   \
    struct sbr_receiver_stats s_;                                              \
    for (stats(w, &s_); s_.field < (want); stats(w, &s_)) {                    \
      ASSERT_MSG(ms_since(t0_) < HANG_MS, "stats." #field " %llu, want %llu",  \
                 (unsigned long long)s_.field, (unsigned long long)(want));    \
      usleep(1000);                                                            \
    }                                                                          \
  } while (0)

/* The honest lane goes on after the rogue is done: 20 more frames, then
 * every frame sent arrived, verified, in order, none dropped or rejected;
 * the rogue's lanes are closed and nothing else; the receiver is freed. */
static void world_finish(struct world *w)
{
  unsigned from = atomic_load(&w->st.sent);
  uint64_t t0 = now_ns();
  while (atomic_load(&w->st.sent) < from + 20 && atomic_load(&w->st.ret) == 0)
    ASSERT_MSG(ms_since(t0) < HANG_MS, "the honest sender stalled");
  atomic_store(&w->st.stop, true);
  pthread_join(w->st.thread, NULL);
  int ret = atomic_load(&w->st.ret);
  ASSERT_MSG(ret == 0, "honest send failed: %d (%s)", ret, strerror(-ret));
  ASSERT_OK(sbr_sender_flush(w->st.s, 5000));
  unsigned sent = atomic_load(&w->st.sent);
  t0 = now_ns();
  while (atomic_load(&w->c.honest) < sent)
    ASSERT_MSG(ms_since(t0) < HANG_MS, "honest frames: %u of %u arrived",
               atomic_load(&w->c.honest), sent);
  struct sbr_device_stats ds;
  ASSERT_OK(sbr_receiver_get_device_stats(w->r, HONEST_DEV, &ds));
  ASSERT_EQ(ds.frames, sent);
  ASSERT_EQ(ds.rejected, 0);
  ASSERT_EQ(ds.drops, 0);
  ASSERT_EQ(ds.gaps, 0);
  struct sbr_device_stats sd;
  ASSERT_OK(sbr_sender_get_device_stats(w->st.s, HONEST_DEV, &sd));
  ASSERT_EQ(sd.drops, 0);
  /* Every rogue lane was closed once its rogue went; the honest one is
   * still open. */
  WAIT_STAT(w, lanes_closed, w->rogue_lanes);
  struct sbr_receiver_stats s;
  stats(w, &s);
  ASSERT_EQ(s.lanes_opened, 1 + w->rogue_lanes);
  ASSERT_EQ(s.lanes_closed, w->rogue_lanes);
  ASSERT_EQ(s.lanes_active, 1);
  atomic_store(&w->c.stop, true);
  pthread_join(w->c.thread, NULL);
  stats(w, &s);
  ASSERT_EQ(s.blocks_held, 0); /* nothing the rogue sent is kept */
  sbr_sender_free(w->st.s);
  sbr_receiver_free(w->r);
}

/* The rogue's attempts reached nothing: the receiver rejected nothing and
 * delivered nothing of the rogue's.  Then the world ends. */
static void world_finish_untouched(struct world *w)
{
  struct sbr_receiver_stats s;
  stats(w, &s);
  ASSERT_EQ(s.rejected, 0);
  ASSERT_EQ(atomic_load(&w->c.rogue), 0);
  world_finish(w);
}

/* ------------------------------------------------------- the rogue */

struct rogue {
  struct sbr__conn *c;
  struct sbr__lane_desc lane;
  uint8_t *buf; /* BLOCK_SIZE bytes to WRITE from, READ into */
  struct sbr__mr *mr;
  uint8_t byte; /* the inline status byte's source */
  uint64_t wr_id;
  uint64_t seq;
  uint32_t next_index;
};

static int rogue_connect_priv(struct world *w, struct rogue *g,
                              const uint8_t *priv, size_t len, char *err,
                              size_t errlen)
{
  memset(g, 0, sizeof *g);
  return ops->connect(addr, w->port, NULL, priv, len, &rogue_caps, 5000, &g->c,
                      &g->lane, err, errlen);
}

/* Connects like a sender and takes the lane it is given. */
static void rogue_connect(struct world *w, struct rogue *g)
{
  uint8_t priv[SBR__CONNECT_PRIV_SIZE];
  sbr__connect_priv_encode(priv, SBR_MECH_STATUS_BYTE, 0, 0);
  char err[256] = "";
  int ret = rogue_connect_priv(w, g, priv, sizeof priv, err, sizeof err);
  ASSERT_MSG(ret == 0, "rogue connect: %d %s", ret, err);
  w->rogue_lanes++;
  ASSERT_EQ(g->lane.block_count, BLOCKS);
  ASSERT_EQ(g->lane.block_size, BLOCK_SIZE);
  g->buf = aligned_alloc(4096, BLOCK_SIZE);
  ASSERT(g->buf);
  memset(g->buf, 0, BLOCK_SIZE);
  ASSERT_OK(ops->reg_mr(g->c, g->buf, BLOCK_SIZE, read_sink_access(), &g->mr));
}

static void rogue_close(struct rogue *g)
{
  ops->dereg_mr(g->mr);
  ops->close(g->c);
  free(g->buf);
}

/* Posts n WRs (all signaled) and waits for their completions; returns the
 * first status that is not SUCCESS (or SUCCESS). */
static enum sbr__wc_status rogue_post(struct rogue *g, struct sbr__wr *wrs,
                                      int n)
{
  bool writes = false, reads = false;
  for (int i = 0; i < n; i++) {
    wrs[i].wr_id = ++g->wr_id;
    wrs[i].signaled = true;
    writes |= wrs[i].opcode == SBR__OP_WRITE;
    reads |= wrs[i].opcode == SBR__OP_READ;
  }
  ASSERT_OK(ops->post_send(g->c, wrs, n));
  /* iWARP completes a WRITE once it is sent; the receiver's NIC answers
   * a request it refuses by ending the connection (a TERMINATE,
   * verbs-device.h).  So there, a READ of the rogue's own status byte
   * goes behind WRITEs: it fails if, and only if, one was refused. */
  int total = n;
  bool refused = false;
  if (iwarp && writes) {
    struct sbr__wr probe = {.wr_id = ++g->wr_id,
                            .opcode = SBR__OP_READ,
                            .local_addr = g->buf + BLOCK_SIZE - 1,
                            .length = 1,
                            .lkey = g->mr->lkey,
                            .remote_addr = g->lane.status_addr,
                            .rkey = g->lane.status_rkey,
                            .signaled = true};
    /* Refused to post: the QP is in error, the refusal came first. */
    if (ops->post_send(g->c, &probe, 1) == 0) {
      total++;
      reads = true;
    } else
      refused = true;
  }
  enum sbr__wc_status worst = SBR__WC_SUCCESS;
  uint64_t t0 = now_ns();
  for (int got = 0; got < total;) {
    struct sbr__wc wc[8];
    int k = ops->poll_cq(g->c, wc, 8);
    /* iWARP: the connection ended before the flushed requests reached
     * the CQ (poll_cq says so once it is empty). */
    if (iwarp && k == -ENOTCONN)
      return SBR__WC_ERROR;
    ASSERT_MSG(k >= 0, "rogue poll_cq: %d", k);
    for (int i = 0; i < k; i++)
      if (worst == SBR__WC_SUCCESS && wc[i].status != SBR__WC_SUCCESS)
        worst = wc[i].status;
    got += k;
    /* siw now and then never answers a READ (docs/hardware.md, "A READ
     * left unanswered"): a soft-iWARP quirk, not what this test checks;
     * said as a skip, never as a pass.  Over RoCE and IB it is a hang. */
    if (ms_since(t0) >= HANG_MS && reads && test_verbs_is_siw())
      test_verbs_skip("siw left a READ unanswered for 10 s (docs/hardware.md, "
                      "\"A READ left unanswered\")");
    ASSERT_MSG(ms_since(t0) < HANG_MS, "rogue: %d of %d completions", got,
               total);
  }
  /* iWARP: what the refusal flushed, IB and RoCE fail outright. */
  if (refused || (iwarp && worst == SBR__WC_FLUSH))
    return SBR__WC_ERROR;
  return worst;
}

static struct sbr__wr rogue_write(struct rogue *g, uint64_t raddr,
                                  uint32_t rkey, uint32_t len)
{
  return (struct sbr__wr){.opcode = SBR__OP_WRITE,
                          .local_addr = g->buf,
                          .length = len,
                          .lkey = g->mr->lkey,
                          .remote_addr = raddr,
                          .rkey = rkey};
}

/* WRITE of len bytes of buf into block index, then the inline status
 * byte value, as a sender does. */
static void rogue_put(struct rogue *g, uint32_t index, uint32_t len,
                      uint8_t status)
{
  g->byte = status;
  struct sbr__wr wrs[2] = {
      rogue_write(g, g->lane.blocks_addr + (uint64_t)index * BLOCK_SIZE,
                  g->lane.blocks_rkey, len),
      {.opcode = SBR__OP_WRITE,
       .local_addr = &g->byte,
       .length = 1,
       .remote_addr = g->lane.status_addr + index,
       .rkey = g->lane.status_rkey,
       .inline_data = true},
  };
  ASSERT_EQ(rogue_post(g, wrs, 2), SBR__WC_SUCCESS);
}

/* The lane's status byte index, READ as a sender does. */
static uint8_t rogue_status(struct rogue *g, uint32_t index)
{
  struct sbr__wr rd = {.opcode = SBR__OP_READ,
                       .local_addr = g->buf,
                       .length = 1,
                       .lkey = g->mr->lkey,
                       .remote_addr = g->lane.status_addr + index,
                       .rkey = g->lane.status_rkey};
  ASSERT_EQ(rogue_post(g, &rd, 1), SBR__WC_SUCCESS);
  return g->buf[0];
}

/* A valid one-block frame of device in buf: what a sender would write. */
static uint32_t rogue_valid_block(struct rogue *g, uint8_t device,
                                  uint16_t packet, uint32_t payload_len)
{
  struct sbr__header h = {
      .kind = SBR_KIND_DATA,
      .device = device,
      .flags = SBR_FLAG_FIRST | SBR_FLAG_LAST,
      .packet = packet,
      .epoch = g->lane.epoch,
      .payload_len = payload_len,
      .seq = g->seq,
      .pts = UINT64_MAX,
      .dts = UINT64_MAX,
      .duration = UINT64_MAX,
      .capture_time = 0,
      .frame_offset = 0,
      .frame_size = payload_len,
  };
  for (uint32_t i = 0; i < payload_len; i++)
    g->buf[SBR__HEADER_SIZE + i] = (uint8_t)(0xa5 ^ i);
  size_t n = sbr__block_encode(g->buf, BLOCK_SIZE, &h);
  ASSERT(n > 0);
  return (uint32_t)n;
}

/* ------------------------------------------------ malformed connects */

/* Sends raw connect private data over the shm setup socket (the back
 * end's own connect refuses to send what it can't decode) and waits for
 * the answer: the shm wire is "C" + 3 zero bytes + the private data. */
static void shm_raw_connect(uint16_t port, const uint8_t *priv, size_t len)
{
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ASSERT(fd >= 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int n = snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "sbr-shm:%u",
                   (unsigned)port);
  socklen_t sl =
      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
  ASSERT_MSG(connect(fd, (struct sockaddr *)&sa, sl) == 0, "connect: %s",
             strerror(errno));
  uint8_t msg[4 + 256] = {'C'};
  memcpy(msg + 4, priv, len);
  ASSERT(send(fd, msg, 4 + len, MSG_NOSIGNAL) == (ssize_t)(4 + len));
  uint8_t answer[256];
  struct timeval tv = {.tv_sec = HANG_MS / 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ssize_t got = recv(fd, answer, sizeof answer, 0);
  ASSERT_MSG(got >= 4 + SBR__REJECT_PRIV_SIZE, "no refusal came back (%zd)",
             got);
  struct sbr__refusal why;
  ASSERT_OK(sbr__reject_priv_decode(answer + 4, (size_t)got - 4, &why));
  ASSERT(why.reason == SBR_REFUSAL_MALFORMED ||
         why.reason == SBR_REFUSAL_VERSION ||
         why.reason == SBR_REFUSAL_MECHANISM);
  close(fd);
}

/* Short, foreign, other-version, unknown-mechanism and oversized private
 * data, and a probe target too long: each refused with a reason and counted; no
 * lane is made for it; the honest lane goes on. */
static void malformed_connect_is_refused(void)
{
  struct world w;
  world_start(&w);
  uint8_t good[SBR__CONNECT_PRIV_SIZE];
  sbr__connect_priv_encode(good, SBR_MECH_STATUS_BYTE, 0, 0);
  struct {
    uint8_t priv[64];
    size_t len;
  } bad[6];
  memset(bad, 0, sizeof bad);
  memcpy(bad[0].priv, good, 3); /* short */
  bad[0].len = 3;
  memcpy(bad[1].priv, good, sizeof good); /* not sbr */
  sbr__put_le32(bad[1].priv, 0xdeadbeefu);
  bad[1].len = sizeof good;
  memcpy(bad[2].priv, good, sizeof good); /* another version */
  bad[2].priv[4] = 9;
  bad[2].len = sizeof good;
  memcpy(bad[3].priv, good, sizeof good); /* unknown mechanism */
  bad[3].priv[5] = 7;
  bad[3].len = sizeof good;
  memset(bad[4].priv, 0xff, sizeof bad[4].priv); /* oversized */
  memcpy(bad[4].priv, good, sizeof good);
  bad[4].len = sizeof bad[4].priv;
  /* A probe target longer than the receiver's sink. */
  struct sbr__probe_target t = {
      .addr = 4096, .rkey = 1, .len = SBR__PROBE_MAX + 1};
  memcpy(bad[5].priv, good, sizeof good);
  sbr__connect_priv_add_probe(bad[5].priv, &t);
  bad[5].len = SBR__CONNECT_PRIV_PROBE_SIZE;
  unsigned n = 0;
  for (unsigned i = 0; i < 6; i++) {
    if (backend == SBR_BACKEND_SHM) {
      shm_raw_connect(w.port, bad[i].priv, bad[i].len);
    } else {
      struct rogue g;
      char err[256] = "";
      int ret =
          rogue_connect_priv(&w, &g, bad[i].priv, bad[i].len, err, sizeof err);
      ASSERT_MSG(ret < 0, "malformed private data %u was accepted", i);
      fprintf(stderr, "  variant %u: %d %s\n", i, ret, err);
      if (bad[i].len > SBR__CONNECT_PRIV_SIZE * 3)
        continue; /* over 56 bytes: rdma_cm won't send it; not counted */
    }
    n++;
    WAIT_STAT(&w, refused, n);
  }
  struct sbr_receiver_stats s;
  stats(&w, &s);
  ASSERT_EQ(s.refused, n);
  ASSERT_EQ(s.lanes_opened, 1);
  ASSERT_EQ(s.rejected, 0);
  world_finish(&w);
}

/* ------------------------------------------------------ forged blocks */

enum forgery {
  GARBAGE,
  BAD_MAGIC,
  BAD_VERSION,
  BAD_KIND,
  BAD_EPOCH,
  BAD_TRAILER,
  LENGTH_PAST_BLOCK,
  LENGTH_HUGE,
  FRAGMENT_PAST_FRAME,
  FIRST_NOT_AT_ZERO,
  LAST_SHORT_OF_FRAME,
  UNKNOWN_DEVICE,
};

/* Turns the valid block in buf into the forgery; returns the bytes to
 * WRITE. */
static uint32_t forge(struct rogue *g, enum forgery f)
{
  uint32_t len = rogue_valid_block(g, ROGUE_DEV, 0, 1000);
  uint8_t *b = g->buf;
  switch (f) {
  case GARBAGE: {
    uint32_t x = 12345;
    for (uint32_t i = 0; i < BLOCK_SIZE; i++) {
      x = x * 1103515245u + 12345u;
      b[i] = (uint8_t)(x >> 16);
    }
    return BLOCK_SIZE;
  }
  case BAD_MAGIC:
    sbr__put_le32(b, 0x42524254u);
    break;
  case BAD_VERSION:
    b[4] = SBR__BLOCK_VERSION + 1;
    break;
  case BAD_KIND:
    b[5] = 77;
    break;
  case BAD_EPOCH:
    sbr__put_le16(b + 10, (uint16_t)(g->lane.epoch + 1));
    break;
  case BAD_TRAILER:
    sbr__put_le64(b + len - SBR__TRAILER_SIZE, g->seq + 1);
    break;
  case LENGTH_PAST_BLOCK:
    /* One byte more than fits; the trailer would be past the block. */
    sbr__put_le32(b + 12, BLOCK_SIZE - SBR__BLOCK_OVERHEAD + 1);
    break;
  case LENGTH_HUGE:
    sbr__put_le32(b + 12, UINT32_MAX - 4);
    break;
  case FRAGMENT_PAST_FRAME: /* a middle fragment ending past its frame */
    b[7] = 0;
    sbr__put_le32(b + 56, 1000);
    sbr__put_le32(b + 60, 1500);
    break;
  case FIRST_NOT_AT_ZERO:
    b[7] = SBR_FLAG_FIRST;
    sbr__put_le32(b + 56, 8);
    sbr__put_le32(b + 60, 5000);
    break;
  case LAST_SHORT_OF_FRAME:
    b[7] = SBR_FLAG_LAST;
    sbr__put_le32(b + 56, 0);
    sbr__put_le32(b + 60, 5000);
    break;
  case UNKNOWN_DEVICE:
    b[6] = MASKED_DEV;
    break;
  }
  return len;
}

/* The forged block (with status 1) is rejected and counted -- per device
 * when the device byte is past magic and version -- its status byte goes
 * back to 0 (handed back), nothing is delivered, and the honest lane goes
 * on.  Then the same rogue's valid block is delivered: the lane was only
 * refused the forgery. */
static void forged_block_is_rejected(enum forgery f)
{
  struct world w;
  world_start(&w);
  struct rogue g;
  rogue_connect(&w, &g);
  for (unsigned round = 0; round < 3; round++) {
    uint32_t index = (round * 5) % BLOCKS;
    uint32_t len = forge(&g, f);
    rogue_put(&g, index, len, SBR__STATUS_DATA);
    WAIT_STAT(&w, rejected, round + 1);
    uint64_t t0 = now_ns();
    while (rogue_status(&g, index) != SBR__STATUS_EMPTY)
      ASSERT_MSG(ms_since(t0) < HANG_MS, "status of a rejected block not 0");
  }
  struct sbr_receiver_stats s;
  stats(&w, &s);
  ASSERT_EQ(s.rejected, 3);
  uint8_t dev = f == UNKNOWN_DEVICE ? MASKED_DEV : ROGUE_DEV;
  struct sbr_device_stats ds;
  ASSERT_OK(sbr_receiver_get_device_stats(w.r, dev, &ds));
  bool per_device = !(f == GARBAGE || f == BAD_MAGIC || f == BAD_VERSION);
  ASSERT_EQ(ds.rejected, per_device ? 3 : 0);
  ASSERT_EQ(ds.blocks, 0);
  ASSERT_EQ(atomic_load(&w.c.rogue), 0);

  /* Control: a valid block on the same lane is taken. */
  rogue_put(&g, 7, rogue_valid_block(&g, ROGUE_DEV, 0, 1000), SBR__STATUS_DATA);
  uint64_t t0 = now_ns();
  while (atomic_load(&w.c.rogue) < 1)
    ASSERT_MSG(ms_since(t0) < HANG_MS, "the valid control block never came");
  rogue_close(&g);
  world_finish(&w);
}

#define FORGED(name, f)                                                        \
  static void name(void)                                                       \
  {                                                                            \
    forged_block_is_rejected(f);                                               \
  }
FORGED(garbage_block_is_rejected, GARBAGE)
FORGED(bad_magic_is_rejected, BAD_MAGIC)
FORGED(bad_version_is_rejected, BAD_VERSION)
FORGED(bad_kind_is_rejected, BAD_KIND)
FORGED(wrong_epoch_is_rejected, BAD_EPOCH)
FORGED(trailer_mismatch_is_rejected, BAD_TRAILER)
FORGED(payload_len_past_block_is_rejected, LENGTH_PAST_BLOCK)
FORGED(payload_len_huge_is_rejected, LENGTH_HUGE)
FORGED(fragment_past_frame_is_rejected, FRAGMENT_PAST_FRAME)
FORGED(first_fragment_not_at_zero_is_rejected, FIRST_NOT_AT_ZERO)
FORGED(last_fragment_short_of_frame_is_rejected, LAST_SHORT_OF_FRAME)
FORGED(unknown_device_is_rejected, UNKNOWN_DEVICE)

/* ------------------------------------------------- spanning blocks */

/* Inline WRITE of n status bytes from index on (values kept in the WR:
 * inline data is copied at post). */
static void rogue_status_bytes(struct rogue *g, uint32_t index,
                               const uint8_t *v, uint32_t n)
{
  struct sbr__wr wr = {.opcode = SBR__OP_WRITE,
                       .local_addr = (void *)v,
                       .length = n,
                       .remote_addr = g->lane.status_addr + index,
                       .rkey = g->lane.status_rkey,
                       .inline_data = true};
  ASSERT_EQ(rogue_post(g, &wr, 1), SBR__WC_SUCCESS);
}

/* A spanning block of payload_len at index, as the rogue wants it: the
 * continuation status bytes cont[0..n_cont) first, then the header, the
 * trailer (seq, at the span's end unless trailer_off), status 1. */
static void rogue_span(struct rogue *g, uint32_t index, uint32_t payload_len,
                       uint8_t flags, const uint8_t *cont, uint32_t n_cont,
                       uint32_t trailer_off)
{
  if (n_cont)
    rogue_status_bytes(g, index + 1, cont, n_cont);
  struct sbr__header h = {
      .kind = SBR_KIND_DATA,
      .device = ROGUE_DEV,
      .flags = flags,
      .epoch = g->lane.epoch,
      .payload_len = payload_len,
      .seq = g->seq,
      .pts = UINT64_MAX,
      .dts = UINT64_MAX,
      .duration = UINT64_MAX,
      .frame_size = payload_len,
  };
  sbr__header_encode(g->buf, &h);
  sbr__put_le64(g->buf + 1024, g->seq);
  uint64_t base = g->lane.blocks_addr + (uint64_t)index * BLOCK_SIZE;
  uint32_t at = trailer_off ? trailer_off : SBR__HEADER_SIZE + payload_len;
  struct sbr__wr wrs[2] = {
      rogue_write(g, base, g->lane.blocks_rkey, SBR__HEADER_SIZE),
      rogue_write(g, base + at, g->lane.blocks_rkey, 8),
  };
  wrs[1].local_addr = g->buf + 1024;
  /* A trailer past the lane would fail at the NIC: that one isn't sent
   * (the receiver must refuse the header without reading there). */
  bool in_lane =
      (uint64_t)index * BLOCK_SIZE + at + 8 <= (uint64_t)BLOCKS * BLOCK_SIZE;
  ASSERT_EQ(rogue_post(g, wrs, in_lane ? 2 : 1), SBR__WC_SUCCESS);
  g->seq++;
  static const uint8_t one = SBR__STATUS_DATA;
  rogue_status_bytes(g, index, &one, 1);
}

static void wait_status(struct rogue *g, uint32_t index, uint8_t want)
{
  uint64_t t0 = now_ns();
  uint8_t got;
  while ((got = rogue_status(g, index)) != want)
    ASSERT_MSG(ms_since(t0) < HANG_MS, "status %u of block %u, want %u", got,
               index, want);
}

/* Forged and torn spans (docs/protocol.md, "Spanning blocks"): past the
 * lane's end, over a continuation byte that is not SPAN, over a block
 * that is another block's head, with a trailer where the length doesn't
 * put it, a SPAN flag on a length that fits one block: each is dropped
 * and counted, nothing of them delivered; only the head is given back
 * unless the continuation bytes were the span's own (the torn one: all
 * three back to 0).  A valid span of the rogue's own lane is delivered
 * (its own frame, and then all its blocks are back).  The honest lane,
 * whose 6000-byte frames span two blocks, goes on throughout. */
static void forged_spans_are_dropped_and_counted(void)
{
  struct world w;
  world_start(&w);
  struct rogue g;
  rogue_connect(&w, &g);
  ASSERT(g.lane.features & SBR__FEATURE_SPAN);
  const uint8_t span = SBR__STATUS_SPAN, held = SBR__STATUS_HELD;
  const uint8_t spans[2] = {SBR__STATUS_SPAN, SBR__STATUS_SPAN};
  const uint8_t flags = SBR_FLAG_FIRST | SBR_FLAG_LAST | SBR__FLAG_SPAN;
  const uint32_t two = 2 * BLOCK_SIZE - SBR__BLOCK_OVERHEAD;
  const uint32_t three = 3 * BLOCK_SIZE - SBR__BLOCK_OVERHEAD;
  uint64_t rejected = 0;

  /* Three blocks from the last-but-one: past the lane's end. */
  rogue_span(&g, BLOCKS - 2, three, flags, &span, 1, 0);
  rejected++;
  WAIT_STAT(&w, rejected, rejected);
  wait_status(&g, BLOCKS - 2, SBR__STATUS_EMPTY);
  ASSERT_EQ(rogue_status(&g, BLOCKS - 1), SBR__STATUS_SPAN); /* not its */

  /* Its continuation byte says held, not SPAN. */
  rogue_span(&g, 0, two, flags, &held, 1, 0);
  rejected++;
  WAIT_STAT(&w, rejected, rejected);
  wait_status(&g, 0, SBR__STATUS_EMPTY);
  ASSERT_EQ(rogue_status(&g, 1), SBR__STATUS_HELD);

  /* Over a block that is a head itself (garbage, status 1): both
   * dropped, the second on its own account (if it goes first, the span
   * finds a 0 there: landing, then dropped after the bound). */
  memset(g.buf, 0x5a, BLOCK_SIZE);
  rogue_put(&g, 3, 256, SBR__STATUS_DATA);
  rogue_span(&g, 2, two, flags, NULL, 0, 0);
  rejected += 2;
  WAIT_STAT(&w, rejected, rejected);
  wait_status(&g, 2, SBR__STATUS_EMPTY);
  wait_status(&g, 3, SBR__STATUS_EMPTY);

  /* Torn: the trailer short of where the length puts it.  Its
   * continuation bytes are its own: all three come back. */
  rogue_span(&g, 5, three, flags, spans, 2, SBR__HEADER_SIZE + three - 100);
  rejected++;
  WAIT_STAT(&w, rejected, rejected);
  for (uint32_t i = 5; i < 8; i++)
    wait_status(&g, i, SBR__STATUS_EMPTY);

  /* SPAN on a length that fits one block: no span. */
  rogue_span(&g, 8, 1000, flags, NULL, 0, 0);
  rejected++;
  WAIT_STAT(&w, rejected, rejected);
  wait_status(&g, 8, SBR__STATUS_EMPTY);

  struct sbr_device_stats ds;
  ASSERT_OK(sbr_receiver_get_device_stats(w.r, ROGUE_DEV, &ds));
  ASSERT_EQ(ds.rejected, rejected - 1); /* the garbage block had none */
  ASSERT_EQ(ds.blocks, 0);
  ASSERT_EQ(atomic_load(&w.c.rogue), 0);

  /* Control: a valid span of three is the rogue's own frame. */
  rogue_span(&g, 10, three, flags, spans, 2, 0);
  uint64_t t0 = now_ns();
  while (atomic_load(&w.c.rogue) < 1)
    ASSERT_MSG(ms_since(t0) < HANG_MS, "the valid span never came");
  for (uint32_t i = 10; i < 13; i++)
    wait_status(&g, i, SBR__STATUS_EMPTY);
  struct sbr_receiver_stats st;
  stats(&w, &st);
  ASSERT_EQ(st.rejected, rejected);
  rogue_close(&g);
  world_finish(&w);
}

/* --------------------------------------------------- packet numbers */

/* Valid one-block frames of ROGUE_DEV with the given packet numbers, one
 * after another (each delivered before the next is written). */
static void rogue_packets(struct world *w, struct rogue *g,
                          const uint16_t *packets, unsigned n)
{
  for (unsigned i = 0; i < n; i++) {
    unsigned before = atomic_load(&w->c.rogue);
    uint32_t index = g->next_index;
    g->next_index = (index + 1) % BLOCKS;
    rogue_put(g, index, rogue_valid_block(g, ROGUE_DEV, packets[i], 500),
              SBR__STATUS_DATA);
    g->seq++;
    uint64_t t0 = now_ns();
    while (atomic_load(&w->c.rogue) < before + 1)
      ASSERT_MSG(ms_since(t0) < HANG_MS, "rogue packet %u not delivered",
                 packets[i]);
    ASSERT_EQ(atomic_load(&w->c.rogue_last), packets[i]);
  }
}

/* Packet numbers that jump are valid blocks (the receiver can't tell a
 * rogue with the rkey from a sender): delivered, the skipped numbers
 * counted as gaps of that device only. */
static void packet_jump_is_counted_as_gap(void)
{
  struct world w;
  world_start(&w);
  struct rogue g;
  rogue_connect(&w, &g);
  static const uint16_t packets[] = {0, 1, 2, 12, 13, 1000};
  rogue_packets(&w, &g, packets, 6);
  struct sbr_device_stats ds;
  ASSERT_OK(sbr_receiver_get_device_stats(w.r, ROGUE_DEV, &ds));
  ASSERT_EQ(ds.blocks, 6);
  ASSERT_EQ(ds.gaps, 9 + 986);
  ASSERT_EQ(ds.rejected, 0);
  rogue_close(&g);
  world_finish(&w);
}

/* Packet numbers going backwards: delivered (valid blocks, in the lane's
 * sequence order), and not counted as lost packets (before the fix in
 * deliver(), 12 -> 5 counted 65528 gaps). */
static void packet_backwards_is_not_a_huge_gap(void)
{
  struct world w;
  world_start(&w);
  struct rogue g;
  rogue_connect(&w, &g);
  static const uint16_t packets[] = {10, 11, 12, 5, 6};
  rogue_packets(&w, &g, packets, 5);
  struct sbr_device_stats ds;
  ASSERT_OK(sbr_receiver_get_device_stats(w.r, ROGUE_DEV, &ds));
  ASSERT_EQ(ds.blocks, 5);
  ASSERT_MSG(ds.gaps == 0, "a step back counted as %llu lost packets",
             (unsigned long long)ds.gaps);
  rogue_close(&g);
  world_finish(&w);
}

/* A valid block of ROGUE_DEV with the given fragment fields. */
static uint32_t rogue_fragment(struct rogue *g, uint8_t flags, uint32_t offset,
                               uint32_t len, uint32_t frame_size)
{
  uint32_t n = rogue_valid_block(g, ROGUE_DEV, (uint16_t)g->seq, len);
  g->buf[7] = flags;
  sbr__put_le32(g->buf + 56, offset);
  sbr__put_le32(g->buf + 60, frame_size);
  return n;
}

/* Fragments each valid alone that don't make a frame: a continuation
 * without its first fragment, one at the wrong offset, one of another
 * frame size.  Blocks are taken (they pass validation), frames are not:
 * each broken frame is counted as a drop of the device, nothing is
 * delivered, every block is handed back. */
static void fragments_that_dont_fit_are_dropped(void)
{
  struct world w;
  world_start(&w);
  struct rogue g;
  rogue_connect(&w, &g);
  struct {
    uint8_t flags;
    uint32_t offset, len, size;
  } frags[] = {
      {SBR_FLAG_LAST, 500, 500, 1000}, /* no beginning: drop 1 */
      {SBR_FLAG_FIRST, 0, 500, 1500},  /* wrong offset next: drop 2 */
      {SBR_FLAG_LAST, 700, 800, 1500},
      {SBR_FLAG_FIRST, 0, 500, 1500}, /* other frame size next: drop 3 */
      {SBR_FLAG_LAST, 500, 500, 1000},
  };
  enum { N = sizeof frags / sizeof frags[0] };
  for (unsigned i = 0; i < N; i++) {
    uint32_t index = g.next_index;
    g.next_index = (index + 1) % BLOCKS;
    rogue_put(&g, index,
              rogue_fragment(&g, frags[i].flags, frags[i].offset, frags[i].len,
                             frags[i].size),
              SBR__STATUS_DATA);
    g.seq++;
  }
  uint64_t t0 = now_ns();
  struct sbr_device_stats ds;
  for (;;) {
    ASSERT_OK(sbr_receiver_get_device_stats(w.r, ROGUE_DEV, &ds));
    if (ds.drops >= 3)
      break;
    ASSERT_MSG(ms_since(t0) < HANG_MS, "%llu broken frames counted, want 3",
               (unsigned long long)ds.drops);
    usleep(1000);
  }
  /* Every block handed back: the status bytes are 0 again. */
  for (unsigned i = 0; i < N; i++) {
    t0 = now_ns();
    while (rogue_status(&g, i) != SBR__STATUS_EMPTY)
      ASSERT_MSG(ms_since(t0) < HANG_MS, "block %u never handed back", i);
  }
  ASSERT_OK(sbr_receiver_get_device_stats(w.r, ROGUE_DEV, &ds));
  ASSERT_EQ(ds.drops, 3);
  ASSERT_EQ(ds.blocks, N);
  /* frames counts LAST fragments as blocks are taken (sbr.h), before
   * reassembly: the three broken frames' ends are in it, and in drops. */
  ASSERT_EQ(ds.frames, 3);
  ASSERT_EQ(ds.rejected, 0);
  ASSERT_EQ(atomic_load(&w.c.rogue), 0);
  rogue_close(&g);
  world_finish(&w);
}

/* A FIRST fragment announcing a frame larger than the receiver's
 * max_frame_size (just over it, 256 MiB, 4 GiB - 1) is rejected when it
 * arrives and counted for its device, so reassembly never allocates for
 * it; its continuation finds no frame and is dropped; nothing is
 * delivered.  The honest device's frames of exactly max_frame_size (6000
 * bytes, two fragments) pass.  With the default bound (64 MiB), 256 MiB
 * is refused too. */
static void oversized_frame_is_rejected_before_allocation(void)
{
  for (unsigned round = 0; round < 2; round++) {
    world_max_frame_size = round == 0 ? 6000 : 0;
    struct world w;
    world_start(&w);
    struct rogue g;
    rogue_connect(&w, &g);
    static const uint32_t sizes[] = {6001, 256u << 20, UINT32_MAX};
    unsigned n = 0;
    for (unsigned i = round == 0 ? 0 : 1; i < 3; i++, n++) {
      uint32_t index = g.next_index;
      g.next_index = (index + 1) % BLOCKS;
      rogue_put(&g, index,
                rogue_fragment(&g, SBR_FLAG_FIRST, 0, 2000, sizes[i]),
                SBR__STATUS_DATA);
      g.seq++;
      WAIT_STAT(&w, rejected, n + 1);
    }
    /* A continuation of the refused frame: no beginning, a drop. */
    uint32_t index = g.next_index;
    g.next_index = (index + 1) % BLOCKS;
    rogue_put(&g, index, rogue_fragment(&g, SBR_FLAG_LAST, 2000, 4000, 6000),
              SBR__STATUS_DATA);
    g.seq++;
    struct sbr_device_stats ds;
    uint64_t t0 = now_ns();
    for (;;) {
      ASSERT_OK(sbr_receiver_get_device_stats(w.r, ROGUE_DEV, &ds));
      if (ds.drops >= 1)
        break;
      ASSERT_MSG(ms_since(t0) < HANG_MS, "the orphan fragment was not "
                                         "dropped");
      usleep(1000);
    }
    ASSERT_EQ(ds.rejected, n);
    struct sbr_receiver_stats s;
    stats(&w, &s);
    ASSERT_EQ(s.rejected, n);
    ASSERT_EQ(s.frames_copied, 0);
    ASSERT_EQ(atomic_load(&w.c.rogue), 0);
    rogue_close(&g);
    world_finish(&w);
    world_max_frame_size = 0;
  }
}

/* A flood: garbage with status 1 into every block, over and over, as
 * fast as the rogue's queue goes.  Rejected and counted (at most once per
 * WRITE), the honest lane unaffected. */
static void garbage_flood_does_not_disturb_honest_lane(void)
{
  struct world w;
  world_start(&w);
  struct rogue g;
  rogue_connect(&w, &g);
  unsigned honest0 = atomic_load(&w.c.honest);
  enum { ROUNDS = 2000 };
  for (unsigned i = 0; i < ROUNDS; i++) {
    forge(&g, GARBAGE);
    g.buf[0] = (uint8_t)i; /* never the magic */
    rogue_put(&g, i % BLOCKS, BLOCK_SIZE, SBR__STATUS_DATA);
  }
  WAIT_STAT(&w, rejected, 1);
  struct sbr_receiver_stats s;
  stats(&w, &s);
  ASSERT(s.rejected <= ROUNDS);
  ASSERT_MSG(atomic_load(&w.c.honest) > honest0,
             "no honest frame arrived during the flood");
  fprintf(stderr, "  %llu of %u garbage blocks seen and rejected\n",
          (unsigned long long)s.rejected, ROUNDS);
  ASSERT_EQ(atomic_load(&w.c.rogue), 0);
  rogue_close(&g);
  world_finish(&w);
}

/* Counts the receiver's warnings about one lane's invalid blocks: the
 * first of a reason ("lane L block B dropped: ...") and the summaries
 * ("lane L: N more blocks dropped: ..."), with the N they add up to. */
struct warn_count {
  atomic_uint lane;
  atomic_uint firsts;
  atomic_uint summaries;
  _Atomic uint64_t summed;
};
static struct warn_count warns;

static void count_warnings(void *data, enum sbr_log_level level,
                           const char *msg)
{
  (void)data;
  if (getenv("SBR_TEST_LOG"))
    fprintf(stderr, "  [%d] %s\n", (int)level, msg);
  unsigned lane, block;
  unsigned long long n;
  if (sscanf(msg, "receiver: lane %u block %u dropped:", &lane, &block) == 2 &&
      lane == atomic_load(&warns.lane))
    atomic_fetch_add(&warns.firsts, 1);
  else if (sscanf(msg, "receiver: lane %u: %llu more blocks dropped:", &lane,
                  &n) == 2 &&
           lane == atomic_load(&warns.lane)) {
    atomic_fetch_add(&warns.summaries, 1);
    atomic_fetch_add(&warns.summed, n);
  }
}

/* A flood of invalid blocks logs the first of its reason and then at most
 * one summary per interval (100 ms here, 10 s by default) and one at the
 * lane's close, while the counters stay exact: the first plus the
 * summaries' counts are every block the stats rejected. */
static void invalid_block_warnings_are_rate_limited(void)
{
  sbr__warn_summary_ns = 100000000ull;
  atomic_store(&warns.lane, UINT32_MAX);
  sbr_set_log_handler(count_warnings, NULL);
  uint64_t t0 = now_ns();
  struct world w;
  world_start(&w);
  struct rogue g;
  rogue_connect(&w, &g);
  atomic_store(&warns.lane, g.lane.lane_id);
  enum { ROUNDS = 1000 };
  for (unsigned i = 0; i < ROUNDS; i++) {
    forge(&g, GARBAGE);
    g.buf[0] = (uint8_t)i; /* never the magic: one reason throughout */
    rogue_put(&g, i % BLOCKS, BLOCK_SIZE, SBR__STATUS_DATA);
  }
  WAIT_STAT(&w, rejected, 1);
  rogue_close(&g);
  WAIT_STAT(&w, lanes_closed, 1);
  uint64_t elapsed_ms = ms_since(t0);
  struct sbr_receiver_stats s;
  stats(&w, &s);
  unsigned firsts = atomic_load(&warns.firsts);
  unsigned summaries = atomic_load(&warns.summaries);
  uint64_t summed = atomic_load(&warns.summed);
  fprintf(stderr,
          "  %llu rejected in %llu ms: %u first warning(s), %u summaries "
          "adding up to %llu\n",
          (unsigned long long)s.rejected, (unsigned long long)elapsed_ms,
          firsts, summaries, (unsigned long long)summed);
  ASSERT_EQ(firsts, 1);
  ASSERT_EQ(firsts + summed, s.rejected);
  ASSERT_MSG(summaries <= elapsed_ms / 100 + 2,
             "%u summaries in %llu ms of 100 ms intervals", summaries,
             (unsigned long long)elapsed_ms);
  if (s.rejected > 1)
    ASSERT(summaries >= 1); /* the close says what was held back */
  ASSERT_EQ(atomic_load(&w.c.rogue), 0);
  world_finish(&w);
  sbr_set_log_handler(NULL, NULL);
  sbr__warn_summary_ns = 10000000000ull;
}

/* ---------------------------------------------------- status values */

/* Over a valid block waiting in the lane, the status values 0 and 2..255
 * deliver nothing (only 1 means data); the 1 written last delivers it. */
static void status_other_than_one_delivers_nothing(void)
{
  struct world w;
  world_start(&w);
  struct rogue g;
  rogue_connect(&w, &g);
  uint32_t index = 3;
  rogue_put(&g, index, rogue_valid_block(&g, ROGUE_DEV, 0, 800), 2);
  for (unsigned v = 0; v < 256; v++) {
    if (v == SBR__STATUS_DATA)
      continue;
    g.byte = (uint8_t)v;
    struct sbr__wr wr = {.opcode = SBR__OP_WRITE,
                         .local_addr = &g.byte,
                         .length = 1,
                         .remote_addr = g.lane.status_addr + index,
                         .rkey = g.lane.status_rkey,
                         .inline_data = true};
    ASSERT_EQ(rogue_post(&g, &wr, 1), SBR__WC_SUCCESS);
    if (v % 32 == 0)
      usleep(20000); /* many scans see it */
  }
  usleep(50000);
  ASSERT_EQ(atomic_load(&w.c.rogue), 0);
  struct sbr_receiver_stats s;
  stats(&w, &s);
  ASSERT_EQ(s.rejected, 0);
  ASSERT_EQ(rogue_status(&g, index), 255); /* the receiver left it alone */
  /* The same block with 1: delivered. */
  rogue_put(&g, index, rogue_valid_block(&g, ROGUE_DEV, 0, 800),
            SBR__STATUS_DATA);
  uint64_t t0 = now_ns();
  while (atomic_load(&w.c.rogue) < 1)
    ASSERT_MSG(ms_since(t0) < HANG_MS, "status 1 did not deliver the block");
  rogue_close(&g);
  world_finish(&w);
}

/* ------------------------------------------- access outside the rules */

/* Whether the rogue's connection is unusable now: a WRITE that was fine
 * before completes flushed or in error, or the post itself fails. */
static bool rogue_qp_dead(struct rogue *g)
{
  g->byte = 0;
  struct sbr__wr wr = {.wr_id = ++g->wr_id,
                       .opcode = SBR__OP_WRITE,
                       .local_addr = &g->byte,
                       .length = 1,
                       .remote_addr = g->lane.status_addr,
                       .rkey = g->lane.status_rkey,
                       .signaled = true,
                       .inline_data = true};
  if (ops->post_send(g->c, &wr, 1) < 0)
    return true;
  uint64_t t0 = now_ns();
  for (;;) {
    struct sbr__wc wc;
    int k = ops->poll_cq(g->c, &wc, 1);
    if (k < 0)
      return true;
    if (k == 1)
      return wc.status != SBR__WC_SUCCESS;
    ASSERT_MSG(ms_since(t0) < HANG_MS, "no completion for the probe WRITE");
  }
}

/* A rogue's 256-byte READ of the blocks region, with the blocks' rkey or
 * the status region's, fails: its WR completes in error, nothing comes
 * back and its connection is dead afterwards; the receiver delivers
 * nothing of it, rejects nothing, and goes on. */
static void read_of_blocks_fails_with(bool status_key)
{
  struct world w;
  world_start(&w);
  struct rogue g;
  rogue_connect(&w, &g);
  memset(g.buf, 0x5a, BLOCK_SIZE);
  struct sbr__wr rd = {.opcode = SBR__OP_READ,
                       .local_addr = g.buf,
                       .length = 256,
                       .lkey = g.mr->lkey,
                       .remote_addr = g.lane.blocks_addr,
                       .rkey = status_key ? g.lane.status_rkey
                                          : g.lane.blocks_rkey};
  ASSERT_EQ(rogue_post(&g, &rd, 1), SBR__WC_ERROR);
  for (unsigned i = 0; i < 256; i++)
    ASSERT_EQ(g.buf[i], 0x5a); /* nothing came back */
  ASSERT(rogue_qp_dead(&g));
  rogue_close(&g);
  world_finish_untouched(&w);
}

/* With the blocks' own rkey: the region is registered REMOTE_WRITE only. */
static void read_of_blocks_fails(void)
{
#ifdef SBR_HAVE_VERBS
  if (backend == SBR_BACKEND_VERBS && test_verbs_is_siw())
    test_verbs_skip("siw serves READs of memory registered without "
                    "REMOTE_READ (verbs-device.h)");
#endif
  read_of_blocks_fails_with(false);
}

/* Nor with the status rkey: it names another region.  (A test of its own
 * so that it runs over siw too, which checks keys and bounds on a READ,
 * not rights.) */
static void read_of_blocks_with_status_key_fails(void)
{
  read_of_blocks_fails_with(true);
}

/* WRITEs outside the lane (past the blocks, across the end of the last
 * block, past the status region, before the blocks) fail at the rogue
 * with its connection dead; the receiver sees nothing of them. */
static void write_outside_lane_fails(void)
{
  struct world w;
  world_start(&w);
  for (unsigned v = 0; v < 4; v++) {
    struct rogue g;
    rogue_connect(&w, &g);
    uint64_t end = g.lane.blocks_addr + (uint64_t)BLOCKS * BLOCK_SIZE;
    struct sbr__wr wr;
    switch (v) {
    case 0: /* just past the blocks */
      wr = rogue_write(&g, end, g.lane.blocks_rkey, 64);
      break;
    case 1: /* the last block and one byte more */
      wr =
          rogue_write(&g, end - BLOCK_SIZE + 1, g.lane.blocks_rkey, BLOCK_SIZE);
      break;
    case 2: /* past the status region */
      wr = rogue_write(&g, g.lane.status_addr + sbr__lane_status_len(&g.lane),
                       g.lane.status_rkey, 16);
      break;
    default: /* before the blocks */
      wr = rogue_write(&g, g.lane.blocks_addr - 64, g.lane.blocks_rkey, 64);
      break;
    }
    memset(g.buf, 0xee, BLOCK_SIZE);
    ASSERT_MSG(rogue_post(&g, &wr, 1) == SBR__WC_ERROR,
               "out-of-lane WRITE %u completed", v);
    ASSERT(rogue_qp_dead(&g));
    rogue_close(&g);
  }
  world_finish_untouched(&w);
}

/* The rogue knows the honest lane's addresses and rkeys (ReDMArk: keys
 * can be guessed; here they are taken from the honest sender) and WRITEs
 * a block the honest lane would accept, then its status 1, from its own
 * connection: both fail at the rogue (shm: the rkeys name no region of
 * the rogue's lane; verbs: the MRs are in another lane's protection
 * domain), and the honest lane never sees them. */
static void write_with_other_lanes_keys_fails(void)
{
  struct world w;
  world_start(&w);
  const struct sbr__lane_desc honest = w.st.s->lane;
  for (unsigned v = 0; v < 2; v++) {
    struct rogue g;
    rogue_connect(&w, &g);
    ASSERT(honest.lane_id != g.lane.lane_id);
    /* Each lane registers (or binds) its own: no key is shared. */
    ASSERT(honest.blocks_rkey != g.lane.blocks_rkey);
    ASSERT(honest.status_rkey != g.lane.status_rkey);
    struct sbr__wr wr;
    if (v == 0) {
      struct sbr__lane_desc saved = g.lane;
      g.lane.epoch = honest.epoch;
      uint32_t len = rogue_valid_block(&g, HONEST_DEV, 0, 300);
      g.lane = saved;
      wr = rogue_write(&g, honest.blocks_addr + 2u * honest.block_size,
                       honest.blocks_rkey, len);
    } else {
      g.buf[0] = SBR__STATUS_DATA;
      wr = rogue_write(&g, honest.status_addr + 2u, honest.status_rkey, 1);
    }
    ASSERT_MSG(rogue_post(&g, &wr, 1) == SBR__WC_ERROR,
               "a WRITE with the honest lane's keys (%u) completed", v);
    ASSERT(rogue_qp_dead(&g));
    rogue_close(&g);
  }
  world_finish_untouched(&w);
}

/* ------------------------------------------------------ fresh keys */

/* A sender that reconnects gets a new lane with new keys, and the keys of
 * its previous lane are worth nothing on the new connection: a status
 * WRITE of 1 with the old status key over a valid block (written with the
 * new key) fails at the rogue and delivers nothing; a block WRITE with the
 * old blocks key fails too.  The new lane's memory is untouched: had
 * either landed, the block would have been delivered or rejected. */
static void reconnect_gets_fresh_keys_old_keys_fail(void)
{
  struct world w;
  world_start(&w);
  struct rogue g;
  rogue_connect(&w, &g);
  const struct sbr__lane_desc old = g.lane;
  ASSERT_EQ(rogue_status(&g, 0), SBR__STATUS_EMPTY); /* the keys worked */
  rogue_close(&g);
  WAIT_STAT(&w, lanes_closed, 1);
  for (unsigned v = 0; v < 2; v++) {
    rogue_connect(&w, &g);
    ASSERT(g.lane.lane_id != old.lane_id);
    ASSERT(g.lane.epoch != old.epoch);
    ASSERT_MSG(g.lane.blocks_rkey != old.blocks_rkey,
               "blocks rkey 0x%x again after a reconnect", old.blocks_rkey);
    ASSERT_MSG(g.lane.status_rkey != old.status_rkey,
               "status rkey 0x%x again after a reconnect", old.status_rkey);
    fprintf(stderr, "  keys 0x%x/0x%x, then 0x%x/0x%x\n", old.blocks_rkey,
            old.status_rkey, g.lane.blocks_rkey, g.lane.status_rkey);
    struct sbr__wr wr;
    uint32_t len = rogue_valid_block(&g, ROGUE_DEV, 0, 500);
    if (v == 0) {
      /* The block with the new key, its status with the old one. */
      wr = rogue_write(&g, g.lane.blocks_addr, g.lane.blocks_rkey, len);
      ASSERT_EQ(rogue_post(&g, &wr, 1), SBR__WC_SUCCESS);
      g.byte = SBR__STATUS_DATA;
      wr = (struct sbr__wr){.opcode = SBR__OP_WRITE,
                            .local_addr = &g.byte,
                            .length = 1,
                            .remote_addr = g.lane.status_addr,
                            .rkey = old.status_rkey,
                            .inline_data = true};
    } else {
      wr = rogue_write(&g, g.lane.blocks_addr, old.blocks_rkey, len);
    }
    ASSERT_MSG(rogue_post(&g, &wr, 1) == SBR__WC_ERROR,
               "a WRITE with the previous lane's key (%u) completed", v);
    ASSERT(rogue_qp_dead(&g));
    rogue_close(&g);
    /* What landed in a lane is delivered before it closes. */
    WAIT_STAT(&w, lanes_closed, 2 + v);
  }
  world_finish_untouched(&w);
}

#ifdef SBR_HAVE_VERBS
/* Does the first RDMA device bind type-2 windows? */
static bool device_has_windows(void)
{
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  ASSERT_MSG(list && n > 0, "no RDMA device");
  struct ibv_context *ctx = ibv_open_device(list[0]);
  ASSERT(ctx);
  bool yes = sbr__verbs_windows_supported(ctx);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return yes;
}

/* Where the device binds type-2 windows (rxe does; siw has none: skipped
 * there), every lane's keys are windows (lanes_windowed), and the whole
 * rogue's repertoire above runs on them; the keys of one lane fail on
 * another's QP. */
static void lanes_use_memory_windows(void)
{
  if (!device_has_windows())
    test_verbs_skip("the device has no type-2 memory windows to test (MR "
                    "keys: mr_fallback_without_windows)");
  struct world w;
  world_start(&w);
  struct rogue g;
  rogue_connect(&w, &g);
  /* The rogue may see ESTABLISHED before the receiver counts its lane. */
  WAIT_STAT(&w, lanes_opened, 2);
  struct sbr_receiver_stats s;
  stats(&w, &s);
  ASSERT_EQ(s.lanes_windowed, 2);
  /* The window grants what the MR used to: WRITE and READ of the status,
   * WRITE of the blocks, and the block is delivered. */
  rogue_put(&g, 0, rogue_valid_block(&g, ROGUE_DEV, 0, 700), SBR__STATUS_DATA);
  uint64_t t0 = now_ns();
  while (atomic_load(&w.c.rogue) < 1)
    ASSERT_MSG(ms_since(t0) < HANG_MS, "a block written through a window "
                                       "was not delivered");
  rogue_close(&g);
  /* And nothing more: no READ of the blocks. */
  rogue_connect(&w, &g);
  struct sbr__wr rd = {.opcode = SBR__OP_READ,
                       .local_addr = g.buf,
                       .length = 64,
                       .lkey = g.mr->lkey,
                       .remote_addr = g.lane.blocks_addr,
                       .rkey = g.lane.blocks_rkey};
  ASSERT_EQ(rogue_post(&g, &rd, 1), SBR__WC_ERROR);
  rogue_close(&g);
  atomic_store(&w.c.rogue, 0); /* the one delivered on purpose */
  world_finish(&w);
}

/* Without windows (a device that has none, here pretended) the lanes use
 * their MRs, say so in the stats, and keep every property the tests above
 * check: the honest stream flows, another lane's keys fail. */
static void mr_fallback_without_windows(void)
{
  sbr__verbs_windows_disabled = true;
  struct world w;
  world_start(&w);
  const struct sbr__lane_desc honest = w.st.s->lane;
  struct rogue g;
  rogue_connect(&w, &g);
  ASSERT(honest.blocks_rkey != g.lane.blocks_rkey);
  g.buf[0] = SBR__STATUS_DATA;
  struct sbr__wr wr =
      rogue_write(&g, honest.status_addr + 2u, honest.status_rkey, 1);
  ASSERT_EQ(rogue_post(&g, &wr, 1), SBR__WC_ERROR);
  rogue_close(&g);
  WAIT_STAT(&w, lanes_opened, 2);
  struct sbr_receiver_stats s;
  stats(&w, &s);
  ASSERT_EQ(s.lanes_windowed, 0);
  world_finish(&w);
  sbr__verbs_windows_disabled = false;
}

/* A windowed accept whose bind fails (refused, or never completing as
 * on an iWARP-like device): the lane is set up again with MR keys in the
 * same accept, so the sender connects at its first try, and every later
 * lane of the listener gets MR keys without trying windows again. */
static void windows_fail_then_mrs(bool time_out)
{
  if (!device_has_windows())
    test_verbs_skip("the device has no type-2 memory windows, so no bind to "
                    "fail");
  struct world w;
  world_start(&w);
  /* The sender may see ESTABLISHED before the receiver counts its lane. */
  WAIT_STAT(&w, lanes_opened, 1);
  struct sbr_receiver_stats s;
  stats(&w, &s);
  uint64_t windowed = s.lanes_windowed, refused = s.refused;
  ASSERT_EQ(windowed, 1); /* the honest sender's lane: windows */

  if (time_out)
    sbr__verbs_window_binds_to_time_out = 1;
  else
    sbr__verbs_window_binds_to_fail = 1;
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, w.port);
  sc.backend = backend;
  sc.host = addr;
  sc.send_blocks = 4;
  sbr_sender *second = NULL, *third = NULL;
  char err[256];
  int ret = sbr_sender_new(&sc, &second, err, sizeof err);
  ASSERT_MSG(ret == 0, "first try: %d %s", ret, err);
  ASSERT_EQ(sbr__verbs_window_binds_to_fail, 0);
  ASSERT_EQ(sbr__verbs_window_binds_to_time_out, 0);
  /* Windows are not tried again on this listener: a third lane binds
   * nothing and gets MR keys too. */
  ret = sbr_sender_new(&sc, &third, err, sizeof err);
  ASSERT_MSG(ret == 0, "third: %d %s", ret, err);
  w.rogue_lanes += 2; /* lanes beside the honest one, as a rogue's */
  sbr_sender_free(second);
  sbr_sender_free(third);
  stats(&w, &s);
  ASSERT_EQ(s.lanes_windowed, windowed); /* both new lanes: MR keys */
  ASSERT_EQ(s.refused, refused);         /* nobody was refused */
  world_finish(&w);
}

static void failed_windows_fall_back_to_mrs(void)
{
  windows_fail_then_mrs(false);
}

static void timed_out_bind_falls_back_to_mrs(void)
{
  windows_fail_then_mrs(true);
}

/* SBR_VERBS_WINDOWS=0 (verbs-caps.h) turns windows off on a device that
 * has them: every lane gets MR keys. */
static void windows_off_by_configuration(void)
{
  if (!device_has_windows()) {
    fprintf(stderr, "  the device has no type-2 windows: nothing to turn "
                    "off\n");
    exit(77); /* skipped */
  }
  setenv("SBR_VERBS_WINDOWS", "0", 1);
  struct world w;
  world_start(&w);
  WAIT_STAT(&w, lanes_opened, 1);
  struct sbr_receiver_stats s;
  stats(&w, &s);
  ASSERT_EQ(s.lanes_windowed, 0);
  world_finish(&w);
}

/* Drops CAP_IPC_LOCK from this process, as a non-root user has none: the
 * VM runs the tests as root, whom RLIMIT_MEMLOCK doesn't bind. */
static void drop_ipc_lock(void)
{
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  ASSERT(syscall(SYS_capget, &h, d) == 0);
  d[0].effective &= ~(1u << CAP_IPC_LOCK);
  d[0].permitted &= ~(1u << CAP_IPC_LOCK);
  d[0].inheritable &= ~(1u << CAP_IPC_LOCK);
  ASSERT(syscall(SYS_capset, &h, d) == 0);
}

/* A receiver whose RLIMIT_MEMLOCK (here 8 MiB, the usual default) is below
 * one lane (16 x 1 MiB) refuses each sender at once and for good, and
 * both ends say which limit and how to raise it: no retry loop until the
 * sender's connect timeout. */
static void memlock_below_a_lane_is_refused_for_good(void)
{
  drop_ipc_lock();
  struct rlimit lim = {8u << 20, 8u << 20};
  ASSERT(setrlimit(RLIMIT_MEMLOCK, &lim) == 0);
  uint16_t port = fixture_port();
  struct sbr_receiver_config rc;
  fixture_receiver_config(&rc, port, 16, 1u << 20);
  rc.backend = backend;
  rc.address = addr;
  sbr_receiver *r = fixture_receiver_new(&rc);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.backend = backend;
  sc.host = addr;
  sc.send_blocks = 2;
  sc.connect_timeout_ms = 10000;
  sbr_sender *s = NULL;
  char err[512] = "";
  int ret = fixture_connect(r, &sc, &s, err, sizeof err);
  ASSERT_MSG(ret == -ENOMEM, "refused with %d (%s)", ret, err);
  ASSERT(s == NULL);
  ASSERT_MSG(strstr(err, "RLIMIT_MEMLOCK") && strstr(err, "8192 KiB") &&
                 strstr(err, "ulimit -l") && strstr(err, "LimitMEMLOCK=") &&
                 strstr(err, "IPC_LOCK"),
             "%s", err);
  struct sbr_receiver_stats st;
  sbr_receiver_get_stats(r, &st);
  ASSERT_EQ(st.refused, 1);
  ASSERT_EQ(st.refused_by_reason[SBR_REFUSAL_MEMLOCK], 1);
  ASSERT_EQ(st.lanes_opened, 0);
  sbr_receiver_free(r);
}

/* A lane accepted while others stream is probed only once it has been
 * quiet for probe_after_ms, not at once: the receive pass that accepts it
 * began before it was heard from.  Over iWARP a probe that early reached
 * the sender with the MPA reply and siw failed the connect
 * (CONNECT_ERROR, EINVAL): rogue connects failed at random over siw. */
static void new_lane_is_not_probed_at_once(void)
{
  world_probe_after_ms = 3000;
  struct world w;
  world_start(&w);
  world_probe_after_ms = 0;
  struct rogue g;
  uint64_t before_connect = now_ns();
  rogue_connect(&w, &g);
  /* The receiver accepted after before_connect: while less than 3 s have
   * passed since, no probe is due (a host too loaded to look in time
   * proves nothing either way, and says so). */
  usleep(300000);
  uint64_t probes = atomic_load(&w.r->probes_posted);
  if (ms_since(before_connect) < 3000)
    ASSERT_EQ(probes, 0);
  else
    fprintf(stderr, "looked after %llu ms, past the 3 s: not checked\n",
            (unsigned long long)ms_since(before_connect));
  /* The quiet rogue lane is probed later, and answers. */
  uint64_t t0 = now_ns();
  while (atomic_load(&w.r->probes_posted) == 0) {
    ASSERT_MSG(ms_since(t0) < HANG_MS, "the quiet lane was never probed");
    usleep(10000);
  }
  rogue_close(&g);
  world_finish(&w);
}

/* A quiet sender that is alive keeps its lane, probe after probe: its
 * host answers each (over iWARP a READ of its probe target, which needs
 * the READ credits of both connects and a sink iWARP can place into;
 * one that failed, or went unanswered for 2 s, would close the lane). */
static void quiet_live_sender_keeps_its_lane(void)
{
  world_probe_after_ms = 200;
  struct world w;
  world_start(&w);
  world_probe_after_ms = 0;
  struct rogue g;
  rogue_connect(&w, &g);
  uint64_t probes = atomic_load(&w.r->probes_posted);
  /* Past 200 ms of quiet plus the READ's 2 s deadline, several times
   * probed. */
  uint64_t t0 = now_ns();
  while (ms_since(t0) < 3000 || atomic_load(&w.r->probes_posted) < probes + 5) {
    ASSERT_MSG(ms_since(t0) < HANG_MS, "the quiet lane was probed %llu times",
               (unsigned long long)(atomic_load(&w.r->probes_posted) - probes));
    usleep(10000);
  }
  struct sbr_receiver_stats s;
  stats(&w, &s);
  ASSERT_EQ(s.lanes_silent_closed, 0);
  ASSERT_EQ(s.lanes_active, 2);
  rogue_close(&g);
  world_finish(&w);
}

/* The first RDMA device's name. */
static void first_device_name(char *name, size_t len)
{
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  ASSERT_MSG(list && n > 0, "no RDMA device");
  snprintf(name, len, "%s", ibv_get_device_name(list[0]));
  ibv_free_device_list(list);
}

/* Writes value into root/dev/ports/1/hw_counters/resp_remote_access_errors
 * (made as needed). */
static void fake_counter(const char *root, const char *dev, uint64_t value)
{
  static const char *const dirs[] = {"", "/ports", "/ports/1",
                                     "/ports/1/hw_counters"};
  char path[512];
  for (unsigned i = 0; i < 4; i++) {
    snprintf(path, sizeof path, "%s/%s%s", root, dev, dirs[i]);
    mkdir(path, 0700);
  }
  snprintf(path, sizeof path,
           "%s/%s/ports/1/hw_counters/resp_remote_access_errors", root, dev);
  FILE *f = fopen(path, "w");
  ASSERT(f);
  fprintf(f, "%llu\n", (unsigned long long)value);
  fclose(f);
}

/* The NIC's remote-access-error counter in the receiver's stats: where the
 * device has one, a rogue's WRITE with another lane's key moves it; where
 * it has none (rxe: measured, no hw_counter moves on a remote access
 * error), the field says SBR_COUNTER_ABSENT.  The plumbing (which device
 * and port the lanes use, the file's format) is checked against a
 * stand-in sysfs tree with the mlx5 name in it. */
static void nic_remote_access_errors_counted(void)
{
  char dev[64];
  first_device_name(dev, sizeof dev);
  char real[512];
  snprintf(real, sizeof real,
           SBR__SYSFS_INFINIBAND
           "/%s/ports/1/hw_counters/resp_remote_access_errors",
           dev);
  bool has = access(real, R_OK) == 0;
  fprintf(stderr, "  %s has %s remote access error counter\n", dev,
          has ? "a" : "no");
  struct world w;
  world_start(&w);
  struct sbr_receiver_stats s;
  stats(&w, &s);
  uint64_t before = s.nic_remote_access_errors;
  ASSERT(has ? before != SBR_COUNTER_ABSENT : before == SBR_COUNTER_ABSENT);
  /* One remote access error: the honest lane's status key on the rogue's
   * QP. */
  const struct sbr__lane_desc honest = w.st.s->lane;
  struct rogue g;
  rogue_connect(&w, &g);
  g.buf[0] = SBR__STATUS_DATA;
  struct sbr__wr wr =
      rogue_write(&g, honest.status_addr + 2u, honest.status_rkey, 1);
  ASSERT_EQ(rogue_post(&g, &wr, 1), SBR__WC_ERROR);
  rogue_close(&g);
  stats(&w, &s);
  if (has)
    ASSERT_MSG(s.nic_remote_access_errors > before,
               "the NIC's counter stayed at %llu", (unsigned long long)before);
  else
    ASSERT_EQ(s.nic_remote_access_errors, SBR_COUNTER_ABSENT);

  /* A stand-in tree: the receiver reads its lanes' device, port 1. */
  char root[] = "/tmp/sbr-sysfs-XXXXXX";
  ASSERT(mkdtemp(root));
  fake_counter(root, dev, 41);
  sbr__nic_sysfs_root = root;
  stats(&w, &s);
  ASSERT_EQ(s.nic_remote_access_errors, 41);
  fake_counter(root, dev, 18446744073709551614ull);
  stats(&w, &s);
  ASSERT_EQ(s.nic_remote_access_errors, 18446744073709551614ull);
  sbr__nic_sysfs_root = SBR__SYSFS_INFINIBAND;
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  ASSERT_EQ(system(cmd), 0);
  world_finish(&w);
}
#endif

/* Over shm there is no NIC: the counter is absent. */
static void nic_counter_absent_over_shm(void)
{
  struct world w;
  world_start(&w);
  struct sbr_receiver_stats s;
  stats(&w, &s);
  ASSERT_EQ(s.nic_remote_access_errors, SBR_COUNTER_ABSENT);
  world_finish(&w);
}

/* ---------------------------------------------------------------- main */

static const struct test_entry all_tests[] = {
    {"malformed_connect_is_refused", malformed_connect_is_refused, ANY_BACKEND},
    {"garbage_block_is_rejected", garbage_block_is_rejected, ANY_BACKEND},
    {"bad_magic_is_rejected", bad_magic_is_rejected, ANY_BACKEND},
    {"bad_version_is_rejected", bad_version_is_rejected, ANY_BACKEND},
    {"bad_kind_is_rejected", bad_kind_is_rejected, ANY_BACKEND},
    {"wrong_epoch_is_rejected", wrong_epoch_is_rejected, ANY_BACKEND},
    {"trailer_mismatch_is_rejected", trailer_mismatch_is_rejected, ANY_BACKEND},
    {"payload_len_past_block_is_rejected", payload_len_past_block_is_rejected,
     ANY_BACKEND},
    {"payload_len_huge_is_rejected", payload_len_huge_is_rejected, ANY_BACKEND},
    {"forged_spans_are_dropped_and_counted",
     forged_spans_are_dropped_and_counted, ANY_BACKEND},
    {"fragment_past_frame_is_rejected", fragment_past_frame_is_rejected,
     ANY_BACKEND},
    {"first_fragment_not_at_zero_is_rejected",
     first_fragment_not_at_zero_is_rejected, ANY_BACKEND},
    {"last_fragment_short_of_frame_is_rejected",
     last_fragment_short_of_frame_is_rejected, ANY_BACKEND},
    {"unknown_device_is_rejected", unknown_device_is_rejected, ANY_BACKEND},
    {"packet_jump_is_counted_as_gap", packet_jump_is_counted_as_gap,
     ANY_BACKEND},
    {"packet_backwards_is_not_a_huge_gap", packet_backwards_is_not_a_huge_gap,
     ANY_BACKEND},
    {"fragments_that_dont_fit_are_dropped", fragments_that_dont_fit_are_dropped,
     ANY_BACKEND},
    {"oversized_frame_is_rejected_before_allocation",
     oversized_frame_is_rejected_before_allocation, ANY_BACKEND},
    {"garbage_flood_does_not_disturb_honest_lane",
     garbage_flood_does_not_disturb_honest_lane, ANY_BACKEND},
    {"invalid_block_warnings_are_rate_limited",
     invalid_block_warnings_are_rate_limited, ANY_BACKEND},
    {"status_other_than_one_delivers_nothing",
     status_other_than_one_delivers_nothing, ANY_BACKEND},
    {"read_of_blocks_fails", read_of_blocks_fails, ANY_BACKEND},
    {"read_of_blocks_with_status_key_fails",
     read_of_blocks_with_status_key_fails, ANY_BACKEND},
    {"write_outside_lane_fails", write_outside_lane_fails, ANY_BACKEND},
    {"write_with_other_lanes_keys_fails", write_with_other_lanes_keys_fails,
     ANY_BACKEND},
    {"reconnect_gets_fresh_keys_old_keys_fail",
     reconnect_gets_fresh_keys_old_keys_fail, ANY_BACKEND},
#ifdef SBR_HAVE_VERBS
    {"lanes_use_memory_windows", lanes_use_memory_windows, VERBS_ONLY},
    {"mr_fallback_without_windows", mr_fallback_without_windows, VERBS_ONLY},
    {"failed_windows_fall_back_to_mrs", failed_windows_fall_back_to_mrs,
     VERBS_ONLY},
    {"timed_out_bind_falls_back_to_mrs", timed_out_bind_falls_back_to_mrs,
     VERBS_ONLY},
    {"windows_off_by_configuration", windows_off_by_configuration, VERBS_ONLY},
    {"new_lane_is_not_probed_at_once", new_lane_is_not_probed_at_once,
     VERBS_ONLY},
    {"quiet_live_sender_keeps_its_lane", quiet_live_sender_keeps_its_lane,
     VERBS_ONLY},
    {"memlock_below_a_lane_is_refused_for_good",
     memlock_below_a_lane_is_refused_for_good, VERBS_ONLY},
    {"nic_remote_access_errors_counted", nic_remote_access_errors_counted,
     VERBS_ONLY},
#endif
    {"nic_counter_absent_over_shm", nic_counter_absent_over_shm, SHM_ONLY},
    {NULL, NULL, ANY_BACKEND},
};

/* SBR_TEST_LOG=1: the library's messages on stderr, for a failure's
 * story. */
static void log_to_stderr(void *data, enum sbr_log_level level, const char *msg)
{
  (void)data;
  fprintf(stderr, "  [%d] %s\n", (int)level, msg);
}

int main(int argc, char **argv)
{
  if (getenv("SBR_TEST_LOG"))
    sbr_set_log_handler(log_to_stderr, NULL);
  if (test_parse_backend(argc, argv, &backend, &addr) < 0)
    return 2;
#ifdef SBR_HAVE_VERBS
  if (backend == SBR_BACKEND_VERBS)
    iwarp = test_verbs_is_iwarp();
#endif
  ops = sbr__transport_get(backend);
  if (!ops) {
    fprintf(stderr, "back end %s is not built in\n", argv[1]);
    return 77;
  }
  return test_main_over_backend(all_tests, backend, argc, argv);
}
