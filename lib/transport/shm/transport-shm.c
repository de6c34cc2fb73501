/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * transport-shm.c - the shm back end: a simulated RDMA NIC between two
 * processes on one host.
 *
 * The receiver's lane lives in a memfd that the receiver hands to the sender
 * over a Unix socket when it accepts.  The sender maps it, and a "NIC" thread
 * in the sender process executes the posted work requests in order with
 * memcpy, so the receiver stays as passive as it is over verbs.  Where an
 * engine could tell the difference, the back end behaves like a verbs RC QP:
 * remote keys and bounds are checked per WR, the blocks region refuses READs
 * (rule 8), local ranges must lie in the registered MR their lkey names (lkey
 * 0 means unregistered memory, which shm accepts: it needs no registration,
 * and raw shm tools rely on that), a failed WR puts the QP in error and
 * flushes what follows, inline data is copied at post time,
 * only signaled WRs (and every failure) complete, a send queue slot is freed
 * only when a completion covering it has been polled, and a full send queue
 * refuses posts with -ENOMEM.
 *
 * Setup: one datagram each way on a SOCK_SEQPACKET socket.
 *
 *   sender -> receiver   'C' 0 0 0 | connect private data (<= 56 bytes)
 *   receiver -> sender   'A' 0 0 0 | accept private data (56 bytes),
 *                                    with the memfd attached (SCM_RIGHTS)
 *                    or  'R' 0 0 0 | reject private data (16 bytes, why;
 *                                    transport.h; an old receiver sent
 *                                    none)
 *
 * After that the socket carries nothing: its hang-up is the disconnect, seen
 * by the receiver's get_event and poll_cq and by the sender's NIC thread.
 *
 * The segment (sealed against resizing, so a peer can't make us SIGBUS):
 *
 *   0             struct shm_ctrl, then the slots of both rings (pages)
 *   status_addr   block_count status bytes, padded to 64, then the 32-byte
 *                 pause bitmap (status_addr + pause_offset) and the 32-byte
 *                 refused bitmap (status_addr + refused_offset)
 *   blocks_addr   block_count * block_size bytes, page aligned
 *
 * Remote addresses are offsets into the segment; the two rkeys are random
 * per lane.  Everything the sender reads from the receiver (private data,
 * control header, ring counters) is bounds-checked before use, and the
 * layout is copied once so a later change by the peer can't move us.
 *
 * Two-sided traffic (the sliding-window baseline) goes through two rings in
 * the control area.  WRITE WITH IMMEDIATE and SEND from the sender consume
 * one receive the receiver posted (ring "to_receiver", produced by the NIC
 * thread); SEND from the receiver is executed at once in its post_send and
 * consumes one receive the sender posted (ring "to_sender").  Each ring has
 * one producer and one consumer.  "posted" counts the consumer's receives,
 * so posted - head is the producer's credit; a producer without credit waits
 * like RNR retry and then fails the WR.
 *
 * Errors: a WR that fails completes with SBR__WC_ERROR (vendor_err from enum
 * shm_vendor_err) and puts the conn in error; every later WR, whether posted
 * before or after, completes with SBR__WC_FLUSH and the posted receives are
 * flushed, as on a verbs QP in error.  post_send keeps accepting (and
 * flushing) until the peer is known to be gone; then it returns -ENOTCONN,
 * and poll_cq returns -ENOTCONN once everything has been reported.
 *
 * Fault injection (sender only): delay_us is a round trip; a WR posted at t
 * is executed at t + delay/2 and its completion can be polled from
 * t + delay.  WRs are pipelined, only their order is kept.  fail_after_wrs=N
 * fails the Nth WR posted on the conn (vendor_err SHM_VERR_INJECTED).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"
#include "transport/transport.h"

#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull

#define SHM_MAX_INLINE 256 /* bytes a WR may carry inline */
#define SHM_MAX_MSG 64     /* bytes one SEND may carry */
#define SHM_MAX_PRIV 56    /* connect private data, as rdma_cm allows */
static_assert(SHM_MAX_PRIV >= SBR__ACCEPT_PRIV_SIZE, "setup buffers fit both");
#define SHM_MSG_HDR 4       /* setup message: kind byte + 3 zero bytes */
#define SHM_MAX_QUEUE 65536 /* largest send/receive queue we size */
#define SHM_RING_MIN_SLOTS 16
/* The sender's receive depth is unknown when the receiver sizes the
 * segment; the sender's credits bound the use, this bounds the memory. */
#define SHM_TO_SENDER_SLOTS 256
#define SHM_PAGE 4096
#define SHM_PEER_CHECK_NS (50 * NS_PER_MS) /* hang-up noticed within this */
#define SHM_RNR_TIMEOUT_MS 2000     /* NIC waits this long for a receive */
#define SHM_SEND_RNR_TIMEOUT_MS 200 /* receiver's synchronous SEND waits */
#define SHM_MAX_PENDING 16          /* sockets whose request hasn't come */
#define SHM_PENDING_TIMEOUT_NS (5 * NS_PER_S)
#define SHM_CTRL_MAGIC 0x4d485342u /* "SBHM" little-endian */
#define SHM_CTRL_VERSION 2         /* 2: ring doorbells */

enum shm_setup_kind {
  SHM_SETUP_CONNECT = 'C',
  SHM_SETUP_ACCEPT = 'A',
  SHM_SETUP_REJECT = 'R',
};

/* What a failed completion's vendor_err says. */
enum shm_vendor_err {
  SHM_VERR_RKEY = 0x101,      /* rkey names no region of the lane */
  SHM_VERR_BOUNDS = 0x102,    /* remote range outside its region */
  SHM_VERR_ACCESS = 0x103,    /* operation not allowed on the region */
  SHM_VERR_LKEY = 0x104,      /* local range not inside a registered MR */
  SHM_VERR_RNR = 0x105,       /* peer had no receive posted in time */
  SHM_VERR_PEER_GONE = 0x106, /* peer hung up */
  SHM_VERR_LENGTH = 0x107,    /* message longer than the posted receive */
  SHM_VERR_PROTOCOL = 0x108,  /* peer broke the shared ring protocol */
  SHM_VERR_INJECTED = 0x7fff, /* fault injection: fail_after_wrs */
};

/* -------------------------------------------------------- shared layout */

/* One message in a ring: what a RECV completion reports, plus the bytes of
 * a SEND.  The producer fills it before publishing head (release); the
 * consumer reads it after loading head (acquire). */
struct shm_msg {
  uint32_t imm_data; /* host order */
  uint32_t byte_len; /* WRITE_IMM: bytes written; SEND: message length */
  uint8_t has_imm;   /* 1 after WRITE_IMM */
  uint8_t is_send;   /* 1 when data[] holds a message */
  uint8_t reserved[6];
  uint8_t data[SHM_MAX_MSG];
};
static_assert(sizeof(struct shm_msg) == 80, "shm_msg is segment layout");

/* One direction of two-sided traffic.  Counters run free as uint32 (lock
 * free on every target, which sharing across processes needs) and are
 * compared by difference.  Each sits on its own cache line.
 *
 * bell is the consumer's doorbell, a futex word shared by both processes:
 * whoever makes a completion pollable for the consumer (the producer of a
 * message, and for the sender's own WRs its NIC thread) bumps it, and
 * wakes it when bell_waiters says someone sleeps in wait_cq.  A waiter
 * counts itself in, reads bell, checks for completions and sleeps only
 * while bell is unchanged, so no wake-up is lost. */
struct shm_ring {
  alignas(64) _Atomic uint32_t posted; /* receives the consumer posted */
  alignas(64) _Atomic uint32_t head;   /* messages the producer wrote */
  alignas(64) _Atomic uint32_t tail;   /* messages the consumer took */
  alignas(64) uint32_t slot_count;     /* power of two, set before sharing */
  uint32_t slot_offset;                /* segment offset of the slots */
  _Atomic uint32_t bell;               /* bumped per pollable completion */
  _Atomic uint32_t bell_waiters;       /* consumers asleep on bell */
};
static_assert(sizeof(struct shm_ring) == 256, "shm_ring is segment layout");
static_assert(ATOMIC_INT_LOCK_FREE == 2, "ring counters must be lock-free");

/* The control area at offset 0 of the segment. */
struct shm_ctrl {
  uint32_t magic;                          /* SHM_CTRL_MAGIC */
  uint32_t version;                        /* SHM_CTRL_VERSION */
  uint32_t ctrl_size;                      /* bytes, page multiple */
  uint32_t reserved;                       /* zero */
  alignas(64) struct shm_ring to_receiver; /* sender's WRITE_IMM/SEND */
  struct shm_ring to_sender;               /* receiver's SEND */
};
static_assert(sizeof(struct shm_ctrl) == 576, "shm_ctrl is segment layout");

/* ---------------------------------------------------- per-process state */

enum shm_role {
  SHM_SENDER,   /* maps the lane, runs the NIC thread */
  SHM_RECEIVER, /* owns the lane; executes its SENDs synchronously */
};

enum shm_state {
  SHM_UP,    /* working */
  SHM_ERROR, /* a WR failed: QP in error, later WRs and receives flushed */
  SHM_GONE,  /* the peer hung up: as SHM_ERROR, then -ENOTCONN */
};

/* A remote region of the lane, as offsets into the segment. */
struct shm_region {
  uint64_t off;  /* first byte */
  uint64_t len;  /* bytes */
  uint32_t rkey; /* key a WR must name */
  bool read_ok;  /* REMOTE_READ allowed (status: yes, blocks: no) */
  /* WRITEs must end within the first write_len bytes: the status region's
   * pause bitmap is the receiver's alone (verbs can't tell a sub-range of
   * one MR apart, so there the engine's rule is all; here a sender that
   * broke it fails loudly). */
  uint64_t write_len;
  bool status; /* stores are release stores of status bytes */
};

/* A posted send WR, as the NIC sees it. */
struct shm_swr {
  struct sbr__wr wr;           /* as posted; inline data points at inl */
  uint64_t post_ns;            /* when posted; injected delay counts from it */
  uint64_t visible_ns;         /* its completion may be polled from then on */
  enum sbr__wc_status status;  /* result, set by the NIC thread */
  int vendor_err;              /* why it failed */
  uint8_t inl[SHM_MAX_INLINE]; /* inline payload, copied at post time */
};

/* A posted receive. */
struct shm_rwr {
  uint64_t wr_id; /* reported in its completion */
  void *addr;     /* where a SEND's bytes go */
  uint32_t len;   /* room there */
};

/* One connection, either end.  Fields after `lock` are guarded by it unless
 * marked otherwise; those before it are set up once and then read-only. */
struct sbr__conn {
  enum shm_role role;       /* which end this is */
  int sock;                 /* socket to the peer; -1 when closed */
  uint8_t *seg;             /* shared segment mapping; NULL if unmapped */
  size_t seg_len;           /* its length */
  struct shm_ring *tx;      /* ring we produce into */
  struct shm_msg *tx_slots; /* its slots (validated copy of the layout) */
  uint32_t tx_mask;         /* slot count - 1 */
  struct shm_ring *rx;      /* ring of messages for our receives */
  struct shm_msg *rx_slots; /* its slots */
  uint32_t rx_mask;         /* slot count - 1 */
  struct shm_region blocks; /* sender: REMOTE_WRITE only (rule 8) */
  struct shm_region status; /* sender: REMOTE_READ | REMOTE_WRITE */
  uint64_t delay_ns;        /* sender: injected round trip */
  _Atomic uint64_t fail_at; /* sender: 1-based WR to fail, 0 = none; the
                               NIC thread reads it unlocked (test_fail) */
  char peer[64];            /* "shm:pid=N", for logs */

  pthread_mutex_t lock; /* guards the rest, except where noted */
  bool lock_ready;      /* lock initialised (teardown) */
  pthread_cond_t wake;  /* NIC thread: work posted or stop */
  bool wake_ready;      /* wake initialised (teardown) */
  enum shm_state state; /* see enum shm_state */
  struct shm_swr *sq;   /* send queue, sq_depth slots */
  uint32_t sq_depth;    /* caps->max_send_wr */
  uint64_t sq_posted;   /* WRs ever posted */
  uint64_t sq_executed; /* WRs the NIC finished (or flushed) */
  /* A posting thread claimed WRs sq_executed..sq_claim_end to execute
   * itself (shm_post_send_here): the NIC thread leaves them alone while it
   * executes them (claim_started), and takes them over while it hasn't
   * started (a producer preempted before its copy must not stop the
   * lane).  claim_callers counts claimers that haven't returned from
   * execute_claimed yet: they hold c, so close waits for them. */
  bool sq_inline;
  bool claim_started;
  pthread_t claim_owner;
  uint64_t sq_claim_end;
  unsigned claim_callers;
  pthread_cond_t inline_done;  /* a claimer returned (close waits for it) */
  uint64_t sq_scanned;         /* WRs poll_cq looked at */
  uint64_t sq_retired;         /* slots freed by a polled completion */
  struct shm_rwr *rq;          /* posted receives, FIFO, rq_depth slots */
  uint32_t rq_depth;           /* caps->max_recv_wr */
  uint64_t rq_posted;          /* receives ever posted (posted_recv_count) */
  uint64_t rq_completed;       /* receives completed or flushed */
  uint32_t rx_tail;            /* our copy of rx->tail (we are its writer) */
  uint32_t tx_head;            /* our copy of tx->head (NIC thread for the
                                  sender, post_send for the receiver) */
  struct sbr__wc *lcq;         /* receiver: its SENDs' completions */
  uint64_t lcq_head, lcq_tail; /* produced / polled */
  uint64_t next_check_ns;      /* receiver: next hang-up check in poll_cq */
  uint32_t armed_rung;         /* rx->bell at arm_cq (the waiter's only) */
  bool armed;                  /* arm_cq came since the last wait_cq */

  pthread_t nic;    /* sender: NIC thread */
  bool nic_running; /* started, not yet joined */
  atomic_bool stop; /* close asks the NIC thread to leave */

  struct sbr__listener *listener; /* receiver: who watches us for hang-up
                                     (shm_watch_lock) */
  struct sbr__conn *watch_next;   /* next in its list (shm_watch_lock) */
  uint64_t watch_id;              /* unique, to match poll results */
};

/* An accepted socket whose connect message hasn't arrived yet. */
struct shm_pending {
  int fd;            /* the socket */
  uint64_t since_ns; /* accepted at; dropped after SHM_PENDING_TIMEOUT_NS */
};

/* The receiver's listening end. */
struct sbr__listener {
  int fd;                                      /* listening socket */
  uint16_t port;                               /* for logs */
  struct shm_pending pending[SHM_MAX_PENDING]; /* requests being read */
  int n_pending;                               /* entries used */
  struct sbr__conn *lanes; /* accepted, watched for hang-up (shm_watch_lock) */
  uint64_t next_watch_id;  /* (shm_watch_lock) */
  struct pollfd *pfds;     /* get_event scratch: listen, pending, lanes */
  uint64_t *pfd_ids;       /* watch id per lane entry of pfds */
  size_t pfd_cap;          /* entries allocated in both */
};

/* Guards every listener's lane list and each lane's listener pointer.  A
 * lane may be closed on any thread (the last block release), even after its
 * listener is gone, so the link can't be guarded by either end alone. */
static pthread_mutex_t shm_watch_lock = PTHREAD_MUTEX_INITIALIZER;

/* Memory registrations.  shm needs none, but a registry lets the NIC check
 * lkeys and local ranges as a real one would, so an engine bug shows here
 * and not first on hardware.  Process-wide: an MR may outlive its conn. */
struct shm_mr {
  struct sbr__mr pub;  /* what the engine holds; pub.impl points here */
  int access;          /* SBR__ACCESS_* */
  struct shm_mr *next; /* registry list (shm_mr_lock) */
};
static pthread_mutex_t shm_mr_lock = PTHREAD_MUTEX_INITIALIZER;
/* What ibv_dereg_mr promises: once it returns, the NIC no longer touches
 * the memory, so the caller may free it.  NIC threads hold this for reading
 * from their lkey check to the end of their copy; dereg takes it for
 * writing.  Writers first, so busy NIC threads can't starve a dereg. */
static pthread_rwlock_t shm_mr_fence =
    PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static struct shm_mr *shm_mrs;     /* (shm_mr_lock) */
static uint32_t shm_next_lkey = 1; /* (shm_mr_lock) */

/* -------------------------------------------------------------- helpers */

static uint64_t shm_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static uint64_t shm_deadline(int timeout_ms)
{
  if (timeout_ms < 0)
    return UINT64_MAX;
  return shm_now_ns() + (uint64_t)timeout_ms * NS_PER_MS;
}

/* Milliseconds until deadline for poll(), rounded up, capped at cap_ms. */
static int shm_ms_until(uint64_t deadline, int cap_ms)
{
  uint64_t now = shm_now_ns();
  if (now >= deadline)
    return 0;
  uint64_t ms = (deadline - now + NS_PER_MS - 1) / NS_PER_MS;
  return ms > (uint64_t)cap_ms ? cap_ms : (int)ms;
}

static void shm_sleep_ns(uint64_t ns)
{
  struct timespec ts = {(time_t)(ns / NS_PER_S), (long)(ns % NS_PER_S)};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
    ;
}

static uint32_t shm_pow2_at_least(uint32_t n)
{
  uint32_t p = 1;
  while (p < n)
    p <<= 1;
  return p;
}

static uint64_t shm_round_up(uint64_t n, uint64_t to)
{
  return (n + to - 1) / to * to;
}

/* A nonzero key nobody can guess from the previous one: splitmix64 over
 * time, pid and a counter.  Keys catch stale or crossed lanes, they are not
 * a security boundary (the peer holds the whole segment anyway). */
static uint32_t shm_make_key(void)
{
  static atomic_uint_fast64_t counter;
  uint64_t x = shm_now_ns() ^ ((uint64_t)getpid() << 32) ^
               atomic_fetch_add(&counter, 0x9e3779b97f4a7c15ull);
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return (uint32_t)x ? (uint32_t)x : 1;
}

static const char *shm_op_name(enum sbr__opcode op)
{
  switch (op) {
  case SBR__OP_WRITE:
    return "WRITE";
  case SBR__OP_WRITE_IMM:
    return "WRITE_IMM";
  case SBR__OP_READ:
    return "READ";
  case SBR__OP_SEND:
    return "SEND";
  case SBR__OP_RECV:
    return "RECV";
  }
  return "?";
}

static const char *shm_verr_str(int verr)
{
  switch (verr) {
  case SHM_VERR_RKEY:
    return "rkey names no region of the lane";
  case SHM_VERR_BOUNDS:
    return "remote range outside its region";
  case SHM_VERR_ACCESS:
    return "READ of the blocks region (REMOTE_WRITE only)";
  case SHM_VERR_LKEY:
    return "local range not inside a registered MR";
  case SHM_VERR_RNR:
    return "peer had no receive posted (RNR retry exceeded)";
  case SHM_VERR_PEER_GONE:
    return "peer hung up";
  case SHM_VERR_LENGTH:
    return "message longer than the posted receive";
  case SHM_VERR_PROTOCOL:
    return "peer broke the shared ring protocol";
  case SHM_VERR_INJECTED:
    return "injected failure (fail_after_wrs)";
  }
  return "unknown";
}

/* shm is same-host by definition: the receiver may bind "0.0.0.0" while the
 * sender names "127.0.0.1" or a host name, so the address is ignored and the
 * port alone names the receiver.  The name is in the abstract namespace
 * (leading NUL): nothing is left on disk, and it is scoped to the network
 * namespace, which is what "same host" means for sockets. */
static socklen_t shm_sockaddr(uint16_t port, struct sockaddr_un *sa)
{
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  int n = snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "sbr-shm:%u",
                   (unsigned)port);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static void shm_peer_name(int fd, char *buf, size_t len)
{
  struct ucred cred;
  socklen_t cl = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0)
    snprintf(buf, len, "shm:pid=%d", (int)cred.pid);
  else
    snprintf(buf, len, "shm:pid=?");
}

