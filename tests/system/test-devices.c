/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-devices.c - twelve cameras in one sender process, one receiver
 * process, over a real back end (shm on the host, verbs in the Soft-RoCE VM).
 *
 *   test-devices [options] stream   12 producer threads x N frames of mixed
 *                                   sizes (64 B .. max, so some fragment);
 *                                   every byte and every device's order
 *                                   verified; status-byte: the receiver
 *                                   posted no receive WR; verbs: exactly one
 *                                   RC QP in the sender process.
 *   test-devices [options] hold     the same while the receiver holds one
 *                                   frame to the end: 48 and more flow
 *                                   and the sender counts held blocks
 *                                   skipped.
 *   test-devices [options] kill     a sender is SIGKILLed mid-stream: the
 *                                   receiver frees its lane, keeps running,
 *                                   and a new sender gets a fresh lane and
 *                                   delivers verified data.
 *
 * Options: --backend shm|verbs, --mechanism status-byte|sliding-window,
 * --frames N (per device), --max-size BYTES, --block-size BYTES.
 * The address comes from SBR_RDMA_ADDR (default 127.0.0.1).
 *
 * The coordinating process forks the receiver and the senders before it
 * touches any verbs (a child can't use verbs its parent opened).
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sbr.h"
#include "test.h"
#ifdef SBR_HAVE_VERBS
#include "verbs-device.h"
#endif

#define DEVICES 12
/* The hold lasts until every device's EOS: the sender wraps the 16-block
 * lane many times meanwhile and must skip the held blocks each time, so
 * it counts them skipped however fast either side runs and however its
 * status READs fall (a 300 ms hold needed a READ inside it, which a
 * sender slowed by ThreadSanitizer missed; a 48-frame hold saw none over
 * Soft-RoCE).  At least this many frames must flow meanwhile. */
#define HOLD_FRAMES 48

static struct {
  enum sbr_backend backend;
  enum sbr_mechanism mechanism;
  unsigned frames;
  uint32_t max_size;
  uint32_t block_size;
  const char *addr;
  uint16_t port;
} opt = {SBR_BACKEND_SHM, SBR_MECH_STATUS_BYTE, 500, 2u << 20,
         1u << 20,        "127.0.0.1",          0};

/* ------------------------------------------------------------ payload */

static uint64_t mix(uint64_t x)
{
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

/* Log-uniform between 64 B and max_size: as many frames of 64-127 B as of
 * 1-2 MiB, so small frames dominate the count and big ones fragment. */
static uint32_t frame_size(unsigned device, unsigned frame)
{
  uint64_t h = mix(((uint64_t)device << 32) | frame);
  unsigned octaves = 0;
  while ((64u << (octaves + 1)) <= opt.max_size)
    octaves++;
  uint32_t size = 64u << (h % (octaves + 1));
  size += (uint32_t)((h >> 16) % size);
  return size > opt.max_size ? opt.max_size : size;
}

static uint64_t word(unsigned device, unsigned frame, size_t i)
{
  return ((uint64_t)device << 56) ^ ((uint64_t)frame << 28) ^ (i * 0x9e37u);
}

static void fill(uint8_t *p, size_t len, unsigned device, unsigned frame)
{
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w = word(device, frame, i / 8);
    memcpy(p + i, &w, 8);
  }
  uint64_t w = word(device, frame, i / 8);
  memcpy(p + i, &w, len - i);
}

/* Compares [off, off+len) of frame (device, frame) with what fill wrote. */
static bool check_range(const uint8_t *p, size_t off, size_t len,
                        unsigned device, unsigned frame)
{
  uint8_t tmp[8];
  for (size_t i = 0; i < len;) {
    size_t abs = off + i;
    uint64_t w = word(device, frame, abs / 8);
    memcpy(tmp, &w, 8);
    size_t in = abs % 8, n = 8 - in < len - i ? 8 - in : len - i;
    if (memcmp(p + i, tmp + in, n) != 0)
      return false;
    i += n;
  }
  return true;
}

/* -------------------------------------------------------------- sender */

struct producer {
  sbr_sender *s;
  unsigned device;
  unsigned frames; /* 0 = until killed */
};

static void *producer_main(void *arg)
{
  struct producer *p = arg;
  uint8_t *buf = malloc(opt.max_size);
  for (unsigned f = 0; p->frames == 0 || f < p->frames; f++) {
    uint32_t len = frame_size(p->device, f);
    fill(buf, len, p->device, f);
    struct sbr_block_meta m;
    sbr_block_meta_init(&m, (uint8_t)p->device);
    m.pts = (uint64_t)f * 40000000u;
    int ret = sbr_sender_send(p->s, &m, buf, len);
    ASSERT_MSG(ret == 0, "device %u frame %u: send failed: %d (%s)", p->device,
               f, ret, strerror(-ret));
  }
  struct sbr_block_meta m;
  sbr_block_meta_init(&m, (uint8_t)p->device);
  m.kind = SBR_KIND_EOS;
  ASSERT_OK(sbr_sender_send(p->s, &m, NULL, 0));
  free(buf);
  return NULL;
}

/* Runs DEVICES producers; then waits for a byte on hold_fd (if >= 0)
 * before disconnecting, so the coordinator can count QPs meanwhile. */
static int sender_main(unsigned frames, int hold_fd, bool expect_held)
{
  struct sbr_sender_config cfg;
  sbr_sender_config_init(&cfg);
  cfg.backend = opt.backend;
  cfg.mechanism = opt.mechanism;
  cfg.host = opt.addr;
  cfg.port = opt.port;
  cfg.wait_timeout_ms = 30000;
  cfg.connect_timeout_ms = 10000;
  sbr_sender *s;
  char err[256];
  int ret = sbr_sender_new(&cfg, &s, err, sizeof err);
  ASSERT_MSG(ret == 0, "sender: cannot connect: %d %s", ret, err);
  pthread_t t[DEVICES];
  struct producer p[DEVICES];
  for (unsigned d = 0; d < DEVICES; d++) {
    p[d] = (struct producer){s, d, frames};
    ASSERT(pthread_create(&t[d], NULL, producer_main, &p[d]) == 0);
  }
  for (unsigned d = 0; d < DEVICES; d++)
    pthread_join(t[d], NULL);
  ASSERT_OK(sbr_sender_flush(s, 30000));
  struct sbr_sender_stats st;
  sbr_sender_get_stats(s, &st);
  fprintf(stderr,
          "sender: %llu blocks, %llu bytes, %llu sync reads, %llu held "
          "skipped, %llu drops\n",
          (unsigned long long)st.blocks, (unsigned long long)st.bytes,
          (unsigned long long)st.sync_reads,
          (unsigned long long)st.held_skipped, (unsigned long long)st.drops);
  ASSERT_EQ(st.drops, 0);
  if (expect_held)
    ASSERT_MSG(st.held_skipped > 0, "the sender never skipped the held block");
  if (hold_fd >= 0) {
    char c;
    ASSERT(read(hold_fd, &c, 1) == 1);
  }
  sbr_sender_free(s);
  return 0;
}

/* ------------------------------------------------------------ receiver */

struct rx_result {
  unsigned frames[DEVICES];
  bool eos[DEVICES];
};

static sbr_receiver *receiver_open(void)
{
  struct sbr_receiver_config cfg;
  sbr_receiver_config_init(&cfg);
  cfg.backend = opt.backend;
  cfg.mechanism = opt.mechanism;
  cfg.address = opt.addr;
  cfg.port = opt.port;
  cfg.block_size = opt.block_size;
  cfg.block_count = 16;
  sbr_receiver *r;
  char err[256];
  int ret = sbr_receiver_new(&cfg, &r, err, sizeof err);
  ASSERT_MSG(ret == 0, "receiver: cannot listen: %d %s", ret, err);
  return r;
}

/* Verifies one frame (bytes, order on its lane); returns its frame number. */
static unsigned verify_frame(const struct sbr_frame *f, unsigned expect)
{
  unsigned dev = f->info.device;
  unsigned frame = (unsigned)(f->info.pts / 40000000u);
  ASSERT_MSG(dev < DEVICES, "unknown device %u", dev);
  ASSERT_MSG(frame == expect, "device %u: frame %u arrived, expected %u", dev,
             frame, expect);
  ASSERT_MSG(f->size == frame_size(dev, frame),
             "device %u frame %u: %u bytes, expected %u", dev, frame, f->size,
             frame_size(dev, frame));
  if (f->copy) {
    ASSERT_MSG(check_range(f->copy, 0, f->size, dev, frame),
               "device %u frame %u: bytes differ (copied)", dev, frame);
  } else {
    size_t off = 0;
    for (uint32_t k = 0; k < f->n_blocks; k++) {
      const struct sbr_block_info *bi = sbr_block_get_info(f->blocks[k]);
      ASSERT_MSG(check_range(bi->payload, off, bi->payload_len, dev, frame),
                 "device %u frame %u: bytes differ in fragment %u", dev, frame,
                 k);
      off += bi->payload_len;
    }
  }
  return frame;
}

static void hold_frame(struct sbr_frame *f)
{
  for (uint32_t k = 0; k < f->n_blocks; k++)
    sbr_block_hold(f->blocks[k]);
}

/* Receives one sender's DEVICES streams to their EOS on lane `lane`
 * (UINT32_MAX = the first lane seen).  hold: keep device 0's first
 * zero-copy frame until every EOS and check at least HOLD_FRAMES others
 * flow meanwhile. */
static void receive_streams(sbr_receiver *r, uint32_t lane, bool hold)
{
  struct rx_result res = {0};
  unsigned eos = 0, total = 0, during_hold = 0;
  struct sbr_frame held = {0};
  bool held_one = false;
  while (eos < DEVICES) {
    struct sbr_frame f;
    int ret = sbr_receiver_next_frame(r, 20000, &f);
    ASSERT_MSG(ret == 0, "receiver: nothing for 20 s (%u frames so far): %d",
               total, ret);
    if (lane != UINT32_MAX && f.info.lane_id != lane) {
      sbr_frame_release(&f); /* a previous sender's leftovers */
      continue;
    }
    lane = f.info.lane_id;
    unsigned dev = f.info.device;
    if (f.info.kind == SBR_KIND_EOS) {
      ASSERT_MSG(!res.eos[dev], "device %u: second EOS", dev);
      ASSERT_MSG(res.frames[dev] == opt.frames,
                 "device %u: EOS after %u of %u frames", dev, res.frames[dev],
                 opt.frames);
      res.eos[dev] = true;
      eos++;
      sbr_frame_release(&f);
      continue;
    }
    res.frames[dev] = verify_frame(&f, res.frames[dev]) + 1;
    total++;
    if (hold && !held.n_blocks && !held_one && dev == 0 && f.n_blocks) {
      hold_frame(&f);
      held = f;
      held_one = true;
      continue;
    }
    if (held.n_blocks)
      during_hold++;
    sbr_frame_release(&f);
  }
  if (held.n_blocks)
    sbr_frame_release(&held);
  if (hold)
    ASSERT_MSG(during_hold >= HOLD_FRAMES,
               "%u frames flowed while a frame was held", during_hold);
  fprintf(stderr, "receiver: lane %u: %u frames verified%s\n", lane, total,
          hold ? " (one held meanwhile)" : "");
}

/* lost_ok: a killed sender's unfinished frames were dropped (and counted)
 * when its lane closed. */
static void check_receiver_stats(sbr_receiver *r, bool lost_ok)
{
  struct sbr_receiver_stats st;
  sbr_receiver_get_stats(r, &st);
  ASSERT_EQ(st.rejected, 0);
  if (opt.mechanism == SBR_MECH_STATUS_BYTE)
    ASSERT_MSG(st.recv_wr_posted == 0,
               "the status-byte receiver posted %llu receive WRs",
               (unsigned long long)st.recv_wr_posted);
  for (unsigned d = 0; d < DEVICES; d++) {
    struct sbr_device_stats ds;
    sbr_receiver_get_device_stats(r, (uint8_t)d, &ds);
    ASSERT_MSG(ds.gaps == 0 && (lost_ok || ds.drops == 0),
               "device %u: %llu gaps, %llu drops", d,
               (unsigned long long)ds.gaps, (unsigned long long)ds.drops);
  }
}

/* ---------------------------------------------------------- processes */

static pid_t coordinator;
static pid_t children[4];
static int n_children;

/* A failing coordinator takes its children with it. */
static void kill_children(void)
{
  if (getpid() != coordinator)
    return;
  for (int i = 0; i < n_children; i++)
    kill(children[i], SIGKILL);
}

static pid_t spawn(int (*fn)(void *), void *arg)
{
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0)
    _exit(fn(arg));
  children[n_children++] = pid;
  return pid;
}

