/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sbr-soak - the two ends of the soak (tests/soak/soak.py drives them).
 *
 *   sbr-soak send    --state FILE --log FILE --epoch-ns T0 --rate FPS ...
 *   sbr-soak receive --state FILE --log FILE ...
 *
 * Unlike sbr-perf, both ends outlive faults: the sender reconnects when
 * its receiver dies, the receiver keeps serving when a sender dies, and
 * either can be SIGKILLed and started again without the soak losing
 * count.  What makes that possible:
 *
 * Frames are named by camera tick, not by a counter of the process.
 *   Device d's frame for tick n is due at T0 + n * period (CLOCK_MONOTONIC,
 *   T0 given by the driver and the same for every sender incarnation), and
 *   carries pts = n * period and a payload derived from (d, n, size).  A
 *   restarted sender goes on from the current tick, so every tick of the
 *   run names one frame that either arrived or was lost, and a lost tick
 *   has a time: the driver attributes each loss to the fault during which
 *   it happened.
 *
 * The counters live in a file each end maps (--state).
 *   Every counter is updated right after the event it counts, so a
 *   SIGKILLed process leaves exact figures behind, and its successor
 *   continues them (the receiver also continues each device's last tick,
 *   so the ticks missed while it was down show up as one gap).
 *
 * Each end appends one line per event to --log (O_APPEND writes, whole
 * lines, so they survive a SIGKILL and never interleave):
 *   sender:   drop DEV FIRST COUNT REASON T   ticks not handed to libsbr
 *             event T WHAT...
 *   receiver: first DEV TICK T                 the device's first frame
 *             gap DEV FIRST COUNT T            ticks that never arrived
 *             error DEV TICK T WHAT...         a bad frame (never expected)
 *             eos DEV TICK T
 *             event T WHAT...
 * T is CLOCK_MONOTONIC ns.
 *
 * Faults the driver injects through the receiver: SIGUSR1 makes the
 * consumer hold every block it receives for --stall-ms, then release them
 * all (the lane fills and the sender meets backpressure).
 *
 * SIGTERM to the sender: stop, send each device's EOS (pts = the next
 * tick), drain, exit 0.  The receiver exits 0 once every device sent its
 * EOS, or at SIGTERM.  Exit 1: could not start; 2: bad options.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <assert.h>
#include <inttypes.h>
#include <stddef.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sbr.h"

#define NS_PER_S 1000000000ull
#define NS_PER_MS 1000000ull
#define MAX_DEVICES 64
#define STATE_MAGIC_TX 0x58544b53u /* "SKTX" */
#define STATE_MAGIC_RX 0x58524b53u /* "SKRX" */
#define STATE_VERSION 1
/* The receiver polls in slices this long so signals and the stall timer
 * are noticed without a wake-up from a handler. */
#define RECV_SLICE_MS 20
/* The sender's supervisor looks at the connection this often. */
#define SUPERVISE_MS 20
#define CONNECT_PAUSE_MS 100
#define MAX_HELD 4096
#define LINGER_MS 1000

/* ------------------------------------------------- state file layouts */

/* Both layouts are read by soak.py (struct module): keep them in step.
 * Every field is a naturally aligned uint64_t, so a reader never sees a
 * torn value. */
/* malloc's view of the heap (mallinfo2): bytes in live allocations, and
 * bytes the heap holds from the system.  A leak grows the first; a heap
 * that fragments grows the second only. */
struct heap {
  uint64_t in_use;
  uint64_t arena;
  uint64_t mmapped;
};

struct tx_dev {
  uint64_t next_tick;    /* first tick not yet tried; 0 = never ran */
  uint64_t handed;       /* frames libsbr accepted */
  uint64_t drop_eagain;  /* backpressure: no free block in time */
  uint64_t drop_notconn; /* the connection was down */
  uint64_t drop_late;    /* the producer fell behind and skipped ticks */
  uint64_t drop_down;    /* ticks while no sender was producing */
  uint64_t drop_other;   /* any other error */
  uint64_t reserved;
};

struct tx_state {
  uint32_t magic, version;
  uint64_t devices;
  uint64_t pid;
  uint64_t starts;     /* incarnations */
  uint64_t connected;  /* 1 while connected */
  uint64_t reconnects; /* successful reconnects, all incarnations */
  uint64_t disconnects;
  uint64_t epoch_ns; /* tick 0, kept for later incarnations */
  struct heap heap;
  uint64_t reserved[5];
  struct tx_dev dev[MAX_DEVICES];
};

