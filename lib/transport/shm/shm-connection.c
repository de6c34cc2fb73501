/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * shm-connection.c - the shm back end's connection set-up (shm-internal.h
 * says what the back end is and how its files divide it).
 *
 * Setup: one datagram each way on a SOCK_SEQPACKET socket.
 *
 *   sender -> receiver   'C' 0 0 0 | connect private data (<= 56 bytes)
 *   receiver -> sender   'A' 0 0 0 | accept private data (56 bytes),
 *                                    with the memfd attached (SCM_RIGHTS)
 *                    or  'R' 0 0 0 | reject private data (16 bytes, why;
 *                                    wire/private-data.h; an old
 *                                    receiver sent none)
 *
 * After that the socket carries nothing: its hang-up is the disconnect, seen
 * by the receiver's get_event and poll_cq and by the sender's NIC thread.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/log.h"
#include "transport/shm/shm-internal.h"

enum shm_setup_kind {
  SHM_SETUP_CONNECT = 'C',
  SHM_SETUP_ACCEPT = 'A',
  SHM_SETUP_REJECT = 'R',
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

/* -------------------------------------------------------------- helpers */

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
  uint8_t buf[SHM_MSG_HDR + SHM_MAX_SETUP] = {kind};
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
bool sbr__shm_peer_gone(int sock)
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

/* ------------------------------------------------------ conn lifetime */

/* Allocates a conn with its queues; nothing shared yet. */
struct sbr__conn *sbr__shm_conn_new(enum shm_role role,
                                    const struct sbr__queue_caps *caps)
{
  struct sbr__conn *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->role = role;
  c->sock = -1;
  c->memfd = -1;
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
void sbr__shm_conn_destroy(struct sbr__conn *c)
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
  if (c->memfd >= 0)
    close(c->memfd);
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

static int shm_connect(const char *host, uint16_t port, const char *source,
                       const uint8_t *priv, size_t priv_len,
                       const struct sbr__queue_caps *caps, int timeout_ms,
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
  struct sbr__conn *c = sbr__shm_conn_new(SHM_SENDER, caps);
  if (!c) {
    sbr__errf(errbuf, errlen, "shm: out of memory");
    return -ENOMEM;
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
  err = sbr__shm_map_lane(c, memfd, lane, errbuf, errlen);
  if (err)
    goto out_close_memfd;
  /* Kept open: direct placement maps the blocks region again, in a
   * mapping that may outlive the conn (sbr__shm_map_blocks). */
  c->memfd = memfd;
  memfd = -1;
  err = sbr__shm_start_nic(c);
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
  /* Unmaps, closes the socket: the receiver sees it. */
  sbr__shm_conn_destroy(c);
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
  /* shm never probes, but refuses a bad probe target as verbs does. */
  if (dec == 0)
    dec = sbr__connect_priv_probe(priv, len, &req->probe);
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
    if (sbr__shm_peer_gone(c->sock)) {
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
  if (!caps || !lane || !out || !mem || !sbr__lane_desc_valid(lane) ||
      caps->max_send_wr > SHM_MAX_QUEUE || caps->max_recv_wr > SHM_MAX_QUEUE)
    goto out_refuse;
  err = -ENOMEM;
  c = sbr__shm_conn_new(SHM_RECEIVER, caps);
  if (!c)
    goto out_refuse;
  snprintf(c->peer, sizeof c->peer, "%s", req->peer);
  int memfd = sbr__shm_segment_create(c, caps, lane);
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
  sbr__shm_conn_destroy(c);
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
  sbr__shm_conn_destroy(c);
}

const struct sbr__transport_ops sbr__transport_shm = {
    .name = "shm",
    .connect = shm_connect,
    .listen = shm_listen,
    .get_event = shm_get_event,
    .accept = shm_accept,
    .reject = shm_reject,
    .close_listener = shm_close_listener,
    .reg_mr = sbr__shm_reg_mr,
    .dereg_mr = sbr__shm_dereg_mr,
    .post_send = sbr__shm_post_send,
    .post_send_here = sbr__shm_post_send_here,
    .execute_claimed = sbr__shm_execute_claimed,
    .post_recv = sbr__shm_post_recv,
    .poll_cq = sbr__shm_poll_cq,
    .arm_cq = sbr__shm_arm_cq,
    .wait_cq = sbr__shm_wait_cq,
    .kick_cq = sbr__shm_kick_cq,
    .disconnect = shm_disconnect,
    .close = shm_close,
    .posted_recv_count = sbr__shm_posted_recv_count,
    .sleep_prepare = sbr__shm_sleep_prepare,
    .sleep_wait = sbr__shm_sleep_wait,
    .sleep_end = sbr__shm_sleep_end,
    .test_fail = sbr__shm_test_fail,
    .map_blocks = sbr__shm_map_blocks,
    .unmap_blocks = sbr__shm_unmap_blocks,
};
