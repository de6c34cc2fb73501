/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sbr-perf - send or receive a synthetic multi-camera stream through libsbr,
 * check that it arrived intact and in order, and say what it cost.
 *
 *   sbr-perf receive [options]     listen, count, verify, print a summary
 *   sbr-perf send HOST [options]   one producer thread per device
 *
 * It is used by hand (is the link up, how fast is it), by the tests (exit
 * status 0 means everything arrived and verified) and by the benchmarks
 * (--json prints one object to parse).
 *
 * The stream, per device d (0..devices-1):
 *
 *   DATA frames, sbr_sender_send (or acquire/submit with --zero-copy):
 *     pts          = frame number * 40 ms, so the receiver recovers the frame
 *                    number and checks that it grows by exactly 1 per device
 *     duration     = 40 ms
 *     capture_time = CLOCK_REALTIME ns before the payload is filled
 *     size         = --size, or with --sizes MIN:MAX a pseudo-random size
 *                    seeded by (d, frame number)
 *     payload      = with --verify, a pattern derived from (d, frame number,
 *                    byte offset) and the frame size
 *   one EOS block (kind SBR_KIND_EOS, no payload) whose pts is the number of
 *   frames sent * 40 ms, so frames lost at the tail are noticed too.
 *
 * A frame dropped by backpressure (--drop, or a wait that timed out) gives
 * its frame number to the next frame: numbers count frames handed to the
 * library, so a gap seen by the receiver is always a transport fault and the
 * receiver needs no knowledge of the sender's drops.
 *
 * The pattern's seed includes the frame size: a receiver that was not told
 * --size/--sizes still catches a frame delivered with the wrong length,
 * because every byte of it then differs from what it recomputes.
 *
 * The receiver exits once it has seen EOS from --devices devices.  It fails
 * (exit 1) on any gap, reordering, duplicate, wrong size or wrong byte, on
 * a missing EOS (--timeout, Ctrl-C) and when the library itself counted
 * gaps, drops or rejected blocks.  The sender fails on a lost connection and
 * on frames dropped after waiting (without --drop); Ctrl-C on the sender
 * ends the streams early but cleanly, with their EOS.
 *
 * Exit status: 0 success, 1 runtime failure, 2 bad options.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "sbr.h"
#include "sbr-testing.h"
#include "sbr-check.h"

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2

/* sbr.h: a block is a 64-byte header, the payload and an 8-byte trailer. */
#define BLOCK_OVERHEAD 72u
#define MAX_BLOCK_SIZE (64u << 20)    /* the library's limit */
#define FRAME_INTERVAL_NS 40000000ull /* 25 fps */
#define NS_PER_S 1000000000ull

/* The receiver polls in slices this long so SIGINT, the hold timer and
 * --timeout are noticed without a wake-up from a signal handler. */
#define RECV_SLICE_MS 100
/* The sender waits this long for the receiver to drain at the end. */
#define FLUSH_TIMEOUT_MS 30000
/* See linger(). */
#define LINGER_MS 1000
#define LINGER_POLL_US 5000
/* See read_final_stats(). */
#define SETTLE_MS 200
/* A receiver started a moment after the sender (scripts start both at once)
 * is waited for this long. */
#define CONNECT_RETRY_MS 5000
#define CONNECT_RETRY_PAUSE_US 100000
/* Only the first few verification errors are printed; all are counted. */
#define MAX_PRINTED_ERRORS 10

enum mode {
  MODE_SEND = 1 << 0,
  MODE_RECEIVE = 1 << 1,
};
#define MODE_BOTH (MODE_SEND | MODE_RECEIVE)

struct options {
  enum mode mode;
  const char *host; /* send: the receiver */
  enum sbr_backend backend;
  enum sbr_mechanism mechanism;
  uint16_t port;
  const char *address;
  uint32_t block_size;
  uint32_t blocks;
  uint32_t devices;
  bool size_set; /* --size or --sizes given; else block payload size */
  uint64_t size_min, size_max;
  double duration_s; /* 0: not given */
  uint64_t count;
  bool count_set;
  double rate;
  bool verify;
  uint32_t hold_ms;
  bool zero_copy;
  bool drop;
  double timeout_s; /* 0: wait forever */
  uint32_t delay_us;
  uint32_t fail_after;
  uint32_t read_ahead;
  enum sbr_send_order send_order;
  bool sender_thread_posts;
  uint32_t status_batch_bytes;
  enum sbr_poll_mode poll_mode;
  bool json;
  int verbose;
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
  (void)sig;
  interrupted = 1;
}