static void expect_exit_ok(pid_t pid, const char *who)
{
  int status;
  ASSERT(waitpid(pid, &status, 0) == pid);
  ASSERT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
             "%s failed (status 0x%x)", who, status);
}

/* Counts RC QPs owned by pid, from the kernel's RDMA resource tracking. */
static int count_qps(pid_t pid)
{
  FILE *p = popen("rdma resource show qp 2>&1", "r");
  ASSERT(p);
  char line[512], needle[32];
  snprintf(needle, sizeof needle, " pid %d ", (int)pid);
  int n = 0;
  while (fgets(line, sizeof line, p)) {
    if (strstr(line, "type RC") && strstr(line, needle))
      n++;
  }
  pclose(p);
  return n;
}

/* Pipes between the coordinator and its children.  Each child closes the
 * ends it doesn't use, so a dead peer is an EOF, never a hang. */
struct pipes {
  int to_parent[2]; /* receiver -> coordinator: progress letters */
  int rx_go[2];     /* coordinator -> receiver: you may disconnect */
  int tx_go[2];     /* coordinator -> sender: you may disconnect */
  const char *scenario;
};

static void close_pair(int p[2])
{
  close(p[0]);
  close(p[1]);
}

/* Kill scenario, first sender: verify what comes until the coordinator
 * has killed it (told after 100 frames) and the lane is freed. */