struct rx_dev {
  uint64_t last_tick;    /* newest tick delivered + 1; 0 = none yet */
  uint64_t received;     /* DATA frames delivered */
  uint64_t verified;     /* of those, every byte as expected */
  uint64_t errors;       /* bad frames: bytes, size, pts, order */
  uint64_t lost;         /* ticks that never arrived (gaps) */
  uint64_t eos_tick;     /* EOS's tick + 1; 0 = none */
  uint64_t last_arrival; /* CLOCK_MONOTONIC ns */
  uint64_t first_tick;   /* first tick delivered + 1; 0 = none */
  uint64_t lib_gaps;     /* libsbr's own counters, this incarnation */
  uint64_t lib_drops;
  uint64_t lib_rejected;
  uint64_t reserved[5];
};

struct rx_state {
  uint32_t magic, version;
  uint64_t devices;
  uint64_t pid;
  uint64_t starts;
  uint64_t listening; /* 1 once sbr_receiver_new succeeded */
  uint64_t lanes_active, lanes_opened, lanes_closed;
  uint64_t blocks_held; /* libsbr: blocks the application holds now */
  uint64_t stalls;      /* stalls served */
  uint64_t stalled;     /* 1 during a stall */
  uint64_t stall_end_ns;
  uint64_t frames_copied;
  uint64_t lib_rejected;
  uint64_t refused;
  uint64_t reserved[1];
  struct heap heap;
  uint64_t reserved2[13];
  struct rx_dev dev[MAX_DEVICES];
};

/* soak.py reads these offsets: a layout change must change both. */
static_assert(sizeof(struct tx_dev) == 64, "tx_dev layout");
static_assert(offsetof(struct tx_state, dev) == 128, "tx_state layout");
static_assert(sizeof(struct rx_dev) == 128, "rx_dev layout");
static_assert(offsetof(struct rx_state, dev) == 256, "rx_state layout");

#define STORE(field, v)                                                        \
  atomic_store_explicit((_Atomic uint64_t *)&(field), (uint64_t)(v),           \
                        memory_order_relaxed)
#define ADD(field, v)                                                          \
  atomic_fetch_add_explicit((_Atomic uint64_t *)&(field), (uint64_t)(v),       \
                            memory_order_relaxed)

/* ------------------------------------------------------------ options */

static struct {
  enum sbr_backend backend;
  const char *host;    /* send */
  const char *address; /* receive */
  uint16_t port;
  unsigned devices;
  uint32_t size;
  double rate;
  uint64_t epoch_ns;
  uint32_t block_size;
  uint32_t blocks;
  uint32_t stall_ms;
  uint32_t max_lag_ms;
  uint32_t wait_timeout_ms;
  const char *state_path;
  const char *log_path;
} opt = {
    .backend = SBR_BACKEND_SHM,
    .host = "127.0.0.1",
    .address = "0.0.0.0",
    .port = SBR_DEFAULT_PORT,
    .devices = 12,
    .size = 921600,
    .rate = 25,
    .block_size = 1u << 20,
    .blocks = 16,
    .stall_ms = 5000,
    .max_lag_ms = 1000,
    .wait_timeout_ms = 1000,
};

static uint64_t period_ns;

static volatile sig_atomic_t terminate_requested;
static volatile sig_atomic_t stall_requested;

static void on_term(int sig)
{
  (void)sig;
  terminate_requested = 1;
}

static void on_usr1(int sig)
{
  (void)sig;
  stall_requested = 1;
}

static void install_signals(void)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = on_term;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);
}

static uint64_t mono_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static void sleep_until_ns(uint64_t t)
{
  struct timespec ts = {.tv_sec = (time_t)(t / NS_PER_S),
                        .tv_nsec = (long)(t % NS_PER_S)};
  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

static void sleep_ms(unsigned ms)
{
  sleep_until_ns(mono_ns() + ms * NS_PER_MS);
}

/* ---------------------------------------------------------------- log */

static int log_fd = -1;

/* One whole line per write(2) on an O_APPEND fd: lines from several
 * threads and from successive incarnations never interleave, and a line
 * written is kept even if the process is SIGKILLed right after. */
static void __attribute__((format(printf, 1, 2))) logline(const char *fmt, ...)
{
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n > sizeof buf - 2)
    n = (int)sizeof buf - 2;
  buf[n++] = '\n';
  if (write(log_fd, buf, (size_t)n) < 0)
    perror("sbr-soak: log");
}

static void lib_log(void *data, enum sbr_log_level level, const char *msg)
{
  (void)data;
  if (level <= SBR_LOG_WARNING)
    logline("event %" PRIu64 " libsbr-%s %s", mono_ns(),
            level == SBR_LOG_ERROR ? "error" : "warning", msg);
}

/* Maps the state file, creating it zeroed, or checks the one a previous
 * incarnation left. */