static void install_signal_handlers(void)
{
  /* SA_RESETHAND: a second Ctrl-C kills a run that hangs while stopping. */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

/* ------------------------------------------------------------ helpers */

static uint64_t mono_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static uint64_t realtime_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static void sleep_until_ns(uint64_t t)
{
  struct timespec ts = {.tv_sec = (time_t)(t / NS_PER_S),
                        .tv_nsec = (long)(t % NS_PER_S)};
  /* An EINTR means SIGINT: the caller looks at the flag next. */
  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

static double cpu_seconds(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void init_monotonic_cond(pthread_cond_t *c)
{
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(c, &a);
  pthread_condattr_destroy(&a);
}

static void deadline_ts(struct timespec *ts, uint64_t t)
{
  ts->tv_sec = (time_t)(t / NS_PER_S);
  ts->tv_nsec = (long)(t % NS_PER_S);
}

static int log_verbosity;

static void log_to_stderr(void *user_data, enum sbr_log_level level,
                          const char *message)
{
  static const char *const names[] = {"error", "warning", "info", "debug"};
  (void)user_data;
  /* -v shows errors to info, -vv debug as well. */
  if ((int)level > log_verbosity + 1)
    return;
  fprintf(stderr, "sbr-perf: libsbr %s: %s\n",
          (unsigned)level < 4 ? names[level] : "?", message);
}

/* Prints a JSON string literal; the only strings are names and messages. */
static void json_string(FILE *f, const char *s)
{
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

/* ---------------------------------------------- sizes and the pattern */

static uint64_t splitmix64(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t frame_key(uint8_t device, uint64_t frame)
{
  return splitmix64(((uint64_t)device << 56) ^ frame);
}

/* Both ends compute the same size from (device, frame number). */
static uint64_t frame_size_for(const struct options *o, uint8_t device,
                               uint64_t frame)
{
  if (o->size_min == o->size_max)
    return o->size_min;
  uint64_t span = o->size_max - o->size_min + 1;
  return o->size_min +
         splitmix64(frame_key(device, frame) ^ 0x53495a45u) % span;
}

static uint64_t pattern_seed(uint8_t device, uint64_t frame, uint64_t size)
{
  return splitmix64(frame_key(device, frame) + size);
}

/* Word i (bytes 8i..8i+7, little-endian) of a frame.  Consecutive words
 * differ, so a misplaced fragment or a shifted copy shows up as well as
 * stale bytes of another frame (another seed). */
static inline uint64_t pattern_word(uint64_t seed, uint64_t i)
{
  return seed + i * 0x9e3779b97f4a7c15ull;
}

static inline uint8_t pattern_byte(uint64_t seed, uint64_t off)
{
  return (uint8_t)(pattern_word(seed, off / 8) >> (8 * (off % 8)));
}

static inline void put_le64(uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t get_le64(const uint8_t *p)
{
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static void fill_pattern(uint8_t *p, size_t len, uint64_t seed)
{
  size_t i = 0;
  for (; i + 8 <= len; i += 8)
    put_le64(p + i, pattern_word(seed, i / 8));
  for (; i < len; i++)
    p[i] = pattern_byte(seed, i);
}

/* Checks len bytes that sit at frame offset off.  Returns the frame offset
 * of the first wrong byte, or UINT64_MAX when all are right. */
static uint64_t check_pattern(const uint8_t *p, size_t len, uint64_t off,
                              uint64_t seed)
{
  size_t i = 0;
  /* Byte by byte up to a word boundary of the frame, then word by word. */
  for (; i < len && (off + i) % 8 != 0; i++)
    if (p[i] != pattern_byte(seed, off + i))
      return off + i;
  for (; i + 8 <= len; i += 8) {
    if (get_le64(p + i) == pattern_word(seed, (off + i) / 8))
      continue;
    for (size_t k = 0; k < 8; k++)
      if (p[i + k] != pattern_byte(seed, off + i + k))
        return off + i + k;
  }
  for (; i < len; i++)
    if (p[i] != pattern_byte(seed, off + i))
      return off + i;
  return UINT64_MAX;
}

/* ------------------------------------------------------------ options */

enum {
  OPT_BACKEND = 256,
  OPT_MECHANISM,
  OPT_PORT,
  OPT_ADDRESS,
  OPT_BLOCK_SIZE,
  OPT_BLOCKS,
  OPT_DEVICES,
  OPT_SIZE,
  OPT_SIZES,
  OPT_DURATION,
  OPT_COUNT,
  OPT_RATE,
  OPT_VERIFY,
  OPT_HOLD_MS,
  OPT_ZERO_COPY,
  OPT_DROP,
  OPT_TIMEOUT,
  OPT_DELAY_US,
  OPT_FAIL_AFTER,
  OPT_READ_AHEAD,
  OPT_STATUS_BATCH,
  OPT_SEND_ORDER,
  OPT_SENDER_THREAD_POSTS,
  OPT_POLL_MODE,
  OPT_JSON,
  OPT_HELP,
  OPT_VERSION,
  OPT_END,
};

static const struct option long_options[] = {
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"mechanism", required_argument, NULL, OPT_MECHANISM},
    {"port", required_argument, NULL, OPT_PORT},
    {"address", required_argument, NULL, OPT_ADDRESS},
    {"block-size", required_argument, NULL, OPT_BLOCK_SIZE},
    {"blocks", required_argument, NULL, OPT_BLOCKS},
    {"devices", required_argument, NULL, OPT_DEVICES},
    {"size", required_argument, NULL, OPT_SIZE},
    {"sizes", required_argument, NULL, OPT_SIZES},
    {"duration", required_argument, NULL, OPT_DURATION},
    {"count", required_argument, NULL, OPT_COUNT},
    {"rate", required_argument, NULL, OPT_RATE},
    {"verify", no_argument, NULL, OPT_VERIFY},
    {"hold-ms", required_argument, NULL, OPT_HOLD_MS},
    {"zero-copy", no_argument, NULL, OPT_ZERO_COPY},
    {"drop", no_argument, NULL, OPT_DROP},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"delay-us", required_argument, NULL, OPT_DELAY_US},
    {"fail-after", required_argument, NULL, OPT_FAIL_AFTER},
    {"read-ahead", required_argument, NULL, OPT_READ_AHEAD},
    {"status-batch", required_argument, NULL, OPT_STATUS_BATCH},
    {"poll-mode", required_argument, NULL, OPT_POLL_MODE},
    {"send-order", required_argument, NULL, OPT_SEND_ORDER},
    {"sender-thread-posts", no_argument, NULL, OPT_SENDER_THREAD_POSTS},
    {"json", no_argument, NULL, OPT_JSON},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

/* Which mode each option belongs to: an option of the other mode is an
 * error rather than silently ignored, so a typo'd script fails loudly. */
static const unsigned option_modes[OPT_END - OPT_BACKEND] = {
    [OPT_BACKEND - OPT_BACKEND] = MODE_BOTH,
    [OPT_MECHANISM - OPT_BACKEND] = MODE_BOTH,
    [OPT_PORT - OPT_BACKEND] = MODE_BOTH,
    [OPT_ADDRESS - OPT_BACKEND] = MODE_RECEIVE,
    [OPT_BLOCK_SIZE - OPT_BACKEND] = MODE_BOTH,
    [OPT_BLOCKS - OPT_BACKEND] = MODE_BOTH,
    [OPT_DEVICES - OPT_BACKEND] = MODE_BOTH,
    [OPT_SIZE - OPT_BACKEND] = MODE_BOTH,
    [OPT_SIZES - OPT_BACKEND] = MODE_BOTH,
    [OPT_DURATION - OPT_BACKEND] = MODE_SEND,
    [OPT_COUNT - OPT_BACKEND] = MODE_SEND,
    [OPT_RATE - OPT_BACKEND] = MODE_SEND,
    [OPT_VERIFY - OPT_BACKEND] = MODE_BOTH,
    [OPT_HOLD_MS - OPT_BACKEND] = MODE_RECEIVE,
    [OPT_ZERO_COPY - OPT_BACKEND] = MODE_SEND,
    [OPT_DROP - OPT_BACKEND] = MODE_SEND,
    [OPT_TIMEOUT - OPT_BACKEND] = MODE_RECEIVE,
    [OPT_DELAY_US - OPT_BACKEND] = MODE_SEND,
    [OPT_FAIL_AFTER - OPT_BACKEND] = MODE_SEND,
    [OPT_READ_AHEAD - OPT_BACKEND] = MODE_SEND,
    [OPT_STATUS_BATCH - OPT_BACKEND] = MODE_SEND,
    [OPT_SEND_ORDER - OPT_BACKEND] = MODE_SEND,
    [OPT_SENDER_THREAD_POSTS - OPT_BACKEND] = MODE_SEND,
    [OPT_POLL_MODE - OPT_BACKEND] = MODE_RECEIVE,
    [OPT_JSON - OPT_BACKEND] = MODE_BOTH,
    [OPT_HELP - OPT_BACKEND] = MODE_BOTH,
    [OPT_VERSION - OPT_BACKEND] = MODE_BOTH,
};

static const char *option_name(int val)
{
  for (const struct option *opt = long_options; opt->name; opt++)
    if (opt->val == val)
      return opt->name;
  return "?";
}

static void usage(FILE *f)
{
  fprintf(f,
          "Usage: sbr-perf receive [options]\n"
          "       sbr-perf send HOST [options]\n"
          "       sbr-perf check [PEER]   is this host ready for RDMA? "
          "(check --help)\n"
          "\n"
          "Moves a synthetic multi-device stream through libsbr and reports\n"
          "throughput, CPU and correctness.\n"
          "\n"
          "Both modes:\n"
          "  --backend verbs|shm          transport [verbs]\n"
          "  --mechanism status-byte|sliding-window  [status-byte]\n"
          "  --port N                     [%u]\n"
          "  --block-size BYTES           receive: lane block size incl. %u "
          "bytes\n"
          "                               of header+trailer; send: hint "
          "[1048576]\n"
          "  --blocks N                   receive: lane blocks; send: send "
          "blocks [16]\n"
          "  --devices N                  send: producer threads (devices "
          "0..N-1);\n"
          "                               receive: EOS count to wait for [1]\n"
          "  --size BYTES | --sizes MIN:MAX\n"
          "                               payload per frame (receive: check "
          "it)\n"
          "                               [block payload size]\n"
          "  --verify                     send: pattern payloads; receive: "
          "check them\n"
          "  --json                       one JSON object on stdout\n"
          "  -v, --verbose                library messages on stderr (-vv: "
          "debug)\n"
          "Receive:\n"
          "  --address A                  bind address [0.0.0.0]\n"
          "  --hold-ms MS                 hold device 0's first frame this "
          "long [0]\n"
          "  --timeout SECONDS            fail when nothing arrives for this "
          "long;\n"
          "                               0 waits forever [10]\n"
          "  --poll-mode busy|adaptive|backoff\n"
          "                               how to wait between polls "
          "[adaptive]\n"
          "Send:\n"
          "  --count N                    frames per device [1000]\n"
          "  --duration SECONDS           send for this long instead\n"
          "  --rate FPS                   per device, 0 = flat out [0]\n"
          "  --zero-copy                  acquire/submit frames that fit a "
          "block\n"
          "  --drop                       drop at once when no block is free\n"
          "  --delay-us N, --fail-after N shm fault injection\n"
          "  --read-ahead N               status READ when <= N blocks are\n"
          "                               known free (0: when none) [0]\n"
          "  --status-batch BYTES         blocks posted together share one\n"
          "                               status WRITE up to this much data\n"
          "                               (1: one per block) [128k]\n"
          "  --send-order round-robin|fifo  devices' queued blocks: one per\n"
          "                               device in turn, or submit order\n"
          "                               [fifo]\n"
          "  --sender-thread-posts          leave all posting to the sender\n"
          "                               thread, as before producers\n"
          "                               posted their own blocks (for\n"
          "                               comparison)\n"
          "\n"
          "BYTES take a k, M or G suffix (powers of 1024).  Exit status: 0 "
          "success,\n"
          "1 runtime failure, 2 bad options.\n",
          SBR_DEFAULT_PORT, BLOCK_OVERHEAD);
}

static void __attribute__((noreturn, format(printf, 1, 2)))
usage_error(const char *fmt, ...)
{
  va_list ap;
  fputs("sbr-perf: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs("\nTry 'sbr-perf --help'.\n", stderr);
  exit(EXIT_USAGE);
}

/* Unsigned integer in [min, max]; bytes allows a binary k/M/G suffix. */
static uint64_t parse_uint(const char *opt, const char *s, uint64_t min,
                           uint64_t max, bool bytes)
{
  char *end;
  errno = 0;
  if (*s == '-' || *s == '\0')
    usage_error("%s: '%s' is not a non-negative integer", opt, s);
  unsigned long long v = strtoull(s, &end, 10);
  unsigned shift = 0;
  if (bytes && *end) {
    switch (*end) {
    case 'k':
    case 'K':
      shift = 10;
      break;
    case 'm':
    case 'M':
      shift = 20;
      break;
    case 'g':
    case 'G':
      shift = 30;
      break;
    default:
      shift = 64;
    }
    if (shift < 64)
      end++;
  }
  if (errno || end == s || *end || shift == 64 || (v << shift) >> shift != v)
    usage_error("%s: '%s' is not %s", opt, s,
                bytes ? "a byte count" : "an integer");
  v <<= shift;
  if (v < min || v > max)
    usage_error("%s: %llu is out of range (%" PRIu64 "..%" PRIu64 ")", opt, v,
                min, max);
  return v;
}

static double parse_seconds(const char *opt, const char *s, bool allow_zero)
{
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < 0 ||
      (!allow_zero && v == 0))
    usage_error("%s: '%s' is not a %s number", opt, s,
                allow_zero ? "non-negative" : "positive");
  return v;
}

static void parse_sizes(struct options *o, const char *s)
{
  const char *colon = strchr(s, ':');
  if (!colon)
    usage_error("--sizes: '%s' is not MIN:MAX", s);
  char min[64];
  size_t n = (size_t)(colon - s);
  if (n >= sizeof min)
    usage_error("--sizes: '%s' is not MIN:MAX", s);
  memcpy(min, s, n);
  min[n] = '\0';
  o->size_min = parse_uint("--sizes", min, 0, UINT32_MAX, true);
  o->size_max = parse_uint("--sizes", colon + 1, 0, UINT32_MAX, true);
  if (o->size_min > o->size_max)
    usage_error("--sizes: MIN %" PRIu64 " is larger than MAX %" PRIu64,
                o->size_min, o->size_max);
}

static void parse_option(struct options *o, int c, const char *arg)
{
  switch (c) {
  case OPT_BACKEND:
    if (sbr_backend_from_name(arg, &o->backend) < 0)
      usage_error("--backend: '%s' is neither verbs nor shm", arg);
    break;
  case OPT_MECHANISM:
    if (sbr_mechanism_from_name(arg, &o->mechanism) < 0)
      usage_error("--mechanism: '%s' is neither status-byte nor "
                  "sliding-window",
                  arg);
    break;
  case OPT_PORT:
    o->port = (uint16_t)parse_uint("--port", arg, 1, 65535, false);
    break;
  case OPT_ADDRESS:
    o->address = arg;
    break;
  case OPT_BLOCK_SIZE:
    o->block_size = (uint32_t)parse_uint(
        "--block-size", arg, BLOCK_OVERHEAD + 1, MAX_BLOCK_SIZE, true);
    break;
  case OPT_BLOCKS:
    o->blocks = (uint32_t)parse_uint("--blocks", arg, 1, 65536, false);
    break;
  case OPT_DEVICES:
    o->devices =
        (uint32_t)parse_uint("--devices", arg, 1, SBR_MAX_DEVICES, false);
    break;
  case OPT_SIZE:
    if (o->size_set)
      usage_error("give --size or --sizes once");
    o->size_min = o->size_max = parse_uint("--size", arg, 0, UINT32_MAX, true);
    o->size_set = true;
    break;
  case OPT_SIZES:
    if (o->size_set)
      usage_error("give --size or --sizes once");
    parse_sizes(o, arg);
    o->size_set = true;
    break;
  case OPT_DURATION:
    o->duration_s = parse_seconds("--duration", arg, false);
    break;
  case OPT_COUNT:
    o->count = parse_uint("--count", arg, 0, UINT32_MAX, false);
    o->count_set = true;
    break;
  case OPT_RATE:
    o->rate = parse_seconds("--rate", arg, true);
    break;
  case OPT_VERIFY:
    o->verify = true;
    break;
  case OPT_HOLD_MS:
    o->hold_ms = (uint32_t)parse_uint("--hold-ms", arg, 0, 3600000, false);
    break;
  case OPT_ZERO_COPY:
    o->zero_copy = true;
    break;
  case OPT_DROP:
    o->drop = true;
    break;
  case OPT_TIMEOUT:
    o->timeout_s = parse_seconds("--timeout", arg, true);
    break;
  case OPT_DELAY_US:
    o->delay_us = (uint32_t)parse_uint("--delay-us", arg, 0, UINT32_MAX, false);
    break;
  case OPT_FAIL_AFTER:
    o->fail_after =
        (uint32_t)parse_uint("--fail-after", arg, 0, UINT32_MAX, false);
    break;
  case OPT_READ_AHEAD:
    o->read_ahead =
        (uint32_t)parse_uint("--read-ahead", arg, 0, UINT32_MAX, false);
    break;
  case OPT_STATUS_BATCH:
    o->status_batch_bytes =
        (uint32_t)parse_uint("--status-batch", arg, 1, UINT32_MAX, true);
    break;
  case OPT_SEND_ORDER:
    if (strcmp(arg, "round-robin") == 0)
      o->send_order = SBR_SEND_ORDER_ROUND_ROBIN;
    else if (strcmp(arg, "fifo") == 0)
      o->send_order = SBR_SEND_ORDER_FIFO;
    else
      usage_error("--send-order: '%s' is not round-robin or fifo", arg);
    break;
  case OPT_SENDER_THREAD_POSTS:
    o->sender_thread_posts = true;
    break;
  case OPT_POLL_MODE:
    if (sbr_poll_mode_from_name(arg, &o->poll_mode) < 0)
      usage_error("--poll-mode: '%s' is not busy, adaptive or backoff", arg);
    break;
  case OPT_JSON:
    o->json = true;
    break;
  }
}

static void parse_args(int argc, char **argv, struct options *o)
{
  memset(o, 0, sizeof *o);
  o->backend = SBR_BACKEND_VERBS;
  o->mechanism = SBR_MECH_STATUS_BYTE;
  o->port = SBR_DEFAULT_PORT;
  o->address = "0.0.0.0";
  o->block_size = 1u << 20;
  o->blocks = 16;
  o->devices = 1;
  o->count = 1000;
  o->timeout_s = 10;

  if (argc < 2)
    usage_error("say 'send HOST' or 'receive'");
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(stdout);
    exit(0);
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("sbr-perf %s\n", SBR_VERSION_STRING);
    exit(0);
  }
  if (strcmp(argv[1], "send") == 0)
    o->mode = MODE_SEND;
  else if (strcmp(argv[1], "receive") == 0)
    o->mode = MODE_RECEIVE;
  else
    usage_error("unknown mode '%s': say 'send HOST', 'receive' or 'check'",
                argv[1]);

  /* getopt sees "send"/"receive" as the program name. */
  int c;
  opterr = 0;
  while ((c = getopt_long(argc - 1, argv + 1, "hv", long_options, NULL)) !=
         -1) {
    if (c == '?')
      usage_error("unknown or incomplete option '%s'", argv[optind]);
    if (c == 'h' || c == OPT_HELP) {
      usage(stdout);
      exit(0);
    }
    if (c == OPT_VERSION) {
      printf("sbr-perf %s\n", SBR_VERSION_STRING);
      exit(0);
    }
    if (c == 'v') {
      o->verbose++;
      continue;
    }
    if (!(option_modes[c - OPT_BACKEND] & o->mode))
      usage_error("--%s is a %s option", option_name(c),
                  o->mode == MODE_SEND ? "receive" : "send");
    parse_option(o, c, optarg);
  }
  int rest = argc - 1 - optind;
  char **args = argv + 1 + optind;
  if (o->mode == MODE_SEND) {
    if (rest != 1)
      usage_error("send takes exactly one HOST");
    o->host = args[0];
    /* --duration alone means "for this long", not "1000 frames at most". */
    if (o->duration_s > 0 && !o->count_set)
      o->count = UINT64_MAX;
    if ((o->delay_us || o->fail_after) && o->backend != SBR_BACKEND_SHM)
      usage_error("--delay-us and --fail-after need --backend shm");
  } else if (rest != 0) {
    usage_error("receive takes no HOST ('%s')", args[0]);
  }
}

/* ------------------------------------------------------------- sender */

struct send_run;

struct producer {
  struct send_run *run;
  pthread_t thread;
  uint8_t device;
  uint8_t *buf;       /* the frame being sent (copying path) */
  uint64_t attempts;  /* frames tried, counted against --count */
  uint64_t frames;    /* frames handed to the library = next number */
  uint64_t bytes;     /* their payload */
  uint64_t blocks;    /* blocks those frames take */
  uint64_t drops;     /* backpressure drops (the library counts too) */
  uint64_t zero_copy; /* frames that went acquire/submit */
  int error;          /* first fatal negative errno, 0 if none */
};

struct send_run {
  const struct options *o;
  sbr_sender *s;
  size_t payload_cap; /* payload bytes in one block */
  pthread_barrier_t start;
  uint64_t start_ns; /* written before the barrier, read after */
  uint64_t end_ns;   /* --duration deadline, UINT64_MAX if none */
  atomic_bool abort; /* a producer hit a fatal error: all stop */
  struct producer *prod;
};

static int send_frame(struct producer *p, size_t size)
{
  const struct options *o = p->run->o;
  struct sbr_block_meta meta;
  sbr_block_meta_init(&meta, p->device);
  meta.pts = p->frames * FRAME_INTERVAL_NS;
  meta.duration = FRAME_INTERVAL_NS;
  meta.capture_time = realtime_ns();
  uint64_t seed = pattern_seed(p->device, p->frames, size);

  if (o->zero_copy && size <= p->run->payload_cap) {
    sbr_send_block *b;
    int ret = sbr_sender_acquire(p->run->s, p->device, &b);
    if (ret < 0)
      return ret;
    /* The producer renders straight into registered memory: no copy. */
    uint8_t *dst = sbr_send_block_payload(b, NULL);
    if (o->verify)
      fill_pattern(dst, size, seed);
    ret = sbr_sender_submit(p->run->s, b, &meta, size);
    if (ret == -EINVAL)
      sbr_sender_abandon(p->run->s, b); /* still ours on -EINVAL */
    if (ret == 0)
      p->zero_copy++;
    return ret;
  }
  if (o->verify)
    fill_pattern(p->buf, size, seed);
  return sbr_sender_send(p->run->s, &meta, p->buf, size);
}

static void *producer_main(void *arg)
{
  struct producer *p = arg;
  struct send_run *run = p->run;
  const struct options *o = run->o;
  char name[16];
  snprintf(name, sizeof name, "producer-%u", p->device);
  pthread_setname_np(pthread_self(), name);

  pthread_barrier_wait(&run->start);
  uint64_t interval = o->rate > 0 ? (uint64_t)(1e9 / o->rate) : 0;
  uint64_t next_ns = run->start_ns;
  while (p->attempts < o->count && !interrupted &&
         !atomic_load_explicit(&run->abort, memory_order_relaxed)) {
    if (interval) {
      sleep_until_ns(next_ns);
      /* A camera that fell behind doesn't burst to catch up. */
      uint64_t now = mono_ns();
      next_ns = next_ns + interval > now ? next_ns + interval : now;
    }
    if (run->end_ns != UINT64_MAX && mono_ns() >= run->end_ns)
      break;
    size_t size = (size_t)frame_size_for(o, p->device, p->frames);
    p->attempts++;
    int ret = send_frame(p, size);
    if (ret == 0) {
      p->frames++;
      p->bytes += size;
      p->blocks += size ? (size + run->payload_cap - 1) / run->payload_cap : 1;
    } else if (ret == -EAGAIN) {
      p->drops++; /* the frame number goes to the next frame */
    } else {
      p->error = ret;
      atomic_store(&run->abort, true);
      break;
    }
  }
  return NULL;
}

/* Connects, waiting a little for a receiver that is still starting. */
static int connect_sender(const struct options *o, sbr_sender **out)
{
  struct sbr_sender_config cfg;
  sbr_sender_config_init(&cfg);
  cfg.backend = o->backend;
  cfg.mechanism = o->mechanism;
  cfg.host = o->host;
  cfg.port = o->port;
  cfg.send_blocks = o->blocks;
  cfg.block_size_hint = o->block_size;
  cfg.backpressure = o->drop ? SBR_BACKPRESSURE_DROP : SBR_BACKPRESSURE_WAIT;
  cfg.read_ahead = o->read_ahead;
  cfg.status_batch_bytes = o->status_batch_bytes;
  cfg.send_order = o->send_order;
  /* Studies' knobs, not the API's (lib/sbr-testing.h). */
  struct sbr__sender_knobs knobs = {
      .faults = {.delay_us = o->delay_us, .fail_after_wrs = o->fail_after},
      .sender_thread_posts = o->sender_thread_posts,
  };

  char errbuf[256];
  uint64_t give_up = mono_ns() + CONNECT_RETRY_MS * 1000000ull;
  for (;;) {
    int ret = sbr__sender_new_knobs(&cfg, &knobs, out, errbuf, sizeof errbuf);
    if (ret == 0)
      return 0;
    /* Not listening yet, or every lane taken (a sender of the last run
     * still leaving); anything else a retry won't fix (sbr.h). */
    bool not_yet = ret == -ECONNREFUSED || ret == -ENOENT || ret == -EBUSY;
    if (!not_yet || interrupted || mono_ns() >= give_up) {
      fprintf(stderr, "sbr-perf: cannot connect to %s:%u over %s: %s\n",
              o->host, o->port, sbr_backend_name(o->backend),
              errbuf[0] ? errbuf : strerror(-ret));
      return ret;
    }
    usleep(CONNECT_RETRY_PAUSE_US);
  }
}

/* Ends every device's stream; the flush before each EOS frees the blocks
 * it needs, so --drop doesn't drop an EOS. */
static int send_eos(struct send_run *run)
{
  for (uint32_t d = 0; d < run->o->devices; d++) {
    struct sbr_block_meta meta;
    sbr_block_meta_init(&meta, (uint8_t)d);
    meta.kind = SBR_KIND_EOS;
    meta.pts = run->prod[d].frames * FRAME_INTERVAL_NS;
    meta.capture_time = realtime_ns();
    int ret = sbr_sender_flush(run->s, FLUSH_TIMEOUT_MS);
    if (ret == 0)
      ret = sbr_sender_send(run->s, &meta, NULL, 0);
    if (ret < 0)
      return ret;
  }
  return sbr_sender_flush(run->s, FLUSH_TIMEOUT_MS);
}

/* Waits, after the last completion, until the receiver has taken the
 * stream in, before disconnecting.  A completion only says the bytes landed:
 * a receiver that sees the disconnect closes the lane and loses blocks it
 * has not delivered yet (lib/engine/receiver.c, handle_events -> lane_close).
 * The sliding window says when it is done (one ACK per block); status-byte
 * sends nothing back, so it waits LINGER_MS unless the receiver hangs up
 * first, as sbr-perf receive does once every EOS arrived. */
static void linger(struct send_run *run)
{
  uint64_t give_up = mono_ns() + LINGER_MS * 1000000ull;
  while (mono_ns() < give_up && !interrupted &&
         sbr_sender_is_connected(run->s)) {
    struct sbr_sender_stats st;
    sbr_sender_get_stats(run->s, &st);
    if (run->o->mechanism == SBR_MECH_SLIDING_WINDOW && st.acks >= st.blocks)
      return;
    usleep(LINGER_POLL_US);
  }
}

/* The sender's statistics once they have settled.  The sliding-window
 * engine counts a block after post_send returns, but its ACK thread may
 * already have completed and recycled that block, so sbr_sender_flush can
 * return before the last post is counted (lib/engine/sender-sliding-window.c,
 * sbr__sender_count_post after post_send).  For the same reason its
 * per-device counters may charge a block to the wrong device, so only the
 * total is compared. */
static void read_final_stats(struct send_run *run, uint64_t handed,
                             struct sbr_sender_stats *st)
{
  uint64_t give_up = mono_ns() + SETTLE_MS * 1000000ull;
  for (;;) {
    sbr_sender_get_stats(run->s, st);
    if (st->blocks >= handed || mono_ns() >= give_up)
      return;
    usleep(LINGER_POLL_US);
  }
}

struct send_result {
  uint64_t frames, bytes, blocks, drops, zero_copy;
  double elapsed_s, cpu_s;
  struct sbr_sender_stats stats;
  char failure[256]; /* empty when everything was sent */
};

static void print_send_result(const struct options *o,
                              const struct send_run *run,
                              const struct send_result *res)
{
  const struct sbr_sender_stats *st = &res->stats;
  double mbps = res->elapsed_s > 0 ? res->bytes / res->elapsed_s / 1e6 : 0;
  double fps = res->elapsed_s > 0 ? res->frames / res->elapsed_s : 0;
  double cpu_pct = res->elapsed_s > 0 ? res->cpu_s / res->elapsed_s * 100 : 0;
  double sync_mean_us =
      st->sync_reads ? st->sync_read_ns_total / 1e3 / st->sync_reads : 0;
  double sync_max_us = st->sync_read_ns_max / 1e3;
  uint32_t block_size = (uint32_t)(run->payload_cap + BLOCK_OVERHEAD);
  const char *backend = sbr_backend_name(o->backend);
  const char *mech = sbr_mechanism_name(o->mechanism);

  if (o->json) {
    printf("{\"mode\":\"send\",\"backend\":\"%s\",\"mechanism\":\"%s\","
           "\"host\":",
           backend, mech);
    json_string(stdout, o->host);
    printf(",\"port\":%u,\"block_size\":%u,\"blocks\":%u,\"devices\":%u,"
           "\"zero_copy\":%s,\"backpressure\":\"%s\","
           "\"size_min\":%" PRIu64 ",\"size_max\":%" PRIu64 ","
           "\"frames\":%" PRIu64 ",\"bytes\":%" PRIu64 ","
           "\"elapsed_s\":%.6f,\"throughput_mbps\":%.3f,"
           "\"frames_per_s\":%.3f,\"zero_copy_frames\":%" PRIu64 ","
           "\"sync_reads\":%" PRIu64 ",\"sync_read_mean_us\":%.3f,"
           "\"sync_read_max_us\":%.3f,\"held_skipped\":%" PRIu64 ","
           "\"busy_skipped\":%" PRIu64 ",\"no_free_waits\":%" PRIu64 ","
           "\"drops\":%" PRIu64 ",\"acks\":%" PRIu64 ","
           "\"wr_posted\":%" PRIu64 ",\"status_writes\":%" PRIu64 ","
           "\"kicks\":%" PRIu64 ",\"producer_posts\":%" PRIu64 ","
           "\"cpu_s\":%.3f,\"cpu_percent\":%.1f,"
           "\"ok\":%s",
           o->port, block_size, o->blocks, o->devices,
           o->zero_copy ? "true" : "false", o->drop ? "drop" : "wait",
           o->size_min, o->size_max, res->frames, res->bytes, res->elapsed_s,
           mbps, fps, res->zero_copy, st->sync_reads, sync_mean_us, sync_max_us,
           st->held_skipped, st->busy_skipped, st->no_free_waits, st->drops,
           st->acks, st->wr_posted, st->status_writes, st->kicks,
           st->producer_posts, res->cpu_s, cpu_pct,
           res->failure[0] ? "false" : "true");
    if (res->failure[0]) {
      printf(",\"error\":");
      json_string(stdout, res->failure);
    }
    printf("}\n");
    return;
  }
  printf("mode:            send to %s:%u\n", o->host, o->port);
  printf("transport:       %s, %s\n", backend, mech);
  printf("blocks:          %u send blocks, lane blocks of %u bytes\n",
         o->blocks, block_size);
  printf("devices:         %u%s, backpressure %s\n", o->devices,
         o->zero_copy ? " (zero-copy)" : "", o->drop ? "drop" : "wait");
  if (o->size_min == o->size_max)
    printf("frame size:      %" PRIu64 " bytes\n", o->size_min);
  else
    printf("frame size:      %" PRIu64 "..%" PRIu64 " bytes\n", o->size_min,
           o->size_max);
  printf("frames:          %" PRIu64 " (%" PRIu64 " zero-copy)\n", res->frames,
         res->zero_copy);
  printf("bytes:           %" PRIu64 "\n", res->bytes);
  printf("elapsed:         %.3f s\n", res->elapsed_s);
  printf("throughput:      %.1f MB/s, %.1f frames/s\n", mbps, fps);
  printf("sync reads:      %" PRIu64 ", mean %.1f us, max %.1f us\n",
         st->sync_reads, sync_mean_us, sync_max_us);
  printf("skipped:         %" PRIu64 " held, %" PRIu64 " busy, %" PRIu64
         " syncs found none free\n",
         st->held_skipped, st->busy_skipped, st->no_free_waits);
  printf("drops:           %" PRIu64 "\n", st->drops);
  if (o->mechanism == SBR_MECH_SLIDING_WINDOW)
    printf("acks:            %" PRIu64 "\n", st->acks);
  printf("work requests:   %" PRIu64 "\n", st->wr_posted);
  if (o->mechanism == SBR_MECH_STATUS_BYTE) {
    printf("status writes:   %" PRIu64 "\n", st->status_writes);
    printf("kicks:           %" PRIu64 "\n", st->kicks);
    printf("producer posts:  %" PRIu64 "\n", st->producer_posts);
  }
  printf("cpu:             %.2f s (%.1f %%)\n", res->cpu_s, cpu_pct);
  printf("result:          %s\n", res->failure[0] ? "FAILED" : "ok");
}

/* Sets the run's failure reason once; later ones are less telling. */
static void __attribute__((format(printf, 2, 3)))
set_failure(char failure[256], const char *fmt, ...)
{
  if (failure[0])
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(failure, 256, fmt, ap);
  va_end(ap);
}

static int start_producers(struct send_run *run)
{
  const struct options *o = run->o;
  size_t buf_size = o->size_max ? (size_t)o->size_max : 1;
  for (uint32_t d = 0; d < o->devices; d++) {
    struct producer *p = &run->prod[d];
    p->run = run;
    p->device = (uint8_t)d;
    p->buf = malloc(buf_size);
    if (!p->buf)
      return -ENOMEM;
    /* Touch every page now, not in the timed loop. */
    memset(p->buf, 0xa5, buf_size);
  }
  pthread_barrier_init(&run->start, NULL, o->devices + 1);
  for (uint32_t d = 0; d < o->devices; d++) {
    int ret = pthread_create(&run->prod[d].thread, NULL, producer_main,
                             &run->prod[d]);
    if (ret != 0) {
      /* Unreachable in practice; the barrier would never open. */
      fprintf(stderr, "sbr-perf: cannot start producer %u: %s\n", d,
              strerror(ret));
      exit(EXIT_RUNTIME);
    }
  }
  return 0;
}

static int run_send(const struct options *o)
{
  struct send_run run;
  memset(&run, 0, sizeof run);
  run.o = o;
  if (connect_sender(o, &run.s) < 0)
    return EXIT_RUNTIME;
  run.payload_cap = sbr_sender_block_payload_size(run.s);

  struct options eff = *o; /* with the default size filled in */
  if (!eff.size_set)
    eff.size_min = eff.size_max = run.payload_cap;
  run.o = &eff;
  /* sbr_sender_send needs all of a frame's blocks at once. */
  uint64_t need =
      eff.size_max ? (eff.size_max + run.payload_cap - 1) / run.payload_cap : 1;
  if (need > o->blocks) {
    fprintf(stderr,
            "sbr-perf: a %" PRIu64 "-byte frame needs %" PRIu64
            " blocks of %zu payload bytes; raise --blocks (%u)\n",
            eff.size_max, need, run.payload_cap, o->blocks);
    sbr_sender_free(run.s);
    return EXIT_USAGE;
  }

  run.prod = calloc(o->devices, sizeof *run.prod);
  if (!run.prod || start_producers(&run) < 0) {
    fprintf(stderr, "sbr-perf: out of memory\n");
    exit(EXIT_RUNTIME); /* no producer runs yet: nothing to stop */
  }
  double cpu0 = cpu_seconds();
  run.start_ns = mono_ns();
  run.end_ns = o->duration_s > 0
                   ? run.start_ns + (uint64_t)(o->duration_s * 1e9)
                   : UINT64_MAX;
  pthread_barrier_wait(&run.start);

  struct send_result res;
  memset(&res, 0, sizeof res);
  int first_error = 0;
  for (uint32_t d = 0; d < o->devices; d++) {
    struct producer *p = &run.prod[d];
    pthread_join(p->thread, NULL);
    res.frames += p->frames;
    res.bytes += p->bytes;
    res.blocks += p->blocks;
    res.drops += p->drops;
    res.zero_copy += p->zero_copy;
    if (p->error && !first_error)
      first_error = p->error;
    free(p->buf);
  }
  pthread_barrier_destroy(&run.start);

  if (first_error) {
    set_failure(res.failure, "sending failed: %s%s", strerror(-first_error),
                sbr_sender_is_connected(run.s) ? "" : " (connection lost)");
  } else {
    int ret = send_eos(&run);
    if (ret < 0)
      set_failure(res.failure, "ending the streams failed: %s%s",
                  strerror(-ret),
                  ret == -ETIMEDOUT ? " (the receiver stopped consuming)" : "");
  }
  res.elapsed_s = (mono_ns() - run.start_ns) / 1e9;
  res.cpu_s = cpu_seconds() - cpu0;
  if (!res.failure[0])
    linger(&run);
  uint64_t handed = res.blocks + o->devices; /* frames' blocks and EOS */
  read_final_stats(&run, handed, &res.stats);

  /* What the library posted must be what the producers handed it. */
  if (!res.failure[0] && res.stats.blocks != handed)
    set_failure(res.failure,
                "%" PRIu64 " blocks handed to the library, %" PRIu64 " posted",
                handed, res.stats.blocks);
  if (res.drops && !o->drop)
    set_failure(res.failure,
                "%" PRIu64 " frames dropped after waiting for a free block "
                "(receiver too slow or stalled?)",
                res.drops);

  print_send_result(&eff, &run, &res);
  fflush(stdout);
  sbr_sender_free(run.s);
  free(run.prod);
  if (res.failure[0]) {
    fprintf(stderr, "sbr-perf: %s\n", res.failure);
    return EXIT_RUNTIME;
  }
  return 0;
}

/* ----------------------------------------------------------- receiver */

/* Where one device's stream stands. */
struct dev_track {
  bool seen;           /* any block of it arrived */
  bool eos;            /* its EOS arrived */
  uint64_t next_frame; /* expected frame number */
  uint64_t frames;     /* DATA frames received */
  uint64_t bytes;      /* their payload */
  uint64_t verified;   /* frames whose bytes all matched */
};

/* The first zero-copy frame of device 0, kept back (--hold-ms). */
struct holder {
  pthread_t thread;
  bool started;
  struct sbr_frame frame;
  uint64_t until_ns;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool cancel; /* the run is over: release now */
  bool held;   /* a frame was held (stays set after its release) */
};

/* Capture-to-receive latencies, for their percentiles: a log-linear
 * histogram of nanoseconds, LAT_SUB buckets per power of two (values below
 * 2 LAT_SUB exact), so a percentile is within 1/(2 LAT_SUB) (0.8 %) of the
 * true value, in fixed memory however long the run.  Mean and max are
 * exact. */
#define LAT_SUB_BITS 6
#define LAT_SUB (1u << LAT_SUB_BITS)
#define LAT_BUCKETS (LAT_SUB * (64 - LAT_SUB_BITS + 1))

struct lat_hist {
  uint64_t n, sum_ns, max_ns;
  uint64_t count[LAT_BUCKETS];
};

static unsigned lat_bucket(uint64_t v)
{
  if (v < LAT_SUB)
    return (unsigned)v;
  /* v >> e is in [LAT_SUB .. 2 LAT_SUB): LAT_SUB buckets per octave. */
  unsigned e = 63u - (unsigned)__builtin_clzll(v) - LAT_SUB_BITS;
  return e * LAT_SUB + (unsigned)(v >> e);
}

/* The middle of bucket i. */
static double lat_bucket_value(unsigned i)
{
  if (i < 2 * LAT_SUB)
    return i;
  unsigned e = i / LAT_SUB - 1;
  uint64_t m = i - (uint64_t)e * LAT_SUB;
  return ((double)m + 0.5) * (double)(1ull << e);
}

static void lat_add(struct lat_hist *h, uint64_t ns)
{
  unsigned b = lat_bucket(ns);
  h->count[b < LAT_BUCKETS ? b : LAT_BUCKETS - 1]++;
  h->n++;
  h->sum_ns += ns;
  if (ns > h->max_ns)
    h->max_ns = ns;
}

/* The q-quantile (0..1) in microseconds: the smallest bucket that holds
 * at least q of the samples, never above the exact max. */
static double lat_quantile_us(const struct lat_hist *h, double q)
{
  if (!h->n)
    return 0;
  double rank = q * (double)h->n;
  uint64_t want = (uint64_t)rank, seen = 0;
  if ((double)want < rank || want < 1)
    want++;
  for (unsigned i = 0; i < LAT_BUCKETS; i++) {
    seen += h->count[i];
    if (seen >= want) {
      double v = lat_bucket_value(i);
      return (v < (double)h->max_ns ? v : (double)h->max_ns) / 1e3;
    }
  }
  return h->max_ns / 1e3;
}

struct recv_run {
  const struct options *o;
  sbr_receiver *r;
  struct dev_track dev[SBR_MAX_DEVICES];
  uint32_t eos_devices;
  uint64_t frames, bytes, verified, errors;
  struct lat_hist lat;
  uint64_t first_ns, last_ns; /* first and last arrival */
  double cpu_at_first;
  struct holder hold;
};

static void __attribute__((format(printf, 2, 3)))
stream_error(struct recv_run *run, const char *fmt, ...)
{
  run->errors++;
  if (run->errors > MAX_PRINTED_ERRORS) {
    return;
  }
  va_list ap;
  fputs("sbr-perf: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  if (run->errors == MAX_PRINTED_ERRORS)
    fputs("sbr-perf: (further errors are counted, not printed)\n", stderr);
}

static void *holder_main(void *arg)
{
  struct holder *h = arg;
  struct timespec ts;
  deadline_ts(&ts, h->until_ns);
  pthread_mutex_lock(&h->lock);
  while (!h->cancel &&
         pthread_cond_timedwait(&h->cond, &h->lock, &ts) != ETIMEDOUT)
    ;
  pthread_mutex_unlock(&h->lock);
  /* Released from this thread on purpose: the contract allows any. */
  sbr_frame_release(&h->frame);
  return NULL;
}

/* Marks the frame's blocks held (status 2) and releases them later from
 * another thread.  Returns false when it can't (then the caller releases). */
static bool hold_frame(struct recv_run *run, struct sbr_frame *f)
{
  struct holder *h = &run->hold;
  for (uint32_t i = 0; i < f->n_blocks; i++)
    sbr_block_hold(f->blocks[i]);
  h->frame = *f;
  h->until_ns = mono_ns() + (uint64_t)run->o->hold_ms * 1000000u;
  pthread_mutex_init(&h->lock, NULL);
  init_monotonic_cond(&h->cond);
  if (pthread_create(&h->thread, NULL, holder_main, h) != 0) {
    pthread_cond_destroy(&h->cond);
    pthread_mutex_destroy(&h->lock);
    return false;
  }
  h->started = true;
  h->held = true;
  return true;
}

static void end_hold(struct holder *h)
{
  if (!h->started)
    return;
  pthread_mutex_lock(&h->lock);
  h->cancel = true;
  pthread_cond_signal(&h->cond);
  pthread_mutex_unlock(&h->lock);
  pthread_join(h->thread, NULL);
  pthread_cond_destroy(&h->cond);
  pthread_mutex_destroy(&h->lock);
  h->started = false;
}

/* Checks a DATA frame's bytes against the pattern; 0 if all match. */
static int verify_payload(struct recv_run *run, const struct sbr_frame *f,
                          uint64_t frame)
{
  const struct sbr_block_info *in = &f->info;
  uint64_t seed = pattern_seed(in->device, frame, f->size);
  uint64_t bad = UINT64_MAX;
  uint64_t covered = 0;
  if (f->n_blocks == 0) {
    /* Reassembled by copying: info.payload is the whole frame. */
    bad = check_pattern(in->payload, f->size, 0, seed);
    covered = f->size;
  } else {
    for (uint32_t i = 0; i < f->n_blocks && bad == UINT64_MAX; i++) {
      const struct sbr_block_info *bi = sbr_block_get_info(f->blocks[i]);
      if (bi->frame_offset != covered) {
        stream_error(run,
                     "device %u frame %" PRIu64 ": fragment %u at offset %u, "
                     "expected %" PRIu64,
                     in->device, frame, i, bi->frame_offset, covered);
        return -1;
      }
      bad = check_pattern(bi->payload, bi->payload_len, bi->frame_offset, seed);
      covered += bi->payload_len;
    }
  }
  if (bad != UINT64_MAX) {
    stream_error(run,
                 "device %u frame %" PRIu64 " (%u bytes): byte %" PRIu64
                 " differs from the pattern",
                 in->device, frame, f->size, bad);
    return -1;
  }
  if (covered != f->size) {
    stream_error(run,
                 "device %u frame %" PRIu64 ": fragments carry %" PRIu64
                 " bytes, frame size %u",
                 in->device, frame, covered, f->size);
    return -1;
  }
  return 0;
}

static void handle_eos(struct recv_run *run, const struct sbr_frame *f)
{
  const struct sbr_block_info *in = &f->info;
  struct dev_track *d = &run->dev[in->device];
  d->seen = true;
  if (d->eos) {
    stream_error(run, "device %u: a second EOS", in->device);
    return;
  }
  d->eos = true;
  run->eos_devices++;
  /* The EOS pts says how many frames were sent: the tail is checked too. */
  if (in->pts == SBR_TIME_NONE || in->pts % FRAME_INTERVAL_NS != 0) {
    stream_error(run, "device %u: EOS without a frame count", in->device);
    return;
  }
  uint64_t sent = in->pts / FRAME_INTERVAL_NS;
  if (sent != d->next_frame)
    stream_error(run,
                 "device %u: EOS after %" PRIu64 " frames, the sender sent "
                 "%" PRIu64,
                 in->device, d->next_frame, sent);
}

static void handle_data(struct recv_run *run, struct sbr_frame *f)
{
  const struct options *o = run->o;
  const struct sbr_block_info *in = &f->info;
  struct dev_track *d = &run->dev[in->device];
  d->seen = true;
  d->frames++;
  d->bytes += f->size;
  run->frames++;
  run->bytes += f->size;

  if (in->capture_time != SBR_TIME_NONE) {
    uint64_t now = realtime_ns();
    uint64_t lat = now > in->capture_time ? now - in->capture_time : 0;
    lat_add(&run->lat, lat);
  }
  if (d->eos)
    stream_error(run, "device %u: a frame after its EOS", in->device);
  if (in->pts == SBR_TIME_NONE || in->pts % FRAME_INTERVAL_NS != 0) {
    stream_error(run, "device %u: pts %" PRIu64 " is not a frame number",
                 in->device, in->pts);
    return;
  }
  uint64_t frame = in->pts / FRAME_INTERVAL_NS;
  if (frame > d->next_frame) {
    stream_error(run,
                 "device %u: frame %" PRIu64 " arrived, expected %" PRIu64
                 " (%" PRIu64 " missing)",
                 in->device, frame, d->next_frame, frame - d->next_frame);
  } else if (frame < d->next_frame) {
    stream_error(run,
                 "device %u: frame %" PRIu64 " arrived after frame %" PRIu64
                 " (reordered or duplicated)",
                 in->device, frame, d->next_frame - 1);
  }
  /* A late frame doesn't rewind: the frames after it aren't errors too. */
  if (frame + 1 > d->next_frame)
    d->next_frame = frame + 1;

  bool ok = true;
  if (f->size != in->frame_size) {
    stream_error(run,
                 "device %u frame %" PRIu64 ": %u bytes arrived, header "
                 "says %u",
                 in->device, frame, f->size, in->frame_size);
    ok = false;
  }
  if (o->size_set) {
    uint64_t want = frame_size_for(o, in->device, frame);
    if (f->size != want) {
      stream_error(run,
                   "device %u frame %" PRIu64 ": %u bytes, expected %" PRIu64,
                   in->device, frame, f->size, want);
      ok = false;
    }
  }
  if (o->verify && ok && verify_payload(run, f, frame) == 0) {
    d->verified++;
    run->verified++;
  }
}

static void handle_frame(struct recv_run *run, struct sbr_frame *f)
{
  const struct options *o = run->o;
  const struct sbr_block_info *in = &f->info;
  if (in->kind == SBR_KIND_EOS)
    handle_eos(run, f);
  else if (in->kind == SBR_KIND_DATA)
    handle_data(run, f);
  /* CAPS and future kinds: nothing to check. */

  /* A copied frame has no blocks left to hold: wait for one that has. */
  if (o->hold_ms && !run->hold.held && in->kind == SBR_KIND_DATA &&
      in->device == 0 && f->n_blocks > 0 && hold_frame(run, f))
    return;
  sbr_frame_release(f);
}

/* Receives until every expected EOS arrived, the timeout, or SIGINT.
 * Returns a failure reason or NULL. */
static const char *receive_loop(struct recv_run *run, char *why, size_t len)
{
  const struct options *o = run->o;
  uint64_t timeout_ns = (uint64_t)(o->timeout_s * 1e9);
  uint64_t idle_since = mono_ns();
  while (run->eos_devices < o->devices) {
    if (interrupted)
      return "interrupted";
    struct sbr_frame f;
    int ret = sbr_receiver_next_frame(run->r, RECV_SLICE_MS, &f);
    uint64_t now = mono_ns();
    if (ret == -ETIMEDOUT || ret == -EINTR) {
      if (timeout_ns && now - idle_since >= timeout_ns) {
        snprintf(why, len, "nothing arrived for %g s (%u of %u devices ended)",
                 o->timeout_s, run->eos_devices, o->devices);
        return why;
      }
      continue;
    }
    if (ret < 0) {
      snprintf(why, len, "receiving failed: %s", strerror(-ret));
      return why;
    }
    if (!run->first_ns) {
      run->first_ns = now;
      run->cpu_at_first = cpu_seconds();
    }
    run->last_ns = now;
    idle_since = now;
    handle_frame(run, &f);
  }
  return NULL;
}

/* Devices worth a line: the expected ones and any that showed up. */
static bool device_shown(const struct recv_run *run, uint32_t d,
                         const struct sbr_device_stats *ds)
{
  return d < run->o->devices || run->dev[d].seen || ds->blocks || ds->gaps ||
         ds->drops || ds->rejected;
}

static void print_recv_result(const struct recv_run *run,
                              const struct sbr_receiver_stats *st,
                              const struct sbr_device_stats *ds, double cpu_s,
                              const char *failure)
{
  const struct options *o = run->o;
  double elapsed = run->first_ns ? (run->last_ns - run->first_ns) / 1e9 : 0;
  double mbps = elapsed > 0 ? run->bytes / elapsed / 1e6 : 0;
  double fps = elapsed > 0 ? run->frames / elapsed : 0;
  double cpu_pct = elapsed > 0 ? cpu_s / elapsed * 100 : 0;
  const struct lat_hist *lh = &run->lat;
  double lat_mean_us = lh->n ? lh->sum_ns / 1e3 / lh->n : 0;
  double lat_max_us = lh->max_ns / 1e3;
  double lat_p50_us = lat_quantile_us(lh, 0.50);
  double lat_p90_us = lat_quantile_us(lh, 0.90);
  double lat_p99_us = lat_quantile_us(lh, 0.99);
  uint64_t gaps = 0, drops = 0, rejected = st->rejected;
  for (uint32_t d = 0; d < SBR_MAX_DEVICES; d++) {
    gaps += ds[d].gaps;
    drops += ds[d].drops;
  }
  const char *backend = sbr_backend_name(o->backend);
  const char *mech = sbr_mechanism_name(o->mechanism);

  if (o->json) {
    printf("{\"mode\":\"receive\",\"backend\":\"%s\",\"mechanism\":\"%s\","
           "\"address\":",
           backend, mech);
    json_string(stdout, o->address);
    printf(",\"port\":%u,\"block_size\":%u,\"blocks\":%u,\"devices\":%u,"
           "\"eos_devices\":%u,\"frames\":%" PRIu64 ",\"bytes\":%" PRIu64
           ",\"elapsed_s\":%.6f,\"throughput_mbps\":%.3f,"
           "\"frames_per_s\":%.3f,\"latency_mean_us\":%.3f,"
           "\"latency_max_us\":%.3f,\"latency_p50_us\":%.3f,"
           "\"latency_p90_us\":%.3f,\"latency_p99_us\":%.3f,"
           "\"latency_samples\":%" PRIu64 ",\"verify\":%s,"
           "\"frames_verified\":%" PRIu64 ",\"errors\":%" PRIu64 ","
           "\"gaps\":%" PRIu64 ",\"drops\":%" PRIu64 ","
           "\"rejected\":%" PRIu64 ",\"frames_copied\":%" PRIu64 ","
           "\"recv_wr_posted\":%" PRIu64 ",\"lanes_opened\":%" PRIu64 ","
           "\"held_ms\":%u,\"cpu_s\":%.3f,\"cpu_percent\":%.1f,"
           "\"per_device\":[",
           o->port, o->block_size, o->blocks, o->devices, run->eos_devices,
           run->frames, run->bytes, elapsed, mbps, fps, lat_mean_us, lat_max_us,
           lat_p50_us, lat_p90_us, lat_p99_us, lh->n,
           o->verify ? "true" : "false", run->verified, run->errors, gaps,
           drops, rejected, st->frames_copied, st->recv_wr_posted,
           st->lanes_opened, run->hold.held ? o->hold_ms : 0, cpu_s, cpu_pct);
    bool first = true;
    for (uint32_t d = 0; d < SBR_MAX_DEVICES; d++) {
      if (!device_shown(run, d, &ds[d]))
        continue;
      printf("%s{\"device\":%u,\"frames\":%" PRIu64 ",\"bytes\":%" PRIu64
             ",\"eos\":%s,\"gaps\":%" PRIu64 ",\"drops\":%" PRIu64
             ",\"rejected\":%" PRIu64 "}",
             first ? "" : ",", d, run->dev[d].frames, run->dev[d].bytes,
             run->dev[d].eos ? "true" : "false", ds[d].gaps, ds[d].drops,
             ds[d].rejected);
      first = false;
    }
    printf("],\"ok\":%s", failure ? "false" : "true");
    if (failure) {
      printf(",\"error\":");
      json_string(stdout, failure);
    }
    printf("}\n");
    return;
  }
  printf("mode:            receive on %s:%u\n", o->address, o->port);
  printf("transport:       %s, %s\n", backend, mech);
  printf("blocks:          %u lane blocks of %u bytes\n", o->blocks,
         o->block_size);
  printf("devices:         %u ended of %u expected\n", run->eos_devices,
         o->devices);
  printf("frames:          %" PRIu64 " (%" PRIu64 " copied to reassemble)\n",
         run->frames, st->frames_copied);
  printf("bytes:           %" PRIu64 "\n", run->bytes);
  printf("elapsed:         %.3f s (first to last arrival)\n", elapsed);
  printf("throughput:      %.1f MB/s, %.1f frames/s\n", mbps, fps);
  printf("latency:         mean %.1f us, p50 %.1f, p90 %.1f, p99 %.1f, "
         "max %.1f us (capture to receive, %" PRIu64 " frames)\n",
         lat_mean_us, lat_p50_us, lat_p90_us, lat_p99_us, lat_max_us, lh->n);
  for (uint32_t d = 0; d < SBR_MAX_DEVICES; d++) {
    if (!device_shown(run, d, &ds[d]))
      continue;
    printf("device %-3u       frames %" PRIu64 ", gaps %" PRIu64
           ", drops %" PRIu64 ", rejected %" PRIu64 "%s\n",
           d, run->dev[d].frames, ds[d].gaps, ds[d].drops, ds[d].rejected,
           run->dev[d].eos ? "" : ", no EOS");
  }
  printf("totals:          gaps %" PRIu64 ", drops %" PRIu64
         ", rejected %" PRIu64 "\n",
         gaps, drops, rejected);
  if (o->hold_ms)
    printf("held:            %s\n", run->hold.held
                                        ? "device 0's first frame"
                                        : "nothing (no zero-copy frame)");
  printf("verified:        %s%" PRIu64 " frames\n", o->verify ? "" : "(off) ",
         run->verified);
  printf("errors:          %" PRIu64 "\n", run->errors);
  printf("cpu:             %.2f s (%.1f %%)\n", cpu_s, cpu_pct);
  printf("result:          %s\n", failure ? "FAILED" : "ok");
}

static int run_receive(const struct options *o)
{
  struct sbr_receiver_config cfg;
  sbr_receiver_config_init(&cfg);
  cfg.backend = o->backend;
  cfg.mechanism = o->mechanism;
  cfg.address = o->address;
  cfg.port = o->port;
  cfg.block_count = o->blocks;
  cfg.block_size = o->block_size;
  cfg.poll_mode = o->poll_mode;

  static struct recv_run run; /* 256 device tracks: keep it off the stack */
  memset(&run, 0, sizeof run);
  run.o = o;
  char errbuf[256];
  int ret = sbr_receiver_new(&cfg, &run.r, errbuf, sizeof errbuf);
  if (ret < 0) {
    fprintf(stderr, "sbr-perf: cannot listen on %s:%u over %s: %s\n",
            o->address, o->port, sbr_backend_name(o->backend),
            errbuf[0] ? errbuf : strerror(-ret));
    return EXIT_RUNTIME;
  }

  char why[256];
  const char *failure = receive_loop(&run, why, sizeof why);
  double cpu_s = run.first_ns ? cpu_seconds() - run.cpu_at_first : 0;
  end_hold(&run.hold);

  struct sbr_receiver_stats st;
  static struct sbr_device_stats ds[SBR_MAX_DEVICES];
  sbr_receiver_get_stats(run.r, &st);
  for (uint32_t d = 0; d < SBR_MAX_DEVICES; d++)
    sbr_receiver_get_device_stats(run.r, (uint8_t)d, &ds[d]);
  sbr_receiver_free(run.r);

  /* The library's own counters must agree that nothing went missing. */
  uint64_t lost = st.rejected;
  for (uint32_t d = 0; d < SBR_MAX_DEVICES; d++)
    lost += ds[d].gaps + ds[d].drops + ds[d].rejected;
  if (!failure && run.errors) {
    snprintf(why, sizeof why, "%" PRIu64 " error%s in the streams", run.errors,
             run.errors == 1 ? "" : "s");
    failure = why;
  } else if (!failure && lost) {
    snprintf(why, sizeof why,
             "the library counted %" PRIu64 " gaps, drops or rejected blocks",
             lost);
    failure = why;
  } else if (!failure && o->verify && run.verified != run.frames) {
    snprintf(why, sizeof why, "only %" PRIu64 " of %" PRIu64 " frames verified",
             run.verified, run.frames);
    failure = why;
  }
  print_recv_result(&run, &st, ds, cpu_s, failure);
  fflush(stdout);
  if (failure) {
    fprintf(stderr, "sbr-perf: %s\n", failure);
    return EXIT_RUNTIME;
  }
  return 0;
}

int main(int argc, char **argv)
{
  /* The host check has options of its own (sbr-check.c). */
  if (argc >= 2 && strcmp(argv[1], "check") == 0)
    return sbr_check_main(argc - 1, argv + 1);
  struct options o;
  parse_args(argc, argv, &o);
  log_verbosity = o.verbose;
  if (o.verbose)
    sbr_set_log_handler(log_to_stderr, NULL);
  install_signal_handlers();
  return o.mode == MODE_SEND ? run_send(&o) : run_receive(&o);
}
