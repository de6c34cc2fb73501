/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz-shm.c - libFuzzer target: the shm back end's control messages
 * (lib/transport/shm/), from both ends, through its real code
 * and real sockets.
 *
 * Input: one mode byte, then
 *   mode bit 0 clear, a hostile sender: the datagram it sends to a
 *     listening receiver (kind byte, 3 zero bytes, connect private data),
 *     with a descriptor attached when mode bit 1 is set.  The receiver must
 *     refuse it or turn it into a request; a request is accepted (mode bit
 *     2) or rejected.  An accepted lane's segment is then mapped as the
 *     sender would, the receive ring's counters and messages are forged
 *     from the input, and the receiver, with receives posted, polls them.
 *   mode bit 0 set, a hostile receiver: a real sender connects to a
 *     listener of this file, which answers with a datagram from the input
 *     (kind, accept private data) and, when mode bit 1 is set, a memfd
 *     segment of a size from the input, sealed or not (bit 2), whose bytes
 *     come from the input (an image of the control area and patches).  The
 *     sender must refuse a segment that its lane does not fit (rule 8); one
 *     it takes is then used: receives posted and polled against forged
 *     ring messages, a status WRITE and READ executed by its NIC thread.
 *
 * The segment layout below (offsets into struct shm_ctrl, struct shm_msg)
 * is the one shm-internal.h asserts; a forged segment only needs to be
 * what a peer could write.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fuzz-common.h"
#include "transport/transport.h"

/* struct shm_ctrl and struct shm_ring (shm-internal.h). */
#define CTRL_SIZE 576
#define RING_TO_RECEIVER 64
#define RING_TO_SENDER 320
#define RING_POSTED 0
#define RING_HEAD 64
#define RING_TAIL 128
#define RING_SLOT_COUNT 192
#define RING_SLOT_OFFSET 196
#define MSG_SIZE 80 /* struct shm_msg */
#define MAX_SEGMENT (1u << 20)

static const struct sbr__transport_ops *ops = &sbr__transport_shm;
static uint16_t rx_port, tx_port;
static struct sbr__listener *listener; /* the receiver under test */
static int rogue_fd = -1;              /* the hostile receiver's listener */

static socklen_t shm_addr(uint16_t port, struct sockaddr_un *sa)
{
  /* shm-connection.c's abstract name for a port. */
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  int n = snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "sbr-shm:%u",
                   (unsigned)port);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static int send_with_fd(int sock, const void *buf, size_t len, int fd)
{
  struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
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
  return sendmsg(sock, &m, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

static int recv_with_fd(int sock, void *buf, size_t cap, int *fd)
{
  union {
    struct cmsghdr align;
    char space[CMSG_SPACE(sizeof(int))];
  } cbuf;
  struct iovec iov = {.iov_base = buf, .iov_len = cap};
  struct msghdr m = {.msg_iov = &iov,
                     .msg_iovlen = 1,
                     .msg_control = cbuf.space,
                     .msg_controllen = sizeof cbuf.space};
  *fd = -1;
  ssize_t r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); r >= 0 && cm;
       cm = CMSG_NXTHDR(&m, cm))
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
      memcpy(fd, CMSG_DATA(cm), sizeof *fd);
  return r < 0 ? -errno : (int)r;
}

static void put32(uint8_t *seg, size_t off, uint32_t v)
{
  __atomic_store_n((uint32_t *)(seg + off), v, __ATOMIC_RELEASE);
}

/* Forges ring messages: counters, then a few slots. */
static void forge_ring(struct fuzz_in *in, uint8_t *seg, size_t seg_len,
                       size_t ring)
{
  uint32_t slot_count, slot_offset;
  memcpy(&slot_count, seg + ring + RING_SLOT_COUNT, 4);
  memcpy(&slot_offset, seg + ring + RING_SLOT_OFFSET, 4);
  uint8_t what = fuzz_u8(in);
  uint32_t head = what & 1 ? fuzz_u32(in) : fuzz_u8(in) % 4;
  if (what & 2)
    put32(seg, ring + RING_POSTED, fuzz_u32(in));
  if (what & 4)
    put32(seg, ring + RING_TAIL, fuzz_u32(in));
  for (uint32_t i = 0; i < 4 && slot_count; i++) {
    uint64_t off = slot_offset + (uint64_t)(i % slot_count) * MSG_SIZE;
    if (off + MSG_SIZE <= seg_len)
      fuzz_bytes(in, seg + off, 16 + fuzz_u8(in) % 65);
  }
  put32(seg, ring + RING_HEAD, head);
}