static void *map_state(size_t size, uint32_t magic)
{
  int fd = open(opt.state_path, O_RDWR | O_CREAT, 0644);
  if (fd < 0) {
    fprintf(stderr, "sbr-soak: %s: %s\n", opt.state_path, strerror(errno));
    exit(1);
  }
  struct stat st;
  if (fstat(fd, &st) < 0 || (st.st_size && (size_t)st.st_size != size) ||
      ftruncate(fd, (off_t)size) < 0) {
    fprintf(stderr, "sbr-soak: %s: not a state file of this version\n",
            opt.state_path);
    exit(1);
  }
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    fprintf(stderr, "sbr-soak: mmap %s: %s\n", opt.state_path, strerror(errno));
    exit(1);
  }
  uint32_t *hdr = p;
  if (hdr[0] == 0) {
    hdr[1] = STATE_VERSION;
    hdr[0] = magic;
  } else if (hdr[0] != magic || hdr[1] != STATE_VERSION) {
    fprintf(stderr, "sbr-soak: %s belongs to the other end\n", opt.state_path);
    exit(1);
  }
  return p;
}

static void publish_heap(struct heap *h)
{
  struct mallinfo2 mi = mallinfo2();
  STORE(h->in_use, mi.uordblks + mi.hblkhd);
  STORE(h->arena, mi.arena);
  STORE(h->mmapped, mi.hblkhd);
}

/* ------------------------------------------------------------ payload */

static uint64_t mix64(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* The size is in the seed, so a frame cut short or padded differs in
 * every byte, not only at its end. */
static uint64_t frame_seed(unsigned device, uint64_t tick, uint32_t size)
{
  return mix64(((uint64_t)device << 56) ^ tick ^ ((uint64_t)size << 24));
}

/* Word i of a frame; consecutive words differ, so a shifted or misplaced
 * fragment shows as well as stale bytes of another frame. */
static inline uint64_t pattern_word(uint64_t seed, uint64_t i)
{
  return seed + i * 0xd1b54a32d192ed03ull;
}

static void fill_pattern(uint8_t *p, size_t len, uint64_t seed)
{
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w = pattern_word(seed, i / 8);
    memcpy(p + i, &w, 8);
  }
  if (i < len) {
    uint64_t w = pattern_word(seed, i / 8);
    memcpy(p + i, &w, len - i);
  }
}

/* Checks len bytes that sit at frame offset off (any alignment). */
static bool check_pattern(const uint8_t *p, size_t len, size_t off,
                          uint64_t seed)
{
  size_t i = 0;
  while (i < len && (off + i) % 8) {
    uint64_t w = pattern_word(seed, (off + i) / 8);
    if (p[i] != (uint8_t)(w >> (8 * ((off + i) % 8))))
      return false;
    i++;
  }
  for (; i + 8 <= len; i += 8) {
    uint64_t w = pattern_word(seed, (off + i) / 8), got;
    memcpy(&got, p + i, 8);
    if (got != w)
      return false;
  }
  if (i < len) {
    uint64_t w = pattern_word(seed, (off + i) / 8);
    if (memcmp(p + i, &w, len - i) != 0)
      return false;
  }
  return true;
}

/* ------------------------------------------------------------- sender */

static struct tx_state *txs;
static sbr_sender *sender;
static atomic_bool producers_stop;

enum drop_reason {
  DROP_NONE,
  DROP_EAGAIN,
  DROP_NOTCONN,
  DROP_LATE,
  DROP_DOWN,
  DROP_OTHER,
};
static const char *const drop_names[] = {"none", "eagain", "notconn",
                                         "late", "down",   "other"};

/* Consecutive drops of one reason become one log line. */
struct drop_run {
  enum drop_reason reason;
  uint64_t first, count, t;
};

static void drop_flush(unsigned device, struct drop_run *run)
{
  if (run->count)
    logline("drop %u %" PRIu64 " %" PRIu64 " %s %" PRIu64, device, run->first,
            run->count, drop_names[run->reason], run->t);
  run->count = 0;
}

static void drop_add(unsigned device, struct drop_run *run,
                     enum drop_reason reason, uint64_t tick, uint64_t count)
{
  if (run->count && (run->reason != reason || run->first + run->count != tick))
    drop_flush(device, run);
  if (!run->count) {
    run->reason = reason;
    run->first = tick;
    run->t = mono_ns();
  }
  run->count += count;
  struct tx_dev *d = &txs->dev[device];
  switch (reason) {
  case DROP_EAGAIN:
    ADD(d->drop_eagain, count);
    break;
  case DROP_NOTCONN:
    ADD(d->drop_notconn, count);
    break;
  case DROP_LATE:
    ADD(d->drop_late, count);
    break;
  case DROP_DOWN:
    ADD(d->drop_down, count);
    break;
  default:
    ADD(d->drop_other, count);
    break;
  }
}