/* Sends one setup message, with fd attached when fd >= 0. */
static int shm_send_setup(int sock, uint8_t kind, const void *payload,
                          size_t len, int fd)
{
  uint8_t buf[SHM_MSG_HDR + SHM_MAX_PRIV] = {kind};
  if (len > sizeof buf - SHM_MSG_HDR)
    return -EINVAL;
  if (len)
    memcpy(buf + SHM_MSG_HDR, payload, len);
  struct iovec iov = {.iov_base = buf, .iov_len = SHM_MSG_HDR + len};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
  union {
    struct cmsghdr align;
    char space[CMSG_SPACE(sizeof(int))];
  } cbuf;
  if (fd >= 0) {
    memset(&cbuf, 0, sizeof cbuf);
    m.msg_control = cbuf.space;
    m.msg_controllen = sizeof cbuf.space;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
  }
  ssize_t r;
  do
    r = sendmsg(sock, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (r < 0 && errno == EINTR);
  if (r < 0)
    return -errno;
  return (size_t)r == iov.iov_len ? 0 : -EIO;
}

/* Receives one setup message without waiting.  Returns its length, 0 at
 * end of stream, or negative errno (-EAGAIN: nothing yet).  *fd gets a
 * passed descriptor or -1; any others are closed. */
static ssize_t shm_recv_setup(int sock, uint8_t *buf, size_t cap, int *fd)
{
  union {
    struct cmsghdr align;
    char space[CMSG_SPACE(4 * sizeof(int))];
  } cbuf;
  struct iovec iov = {.iov_base = buf, .iov_len = cap};
  struct msghdr m = {.msg_iov = &iov,
                     .msg_iovlen = 1,
                     .msg_control = cbuf.space,
                     .msg_controllen = sizeof cbuf.space};
  *fd = -1;
  ssize_t r;
  do
    r = recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  while (r < 0 && errno == EINTR);
  if (r < 0)
    return -errno;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
      continue;
    size_t nfds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < nfds; i++) {
      int got;
      memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof got);
      if (*fd < 0)
        *fd = got;
      else
        close(got);
    }
  }
  if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
    if (*fd >= 0)
      close(*fd);
    *fd = -1;
    return -EPROTO;
  }
  return r;
}