/* Polls what the forged ring holds.  (A RECV's byte_len is the peer's
 * word unless it was a SEND; what a SEND copies must fit the posted buffer,
 * which ASan checks: each buffer is its own allocation.) */
static void poll_some(struct sbr__conn *c)
{
  struct sbr__wc wc[8];
  for (int round = 0; round < 3; round++) {
    int n = ops->poll_cq(c, wc, 8);
    FUZZ_CHECK(n <= 8);
    if (n <= 0)
      break;
  }
}

enum { N_RECV = 4 };

static void post_receives(struct sbr__conn *c, uint8_t *bufs[N_RECV],
                          uint32_t len)
{
  for (int i = 0; i < N_RECV; i++) {
    bufs[i] = malloc(len);
    FUZZ_CHECK(bufs[i]);
    ops->post_recv(c, (uint64_t)i, bufs[i], len, NULL);
  }
}

static void free_receives(uint8_t *bufs[N_RECV])
{
  for (int i = 0; i < N_RECV; i++)
    free(bufs[i]);
}

/* ----------------------------------------------- a hostile sender */

static void hostile_sender(struct fuzz_in *in, uint8_t mode)
{
  int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  FUZZ_CHECK(s >= 0);
  struct sockaddr_un sa;
  socklen_t sl = shm_addr(rx_port, &sa);
  FUZZ_CHECK(connect(s, (struct sockaddr *)&sa, sl) == 0);
  uint8_t msg[128];
  size_t len = fuzz_u8(in) % sizeof msg;
  len = fuzz_bytes(in, msg, len);
  int extra = mode & 2 ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
  if (mode & 8)
    shutdown(s, SHUT_WR); /* hang up without a word */
  else
    send_with_fd(s, msg, len, extra);
  if (extra >= 0)
    close(extra);

  struct sbr__listen_event ev = {0};
  for (int i = 0; i < 3 && ev.type != SBR__EV_CONNECT_REQUEST &&
                  ev.type != SBR__EV_BAD_REQUEST;
       i++)
    FUZZ_CHECK(ops->get_event(listener, 0, &ev) == 0);
  if (ev.type == SBR__EV_BAD_REQUEST) {
    /* The request's socket is ours to answer, as the engine does
     * (lane_refuse): unanswered, each one was a socket leaked, until
     * 20,000 of them ended a long run with EMFILE. */
    ops->reject(listener, &ev.req, &ev.req.refusal);
    close(s);
    return;
  }
  if (ev.type != SBR__EV_CONNECT_REQUEST) {
    close(s);
    return;
  }
  FUZZ_CHECK(ev.req.mechanism <= SBR_MECH_SLIDING_WINDOW);
  if (!(mode & 4)) {
    struct sbr__refusal why;
    sbr__refusal_set(&why, SBR_REFUSAL_LANES_FULL, 1, 0);
    ops->reject(listener, &ev.req, &why);
    close(s);
    return;
  }
  struct sbr__queue_caps caps = {
      .max_send_wr = 8, .max_recv_wr = 8, .max_inline = 64};
  struct sbr__lane_desc lane = {
      .mechanism = ev.req.mechanism,
      .epoch = 1,
      .block_size = 256,
      .block_count = 4,
      .pause_offset = sbr__pause_offset_for(4),
  };
  struct sbr__conn *c;
  struct sbr__lane_mem mem;
  FUZZ_CHECK(ops->accept(listener, &ev.req, &caps, &lane, &c, &mem) == 0);

  /* As the sender: take the answer and map the segment. */
  uint8_t answer[64];
  int memfd;
  int r = recv_with_fd(s, answer, sizeof answer, &memfd);
  FUZZ_CHECK(r == 4 + SBR__ACCEPT_PRIV_SIZE && memfd >= 0);
  struct sbr__lane_desc got;
  FUZZ_CHECK(sbr__accept_priv_decode(answer + 4, (size_t)r - 4, &got) == 0);
  struct stat st;
  FUZZ_CHECK(fstat(memfd, &st) == 0);
  uint8_t *seg = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                      MAP_SHARED, memfd, 0);
  FUZZ_CHECK(seg != MAP_FAILED);
  close(memfd);
  FUZZ_CHECK(got.status_addr + sbr__lane_status_len(&got) <=
             (uint64_t)st.st_size);
  FUZZ_CHECK(mem.status == NULL || mem.blocks != NULL);

  /* Its receives, then forged messages for them. */
  uint8_t *bufs[N_RECV];
  post_receives(c, bufs, 32);
  forge_ring(in, seg, (size_t)st.st_size, RING_TO_RECEIVER);
  poll_some(c);
  /* A SEND from the receiver, when the forged counters give it credit
   * (without it, the SEND waits its RNR time out). */
  uint32_t posted, head;
  memcpy(&posted, seg + RING_TO_SENDER + RING_POSTED, 4);
  memcpy(&head, seg + RING_TO_SENDER + RING_HEAD, 4);
  if (fuzz_u8(in) & 1) {
    put32(seg, RING_TO_SENDER + RING_POSTED, head + 1 + fuzz_u8(in) % 8);
    uint8_t hello[8] = "ack";
    struct sbr__wr wr = {.wr_id = 9,
                         .opcode = SBR__OP_SEND,
                         .local_addr = hello,
                         .length = sizeof hello,
                         .signaled = true};
    ops->post_send(c, &wr, 1);
    poll_some(c);
  }
  (void)posted;
  munmap(seg, (size_t)st.st_size);
  close(s);
  ops->close(c); /* before the buffers its receives name */
  free_receives(bufs);
}