static void receive_until_killed(sbr_receiver *r, int notify_fd)
{
  unsigned next[DEVICES] = {0}, total = 0;
  bool notified = false;
  for (;;) {
    struct sbr_frame f;
    int ret = sbr_receiver_next_frame(r, 200, &f);
    struct sbr_receiver_stats st;
    sbr_receiver_get_stats(r, &st);
    if (ret == -ETIMEDOUT && notified && st.lanes_closed >= 1)
      break;
    if (ret == -ETIMEDOUT)
      continue;
    ASSERT_OK(ret);
    unsigned dev = f.info.device;
    ASSERT_MSG(f.info.kind == SBR_KIND_DATA, "killed sender sent kind %u",
               f.info.kind);
    next[dev] = verify_frame(&f, next[dev]) + 1;
    sbr_frame_release(&f);
    if (++total == 100) {
      ASSERT(write(notify_fd, "N", 1) == 1);
      notified = true;
    }
  }
  struct sbr_receiver_stats st;
  sbr_receiver_get_stats(r, &st);
  ASSERT_EQ(st.lanes_active, 0);
  fprintf(stderr,
          "receiver: killed sender's lane freed after %u verified frames\n",
          total);
}

static int receiver_child(void *arg)
{
  struct pipes *pp = arg;
  close(pp->to_parent[0]);
  close(pp->rx_go[1]);
  close_pair(pp->tx_go);
  sbr_receiver *r = receiver_open();
  ASSERT(write(pp->to_parent[1], "L", 1) == 1);
  if (strcmp(pp->scenario, "kill") == 0) {
    /* First sender: verified until it dies; the lane must then close. */
    receive_until_killed(r, pp->to_parent[1]);
    ASSERT(write(pp->to_parent[1], "C", 1) == 1);
    receive_streams(r, UINT32_MAX, false);
  } else {
    receive_streams(r, UINT32_MAX, strcmp(pp->scenario, "hold") == 0);
  }
  check_receiver_stats(r, strcmp(pp->scenario, "kill") == 0);
  ASSERT(write(pp->to_parent[1], "D", 1) == 1);
  /* Stay connected while the coordinator counts QPs. */
  char c;
  ASSERT(read(pp->rx_go[0], &c, 1) >= 0);
  sbr_receiver_free(r);
  return 0;
}