static uint64_t tick_now(void)
{
  uint64_t now = mono_ns();
  return now > opt.epoch_ns ? (now - opt.epoch_ns) / period_ns : 0;
}

static int send_tick(unsigned device, uint64_t tick, uint8_t *buf, size_t cap)
{
  struct sbr_block_meta m;
  sbr_block_meta_init(&m, (uint8_t)device);
  m.pts = tick * period_ns;
  m.duration = period_ns;
  uint64_t seed = frame_seed(device, tick, opt.size);
  if (opt.size <= cap) {
    /* Zero copy: the camera renders into registered memory. */
    sbr_send_block *b;
    int ret = sbr_sender_acquire(sender, (uint8_t)device, &b);
    if (ret < 0)
      return ret;
    fill_pattern(sbr_send_block_payload(b, NULL), opt.size, seed);
    ret = sbr_sender_submit(sender, b, &m, opt.size);
    if (ret == -EINVAL)
      sbr_sender_abandon(sender, b);
    return ret;
  }
  fill_pattern(buf, opt.size, seed);
  return sbr_sender_send(sender, &m, buf, opt.size);
}

static void *producer_main(void *arg)
{
  unsigned device = (unsigned)(uintptr_t)arg;
  struct tx_dev *d = &txs->dev[device];
  struct drop_run run = {0};
  size_t cap = sbr_sender_block_payload_size(sender);
  uint8_t *buf = opt.size > cap ? malloc(opt.size) : NULL;
  if (opt.size > cap && !buf) {
    fprintf(stderr, "sbr-soak: out of memory\n");
    exit(1);
  }
  char name[16];
  snprintf(name, sizeof name, "camera-%u", device);
  pthread_setname_np(pthread_self(), name);

  uint64_t lag_ticks = opt.max_lag_ms * NS_PER_MS / period_ns;
  uint64_t tick = d->next_tick;
  uint64_t now_tick = tick_now();
  if (tick == 0) {
    tick = now_tick; /* the run's first sender: counting starts here */
  } else if (tick < now_tick) {
    /* Ticks that passed while no sender of ours ran. */
    drop_add(device, &run, DROP_DOWN, tick, now_tick - tick);
    tick = now_tick;
  }
  STORE(d->next_tick, tick);
  while (!atomic_load(&producers_stop)) {
    sleep_until_ns(opt.epoch_ns + tick * period_ns);
    if (atomic_load(&producers_stop))
      break;
    /* A camera that fell far behind skips what it can't send in time. */
    uint64_t cur = tick_now();
    if (cur > tick + lag_ticks) {
      drop_add(device, &run, DROP_LATE, tick, cur - tick);
      tick = cur;
      STORE(d->next_tick, tick);
    }
    int ret = send_tick(device, tick, buf, cap);
    /* Woken to stop, or a wait that began just after the wake-up and
     * timed out: the run ends before this tick (EOS says so), it is not a
     * loss. */
    if (ret != 0 && atomic_load(&producers_stop))
      break;
    if (ret == 0) {
      drop_flush(device, &run);
      ADD(d->handed, 1);
    } else if (ret == -EAGAIN) {
      drop_add(device, &run, DROP_EAGAIN, tick, 1);
    } else if (ret == -ENOTCONN) {
      drop_add(device, &run, DROP_NOTCONN, tick, 1);
    } else {
      if (run.reason != DROP_OTHER || !run.count)
        logline("event %" PRIu64 " device %u tick %" PRIu64 ": %s", mono_ns(),
                device, tick, strerror(-ret));
      drop_add(device, &run, DROP_OTHER, tick, 1);
    }
    tick++;
    STORE(d->next_tick, tick);
  }
  drop_flush(device, &run);
  free(buf);
  return NULL;
}

static int connect_sender(void)
{
  struct sbr_sender_config cfg;
  sbr_sender_config_init(&cfg);
  cfg.backend = opt.backend;
  cfg.host = opt.host;
  cfg.port = opt.port;
  cfg.block_size_hint = opt.block_size;
  cfg.block_count_hint = opt.blocks;
  cfg.send_blocks = opt.blocks;
  cfg.connect_timeout_ms = 2000;
  cfg.wait_timeout_ms = (int)opt.wait_timeout_ms;
  char err[256] = "";
  uint64_t t0 = mono_ns();
  unsigned tries = 0;
  while (!terminate_requested) {
    tries++;
    int ret = sbr_sender_new(&cfg, &sender, err, sizeof err);
    if (ret == 0) {
      logline("event %" PRIu64 " connected after %u tries, %.3f s", mono_ns(),
              tries, (double)(mono_ns() - t0) / 1e9);
      return 0;
    }
    if (tries == 1 || tries % 50 == 0)
      logline("event %" PRIu64 " connect failed (try %u): %s", mono_ns(), tries,
              err[0] ? err : strerror(-ret));
    sleep_ms(CONNECT_PAUSE_MS);
  }
  return -EINTR;
}