/* Has the peer hung up?  Never blocks.  The socket carries nothing after
 * setup, so a stray message is read and dropped. */
static bool shm_peer_gone(int sock)
{
  struct pollfd p = {.fd = sock, .events = POLLIN | POLLRDHUP};
  if (poll(&p, 1, 0) <= 0)
    return false;
  if (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL))
    return true;
  uint8_t junk[64];
  ssize_t r = recv(sock, junk, sizeof junk, MSG_DONTWAIT);
  return r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);
}

/* ------------------------------------------------------ MR registry */

/* Is [addr, +len) inside the registered MR with key lkey, with access?
 * lkey 0 is unregistered memory, which shm allows (see the top). */
static bool shm_local_ok(uint32_t lkey, const void *addr, uint32_t len,
                         int access)
{
  if (len == 0 || lkey == 0)
    return true;
  uintptr_t a = (uintptr_t)addr;
  bool ok = false;
  pthread_mutex_lock(&shm_mr_lock);
  for (struct shm_mr *m = shm_mrs; m; m = m->next) {
    uintptr_t base = (uintptr_t)m->pub.addr;
    if (m->pub.lkey != lkey || a < base || a - base > m->pub.length ||
        len > m->pub.length - (a - base))
      continue;
    ok = (m->access & access) == access;
    break;
  }
  pthread_mutex_unlock(&shm_mr_lock);
  return ok;
}

static int shm_reg_mr(struct sbr__conn *c, void *addr, size_t len, int access,
                      struct sbr__mr **out)
{
  (void)c; /* registrations are process-wide, see shm_mrs */
  if (!addr || len == 0 || !out)
    return -EINVAL;
  struct shm_mr *m = calloc(1, sizeof *m);
  if (!m)
    return -ENOMEM;
  m->pub.addr = addr;
  m->pub.length = len;
  m->pub.impl = m;
  m->access = access;
  pthread_mutex_lock(&shm_mr_lock);
  m->pub.lkey = shm_next_lkey++;
  if (shm_next_lkey == 0)
    shm_next_lkey = 1;
  m->pub.rkey = m->pub.lkey; /* unused: nothing remote reaches our MRs */
  m->next = shm_mrs;
  shm_mrs = m;
  pthread_mutex_unlock(&shm_mr_lock);
  *out = &m->pub;
  return 0;
}

static void shm_dereg_mr(struct sbr__mr *mr)
{
  if (!mr)
    return;
  struct shm_mr *m = mr->impl;
  pthread_rwlock_wrlock(&shm_mr_fence); /* copies in progress end first */
  pthread_mutex_lock(&shm_mr_lock);
  for (struct shm_mr **p = &shm_mrs; *p; p = &(*p)->next) {
    if (*p == m) {
      *p = m->next;
      break;
    }
  }
  pthread_mutex_unlock(&shm_mr_lock);
  pthread_rwlock_unlock(&shm_mr_fence);
  free(m);
}

/* ------------------------------------------------------ conn lifetime */

/* Allocates a conn with its queues; nothing shared yet. */
static struct sbr__conn *shm_conn_new(enum shm_role role,
                                      const struct sbr__queue_caps *caps)
{
  struct sbr__conn *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->role = role;
  c->sock = -1;
  c->state = SHM_UP;
  atomic_init(&c->stop, false);
  snprintf(c->peer, sizeof c->peer, "shm:pid=?");
  c->sq_depth = caps->max_send_wr ? caps->max_send_wr : 1;
  c->rq_depth = caps->max_recv_wr ? caps->max_recv_wr : 1;
  if (role == SHM_SENDER)
    c->sq = calloc(c->sq_depth, sizeof *c->sq);
  else
    c->lcq = calloc(c->sq_depth, sizeof *c->lcq);
  c->rq = calloc(c->rq_depth, sizeof *c->rq);
  if ((!c->sq && !c->lcq) || !c->rq)
    goto out_free;
  if (pthread_mutex_init(&c->lock, NULL) != 0)
    goto out_free;
  c->lock_ready = true;
  /* Timed waits use the monotonic clock: wall-clock steps must not stretch
   * an injected delay or the idle hang-up check. */
  pthread_condattr_t ca;
  if (pthread_condattr_init(&ca) != 0)
    goto out_free;
  int err = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if (!err)
    err = pthread_cond_init(&c->wake, &ca);
  pthread_condattr_destroy(&ca);
  if (!err) {
    err = pthread_cond_init(&c->inline_done, NULL);
    if (err)
      pthread_cond_destroy(&c->wake);
  }
  if (err)
    goto out_free;
  c->wake_ready = true;
  return c;

out_free:
  if (c->lock_ready)
    pthread_mutex_destroy(&c->lock);
  free(c->rq);
  free(c->lcq);
  free(c->sq);
  free(c);
  return NULL;
}

/* Tears a conn down from any stage of setup.  Order: the NIC thread first
 * (it uses everything else), then the mapping, then the socket (the peer
 * sees the hang-up only once we no longer touch the segment), then memory. */
static void shm_conn_destroy(struct sbr__conn *c)
{
  if (!c)
    return;
  if (c->lock_ready && c->wake_ready) {
    /* A producer that claimed a chain comes back to execute_claimed
     * without any lock of the sender's, c in hand: wait for it before c
     * goes (as long as that producer takes to get there). */
    pthread_mutex_lock(&c->lock);
    while (c->claim_callers > 0)
      pthread_cond_wait(&c->inline_done, &c->lock);
    pthread_mutex_unlock(&c->lock);
  }
  if (c->nic_running) {
    atomic_store(&c->stop, true);
    pthread_mutex_lock(&c->lock);
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->nic, NULL);
    c->nic_running = false;
  }
  if (c->seg)
    munmap(c->seg, c->seg_len);
  if (c->sock >= 0)
    close(c->sock);
  if (c->wake_ready) {
    pthread_cond_destroy(&c->wake);
    pthread_cond_destroy(&c->inline_done);
  }
  if (c->lock_ready)
    pthread_mutex_destroy(&c->lock);
  free(c->rq);
  free(c->lcq);
  free(c->sq);
  free(c);
}

/* Enters the error state (first failure wins; GONE overrides ERROR). */
static void shm_set_state(struct sbr__conn *c, enum shm_state s)
{
  if (s > c->state)
    c->state = s;
}

/* ------------------------------------------------------------- rings */

/* Waits until the peer has a receive posted and the ring has room.  The
 * wait is RNR retry: spin a little, then sleep with doubling back-off,
 * checking for stop and for the peer's hang-up.  0, -ETIMEDOUT (RNR),
 * -ENOTCONN (peer gone) or -ECANCELED (conn closing). */
static int shm_tx_reserve(struct sbr__conn *c, int timeout_ms)
{
  uint64_t deadline = 0, next_check = 0, nap = 10000;
  for (int spins = 0;; spins++) {
    uint32_t posted =
        atomic_load_explicit(&c->tx->posted, memory_order_acquire);
    uint32_t tail = atomic_load_explicit(&c->tx->tail, memory_order_acquire);
    uint32_t credit = posted - c->tx_head;
    uint32_t used = c->tx_head - tail;
    /* A credit above 2^31 is the peer's garbage, not a receive. */
    if (credit > 0 && credit < 0x80000000u && used <= c->tx_mask)
      return 0;
    if (atomic_load_explicit(&c->stop, memory_order_relaxed))
      return -ECANCELED;
    if (spins < 64)
      continue;
    uint64_t now = shm_now_ns();
    if (deadline == 0) {
      deadline = now + (uint64_t)timeout_ms * NS_PER_MS;
      next_check = now + SHM_PEER_CHECK_NS;
    }
    if (now >= deadline)
      return -ETIMEDOUT;
    if (now >= next_check) {
      if (shm_peer_gone(c->sock))
        return -ENOTCONN;
      next_check = now + SHM_PEER_CHECK_NS;
    }
    shm_sleep_ns(nap);
    if (nap < NS_PER_MS)
      nap *= 2;
  }
}

/* Rings r's doorbell: a completion became pollable for its consumer.  The
 * futex is not process-private: the peer may be the one asleep. */