struct sender_args {
  struct pipes *pp;
  unsigned frames;
  int hold_fd;
  bool expect_held;
};

static int sender_child(void *arg)
{
  struct sender_args *a = arg;
  close_pair(a->pp->to_parent);
  close_pair(a->pp->rx_go);
  close(a->pp->tx_go[1]);
  return sender_main(a->frames, a->hold_fd, a->expect_held);
}

static char wait_byte(int fd, const char *what)
{
  char c = 0;
  ASSERT_MSG(read(fd, &c, 1) == 1, "%s: the receiver process died", what);
  return c;
}

static int run(const char *scenario)
{
  struct pipes pp = {.scenario = scenario};
  ASSERT(pipe(pp.to_parent) == 0 && pipe(pp.rx_go) == 0 && pipe(pp.tx_go) == 0);
  coordinator = getpid();
  atexit(kill_children);
  pid_t rx = spawn(receiver_child, &pp);
  close(pp.to_parent[1]);
  close(pp.rx_go[0]);
  ASSERT_MSG(wait_byte(pp.to_parent[0], "listen") == 'L', "no listener");

  if (strcmp(scenario, "kill") == 0) {
    struct sender_args a = {&pp, 0, -1, false}; /* streams until killed */
    pid_t victim = spawn(sender_child, &a);
    ASSERT_MSG(wait_byte(pp.to_parent[0], "first frames") == 'N',
               "the first sender's frames never came");
    kill(victim, SIGKILL);
    int status;
    ASSERT(waitpid(victim, &status, 0) == victim);
    ASSERT_MSG(wait_byte(pp.to_parent[0], "lane freed") == 'C',
               "the receiver did not free the killed sender's lane");
    struct sender_args b = {&pp, opt.frames, -1, false};
    pid_t tx = spawn(sender_child, &b);
    close(pp.tx_go[0]);
    expect_exit_ok(tx, "second sender");
    ASSERT_MSG(wait_byte(pp.to_parent[0], "all data") == 'D',
               "the receiver did not get all data");
  } else {
    struct sender_args a = {&pp, opt.frames, pp.tx_go[0],
                            strcmp(scenario, "hold") == 0};
    pid_t tx = spawn(sender_child, &a);
    close(pp.tx_go[0]);
    ASSERT_MSG(wait_byte(pp.to_parent[0], "all data") == 'D',
               "the receiver did not get all data");
    if (opt.backend == SBR_BACKEND_VERBS) {
      /* Both ends still connected: all twelve devices on one QP. */
      int n = count_qps(tx);
      fprintf(stderr, "sender process %d owns %d RC QP(s)\n", (int)tx, n);
      ASSERT_MSG(n == 1, "sender process owns %d RC QPs, want exactly 1", n);
    }
    ASSERT(write(pp.tx_go[1], "x", 1) == 1);
    expect_exit_ok(tx, "sender");
  }
  ASSERT(write(pp.rx_go[1], "x", 1) == 1);
  expect_exit_ok(rx, "receiver");
  fprintf(stderr, "%s over %s (%s): ok\n", scenario,
          sbr_backend_name(opt.backend), sbr_mechanism_name(opt.mechanism));
  return 0;
}