/* The sender's main thread: keeps the connection up while the cameras
 * run.  A lost connection shows as -ENOTCONN in the producers; this
 * reconnects (each try bounded by the connect timeout) until it works. */
static void supervise(void)
{
  bool was_connected = true;
  uint64_t lost_at = 0;
  unsigned tries = 0;
  char err[256];
  uint64_t next_heap = 0;
  while (!terminate_requested) {
    if (mono_ns() >= next_heap) {
      publish_heap(&txs->heap);
      next_heap = mono_ns() + NS_PER_S;
    }
    bool c = sbr_sender_is_connected(sender);
    if (c != was_connected) {
      if (!c) {
        lost_at = mono_ns();
        tries = 0;
        ADD(txs->disconnects, 1);
        logline("event %" PRIu64 " disconnected", lost_at);
      }
      STORE(txs->connected, c);
      was_connected = c;
    }
    if (!c) {
      tries++;
      int ret = sbr_sender_reconnect(sender, err, sizeof err);
      if (ret == 0) {
        ADD(txs->reconnects, 1);
        logline("event %" PRIu64 " reconnected after %u tries, %.3f s",
                mono_ns(), tries, (double)(mono_ns() - lost_at) / 1e9);
        continue;
      }
      if (tries == 1 || tries % 50 == 0)
        logline("event %" PRIu64 " reconnect failed (try %u): %s", mono_ns(),
                tries, err[0] ? err : strerror(-ret));
      sleep_ms(CONNECT_PAUSE_MS);
      continue;
    }
    sleep_ms(SUPERVISE_MS);
  }
}

static int run_send(void)
{
  txs = map_state(sizeof *txs, STATE_MAGIC_TX);
  STORE(txs->devices, opt.devices);
  STORE(txs->pid, getpid());
  ADD(txs->starts, 1);
  STORE(txs->connected, 0);
  /* Every incarnation counts ticks from the same epoch. */
  if (!opt.epoch_ns)
    opt.epoch_ns = txs->epoch_ns ? txs->epoch_ns : mono_ns();
  STORE(txs->epoch_ns, opt.epoch_ns);
  logline("event %" PRIu64 " sender start pid %d", mono_ns(), (int)getpid());
  if (connect_sender() < 0)
    return 0; /* terminated before a receiver came */
  STORE(txs->connected, 1);
  size_t cap = sbr_sender_block_payload_size(sender);
  uint32_t need = opt.size ? (uint32_t)((opt.size + cap - 1) / cap) : 1;
  if (need > opt.blocks) {
    fprintf(stderr, "sbr-soak: a frame needs %u blocks, --blocks is %u\n", need,
            opt.blocks);
    return 2;
  }

  pthread_t threads[MAX_DEVICES];
  for (unsigned d = 0; d < opt.devices; d++) {
    if (pthread_create(&threads[d], NULL, producer_main,
                       (void *)(uintptr_t)d) != 0) {
      fprintf(stderr, "sbr-soak: cannot start camera %u\n", d);
      exit(1);
    }
  }
  supervise();

  atomic_store(&producers_stop, true);
  sbr_sender_wakeup(sender);
  for (unsigned d = 0; d < opt.devices; d++)
    pthread_join(threads[d], NULL);
  /* EOS names the first tick not sent, so the receiver sees the tail. */
  int failed = 0;
  for (unsigned d = 0; d < opt.devices; d++) {
    struct sbr_block_meta m;
    sbr_block_meta_init(&m, (uint8_t)d);
    m.kind = SBR_KIND_EOS;
    m.pts = txs->dev[d].next_tick * period_ns;
    int ret = sbr_sender_flush(sender, 5000);
    if (ret == 0)
      ret = sbr_sender_send(sender, &m, NULL, 0);
    if (ret < 0) {
      logline("event %" PRIu64 " device %u: EOS not sent: %s", mono_ns(), d,
              strerror(-ret));
      failed = 1;
    }
  }
  sbr_sender_flush(sender, 5000);
  /* Status-byte sends nothing back: give the receiver time to take the
   * EOS in before the disconnect closes the lane (see sbr-perf linger). */
  uint64_t until = mono_ns() + LINGER_MS * NS_PER_MS;
  while (mono_ns() < until && sbr_sender_is_connected(sender))
    sleep_ms(10);
  struct sbr_sender_stats st;
  sbr_sender_get_stats(sender, &st);
  logline("event %" PRIu64 " sender end: %" PRIu64 " blocks, %" PRIu64
          " drops, %" PRIu64 " reconnects, %" PRIu64 " held skipped",
          mono_ns(), st.blocks, st.drops, st.reconnects, st.held_skipped);
  sbr_sender_free(sender);
  return failed;
}