static void shm_bell_ring(struct shm_ring *r)
{
  atomic_fetch_add(&r->bell, 1);
  if (atomic_load(&r->bell_waiters) > 0)
    syscall(SYS_futex, &r->bell, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* Publishes one message; shm_tx_reserve said there is room and credit.
 * Everything written before (a WRITE_IMM's data) is visible to the
 * consumer once it sees the new head. */
static void shm_tx_push(struct sbr__conn *c, bool is_send, uint32_t imm,
                        bool has_imm, const void *data, uint32_t len)
{
  struct shm_msg *m = &c->tx_slots[c->tx_head & c->tx_mask];
  m->imm_data = imm;
  m->byte_len = len;
  m->has_imm = has_imm;
  m->is_send = is_send;
  if (is_send && len)
    memcpy(m->data, data, len);
  c->tx_head++;
  atomic_store_explicit(&c->tx->head, c->tx_head, memory_order_release);
  shm_bell_ring(c->tx);
}

/* Turns messages in the rx ring into RECV completions, matched in FIFO
 * order with the posted receives.  Called with c->lock held. */
static int shm_poll_rx(struct sbr__conn *c, struct sbr__wc *wc, int max)
{
  uint32_t head = atomic_load_explicit(&c->rx->head, memory_order_acquire);
  if (head - c->rx_tail > c->rx_mask + 1) {
    if (c->state == SHM_UP)
      SBR_WARN("%s: ring head %" PRIu32 " is %" PRIu32
               " past tail, ring corrupt",
               c->peer, head, head - c->rx_tail);
    shm_set_state(c, SHM_ERROR);
    return 0;
  }
  int n = 0;
  while (n < max && c->rx_tail != head) {
    if (c->rq_completed == c->rq_posted) {
      /* A message without a receive: only a broken peer does that (or
       * one still sending after we flushed).  Drop what is there. */
      if (c->state == SHM_UP)
        SBR_WARN("%s: message without a posted receive", c->peer);
      shm_set_state(c, SHM_ERROR);
      c->rx_tail = head;
      break;
    }
    struct shm_msg m;
    memcpy(&m, &c->rx_slots[c->rx_tail & c->rx_mask], sizeof m);
    struct shm_rwr *r = &c->rq[c->rq_completed % c->rq_depth];
    struct sbr__wc *w = &wc[n++];
    memset(w, 0, sizeof *w);
    w->wr_id = r->wr_id;
    w->opcode = SBR__OP_RECV;
    w->byte_len = m.byte_len;
    w->imm_data = m.imm_data;
    w->has_imm = m.has_imm != 0;
    if (m.is_send && (m.byte_len > SHM_MAX_MSG || m.byte_len > r->len)) {
      w->status = SBR__WC_ERROR;
      w->vendor_err =
          m.byte_len > SHM_MAX_MSG ? SHM_VERR_PROTOCOL : SHM_VERR_LENGTH;
      SBR_WARN("%s: RECV %" PRIu64 " failed: %s (%" PRIu32 " > %" PRIu32 ")",
               c->peer, r->wr_id, shm_verr_str(w->vendor_err), m.byte_len,
               r->len);
      shm_set_state(c, SHM_ERROR);
    } else if (m.is_send && m.byte_len) {
      memcpy(r->addr, m.data, m.byte_len);
    }
    c->rq_completed++;
    c->rx_tail++;
  }
  atomic_store_explicit(&c->rx->tail, c->rx_tail, memory_order_release);
  return n;
}

/* In error, posted receives complete as flushed once the ring is drained. */
static int shm_flush_rq(struct sbr__conn *c, struct sbr__wc *wc, int max)
{
  int n = 0;
  while (n < max && c->rq_completed != c->rq_posted) {
    struct sbr__wc *w = &wc[n++];
    memset(w, 0, sizeof *w);
    w->wr_id = c->rq[c->rq_completed % c->rq_depth].wr_id;
    w->opcode = SBR__OP_RECV;
    w->status = SBR__WC_FLUSH;
    c->rq_completed++;
  }
  return n;
}

/* ------------------------------------------------------ the NIC thread */

static const struct shm_region *shm_region_of(const struct sbr__conn *c,
                                              uint32_t rkey)
{
  if (rkey == c->blocks.rkey)
    return &c->blocks;
  if (rkey == c->status.rkey)
    return &c->status;
  return NULL;
}

/* Copies into the lane.  Status bytes are release stores, so a receiver
 * whose acquire load sees a status byte also sees every block byte this
 * thread wrote before it (rule 2).  (Release stores rather than a fence and
 * relaxed stores: the same code on x86, and ThreadSanitizer models them.) */
static void shm_copy_in(const struct shm_region *r, uint8_t *dst,
                        const uint8_t *src, uint32_t len)
{
  if (!r->status) {
    memcpy(dst, src, len);
    return;
  }
  _Atomic uint8_t *st = (_Atomic uint8_t *)dst;
  for (uint32_t i = 0; i < len; i++)
    atomic_store_explicit(&st[i], src[i], memory_order_release);
}

/* Copies out of the status region (the only readable one) with acquire
 * loads: what the receiver wrote before releasing a byte comes with it. */
static void shm_copy_out(uint8_t *dst, const uint8_t *src, uint32_t len)
{
  _Atomic uint8_t *st = (_Atomic uint8_t *)src;
  for (uint32_t i = 0; i < len; i++)
    dst[i] = atomic_load_explicit(&st[i], memory_order_acquire);
}

/* Executes one WR against the lane, without c->lock.  index is its 0-based
 * position in the posting order.  SBR__WC_SUCCESS, or SBR__WC_ERROR with
 * *verr set. */
static enum sbr__wc_status shm_execute(struct sbr__conn *c,
                                       const struct shm_swr *s, uint64_t index,
                                       int *verr)
{
  const struct sbr__wr *wr = &s->wr;
  const struct shm_region *r = NULL;
  *verr = 0;
  /* >=: a test_fail that raced with this WR's start fails the next one
   * (the conn is in error after the first failure anyway). */
  uint64_t fail_at = atomic_load_explicit(&c->fail_at, memory_order_relaxed);
  if (fail_at && index + 1 >= fail_at) {
    *verr = SHM_VERR_INJECTED;
    return SBR__WC_ERROR;
  }
  if (wr->opcode != SBR__OP_SEND) {
    r = shm_region_of(c, wr->rkey);
    if (!r)
      *verr = SHM_VERR_RKEY;
    else if (wr->opcode == SBR__OP_READ && !r->read_ok)
      *verr = SHM_VERR_ACCESS;
    else if (wr->remote_addr < r->off || wr->remote_addr - r->off > r->len ||
             wr->length > r->len - (wr->remote_addr - r->off))
      *verr = SHM_VERR_BOUNDS;
    else if (wr->opcode != SBR__OP_READ &&
             (wr->remote_addr - r->off > r->write_len ||
              wr->length > r->write_len - (wr->remote_addr - r->off)))
      *verr = SHM_VERR_ACCESS;
    if (*verr)
      return SBR__WC_ERROR;
  }
  if (wr->opcode == SBR__OP_WRITE_IMM || wr->opcode == SBR__OP_SEND) {
    int err = shm_tx_reserve(c, SHM_RNR_TIMEOUT_MS);
    if (err) {
      *verr = err == -ETIMEDOUT ? SHM_VERR_RNR : SHM_VERR_PEER_GONE;
      return SBR__WC_ERROR;
    }
  }
  /* From the lkey check to the end of the copy, no dereg can complete: a
   * sender that deregisters and frees a buffer (a READ's target) while a WR
   * is executing must not get the copy into freed memory. */
  pthread_rwlock_rdlock(&shm_mr_fence);
  if (!wr->inline_data &&
      !shm_local_ok(wr->lkey, wr->local_addr, wr->length,
                    wr->opcode == SBR__OP_READ ? SBR__ACCESS_LOCAL_WRITE : 0)) {
    pthread_rwlock_unlock(&shm_mr_fence);
    *verr = SHM_VERR_LKEY;
    return SBR__WC_ERROR;
  }
  uint8_t *remote = r ? c->seg + wr->remote_addr : NULL;
  switch (wr->opcode) {
  case SBR__OP_WRITE:
    shm_copy_in(r, remote, wr->local_addr, wr->length);
    break;
  case SBR__OP_WRITE_IMM:
    shm_copy_in(r, remote, wr->local_addr, wr->length);
    shm_tx_push(c, false, wr->imm_data, true, NULL, wr->length);
    break;
  case SBR__OP_READ:
    shm_copy_out(wr->local_addr, remote, wr->length);
    break;
  case SBR__OP_SEND:
    shm_tx_push(c, true, 0, false, wr->local_addr, wr->length);
    break;
  case SBR__OP_RECV:
    break; /* refused by post_send */
  }
  pthread_rwlock_unlock(&shm_mr_fence);
  return SBR__WC_SUCCESS;
}

static void shm_wait_until(struct sbr__conn *c, uint64_t when_ns)
{
  if (when_ns == UINT64_MAX) {
    pthread_cond_wait(&c->wake, &c->lock);
    return;
  }
  struct timespec ts = {(time_t)(when_ns / NS_PER_S),
                        (long)(when_ns % NS_PER_S)};
  pthread_cond_timedwait(&c->wake, &c->lock, &ts);
}

/* Executes the WR at sq_executed, which is due, and completes it.  Called
 * with c->lock held by the one thread executing (the NIC thread, or a
 * posting thread with sq_inline set); drops the lock for the copy. */
static void shm_execute_next_locked(struct sbr__conn *c)
{
  uint64_t index = c->sq_executed;
  struct shm_swr *s = &c->sq[index % c->sq_depth];
  /* The slot is ours until sq_executed moves past it: post_send only
   * writes slots that poll_cq has retired. */
  pthread_mutex_unlock(&c->lock);
  int verr;
  enum sbr__wc_status st = shm_execute(c, s, index, &verr);
  uint64_t done = shm_now_ns();
  pthread_mutex_lock(&c->lock);
  s->status = st;
  s->vendor_err = verr;
  s->visible_ns = s->post_ns + c->delay_ns;
  if (s->visible_ns < done)
    s->visible_ns = done;
  c->sq_executed++;
  if (st != SBR__WC_SUCCESS && verr != 0 && c->state == SHM_UP) {
    SBR_WARN("%s: %s wr_id %" PRIu64 " failed: %s (vendor_err 0x%x)", c->peer,
             shm_op_name(s->wr.opcode), s->wr.wr_id, shm_verr_str(verr), verr);
    shm_set_state(c, verr == SHM_VERR_PEER_GONE ? SHM_GONE : SHM_ERROR);
  }
  if (s->wr.signaled || st != SBR__WC_SUCCESS)
    shm_bell_ring(c->rx);
}

/* Executes posted WRs in order, each no earlier than post + delay/2.  While
 * idle it sleeps on c->wake, waking at least every SHM_PEER_CHECK_NS to see
 * whether the receiver hung up; it checks as often while busy. */
static void *shm_nic_main(void *arg)
{
  sbr__thread_precise_sleeps();
  struct sbr__conn *c = arg;
  uint64_t next_check = 0;
  pthread_mutex_lock(&c->lock);
  while (!atomic_load(&c->stop)) {
    uint64_t now = shm_now_ns();
    if (c->state != SHM_GONE && now >= next_check) {
      pthread_mutex_unlock(&c->lock);
      bool gone = shm_peer_gone(c->sock);
      pthread_mutex_lock(&c->lock);
      next_check = now + SHM_PEER_CHECK_NS;
      if (gone) {
        SBR_WARN("%s: receiver hung up; flushing %" PRIu64 " WRs", c->peer,
                 c->sq_posted - c->sq_executed);
        shm_set_state(c, SHM_GONE);
        shm_bell_ring(c->rx);
      }
      continue;
    }
    uint64_t wake = c->state == SHM_GONE ? UINT64_MAX : next_check;
    if (c->sq_inline && !c->claim_started) {
      /* Its claimer hasn't started: take the chain over (execute_claimed
       * then finds it gone).  Order is kept either way. */
      c->sq_inline = false;
      continue;
    }
    if (c->sq_executed == c->sq_posted || c->sq_inline) {
      shm_wait_until(c, wake);
      continue;
    }
    uint64_t index = c->sq_executed;
    struct shm_swr *s = &c->sq[index % c->sq_depth];
    if (c->state != SHM_UP) {
      s->status = SBR__WC_FLUSH;
      s->vendor_err = 0;
      s->visible_ns = now;
      c->sq_executed++;
      shm_bell_ring(c->rx);
      continue;
    }
    uint64_t due = s->post_ns + c->delay_ns / 2;
    if (now < due) {
      shm_wait_until(c, due < wake ? due : wake);
      continue;
    }
    shm_execute_next_locked(c);
  }
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

/* ------------------------------------------------------------ data path */

/* Checks a chain before anything of it is posted. */
static int shm_check_chain(const struct sbr__conn *c, const struct sbr__wr *wrs,
                           int n)
{
  if (!c || !wrs || n <= 0)
    return -EINVAL;
  for (int i = 0; i < n; i++) {
    const struct sbr__wr *wr = &wrs[i];
    switch (wr->opcode) {
    case SBR__OP_WRITE:
    case SBR__OP_WRITE_IMM:
    case SBR__OP_READ:
      /* The receiver end has no remote memory to reach. */
      if (c->role == SHM_RECEIVER)
        return -EOPNOTSUPP;
      break;
    case SBR__OP_SEND:
      if (wr->length > SHM_MAX_MSG)
        return -EMSGSIZE;
      break;
    default:
      return -EINVAL;
    }
    if (wr->inline_data &&
        (wr->opcode == SBR__OP_READ || wr->length > SHM_MAX_INLINE))
      return -EINVAL;
    if (wr->length && !wr->local_addr)
      return -EINVAL;
  }
  return 0;
}

/* May the thread posting wrs execute them itself?  Only on an idle NIC
 * (nothing posted before them is unexecuted, so the order holds), with no
 * injected delay, and only WRITEs and READs: those never wait for the peer
 * (WRITE WITH IMMEDIATE may wait up to SHM_RNR_TIMEOUT_MS for a receive,
 * which a producer's thread must not). */
static bool shm_may_execute_inline_locked(const struct sbr__conn *c,
                                          const struct sbr__wr *wrs, int n)
{
  if (c->state != SHM_UP || c->delay_ns != 0 || c->sq_inline ||
      c->sq_executed != c->sq_posted)
    return false;
  for (int i = 0; i < n; i++)
    if (wrs[i].opcode != SBR__OP_WRITE && wrs[i].opcode != SBR__OP_READ)
      return false;
  return true;
}

/* Sender: queue the chain for the NIC thread, or (post_send_here) claim
 * it for the posting thread when the NIC is idle.  A real NIC starts on a
 * doorbell at once; the NIC thread has to be woken first, which on a busy
 * 2-core host costs 50-200 us (p50 to p90) before every frame's copy even
 * starts (#11).  Claimed, the copy runs in the posting thread
 * (shm_execute_claimed, once the sender dropped engine_lock), as shmsink
 * copies in its render: the WRs' order, their completions and the errors
 * they raise are the NIC thread's (shm_execute_next_locked).  WRs posted
 * meanwhile by other threads queue behind and are the NIC thread's once
 * the claim is done.  Only post_send_here claims: the sender thread keeps
 * reaping while the NIC thread copies what it posts. */
static int shm_post_send_nic(struct sbr__conn *c, const struct sbr__wr *wrs,
                             int n, bool may_claim)
{
  uint64_t now = shm_now_ns();
  pthread_mutex_lock(&c->lock);
  int err = 0;
  bool here = false;
  if (c->state == SHM_GONE)
    err = -ENOTCONN;
  else if ((uint64_t)n > c->sq_depth - (c->sq_posted - c->sq_retired))
    err = -ENOMEM;
  else
    here = may_claim && shm_may_execute_inline_locked(c, wrs, n);
  for (int i = 0; !err && i < n; i++) {
    struct shm_swr *s = &c->sq[c->sq_posted % c->sq_depth];
    s->wr = wrs[i];
    if (s->wr.inline_data) {
      if (s->wr.length)
        memcpy(s->inl, s->wr.local_addr, s->wr.length);
      s->wr.local_addr = s->inl;
    }
    s->post_ns = now;
    s->visible_ns = UINT64_MAX;
    s->status = SBR__WC_SUCCESS;
    s->vendor_err = 0;
    c->sq_posted++;
  }
  if (here) {
    /* Claimed: the caller executes it (shm_execute_claimed). */
    c->sq_inline = true;
    c->claim_started = false;
    c->claim_owner = pthread_self();
    c->sq_claim_end = c->sq_posted;
    c->claim_callers++;
  } else if (!err) {
    pthread_cond_signal(&c->wake);
  }
  pthread_mutex_unlock(&c->lock);
  return err ? err : here ? 1 : 0;
}

void (*sbr__shm_test_claim_hook)(void);

static void shm_execute_claimed(struct sbr__conn *c)
{
  if (sbr__shm_test_claim_hook)
    sbr__shm_test_claim_hook();
  pthread_mutex_lock(&c->lock);
  if (c->sq_inline && !c->claim_started &&
      pthread_equal(c->claim_owner, pthread_self())) {
    c->claim_started = true;
    /* Stops at a failure: the NIC thread flushes the rest, as it would. */
    while (c->sq_executed < c->sq_claim_end && c->state == SHM_UP)
      shm_execute_next_locked(c);
    c->sq_inline = false;
    c->claim_started = false;
    if (c->sq_executed != c->sq_posted)
      pthread_cond_signal(&c->wake);
  }
  /* Else the NIC thread took it over. */
  c->claim_callers--;
  pthread_cond_broadcast(&c->inline_done);
  pthread_mutex_unlock(&c->lock);
}

/* Receiver: SENDs execute here and now, into the sender's ring.  Waiting
 * for the sender's credit holds c->lock (at most SHM_SEND_RNR_TIMEOUT_MS),
 * so a post_recv on another thread can wait that long; the sliding-window
 * sender keeps receives posted, so in practice nobody waits. */
static int shm_post_send_sync(struct sbr__conn *c, const struct sbr__wr *wrs,
                              int n)
{
  pthread_mutex_lock(&c->lock);
  int err = 0;
  if (c->state == SHM_GONE)
    err = -ENOTCONN;
  else if ((uint64_t)n > c->sq_depth - (c->lcq_head - c->lcq_tail))
    err = -ENOMEM;
  for (int i = 0; !err && i < n; i++) {
    const struct sbr__wr *wr = &wrs[i];
    int verr = 0;
    enum sbr__wc_status st = SBR__WC_SUCCESS;
    if (c->state != SHM_UP) {
      st = SBR__WC_FLUSH;
    } else if (!wr->inline_data &&
               !shm_local_ok(wr->lkey, wr->local_addr, wr->length, 0)) {
      verr = SHM_VERR_LKEY;
    } else {
      int r = shm_tx_reserve(c, SHM_SEND_RNR_TIMEOUT_MS);
      if (r)
        verr = r == -ETIMEDOUT ? SHM_VERR_RNR : SHM_VERR_PEER_GONE;
      else
        shm_tx_push(c, true, 0, false, wr->local_addr, wr->length);
    }
    if (verr) {
      st = SBR__WC_ERROR;
      SBR_WARN("%s: SEND wr_id %" PRIu64 " failed: %s (vendor_err 0x%x)",
               c->peer, wr->wr_id, shm_verr_str(verr), verr);
      shm_set_state(c, verr == SHM_VERR_PEER_GONE ? SHM_GONE : SHM_ERROR);
    }
    if (wr->signaled || st != SBR__WC_SUCCESS) {
      struct sbr__wc *w = &c->lcq[c->lcq_head++ % c->sq_depth];
      memset(w, 0, sizeof *w);
      w->wr_id = wr->wr_id;
      w->opcode = SBR__OP_SEND;
      w->status = st;
      w->vendor_err = verr;
    }
  }
  pthread_mutex_unlock(&c->lock);
  return err;
}

static int shm_post_send(struct sbr__conn *c, const struct sbr__wr *wrs, int n)
{
  int err = shm_check_chain(c, wrs, n);
  if (err)
    return err;
  return c->role == SHM_SENDER ? shm_post_send_nic(c, wrs, n, false)
                               : shm_post_send_sync(c, wrs, n);
}

static int shm_post_send_here(struct sbr__conn *c, const struct sbr__wr *wrs,
                              int n)
{
  int err = shm_check_chain(c, wrs, n);
  if (err)
    return err;
  return c->role == SHM_SENDER ? shm_post_send_nic(c, wrs, n, true)
                               : shm_post_send_sync(c, wrs, n);
}

static int shm_post_recv(struct sbr__conn *c, uint64_t wr_id, void *addr,
                         uint32_t len, const struct sbr__mr *mr)
{
  if (!c || (len && !addr))
    return -EINVAL;
  /* Checked now rather than when a message lands: simpler, and a receive
   * buffer outside its MR is a bug either way.  No MR: unregistered. */
  if (len && mr && !shm_local_ok(mr->lkey, addr, len, SBR__ACCESS_LOCAL_WRITE))
    return -EINVAL;
  pthread_mutex_lock(&c->lock);
  int err = 0;
  if (c->rq_posted - c->rq_completed >= c->rq_depth) {
    err = -ENOMEM;
  } else {
    struct shm_rwr *r = &c->rq[c->rq_posted % c->rq_depth];
    r->wr_id = wr_id;
    r->addr = addr;
    r->len = len;
    c->rq_posted++;
    /* The FIFO entry exists before the credit does, so a message the
     * peer sends with that credit always finds it. */
    atomic_store_explicit(&c->rx->posted, (uint32_t)c->rq_posted,
                          memory_order_release);
  }
  pthread_mutex_unlock(&c->lock);
  return err;
}

/* Sender: completions of executed WRs, in posting order, each once its
 * (injected) round trip has passed.  A polled completion frees its slot and
 * every unsignaled one before it, as on verbs. */
static int shm_poll_sq(struct sbr__conn *c, struct sbr__wc *wc, int max,
                       uint64_t now)
{
  int n = 0;
  while (n < max && c->sq_scanned != c->sq_executed) {
    struct shm_swr *s = &c->sq[c->sq_scanned % c->sq_depth];
    if (s->visible_ns > now)
      break; /* in order: nothing after it is visible either */
    c->sq_scanned++;
    if (!s->wr.signaled && s->status == SBR__WC_SUCCESS)
      continue;
    struct sbr__wc *w = &wc[n++];
    memset(w, 0, sizeof *w);
    w->wr_id = s->wr.wr_id;
    w->opcode = s->wr.opcode;
    w->status = s->status;
    w->vendor_err = s->vendor_err;
    if (s->wr.opcode == SBR__OP_READ)
      w->byte_len = s->wr.length;
    c->sq_retired = c->sq_scanned;
  }
  return n;
}

static int shm_poll_cq(struct sbr__conn *c, struct sbr__wc *wc, int max)
{
  if (!c || !wc || max <= 0)
    return -EINVAL;
  uint64_t now = shm_now_ns();
  pthread_mutex_lock(&c->lock);
  int n = 0;
  if (c->role == SHM_SENDER) {
    n += shm_poll_sq(c, wc, max, now);
  } else {
    while (n < max && c->lcq_tail != c->lcq_head)
      wc[n++] = c->lcq[c->lcq_tail++ % c->sq_depth];
  }
  n += shm_poll_rx(c, wc + n, max - n);
  /* The receiver has no NIC thread: it looks for a hang-up here, when
   * there is nothing to report, at most every SHM_PEER_CHECK_NS. */
  if (c->role == SHM_RECEIVER && n == 0 && c->state != SHM_GONE &&
      now >= c->next_check_ns) {
    c->next_check_ns = now + SHM_PEER_CHECK_NS;
    if (shm_peer_gone(c->sock))
      shm_set_state(c, SHM_GONE);
  }
  if (c->state != SHM_UP)
    n += shm_flush_rq(c, wc + n, max - n);
  bool drained =
      c->sq_scanned == c->sq_posted && c->rq_completed == c->rq_posted;
  int ret = n == 0 && c->state == SHM_GONE && drained ? -ENOTCONN : n;
  pthread_mutex_unlock(&c->lock);
  return ret;
}

/* Can poll_cq report something now?  Otherwise *next_ns is when the oldest
 * executed WR's completion becomes visible (injected delay), or
 * UINT64_MAX.  Called with c->lock held. */
static bool shm_cq_ready_locked(struct sbr__conn *c, uint64_t now,
                                uint64_t *next_ns)
{
  *next_ns = UINT64_MAX;
  if (c->state != SHM_UP || c->lcq_tail != c->lcq_head ||
      atomic_load_explicit(&c->rx->head, memory_order_acquire) != c->rx_tail)
    return true;
  if (c->role == SHM_SENDER && c->sq_scanned != c->sq_executed) {
    uint64_t visible = c->sq[c->sq_scanned % c->sq_depth].visible_ns;
    if (visible <= now)
      return true;
    *next_ns = visible;
  }
  return false;
}

static void shm_arm_cq(struct sbr__conn *c)
{
  /* The doorbell needs no arming for completions (a waiter reads the bell
   * before it checks for them), but a kick_cq between this arm and the
   * wait must not be lost: the wait sleeps only while the bell is what it
   * was here. */
  if (!c || !c->rx)
    return;
  c->armed_rung = atomic_load(&c->rx->bell);
  c->armed = true;
}

static void shm_wait_cq(struct sbr__conn *c, uint32_t timeout_us)
{
  if (!c || !c->rx) {
    sbr__sleep_us(timeout_us);
    return;
  }
  struct shm_ring *r = c->rx;
  atomic_fetch_add(&r->bell_waiters, 1);
  uint32_t rung = c->armed ? c->armed_rung : atomic_load(&r->bell);
  c->armed = false;
  uint64_t now = shm_now_ns();
  uint64_t next;
  pthread_mutex_lock(&c->lock);
  bool ready = shm_cq_ready_locked(c, now, &next);
  pthread_mutex_unlock(&c->lock);
  if (!ready) {
    uint64_t wait_ns = (uint64_t)timeout_us * 1000u;
    if (next != UINT64_MAX && next - now < wait_ns)
      wait_ns = next - now;
    struct timespec ts = {(time_t)(wait_ns / NS_PER_S),
                          (long)(wait_ns % NS_PER_S)};
    /* Returns at once when the bell rang since it was read. */
    syscall(SYS_futex, &r->bell, FUTEX_WAIT, rung, &ts, NULL, 0);
  }
  atomic_fetch_sub(&r->bell_waiters, 1);
}

static void shm_kick_cq(struct sbr__conn *c)
{
  /* A pollable completion would ring the same bell: the waiter wakes,
   * polls, and finds whatever there is (perhaps nothing). */
  if (c && c->rx)
    shm_bell_ring(c->rx);
}

static uint64_t shm_posted_recv_count(struct sbr__conn *c)
{
  pthread_mutex_lock(&c->lock);
  uint64_t n = c->rq_posted;
  pthread_mutex_unlock(&c->lock);
  return n;
}

/* Test only: the next WR the NIC thread executes (or the next posted, when
 * none waits) fails with SHM_VERR_INJECTED, which puts the conn in error as
 * fail_after_wrs does. */
static int shm_test_fail(struct sbr__conn *c)
{
  if (!c || c->role != SHM_SENDER)
    return -EINVAL;
  pthread_mutex_lock(&c->lock);
  uint64_t next = c->sq_executed + 1;
  pthread_mutex_unlock(&c->lock);
  atomic_store_explicit(&c->fail_at, next, memory_order_relaxed);
  return 0;
}

/* ------------------------------------------------------------- sender */

/* Connects the socket, retrying while nobody listens yet. */
static int shm_dial(uint16_t port, uint64_t deadline, int *out, char *errbuf,
                    size_t errlen)
{
  struct sockaddr_un sa;
  socklen_t sl = shm_sockaddr(port, &sa);
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    int err = -errno;
    sbr__errf(errbuf, errlen, "shm: socket: %s", strerror(-err));
    return err;
  }
  for (;;) {
    if (connect(fd, (struct sockaddr *)&sa, sl) == 0)
      break;
    int err = -errno;
    /* Refused: nobody listens yet.  EAGAIN: the backlog is full. */
    bool retry = err == -ECONNREFUSED || err == -ENOENT || err == -EAGAIN ||
                 err == -EINTR;
    if (!retry || shm_now_ns() >= deadline) {
      if (retry)
        sbr__errf(errbuf, errlen, "shm: no receiver listening on port %u (%s)",
                  (unsigned)port, strerror(-err));
      else
        sbr__errf(errbuf, errlen, "shm: connect to port %u: %s", (unsigned)port,
                  strerror(-err));
      close(fd);
      return err;
    }
    shm_sleep_ns(10 * NS_PER_MS);
  }
  *out = fd;
  return 0;
}

/* Waits for the receiver's answer; on accept fills *lane and *memfd. */
static int shm_await_answer(struct sbr__conn *c, uint16_t port,
                            uint64_t deadline, struct sbr__lane_desc *lane,
                            int *memfd, char *errbuf, size_t errlen)
{
  uint8_t msg[SHM_MSG_HDR + SBR__ACCEPT_PRIV_SIZE + 16];
  ssize_t r;
  int fd = -1;
  for (;;) {
    struct pollfd p = {.fd = c->sock, .events = POLLIN};
    int ms = shm_ms_until(deadline, 1000);
    if (poll(&p, 1, ms) < 0 && errno != EINTR) {
      int err = -errno;
      sbr__errf(errbuf, errlen, "shm: poll: %s", strerror(-err));
      return err;
    }
    r = shm_recv_setup(c->sock, msg, sizeof msg, &fd);
    if (r != -EAGAIN)
      break;
    if (shm_now_ns() >= deadline) {
      sbr__errf(errbuf, errlen,
                "shm: receiver on port %u did not answer in time",
                (unsigned)port);
      return -ETIMEDOUT;
    }
  }
  if (r == 0 || r == -ECONNRESET) {
    sbr__errf(errbuf, errlen, "shm: receiver on port %u hung up",
              (unsigned)port);
    return -ECONNRESET;
  }
  if (r < 0) {
    sbr__errf(errbuf, errlen, "shm: receiving the answer: %s",
              strerror((int)-r));
    return (int)r;
  }
  int err = -EPROTO;
  if (msg[0] == SHM_SETUP_REJECT) {
    struct sbr__refusal why;
    if (r >= SHM_MSG_HDR &&
        sbr__reject_priv_decode(msg + SHM_MSG_HDR, (size_t)r - SHM_MSG_HDR,
                                &why) == 0) {
      char where[64];
      snprintf(where, sizeof where, "shm: the receiver on port %u",
               (unsigned)port);
      sbr__refusal_errf(errbuf, errlen, where, &why);
      err = sbr__refusal_errno(&why);
    } else {
      sbr__errf(errbuf, errlen,
                "shm: receiver on port %u refused the connection",
                (unsigned)port);
      err = -ECONNREFUSED;
    }
    goto out_close_fd;
  }
  int dec = -EPROTO;
  if (r >= SHM_MSG_HDR && msg[0] == SHM_SETUP_ACCEPT && fd >= 0)
    dec = sbr__accept_priv_decode(msg + SHM_MSG_HDR, (size_t)r - SHM_MSG_HDR,
                                  lane);
  if (dec == -EPROTONOSUPPORT) {
    sbr__errf(errbuf, errlen,
              "shm: the receiver on port %u speaks sbr protocol version %d, "
              "this sender %d",
              (unsigned)port,
              sbr__priv_version(msg + SHM_MSG_HDR, (size_t)r - SHM_MSG_HDR),
              SBR__PRIV_VERSION);
    err = -EPROTONOSUPPORT;
    goto out_close_fd;
  }
  if (dec < 0) {
    sbr__errf(errbuf, errlen,
              "shm: malformed answer from the receiver on port %u",
              (unsigned)port);
    goto out_close_fd;
  }
  *memfd = fd;
  return 0;

out_close_fd:
  if (fd >= 0)
    close(fd);
  return err;
}

/* Does [off, +len) lie in [lo, hi)? */
static bool shm_span_ok(uint64_t off, uint64_t len, uint64_t lo, uint64_t hi)
{
  return off >= lo && off <= hi && len <= hi - off;
}

/* Maps the receiver's segment and checks, before trusting any of it, that
 * the control area, the rings and both regions lie inside it (rule 8).  The
 * layout is copied into c, never read back from the segment. */
static int shm_map_lane(struct sbr__conn *c, int memfd,
                        const struct sbr__lane_desc *lane, char *errbuf,
                        size_t errlen)
{
  struct stat st;
  if (fstat(memfd, &st) < 0) {
    int err = -errno;
    sbr__errf(errbuf, errlen, "shm: fstat of the lane: %s", strerror(-err));
    return err;
  }
  /* Without these seals the receiver could shrink the file under us and
   * turn our next write into SIGBUS. */
  int seals = fcntl(memfd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
    sbr__errf(errbuf, errlen, "shm: the receiver's lane is not sealed");
    return -EPROTO;
  }
  if ((uint64_t)st.st_size < sizeof(struct shm_ctrl)) {
    sbr__errf(errbuf, errlen, "shm: the receiver's lane is too small");
    return -EPROTO;
  }
  uint64_t size = (uint64_t)st.st_size;
  void *map =
      mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (map == MAP_FAILED) {
    int err = -errno;
    sbr__errf(errbuf, errlen, "shm: mapping the lane (%" PRIu64 " bytes): %s",
              size, strerror(-err));
    return err;
  }
  const struct shm_ctrl *ctrl = map;
  uint32_t ctrl_size = ctrl->ctrl_size;
  uint32_t n_rx = ctrl->to_sender.slot_count;
  uint32_t n_tx = ctrl->to_receiver.slot_count;
  uint32_t off_rx = ctrl->to_sender.slot_offset;
  uint32_t off_tx = ctrl->to_receiver.slot_offset;
  uint64_t blocks_len = (uint64_t)lane->block_count * lane->block_size;
  uint64_t status_len = sbr__lane_status_len(lane);
  bool ok = ctrl->magic == SHM_CTRL_MAGIC &&
            ctrl->version == SHM_CTRL_VERSION && ctrl_size <= size && n_rx &&
            !(n_rx & (n_rx - 1)) && n_rx <= SHM_MAX_QUEUE && n_tx &&
            !(n_tx & (n_tx - 1)) && n_tx <= SHM_MAX_QUEUE &&
            off_rx % alignof(struct shm_msg) == 0 &&
            off_tx % alignof(struct shm_msg) == 0 &&
            shm_span_ok(off_rx, (uint64_t)n_rx * sizeof(struct shm_msg),
                        sizeof *ctrl, ctrl_size) &&
            shm_span_ok(off_tx, (uint64_t)n_tx * sizeof(struct shm_msg),
                        sizeof *ctrl, ctrl_size) &&
            shm_span_ok(lane->status_addr, status_len, ctrl_size, size) &&
            shm_span_ok(lane->blocks_addr, blocks_len, ctrl_size, size) &&
            (lane->blocks_addr >= lane->status_addr + status_len ||
             lane->status_addr >= lane->blocks_addr + blocks_len) &&
            lane->blocks_rkey != lane->status_rkey;
  if (!ok) {
    munmap(map, (size_t)size);
    sbr__errf(errbuf, errlen,
              "shm: the receiver's lane does not fit its "
              "segment; refusing it");
    return -EPROTO;
  }
  c->seg = map;
  c->seg_len = (size_t)size;
  struct shm_ctrl *wctrl = map;
  c->tx = &wctrl->to_receiver;
  c->tx_slots = (struct shm_msg *)(c->seg + off_tx);
  c->tx_mask = n_tx - 1;
  c->rx = &wctrl->to_sender;
  c->rx_slots = (struct shm_msg *)(c->seg + off_rx);
  c->rx_mask = n_rx - 1;
  /* Start from the counters as they are: fresh from accept, all zero. */
  c->tx_head = atomic_load(&c->tx->head);
  c->rx_tail = atomic_load(&c->rx->tail);
  c->blocks = (struct shm_region){.off = lane->blocks_addr,
                                  .len = blocks_len,
                                  .rkey = lane->blocks_rkey,
                                  .read_ok = false,
                                  .write_len = blocks_len,
                                  .status = false};
  c->status = (struct shm_region){.off = lane->status_addr,
                                  .len = status_len,
                                  .rkey = lane->status_rkey,
                                  .read_ok = true,
                                  .write_len = lane->block_count,
                                  .status = true};
  return 0;
}

/* Starts the NIC thread with every signal blocked: signals are for the
 * application's threads, not ours. */
static int shm_start_nic(struct sbr__conn *c)
{
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int err = pthread_create(&c->nic, NULL, shm_nic_main, c);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (err)
    return -err;
  pthread_setname_np(c->nic, "sbr-shm-nic");
  c->nic_running = true;
  return 0;
}

static int shm_connect(const char *host, uint16_t port, const char *source,
                       const uint8_t *priv, size_t priv_len,
                       const struct sbr__queue_caps *caps,
                       const struct sbr_fault_injection *faults, int timeout_ms,
                       struct sbr__conn **out, struct sbr__lane_desc *lane,
                       char *errbuf, size_t errlen)
{
  (void)host; /* same host by definition: the port names the receiver */
  (void)source;
  uint8_t mechanism;
  uint32_t hint_size, hint_count;
  if (!out || !lane || !caps || !priv || priv_len > SHM_MAX_PRIV ||
      sbr__connect_priv_decode(priv, priv_len, &mechanism, &hint_size,
                               &hint_count) < 0) {
    sbr__errf(errbuf, errlen, "shm: connect: invalid arguments");
    return -EINVAL;
  }
  if (caps->max_inline > SHM_MAX_INLINE || caps->max_send_wr > SHM_MAX_QUEUE ||
      caps->max_recv_wr > SHM_MAX_QUEUE) {
    sbr__errf(errbuf, errlen,
              "shm: queue caps too large (inline %" PRIu32 " > %d, or more "
              "than %d WRs)",
              caps->max_inline, SHM_MAX_INLINE, SHM_MAX_QUEUE);
    return -EINVAL;
  }
  uint64_t deadline = shm_deadline(timeout_ms);
  struct sbr__conn *c = shm_conn_new(SHM_SENDER, caps);
  if (!c) {
    sbr__errf(errbuf, errlen, "shm: out of memory");
    return -ENOMEM;
  }
  if (faults) {
    c->delay_ns = (uint64_t)faults->delay_us * 1000;
    atomic_store_explicit(&c->fail_at, faults->fail_after_wrs,
                          memory_order_relaxed);
  }
  int memfd = -1;
  int err = shm_dial(port, deadline, &c->sock, errbuf, errlen);
  if (err)
    goto out_destroy;
  shm_peer_name(c->sock, c->peer, sizeof c->peer);
  err = shm_send_setup(c->sock, SHM_SETUP_CONNECT, priv, priv_len, -1);
  if (err) {
    sbr__errf(errbuf, errlen, "shm: sending the request to port %u: %s",
              (unsigned)port, strerror(-err));
    goto out_destroy;
  }
  err = shm_await_answer(c, port, deadline, lane, &memfd, errbuf, errlen);
  if (err)
    goto out_destroy;
  if (lane->mechanism != mechanism) {
    sbr__errf(errbuf, errlen,
              "shm: receiver answered with mechanism %u, asked for %u",
              lane->mechanism, mechanism);
    err = -EPROTO;
    goto out_close_memfd;
  }
  err = shm_map_lane(c, memfd, lane, errbuf, errlen);
  if (err)
    goto out_close_memfd;
  close(memfd); /* the mapping keeps the segment */
  memfd = -1;
  err = shm_start_nic(c);
  if (err) {
    sbr__errf(errbuf, errlen, "shm: starting the NIC thread: %s",
              strerror(-err));
    goto out_destroy;
  }
  *out = c;
  return 0;

out_close_memfd:
  close(memfd);
out_destroy:
  shm_conn_destroy(c); /* unmaps, closes the socket: the receiver sees it */
  return err;
}

/* ------------------------------------------------------------ receiver */

static int shm_listen(const char *addr, uint16_t port,
                      struct sbr__listener **out, char *errbuf, size_t errlen)
{
  (void)addr; /* same host by definition: the port names the receiver */
  if (!out)
    return -EINVAL;
  struct sbr__listener *l = calloc(1, sizeof *l);
  if (!l) {
    sbr__errf(errbuf, errlen, "shm: out of memory");
    return -ENOMEM;
  }
  l->port = port;
  l->next_watch_id = 1;
  int err;
  l->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (l->fd < 0) {
    err = -errno;
    sbr__errf(errbuf, errlen, "shm: socket: %s", strerror(-err));
    goto out_free;
  }
  struct sockaddr_un sa;
  socklen_t sl = shm_sockaddr(port, &sa);
  if (bind(l->fd, (struct sockaddr *)&sa, sl) < 0) {
    err = -errno;
    if (err == -EADDRINUSE)
      sbr__errf(errbuf, errlen,
                "shm: port %u is already taken by another receiver",
                (unsigned)port);
    else
      sbr__errf(errbuf, errlen, "shm: bind to port %u: %s", (unsigned)port,
                strerror(-err));
    goto out_close;
  }
  if (listen(l->fd, 64) < 0) {
    err = -errno;
    sbr__errf(errbuf, errlen, "shm: listen on port %u: %s", (unsigned)port,
              strerror(-err));
    goto out_close;
  }
  *out = l;
  return 0;

out_close:
  close(l->fd);
out_free:
  free(l);
  return err;
}

static void shm_pending_drop(struct sbr__listener *l, int i, bool close_fd)
{
  if (close_fd)
    close(l->pending[i].fd);
  l->pending[i] = l->pending[--l->n_pending];
}

/* Fills the poll set: the listening socket, the pending ones, the lanes. */
static int shm_pollset_build(struct sbr__listener *l, size_t *n_out)
{
  pthread_mutex_lock(&shm_watch_lock);
  size_t n = 1 + (size_t)l->n_pending;
  for (struct sbr__conn *c = l->lanes; c; c = c->watch_next)
    n++;
  if (n > l->pfd_cap) {
    struct pollfd *p = realloc(l->pfds, n * sizeof *p);
    if (p)
      l->pfds = p;
    uint64_t *ids = p ? realloc(l->pfd_ids, n * sizeof *ids) : NULL;
    if (ids)
      l->pfd_ids = ids;
    if (!p || !ids) {
      pthread_mutex_unlock(&shm_watch_lock);
      return -ENOMEM;
    }
    l->pfd_cap = n;
  }
  size_t k = 0;
  l->pfds[k++] = (struct pollfd){.fd = l->fd, .events = POLLIN};
  for (int i = 0; i < l->n_pending; i++)
    l->pfds[k++] = (struct pollfd){.fd = l->pending[i].fd, .events = POLLIN};
  for (struct sbr__conn *c = l->lanes; c; c = c->watch_next) {
    l->pfd_ids[k] = c->watch_id;
    l->pfds[k++] = (struct pollfd){.fd = c->sock, .events = POLLIN | POLLRDHUP};
  }
  pthread_mutex_unlock(&shm_watch_lock);
  *n_out = n;
  return 0;
}

/* Reads the connect message of pending socket i.  True when it became a
 * CONNECT_REQUEST in *ev; the socket then belongs to the request. */
static bool shm_read_request(struct sbr__listener *l, int i,
                             struct sbr__listen_event *ev)
{
  int fd = l->pending[i].fd, extra;
  uint8_t msg[SHM_MSG_HDR + SHM_MAX_PRIV];
  ssize_t r = shm_recv_setup(fd, msg, sizeof msg, &extra);
  if (extra >= 0)
    close(extra); /* nobody passes us descriptors */
  if (r == -EAGAIN)
    return false;
  if (r <= 0 && r != -EPROTO) {
    /* Hung up (or failed) before asking anything: nobody to answer.  A
     * request too long for us (-EPROTO) is answered: it is malformed. */
    shm_pending_drop(l, i, true);
    return false;
  }
  struct sbr__conn_request *req = &ev->req;
  const uint8_t *priv = msg + SHM_MSG_HDR;
  size_t len = r >= SHM_MSG_HDR ? (size_t)r - SHM_MSG_HDR : 0;
  int dec = -EPROTO;
  if (r >= SHM_MSG_HDR && msg[0] == SHM_SETUP_CONNECT)
    dec = sbr__connect_priv_decode(priv, len, &req->mechanism, &req->block_size,
                                   &req->block_count);
  /* impl holds fd + 1, so NULL means "already answered". */
  req->impl = (void *)(intptr_t)(fd + 1);
  shm_peer_name(fd, req->peer, sizeof req->peer);
  ev->type = SBR__EV_CONNECT_REQUEST;
  /* One the engine can't take is still the engine's to refuse (and to
   * report): like verbs, the sender hears why rather than a hang-up. */
  if (dec == -EPROTONOSUPPORT) {
    ev->type = SBR__EV_BAD_REQUEST;
    sbr__refusal_set(&req->refusal, SBR_REFUSAL_VERSION, SBR__PRIV_VERSION,
                     (uint32_t)sbr__priv_version(priv, len));
  } else if (dec < 0) {
    ev->type = SBR__EV_BAD_REQUEST;
    sbr__refusal_set(&req->refusal, SBR_REFUSAL_MALFORMED, 0, (uint32_t)len);
  }
  shm_pending_drop(l, i, false);
  return true;
}

/* A watched lane's socket woke up: report it if the sender is gone. */
static bool shm_check_lane(struct sbr__listener *l, uint64_t id,
                           struct sbr__listen_event *ev)
{
  bool found = false;
  pthread_mutex_lock(&shm_watch_lock);
  for (struct sbr__conn **p = &l->lanes; *p; p = &(*p)->watch_next) {
    struct sbr__conn *c = *p;
    /* Matched by id: the lane may have been closed on another thread
     * since the poll set was built, and its fd number reused. */
    if (c->watch_id != id)
      continue;
    if (shm_peer_gone(c->sock)) {
      *p = c->watch_next;
      c->watch_next = NULL;
      c->listener = NULL; /* reported once; close won't unlink again */
      ev->type = SBR__EV_DISCONNECTED;
      ev->conn = c;
      found = true;
    }
    break;
  }
  pthread_mutex_unlock(&shm_watch_lock);
  return found;
}

static int shm_get_event(struct sbr__listener *l, int timeout_ms,
                         struct sbr__listen_event *ev)
{
  if (!l || !ev)
    return -EINVAL;
  memset(ev, 0, sizeof *ev);
  ev->type = SBR__EV_NONE;
  uint64_t deadline = shm_deadline(timeout_ms);
  for (;;) {
    size_t n;
    int err = shm_pollset_build(l, &n);
    if (err)
      return err;
    /* Woken at least once a second to expire silent pending sockets. */
    int r = poll(l->pfds, n, shm_ms_until(deadline, 1000));
    if (r < 0 && errno != EINTR)
      return -errno;
    uint64_t now = shm_now_ns();
    int np = l->n_pending;
    for (int i = np - 1; r > 0 && i >= 0; i--)
      if (l->pfds[1 + i].revents && shm_read_request(l, i, ev))
        return 0;
    for (size_t k = 1 + (size_t)np; r > 0 && k < n; k++)
      if (l->pfds[k].revents && shm_check_lane(l, l->pfd_ids[k], ev))
        return 0;
    if (r > 0 && (l->pfds[0].revents & POLLIN)) {
      int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        if (l->n_pending == SHM_MAX_PENDING) {
          SBR_WARN("shm: port %u: too many silent connections; dropping one",
                   (unsigned)l->port);
          shm_pending_drop(l, 0, true);
        }
        l->pending[l->n_pending++] = (struct shm_pending){fd, now};
        /* The request usually arrives with the connection. */
        if (shm_read_request(l, l->n_pending - 1, ev))
          return 0;
      }
    }
    for (int i = l->n_pending - 1; i >= 0; i--)
      if (now - l->pending[i].since_ns > SHM_PENDING_TIMEOUT_NS)
        shm_pending_drop(l, i, true);
    if (now >= deadline)
      return 0;
  }
}

/* Takes the socket out of a request; -1 if it was already answered. */
static int shm_req_take(struct sbr__conn_request *req)
{
  if (!req || !req->impl)
    return -1;
  int fd = (int)((intptr_t)req->impl - 1);
  req->impl = NULL;
  return fd;
}

/* Creates, sizes, seals and maps the segment and lays out the control area;
 * fills the lane's addresses and keys.  Returns the memfd (the caller sends
 * it and closes it) or negative errno. */
static int shm_segment_create(struct sbr__conn *c,
                              const struct sbr__queue_caps *caps,
                              struct sbr__lane_desc *lane)
{
  uint32_t n_rx = shm_pow2_at_least(caps->max_recv_wr > SHM_RING_MIN_SLOTS
                                        ? caps->max_recv_wr
                                        : SHM_RING_MIN_SLOTS);
  uint32_t n_tx = SHM_TO_SENDER_SLOTS;
  uint64_t off_rx = shm_round_up(sizeof(struct shm_ctrl), 64);
  uint64_t off_tx = off_rx + (uint64_t)n_rx * sizeof(struct shm_msg);
  uint64_t ctrl_size =
      shm_round_up(off_tx + (uint64_t)n_tx * sizeof(struct shm_msg), SHM_PAGE);
  uint64_t status_off = ctrl_size;
  uint64_t blocks_off =
      shm_round_up(status_off + sbr__lane_status_len(lane), SHM_PAGE);
  uint64_t size = blocks_off + (uint64_t)lane->block_count * lane->block_size;

  int err;
  int fd = memfd_create("sbr-shm-lane", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return -errno;
  if (ftruncate(fd, (off_t)size) < 0)
    goto out_close_fd;
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
    goto out_close_fd;
  void *map =
      mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED)
    goto out_close_fd;
  c->seg = map;
  c->seg_len = (size_t)size;

  /* A fresh memfd reads as zeros: counters start at 0, status bytes empty. */
  struct shm_ctrl *ctrl = map;
  ctrl->magic = SHM_CTRL_MAGIC;
  ctrl->version = SHM_CTRL_VERSION;
  ctrl->ctrl_size = (uint32_t)ctrl_size;
  ctrl->to_receiver.slot_count = n_rx;
  ctrl->to_receiver.slot_offset = (uint32_t)off_rx;
  ctrl->to_sender.slot_count = n_tx;
  ctrl->to_sender.slot_offset = (uint32_t)off_tx;
  c->rx = &ctrl->to_receiver;
  c->rx_slots = (struct shm_msg *)(c->seg + off_rx);
  c->rx_mask = n_rx - 1;
  c->tx = &ctrl->to_sender;
  c->tx_slots = (struct shm_msg *)(c->seg + off_tx);
  c->tx_mask = n_tx - 1;

  lane->status_addr = status_off;
  lane->blocks_addr = blocks_off;
  lane->blocks_rkey = shm_make_key();
  do
    lane->status_rkey = shm_make_key();
  while (lane->status_rkey == lane->blocks_rkey);
  return fd;

out_close_fd:
  err = -errno;
  close(fd);
  return err;
}

/* 'R' with the reason and the receiver's value. */
static void shm_send_reject(int sock, enum sbr_refusal reason,
                            uint32_t receiver_value)
{
  struct sbr__refusal why;
  uint8_t priv[SBR__REJECT_PRIV_SIZE];
  sbr__refusal_set(&why, reason, receiver_value, 0);
  sbr__reject_priv_encode(priv, &why);
  shm_send_setup(sock, SHM_SETUP_REJECT, priv, sizeof priv, -1);
}

static int shm_accept(struct sbr__listener *l, struct sbr__conn_request *req,
                      const struct sbr__queue_caps *caps,
                      struct sbr__lane_desc *lane, struct sbr__conn **out,
                      struct sbr__lane_mem *mem)
{
  int sock = shm_req_take(req);
  if (!l || sock < 0)
    return -EINVAL;
  int err = -EINVAL;
  struct sbr__conn *c = NULL;
  /* Same limits as sbr__accept_priv_decode applies on the other side. */
  if (!caps || !lane || !out || !mem || lane->block_count == 0 ||
      lane->block_count > 65536 || lane->block_size < 128 ||
      lane->block_size > (64u << 20) ||
      lane->pause_offset < lane->block_count ||
      lane->pause_offset > sbr__pause_offset_for(lane->block_count) ||
      (lane->refused_offset != 0 &&
       lane->refused_offset != lane->pause_offset + SBR__PAUSE_BITMAP_SIZE) ||
      caps->max_send_wr > SHM_MAX_QUEUE || caps->max_recv_wr > SHM_MAX_QUEUE)
    goto out_refuse;
  err = -ENOMEM;
  c = shm_conn_new(SHM_RECEIVER, caps);
  if (!c)
    goto out_refuse;
  snprintf(c->peer, sizeof c->peer, "%s", req->peer);
  int memfd = shm_segment_create(c, caps, lane);
  if (memfd < 0) {
    err = memfd;
    SBR_WARN("shm: port %u: cannot create a lane for %s: %s", (unsigned)l->port,
             req->peer, strerror(-err));
    goto out_destroy;
  }
  uint8_t priv[SBR__ACCEPT_PRIV_SIZE];
  sbr__accept_priv_encode(priv, lane);
  err = shm_send_setup(sock, SHM_SETUP_ACCEPT, priv, sizeof priv, memfd);
  close(memfd); /* the sender has its own now; our mapping keeps ours */
  /* A sender that gave up meanwhile is not an accept failure: as on verbs
   * (transport.h), the lane is accepted and get_event reports it as
   * DISCONNECTED, since its socket has hung up. */
  if (err == -EPIPE || err == -ECONNRESET || err == -ENOTCONN)
    err = 0;
  if (err) {
    SBR_WARN("shm: port %u: answering %s: %s", (unsigned)l->port, req->peer,
             strerror(-err));
    goto out_destroy;
  }
  c->sock = sock;
  mem->status = c->seg + lane->status_addr;
  mem->blocks = c->seg + lane->blocks_addr;

  pthread_mutex_lock(&shm_watch_lock);
  c->listener = l;
  c->watch_id = l->next_watch_id++;
  c->watch_next = l->lanes;
  l->lanes = c;
  pthread_mutex_unlock(&shm_watch_lock);
  *out = c;
  return 0;

out_destroy:
  shm_conn_destroy(c);
out_refuse:
  /* The request is answered either way: the sender hears no at once rather
   * than at its timeout, and a later reject of req is a no-op. */
  shm_send_reject(sock, SBR_REFUSAL_RESOURCES, (uint32_t)-err);
  close(sock);
  return err;
}

static void shm_reject(struct sbr__listener *l, struct sbr__conn_request *req,
                       const struct sbr__refusal *why)
{
  (void)l;
  int sock = shm_req_take(req);
  if (sock < 0 || !why) {
    if (sock >= 0)
      close(sock);
    return;
  }
  uint8_t priv[SBR__REJECT_PRIV_SIZE];
  sbr__reject_priv_encode(priv, why);
  shm_send_setup(sock, SHM_SETUP_REJECT, priv, sizeof priv, -1);
  close(sock);
}

static void shm_close_listener(struct sbr__listener *l)
{
  if (!l)
    return;
  while (l->n_pending)
    shm_pending_drop(l, l->n_pending - 1, true);
  /* Accepted lanes live on; they just aren't watched any more. */
  pthread_mutex_lock(&shm_watch_lock);
  while (l->lanes) {
    struct sbr__conn *c = l->lanes;
    l->lanes = c->watch_next;
    c->watch_next = NULL;
    c->listener = NULL;
  }
  pthread_mutex_unlock(&shm_watch_lock);
  close(l->fd);
  free(l->pfds);
  free(l->pfd_ids);
  free(l);
}

/* Stops the listener watching c. */
static void shm_unwatch(struct sbr__conn *c)
{
  pthread_mutex_lock(&shm_watch_lock);
  if (c->listener) {
    for (struct sbr__conn **p = &c->listener->lanes; *p;
         p = &(*p)->watch_next) {
      if (*p == c) {
        *p = c->watch_next;
        break;
      }
    }
    c->listener = NULL;
  }
  pthread_mutex_unlock(&shm_watch_lock);
}

static void shm_disconnect(struct sbr__conn *c)
{
  if (!c)
    return;
  shm_unwatch(c);
  /* The sender's NIC thread sees the hang-up and fails its requests; the
   * mapping stays until close. */
  shutdown(c->sock, SHUT_RDWR);
}

static void shm_close(struct sbr__conn *c)
{
  if (!c)
    return;
  shm_unwatch(c);
  shm_conn_destroy(c);
}

const struct sbr__transport_ops sbr__transport_shm = {
    .name = "shm",
    .connect = shm_connect,
    .listen = shm_listen,
    .get_event = shm_get_event,
    .accept = shm_accept,
    .reject = shm_reject,
    .close_listener = shm_close_listener,
    .reg_mr = shm_reg_mr,
    .dereg_mr = shm_dereg_mr,
    .post_send = shm_post_send,
    .post_send_here = shm_post_send_here,
    .execute_claimed = shm_execute_claimed,
    .post_recv = shm_post_recv,
    .poll_cq = shm_poll_cq,
    .arm_cq = shm_arm_cq,
    .wait_cq = shm_wait_cq,
    .kick_cq = shm_kick_cq,
    .disconnect = shm_disconnect,
    .close = shm_close,
    .posted_recv_count = shm_posted_recv_count,
    .test_fail = shm_test_fail,
};