#ifdef SBR_HAVE_VERBS
/* ----------------------------------------------- iWARP: sliding window */

struct refused_connect {
  int ret;
  char err[256];
  atomic_bool done;
};

static void *refused_connect_thread(void *arg)
{
  struct refused_connect *j = arg;
  struct sbr_sender_config cfg;
  sbr_sender_config_init(&cfg);
  cfg.backend = opt.backend;
  cfg.mechanism = opt.mechanism;
  cfg.host = opt.addr;
  cfg.port = opt.port;
  cfg.connect_timeout_ms = 20000;
  sbr_sender *s = NULL;
  j->ret = sbr_sender_new(&cfg, &s, j->err, sizeof j->err);
  if (s)
    sbr_sender_free(s);
  atomic_store(&j->done, true);
  return NULL;
}

static void count_refusal(void *data, const char *peer, enum sbr_refusal reason,
                          const char *text)
{
  (void)peer;
  fprintf(stderr, "receiver refused: %s\n", text);
  if (reason == SBR_REFUSAL_DEVICE)
    atomic_fetch_add((atomic_int *)data, 1);
}

/* iWARP has no RDMA WRITE with immediate data, which the sliding-window
 * mechanism posts: the receiver refuses such a lane for good, and the
 * sender stops at once with the reason, instead of a lane that fails on
 * its first WRITE and a sender that reconnects until its timeout. */