/* ----------------------------------------------------------- receiver */

static struct rx_state *rxs;

struct held {
  struct sbr_frame f[MAX_HELD];
  unsigned n;
};

static void error_frame(unsigned device, uint64_t tick, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void error_frame(unsigned device, uint64_t tick, const char *fmt, ...)
{
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (device < MAX_DEVICES)
    ADD(rxs->dev[device].errors, 1);
  logline("error %u %" PRIu64 " %" PRIu64 " %s", device, tick, mono_ns(), what);
}

static bool verify_bytes(const struct sbr_frame *f, unsigned device,
                         uint64_t tick)
{
  uint64_t seed = frame_seed(device, tick, f->size);
  if (f->n_blocks == 0) /* reassembled by copying */
    return check_pattern(f->info.payload, f->size, 0, seed);
  size_t off = 0;
  for (uint32_t k = 0; k < f->n_blocks; k++) {
    const struct sbr_block_info *bi = sbr_block_get_info(f->blocks[k]);
    if (bi->frame_offset != off ||
        !check_pattern(bi->payload, bi->payload_len, off, seed))
      return false;
    off += bi->payload_len;
  }
  return off == f->size;
}

/* Ticks before `tick` that never came are lost: one gap line. */
static void account_gap(unsigned device, uint64_t tick, uint64_t now)
{
  struct rx_dev *d = &rxs->dev[device];
  if (d->last_tick && tick > d->last_tick) {
    uint64_t n = tick - d->last_tick;
    ADD(d->lost, n);
    logline("gap %u %" PRIu64 " %" PRIu64 " %" PRIu64, device, d->last_tick, n,
            now);
  }
}

static void handle_frame(const struct sbr_frame *f, uint64_t now)
{
  const struct sbr_block_info *in = &f->info;
  unsigned device = in->device;
  if (device >= opt.devices) {
    error_frame(device, 0, "unknown device");
    return;
  }
  struct rx_dev *d = &rxs->dev[device];
  if (in->pts == SBR_TIME_NONE || in->pts % period_ns) {
    error_frame(device, 0, "pts %" PRIu64 " is not a tick", in->pts);
    return;
  }
  uint64_t tick = in->pts / period_ns;
  if (in->kind == SBR_KIND_EOS) {
    if (d->eos_tick)
      error_frame(device, tick, "a second EOS");
    account_gap(device, tick, now);
    if (tick + 1 > d->last_tick)
      STORE(d->last_tick, tick);
    STORE(d->eos_tick, tick + 1);
    logline("eos %u %" PRIu64 " %" PRIu64, device, tick, now);
    return;
  }
  if (in->kind != SBR_KIND_DATA)
    return;
  if (d->last_tick && tick < d->last_tick) {
    error_frame(device, tick,
                "arrived after tick %" PRIu64 " (reordered or duplicated)",
                d->last_tick - 1);
    return;
  }
  if (!d->first_tick) {
    STORE(d->first_tick, tick + 1);
    logline("first %u %" PRIu64 " %" PRIu64, device, tick, now);
  }
  account_gap(device, tick, now);
  STORE(d->last_tick, tick + 1);
  ADD(d->received, 1);
  STORE(d->last_arrival, now);
  if (f->size != opt.size || in->frame_size != f->size)
    error_frame(device, tick, "%u bytes (header %u), expected %u", f->size,
                in->frame_size, opt.size);
  else if (!verify_bytes(f, device, tick))
    error_frame(device, tick, "bytes differ from the pattern");
  else
    ADD(d->verified, 1);
}

static void publish_stats(sbr_receiver *r)
{
  struct sbr_receiver_stats st;
  sbr_receiver_get_stats(r, &st);
  STORE(rxs->lanes_active, st.lanes_active);
  STORE(rxs->lanes_opened, st.lanes_opened);
  STORE(rxs->lanes_closed, st.lanes_closed);
  STORE(rxs->blocks_held, st.blocks_held);
  STORE(rxs->frames_copied, st.frames_copied);
  STORE(rxs->lib_rejected, st.rejected);
  STORE(rxs->refused, st.refused);
  publish_heap(&rxs->heap);
  for (unsigned dv = 0; dv < opt.devices; dv++) {
    struct sbr_device_stats ds;
    sbr_receiver_get_device_stats(r, (uint8_t)dv, &ds);
    STORE(rxs->dev[dv].lib_gaps, ds.gaps);
    STORE(rxs->dev[dv].lib_drops, ds.drops);
    STORE(rxs->dev[dv].lib_rejected, ds.rejected);
  }
}

static void release_held(struct held *h)
{
  for (unsigned i = 0; i < h->n; i++)
    sbr_frame_release(&h->f[i]);
  h->n = 0;
}

static int run_receive(void)
{
  rxs = map_state(sizeof *rxs, STATE_MAGIC_RX);
  STORE(rxs->devices, opt.devices);
  STORE(rxs->pid, getpid());
  ADD(rxs->starts, 1);
  STORE(rxs->listening, 0);
  STORE(rxs->stalled, 0);
  /* The previous incarnation's lanes died with it. */
  STORE(rxs->lanes_active, 0);

  struct sbr_receiver_config cfg;
  sbr_receiver_config_init(&cfg);
  cfg.backend = opt.backend;
  cfg.address = opt.address;
  cfg.port = opt.port;
  cfg.block_size = opt.block_size;
  cfg.block_count = opt.blocks;
  sbr_receiver *r;
  char err[256] = "";
  /* A receiver restarted at once may find the old one's port still
   * closing: try for a while. */
  int ret;
  for (unsigned tries = 0;; tries++) {
    ret = sbr_receiver_new(&cfg, &r, err, sizeof err);
    if (ret == 0 || tries >= 100 || terminate_requested)
      break;
    sleep_ms(CONNECT_PAUSE_MS);
  }
  if (ret < 0) {
    fprintf(stderr, "sbr-soak: cannot listen: %s\n",
            err[0] ? err : strerror(-ret));
    return 1;
  }
  STORE(rxs->listening, 1);
  logline("event %" PRIu64 " receiver start pid %d", mono_ns(), (int)getpid());

  static struct held held;
  uint64_t stall_until = 0, next_publish = 0;
  unsigned eos = 0;
  for (unsigned dv = 0; dv < opt.devices; dv++)
    eos += rxs->dev[dv].eos_tick != 0;
  while (!terminate_requested && eos < opt.devices) {
    uint64_t now = mono_ns();
    if (stall_requested && !stall_until) {
      stall_requested = 0;
      stall_until = now + opt.stall_ms * NS_PER_MS;
      STORE(rxs->stalled, 1);
      logline("event %" PRIu64 " stall begins (%u ms)", now, opt.stall_ms);
    }
    if (stall_until && now >= stall_until) {
      unsigned n = held.n;
      release_held(&held);
      stall_until = 0;
      ADD(rxs->stalls, 1);
      STORE(rxs->stall_end_ns, now);
      STORE(rxs->stalled, 0);
      logline("event %" PRIu64 " stall ends, %u frames released", now, n);
    }
    if (now >= next_publish) {
      publish_stats(r);
      next_publish = now + 200 * NS_PER_MS;
    }
    struct sbr_frame f;
    ret = sbr_receiver_next_frame(r, RECV_SLICE_MS, &f);
    if (ret == -ETIMEDOUT || ret == -EINTR)
      continue;
    if (ret < 0) {
      logline("event %" PRIu64 " next_frame: %s", mono_ns(), strerror(-ret));
      sleep_ms(RECV_SLICE_MS);
      continue;
    }
    now = mono_ns();
    bool was_eos = f.info.kind == SBR_KIND_EOS && f.info.device < opt.devices &&
                   !rxs->dev[f.info.device].eos_tick;
    handle_frame(&f, now);
    eos += was_eos;
    /* A stalled consumer keeps what it got; a copied frame holds no
     * block, so there is nothing to keep. */
    if (stall_until && f.n_blocks && held.n < MAX_HELD) {
      for (uint32_t k = 0; k < f.n_blocks; k++)
        sbr_block_hold(f.blocks[k]);
      held.f[held.n++] = f;
    } else {
      sbr_frame_release(&f);
    }
  }
  release_held(&held);
  publish_stats(r);
  logline("event %" PRIu64 " receiver end: %u of %u devices ended", mono_ns(),
          eos, opt.devices);
  sbr_receiver_free(r);
  STORE(rxs->listening, 0);
  return 0;
}

/* -------------------------------------------------------------- main */

static void usage(FILE *f)
{
  fputs("Usage: sbr-soak send|receive --state FILE --log FILE [options]\n"
        "  --backend shm|verbs    [shm]\n"
        "  --host H               send: the receiver [127.0.0.1]\n"
        "  --address A            receive: bind address [0.0.0.0]\n"
        "  --port N               [7471]\n"
        "  --devices N            cameras, at most 64 [12]\n"
        "  --size BYTES           payload per frame [921600]\n"
        "  --rate FPS             per camera [25]\n"
        "  --epoch-ns T0          send: CLOCK_MONOTONIC ns of tick 0 "
        "[the state file's, else now]\n"
        "  --block-size BYTES     lane block size [1048576]\n"
        "  --blocks N             lane and send blocks [16]\n"
        "  --stall-ms MS          receive: SIGUSR1 holds blocks this long "
        "[5000]\n"
        "  --max-lag-ms MS        send: skip ticks beyond this lag [1000]\n"
        "  --wait-timeout-ms MS   send: backpressure wait [1000]\n",
        f);
}

static uint64_t num(const char *name, const char *s, uint64_t min, uint64_t max)
{
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max) {
    fprintf(stderr, "sbr-soak: --%s: '%s' is not in %" PRIu64 "..%" PRIu64 "\n",
            name, s, min, max);
    exit(2);
  }
  return v;
}