/* ---------------------------------------------- a hostile receiver */

/* The rogue receiver's answer, handed to its thread. */
struct answer {
  uint8_t msg[80];
  size_t len;
  bool with_fd, sealed;
  uint8_t *segment; /* its bytes, seg_len of them */
  size_t seg_len;
  int sock, memfd; /* left open for the main thread to close */
  bool done;
};

static pthread_mutex_t rogue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rogue_cond = PTHREAD_COND_INITIALIZER;
static struct answer *rogue_job;

static void rogue_answer(struct answer *a)
{
  a->sock = accept4(rogue_fd, NULL, NULL, SOCK_CLOEXEC);
  FUZZ_CHECK(a->sock >= 0);
  uint8_t req[128];
  int fd;
  int r = recv_with_fd(a->sock, req, sizeof req, &fd);
  FUZZ_CHECK(r == 4 + SBR__CONNECT_PRIV_SIZE && fd < 0);
  if (a->with_fd) {
    a->memfd = memfd_create("fuzz-lane", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    FUZZ_CHECK(a->memfd >= 0);
    FUZZ_CHECK(ftruncate(a->memfd, (off_t)a->seg_len) == 0);
    if (a->seg_len &&
        pwrite(a->memfd, a->segment, a->seg_len, 0) != (ssize_t)a->seg_len)
      abort();
    if (a->sealed)
      FUZZ_CHECK(fcntl(a->memfd, F_ADD_SEALS,
                       F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0);
  }
  if (a->len)
    send_with_fd(a->sock, a->msg, a->len, a->memfd);
  else
    shutdown(a->sock, SHUT_RDWR); /* hang up instead of answering */
}

static void *rogue_main(void *arg)
{
  (void)arg;
  pthread_mutex_lock(&rogue_lock);
  for (;;) {
    while (!rogue_job)
      pthread_cond_wait(&rogue_cond, &rogue_lock);
    struct answer *a = rogue_job;
    pthread_mutex_unlock(&rogue_lock);
    rogue_answer(a);
    pthread_mutex_lock(&rogue_lock);
    rogue_job = NULL;
    a->done = true;
    pthread_cond_broadcast(&rogue_cond);
  }
  return NULL;
}

static void hostile_receiver(struct fuzz_in *in, uint8_t mode)
{
  struct answer a = {.sock = -1, .memfd = -1};
  a.len = fuzz_bytes(in, a.msg, fuzz_u8(in) % sizeof a.msg);
  a.with_fd = mode & 2;
  a.sealed = !(mode & 4);
  a.seg_len = fuzz_u32(in) % MAX_SEGMENT;
  a.segment = calloc(1, a.seg_len ? a.seg_len : 1);
  FUZZ_CHECK(a.segment);
  /* An image of the control area, then patches anywhere. */
  size_t image = fuzz_u16(in) % (CTRL_SIZE + 1);
  fuzz_bytes(in, a.segment, image < a.seg_len ? image : a.seg_len);
  for (int i = fuzz_u8(in) % 4; i > 0 && a.seg_len; i--) {
    uint32_t off = fuzz_u32(in) % a.seg_len;
    size_t n = fuzz_u8(in) % 64;
    if (n > a.seg_len - off)
      n = a.seg_len - off;
    fuzz_bytes(in, a.segment + off, n);
  }

  pthread_mutex_lock(&rogue_lock);
  rogue_job = &a;
  pthread_cond_broadcast(&rogue_cond);
  pthread_mutex_unlock(&rogue_lock);

  uint8_t priv[SBR__CONNECT_PRIV_SIZE];
  sbr__connect_priv_encode(
      priv, mode & 8 ? SBR_MECH_SLIDING_WINDOW : SBR_MECH_STATUS_BYTE, 0, 0);
  struct sbr__queue_caps caps = {
      .max_send_wr = 8, .max_recv_wr = 8, .max_inline = 64};
  struct sbr__conn *c = NULL;
  struct sbr__lane_desc lane;
  char err[256];
  int ret = ops->connect(NULL, tx_port, NULL, priv, sizeof priv, &caps, 5000,
                         &c, &lane, err, sizeof err);

  pthread_mutex_lock(&rogue_lock);
  while (!a.done)
    pthread_cond_wait(&rogue_cond, &rogue_lock);
  pthread_mutex_unlock(&rogue_lock);

  if (ret == 0) {
    /* Taken: the lane lies in the segment (rule 8), so use it. */
    FUZZ_CHECK(a.with_fd && a.sealed);
    uint64_t status_len = sbr__lane_status_len(&lane);
    FUZZ_CHECK(lane.status_addr + status_len <= a.seg_len);
    FUZZ_CHECK(lane.blocks_addr +
                   (uint64_t)lane.block_count * lane.block_size <=
               a.seg_len);
    uint8_t *seg =
        mmap(NULL, a.seg_len, PROT_READ | PROT_WRITE, MAP_SHARED, a.memfd, 0);
    FUZZ_CHECK(seg != MAP_FAILED);
    uint8_t *bufs[N_RECV];
    post_receives(c, bufs, 64);
    forge_ring(in, seg, a.seg_len, RING_TO_SENDER);
    poll_some(c);

    static uint8_t status[65536 + 64];
    uint8_t one = 1;
    struct sbr__wr wrs[2] = {
        {.wr_id = 1,
         .opcode = SBR__OP_WRITE,
         .local_addr = &one,
         .length = 1,
         .remote_addr = lane.status_addr + fuzz_u16(in) % lane.block_count,
         .rkey = lane.status_rkey,
         .inline_data = true},
        {.wr_id = 2,
         .opcode = SBR__OP_READ,
         .local_addr = status,
         .length = (uint32_t)status_len,
         .remote_addr = lane.status_addr,
         .rkey = lane.status_rkey,
         .signaled = true},
    };
    if (status_len <= sizeof status && ops->post_send(c, wrs, 2) == 0) {
      struct sbr__wc wc[8];
      int got = 0;
      for (int spin = 0; spin < 100000 && !got; spin++) {
        int n = ops->poll_cq(c, wc, 8);
        for (int i = 0; i < n; i++)
          if (wc[i].wr_id == 2)
            got = 1;
        if (n < 0)
          break;
      }
    }
    munmap(seg, a.seg_len);
    ops->close(c);
    free_receives(bufs);
  }
  if (a.sock >= 0)
    close(a.sock);
  if (a.memfd >= 0)
    close(a.memfd);
  free(a.segment);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc;
  (void)argv;
  fuzz_log_init();
  /* Ports of this process alone, so parallel runs don't meet. */
  rx_port = (uint16_t)(20000 + getpid() % 20000);
  tx_port = (uint16_t)(rx_port + 20000);
  char err[256];
  FUZZ_CHECK(ops->listen(NULL, rx_port, &listener, err, sizeof err) == 0);
  rogue_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa;
  socklen_t sl = shm_addr(tx_port, &sa);
  FUZZ_CHECK(rogue_fd >= 0 && bind(rogue_fd, (struct sockaddr *)&sa, sl) == 0 &&
             listen(rogue_fd, 4) == 0);
  pthread_t t;
  FUZZ_CHECK(pthread_create(&t, NULL, rogue_main, NULL) == 0);
  pthread_detach(t);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct fuzz_in in = {data, size};
  uint8_t mode = fuzz_u8(&in);
  if (mode & 1)
    hostile_receiver(&in, mode);
  else
    hostile_sender(&in, mode);
  return 0;
}