static int refused_on_iwarp(void)
{
  struct sbr_receiver_config cfg;
  sbr_receiver_config_init(&cfg);
  cfg.backend = opt.backend;
  cfg.mechanism = opt.mechanism;
  cfg.address = opt.addr;
  cfg.port = opt.port;
  cfg.block_size = opt.block_size;
  cfg.block_count = 16;
  atomic_int refusals = 0;
  cfg.on_refusal = count_refusal;
  cfg.refusal_user_data = &refusals;
  sbr_receiver *r;
  char err[256];
  int ret = sbr_receiver_new(&cfg, &r, err, sizeof err);
  ASSERT_MSG(ret == 0, "receiver: cannot listen: %d %s", ret, err);

  struct refused_connect j = {0};
  pthread_t t;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ASSERT(pthread_create(&t, NULL, refused_connect_thread, &j) == 0);
  while (!atomic_load(&j.done)) {
    sbr_block *b;
    ASSERT_MSG(sbr_receiver_next(r, 5, &b) != 0,
               "a block arrived from a refused sender");
  }
  pthread_join(t, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long ms = (long)(t1.tv_sec - t0.tv_sec) * 1000 +
            (t1.tv_nsec - t0.tv_nsec) / 1000000;
  fprintf(stderr, "sender: %d after %ld ms: %s\n", j.ret, ms, j.err);
  ASSERT_MSG(j.ret == -EPROTONOSUPPORT, "sender got %d (%s)", j.ret, j.err);
  ASSERT_MSG(strstr(j.err, "iWARP") && strstr(j.err, "use status-byte"),
             "the sender's error does not say why: %s", j.err);
  /* Refused for good, not retried until the 20 s connect timeout. */
  ASSERT_MSG(ms < 10000, "the refusal took %ld ms", ms);
  struct sbr_receiver_stats st;
  sbr_receiver_get_stats(r, &st);
  ASSERT_EQ(st.refused_by_reason[SBR_REFUSAL_DEVICE], 1);
  ASSERT_EQ(st.lanes_opened, 0);
  ASSERT_EQ(atomic_load(&refusals), 1);
  sbr_receiver_free(r);
  fprintf(stderr, "sliding-window over iWARP: refused, as it must be\n");
  return 0;
}
#endif

int main(int argc, char **argv)
{
  static const struct option longopts[] = {
      {"backend", required_argument, NULL, 'b'},
      {"mechanism", required_argument, NULL, 'm'},
      {"frames", required_argument, NULL, 'f'},
      {"max-size", required_argument, NULL, 's'},
      {"block-size", required_argument, NULL, 'B'},
      {NULL, 0, NULL, 0},
  };
  int c;
  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
    case 'b':
      ASSERT_OK(sbr_backend_from_name(optarg, &opt.backend));
      break;
    case 'm':
      ASSERT_OK(sbr_mechanism_from_name(optarg, &opt.mechanism));
      break;
    case 'f':
      opt.frames = (unsigned)strtoul(optarg, NULL, 0);
      break;
    case 's':
      opt.max_size = (uint32_t)strtoul(optarg, NULL, 0);
      break;
    case 'B':
      opt.block_size = (uint32_t)strtoul(optarg, NULL, 0);
      break;
    default:
      return 2;
    }
  }
  if (optind != argc - 1 || opt.max_size < 64) {
    fprintf(stderr, "usage: test-devices [options] stream|hold|kill\n");
    return 2;
  }
  if (getenv("SBR_RDMA_ADDR"))
    opt.addr = getenv("SBR_RDMA_ADDR");
#ifdef SBR_HAVE_VERBS
  /* The sliding window sends WRITE with immediate data, which iWARP
   * lacks: there, every scenario is the refusal. */
  bool refused = opt.backend == SBR_BACKEND_VERBS &&
                 opt.mechanism == SBR_MECH_SLIDING_WINDOW &&
                 test_verbs_is_iwarp();
#endif
  opt.port = (uint16_t)(30000 + getpid() % 20000);
  sbr_set_log_handler(test_log_to_stderr, NULL);
  setvbuf(stderr, NULL, _IOLBF, 0);
#ifdef SBR_HAVE_VERBS
  if (refused)
    return refused_on_iwarp();
#endif
  return run(argv[optind]);
}