int main(int argc, char **argv)
{
  static const struct option longopts[] = {
      {"backend", required_argument, NULL, 'b'},
      {"host", required_argument, NULL, 'H'},
      {"address", required_argument, NULL, 'A'},
      {"port", required_argument, NULL, 'p'},
      {"devices", required_argument, NULL, 'd'},
      {"size", required_argument, NULL, 's'},
      {"rate", required_argument, NULL, 'r'},
      {"epoch-ns", required_argument, NULL, 'e'},
      {"block-size", required_argument, NULL, 'B'},
      {"blocks", required_argument, NULL, 'n'},
      {"stall-ms", required_argument, NULL, 'S'},
      {"max-lag-ms", required_argument, NULL, 'L'},
      {"wait-timeout-ms", required_argument, NULL, 'W'},
      {"state", required_argument, NULL, 'f'},
      {"log", required_argument, NULL, 'l'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  if (argc < 2 || (strcmp(argv[1], "send") && strcmp(argv[1], "receive"))) {
    usage(stderr);
    return 2;
  }
  bool send = strcmp(argv[1], "send") == 0;
  int c;
  while ((c = getopt_long(argc - 1, argv + 1, "", longopts, NULL)) != -1) {
    switch (c) {
    case 'b':
      if (sbr_backend_from_name(optarg, &opt.backend) < 0) {
        fprintf(stderr, "sbr-soak: --backend: '%s'\n", optarg);
        return 2;
      }
      break;
    case 'H':
      opt.host = optarg;
      break;
    case 'A':
      opt.address = optarg;
      break;
    case 'p':
      opt.port = (uint16_t)num("port", optarg, 1, 65535);
      break;
    case 'd':
      opt.devices = (unsigned)num("devices", optarg, 1, MAX_DEVICES);
      break;
    case 's':
      opt.size = (uint32_t)num("size", optarg, 8, 64u << 20);
      break;
    case 'r': {
      char *end;
      opt.rate = strtod(optarg, &end);
      if (*end || !(opt.rate > 0 && opt.rate <= 10000)) {
        fprintf(stderr, "sbr-soak: --rate: '%s'\n", optarg);
        return 2;
      }
      break;
    }
    case 'e':
      opt.epoch_ns = num("epoch-ns", optarg, 0, UINT64_MAX);
      break;
    case 'B':
      opt.block_size = (uint32_t)num("block-size", optarg, 4096, 64u << 20);
      break;
    case 'n':
      opt.blocks = (uint32_t)num("blocks", optarg, 1, 4096);
      break;
    case 'S':
      opt.stall_ms = (uint32_t)num("stall-ms", optarg, 0, 3600000);
      break;
    case 'L':
      opt.max_lag_ms = (uint32_t)num("max-lag-ms", optarg, 0, 3600000);
      break;
    case 'W':
      opt.wait_timeout_ms =
          (uint32_t)num("wait-timeout-ms", optarg, 1, 3600000);
      break;
    case 'f':
      opt.state_path = optarg;
      break;
    case 'l':
      opt.log_path = optarg;
      break;
    case 'h':
      usage(stdout);
      return 0;
    default:
      usage(stderr);
      return 2;
    }
  }
  if (!opt.state_path || !opt.log_path || optind != argc - 1) {
    usage(stderr);
    return 2;
  }
  /* Whole ticks of integral ns: pts = tick * period is exact both ways. */
  period_ns = (uint64_t)(1e9 / opt.rate + 0.5);
  log_fd = open(opt.log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    fprintf(stderr, "sbr-soak: %s: %s\n", opt.log_path, strerror(errno));
    return 1;
  }
  sbr_set_log_handler(lib_log, NULL);
  install_signals();
  return send ? run_send() : run_receive();
}
