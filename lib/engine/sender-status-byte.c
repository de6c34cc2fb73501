/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sender-status-byte.c - the status-byte posting engine (docs/protocol.md,
 * "Status transitions").
 *
 * For each queued block: pick a receive block whose cached status is 0
 * (round robin, skipping 1 = not consumed yet and 2 = held), post ONE chain
 *
 *     WRITE  header+payload+trailer -> blocks_addr + i * block_size  unsignaled
 *     WRITE  inline byte 1          -> status_addr + i               signaled
 *
 * and set the cached status to 1 at post time.  RC executes the chain in
 * order, so the receiver can't see the status byte before the data (rule 1);
 * the status byte is inline, so no source buffer can race (rule 1); the
 * signaled status WRITE's completion covers the data WRITE before it, so the
 * send block is reused only after it (rule 6).
 *
 * Status runs: when several blocks are queued and the cache shows a run of
 * consecutive free receive blocks, they go out as one chain
 *
 *     WRITE block a -> i, WRITE block b -> i+1, ... (unsignaled)
 *     WRITE inline k bytes of 1 -> status_addr + i  (signaled)
 *
 * The rules hold as above (every status byte is written after its data, on
 * the same QP); what changes is the cost: k+1 work requests and one
 * completion for k blocks instead of 2k and k.  On Soft-RoCE every WR is a
 * packet and an ACK through the kernel, so at 4 KiB this was the biggest
 * single cost (docs/benchmarks.md).  A run takes only blocks already
 * queued, never waits for more, and stops at status_batch_bytes of data so
 * large blocks aren't delayed behind each other (1 = the paper's chain).
 *
 * When the cache has no 0, one RDMA READ fetches the receiver's whole status
 * array (the paper's sync-when-empty).  With read_ahead = k > 0 a READ also
 * goes out, between runs (or, after runs a producer posted itself, when
 * the sender thread reaps them), whenever k or fewer cached blocks are free and
 * a quarter of the lane was written since the last READ, up to MAX_READS in
 * flight, and writes go on meanwhile (the CoNEXT '24 observation: a READ round
 * trip hurts more than writes as RTT grows, so hide it).  Several READs matter
 * when the window takes about a round trip to transmit: the NIC executes a
 * READ only after the writes posted before it, so a single READ behind the
 * whole window returns a round trip after the window drained; READs spaced
 * through the window return while the rest of it is still going out.
 *
 * Each READ lands in its own buffer; READs complete in order.  When one
 * completes, its result replaces the cache except for blocks written after
 * it was posted: RC executes the READ after the writes posted before it but
 * says nothing of later ones, so those stay 1 (last_write[] holds, per
 * receive block, the write count when it was last written; each READ
 * remembers the count when it was posted).  A READ that finds no free block
 * is repeated only after a back-off, so a stalled receiver isn't hammered.
 * After (re)connect the cache starts all-busy, so the first post is
 * preceded by a READ (rule 7).
 *
 * Pause: the READ covers the status bytes and, after them, the receiver's
 * per-device pause bitmap (status_addr + pause_offset); every completed
 * READ hands the bitmap to sender.c, which refuses paused devices'
 * producers.  So that a sender that never runs out of free blocks sees a
 * new bit too, a READ is forced when the newest one is pause_poll_us old
 * and blocks were posted since or are queued, or a producer waits for a
 * paused device (then even with nothing to send, so it resumes).  The
 * lane's refused bitmap (status_addr + refused_offset, when the receiver
 * announced one) comes with the same READ and goes the same way; READs
 * are also forced while producers of a refused device keep being turned
 * away.  On a lane with the key-unit area (SBR__FEATURE_KEY_UNIT) the READ
 * covers it too and hands it to sender-keyunit.c.  The sender never
 * WRITEs past the status bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "engine/sender-internal.h"

#define READ_WR_ID UINT64_MAX
#define POLL_BATCH 32
/* Blocks one status WRITE may cover: its bytes go inline, and the
 * connection asks for 64 bytes of inline data. */
#define MAX_RUN 64
#define DEFAULT_STATUS_BATCH_BYTES (128u * 1024u)
/* Status READs in flight at most (read-ahead). */
#define MAX_READS 4u
/* A cache entry, not a wire status: a free receive block handed to the
 * direct placement pool (sender-direct.c), or to a producer from there.
 * READs leave it alone: the receiver shows it 0, but it is taken. */
#define CACHE_RESERVED 0xff
/* The completion deadline's floor (verbs): no completion for this long
 * with work outstanding, the lane is taken for dead.  A live receiver's
 * NIC answers in milliseconds whatever its process does, and the floor
 * is generous for a loaded host or a slow link draining a window. */
#define COMPLETION_DEADLINE_MIN_NS 5000000000ull

struct status_read {
  uint64_t after_writes; /* st->writes when it was posted */
  uint64_t posted_ns;    /* for sync latency */
  bool forced;           /* by pause_poll_us, not for free blocks */
};

struct status_byte_state {
  uint8_t *cache;          /* cached receiver status array */
  uint32_t cache_free;     /* zeros in cache */
  uint8_t *read_bufs;      /* MAX_READS READ targets of block_count bytes */
  struct sbr__mr *read_mr; /* their registration */
  struct status_read reads[MAX_READS]; /* ring, in post order */
  uint32_t reads_done, reads_posted;   /* ring counters */
  uint64_t writes;       /* blocks written (posted) on this connection */
  uint64_t *last_write;  /* per receive block: writes after its last one */
  uint32_t cursor;       /* next receive block to try */
  uint64_t next_read_ns; /* earliest next READ after a fruitless one */
  uint32_t retry_us;     /* current back-off between fruitless READs */
  uint32_t read_len;     /* status bytes + padding + bitmaps */
  uint64_t last_read_ns; /* when the newest READ was posted */
  uint64_t batch_bytes;  /* data bytes one status run may cover */
  uint8_t run_status[MAX_RUN]; /* inline source: MAX_RUN status bytes 1 */
  /* Send blocks in flight, in post order (a ring of n_blocks entries): a
   * status WRITE's wr_id is the count pushed when it was posted, and its
   * completion frees every entry before that count. */
  uint32_t *in_flight;
  uint64_t in_flight_head, in_flight_tail; /* freed / pushed */
  uint32_t *direct_scratch; /* block_count receive block indices */
  /* A frame at the queue's head that waits for a READ before it goes as
   * fragments (post_span), and reads_posted when it began to: a READ
   * posted since must have completed.  Compared, never dereferenced. */
  const struct sbr_send_block *span_wait;
  uint32_t span_wait_reads;
  /* When the NIC was last heard from: the newest completion, or the post
   * that left work outstanding after none was.  Past deadline_ns of
   * silence with work outstanding the lane is taken for dead (0: never,
   * shm; sb_start says why). */
  uint64_t heard_ns;
  uint64_t deadline_ns;
};

static void free_state(struct sbr_sender *s, struct status_byte_state *st)
{
  if (st->read_mr)
    s->ops->dereg_mr(st->read_mr);
  free(st->read_bufs);
  free(st->last_write);
  free(st->in_flight);
  free(st->direct_scratch);
  free(st->cache);
  free(st);
}

/* A RoCE NIC gives a silent peer up after 4.096 us x 2^ack_timeout a try,
 * retry_count + 1 tries, and completes the work request in error; an
 * iWARP one leaves it to TCP, which retransmits for minutes.  Either way
 * the receiver's end of the lane is closed long before (its probe,
 * receiver-liveness.c) and the sender, which hears nothing else, kept
 * refusing frames for a lane that was gone.  And a NIC that never
 * completes a work request it accepted is seen too: rxe, after a bond
 * failover rebuilt its GID table, left a sender connected with every
 * send refused for 30 s (ci4, session 16).  So work outstanding with no
 * completion for twice the NIC's budget, 5 s at least, ends the
 * connection as a failed one would (the sender reconnects), counted in
 * completion_timeouts.  Only where a peer can vanish unheard (verbs): a
 * shm peer's socket closes when it dies, and a shm producer may execute
 * a claimed chain as slowly as the host lets it. */
static uint64_t completion_deadline_ns(const struct sbr_sender *s)
{
  if (s->knobs.completion_deadline_ms) /* a test's, on any back end */
    return (uint64_t)s->knobs.completion_deadline_ms * 1000000u;
  if (!s->ops->peer_can_vanish)
    return 0;
  /* ack_timeout 0 leaves the ACK timeout to rdma_cm, which derives it from
   * the path's packet lifetime: over RoCE 2^18 x 4.096 us, about 1 s a
   * try (cma's CMA_IBOE_PACKET_LIFETIME 16, doubled and plus one).
   * Taken as that, so the deadline never undercuts the NIC's budget. */
  unsigned exponent = s->cfg.ack_timeout ? s->cfg.ack_timeout : 18u;
  uint64_t budget =
      exponent < 32 ? (4096ull << exponent) * (s->cfg.retry_count + 1u) : 0;
  return 2 * budget > COMPLETION_DEADLINE_MIN_NS ? 2 * budget
                                                 : COMPLETION_DEADLINE_MIN_NS;
}

static int sb_start(struct sbr_sender *s)
{
  uint32_t n = s->lane.block_count;
  struct status_byte_state *st = calloc(1, sizeof *st);
  if (!st)
    return -ENOMEM;
  st->read_len = sbr__lane_status_len(&s->lane);
  st->cache = malloc(n);
  st->read_bufs = malloc((size_t)MAX_READS * st->read_len);
  st->last_write = calloc(n, sizeof *st->last_write);
  st->in_flight = calloc(s->n_blocks, sizeof *st->in_flight);
  st->direct_scratch = calloc(n, sizeof *st->direct_scratch);
  if (!st->cache || !st->read_bufs || !st->last_write || !st->in_flight ||
      !st->direct_scratch) {
    free_state(s, st);
    return -ENOMEM;
  }
  /* Rule 7: nothing is known about the lane until a READ says so. */
  memset(st->cache, SBR__STATUS_DATA, n);
  st->cache_free = 0;
  int ret =
      s->ops->reg_mr(s->conn, st->read_bufs, (size_t)MAX_READS * st->read_len,
                     SBR__ACCESS_LOCAL_WRITE, &st->read_mr);
  if (ret < 0) {
    free_state(s, st);
    return ret;
  }
  st->retry_us = s->cfg.backoff.min_sleep_us;
  st->batch_bytes = s->cfg.status_batch_bytes ? s->cfg.status_batch_bytes
                                              : DEFAULT_STATUS_BATCH_BYTES;
  memset(st->run_status, SBR__STATUS_DATA, sizeof st->run_status);
  st->deadline_ns = completion_deadline_ns(s);
  s->engine_state = st;
  return 0;
}

static void sb_stop(struct sbr_sender *s)
{
  struct status_byte_state *st = s->engine_state;
  if (!st)
    return;
  pthread_mutex_lock(&s->lock);
  s->reads_pending = 0; /* the connection's READs went with it */
  pthread_mutex_unlock(&s->lock);
  free_state(s, st);
  s->engine_state = NULL;
}

/* A free receive block at or after the cursor (round robin), or -1. */
static int find_free(const struct sbr_sender *s,
                     const struct status_byte_state *st)
{
  uint32_t n = s->lane.block_count;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t i = (st->cursor + k) % n;
    if (st->cache[i] == SBR__STATUS_EMPTY)
      return (int)i;
  }
  return -1;
}

static uint32_t reads_in_flight(const struct status_byte_state *st)
{
  return st->reads_posted - st->reads_done;
}

/* Does the NIC owe this connection a completion? */
static bool awaits_completion(const struct status_byte_state *st)
{
  return reads_in_flight(st) > 0 || st->in_flight_head < st->in_flight_tail;
}

/* Before a post: with nothing outstanding, the wait for the NIC begins
 * now (heard_ns).  Only the time of day when the deadline applies. */
static void note_post(struct status_byte_state *st)
{
  if (st->deadline_ns && !awaits_completion(st))
    st->heard_ns = sbr__now_ns();
}

/* The buffer of the READ with ring counter n (reads_posted when posted). */
static uint8_t *read_buf(const struct sbr_sender *s,
                         const struct status_byte_state *st, uint32_t n)
{
  (void)s;
  return st->read_bufs + (size_t)(n % MAX_READS) * st->read_len;
}

/* Blocks written since the newest READ was posted (all, before any). */
static uint64_t writes_since_read(const struct status_byte_state *st)
{
  if (st->reads_posted == 0)
    return st->writes;
  return st->writes -
         st->reads[(st->reads_posted - 1) % MAX_READS].after_writes;
}

static int post_status_read(struct sbr_sender *s, struct status_byte_state *st,
                            bool forced)
{
  struct status_read *rd = &st->reads[st->reads_posted % MAX_READS];
  struct sbr__wr wr = {
      .wr_id = READ_WR_ID,
      .opcode = SBR__OP_READ,
      .local_addr = read_buf(s, st, st->reads_posted),
      .length = st->read_len,
      .lkey = st->read_mr->lkey,
      .remote_addr = s->lane.status_addr,
      .rkey = s->lane.status_rkey,
      .signaled = true,
  };
  note_post(st);
  int ret = s->ops->post_send(s->conn, &wr, 1);
  if (ret < 0)
    return ret;
  rd->after_writes = st->writes;
  rd->posted_ns = sbr__now_ns();
  rd->forced = forced;
  st->last_read_ns = rd->posted_ns;
  st->reads_posted++;
  pthread_mutex_lock(&s->lock);
  s->stats.wr_posted++;
  s->stats.pause_reads += forced;
  s->reads_pending++;
  pthread_mutex_unlock(&s->lock);
  return 0;
}

/* The oldest READ in flight completed (READs complete in order). */
static void read_completed(struct sbr_sender *s, struct status_byte_state *st)
{
  const struct status_read *rd = &st->reads[st->reads_done % MAX_READS];
  const uint8_t *found = read_buf(s, st, st->reads_done);
  st->reads_done++;
  uint64_t now = sbr__now_ns();
  uint64_t took = now - rd->posted_ns;
  /* What the sync found: held (2) and unconsumed (1) blocks are skipped
   * until the next one. */
  uint32_t held = 0, busy = 0;
  st->cache_free = 0;
  for (uint32_t i = 0; i < s->lane.block_count; i++) {
    if (st->cache[i] != CACHE_RESERVED && st->last_write[i] <= rd->after_writes)
      st->cache[i] = found[i];
    held += st->cache[i] == SBR__STATUS_HELD;
    busy += st->cache[i] == SBR__STATUS_DATA;
    st->cache_free += st->cache[i] == SBR__STATUS_EMPTY;
  }
  bool any_free = st->cache_free > 0;
  if (any_free) {
    st->retry_us = s->cfg.backoff.min_sleep_us;
    st->next_read_ns = 0;
  } else {
    st->next_read_ns = now + (uint64_t)st->retry_us * 1000u;
    st->retry_us *= 2;
    if (st->retry_us > s->cfg.backoff.max_sleep_us)
      st->retry_us = s->cfg.backoff.max_sleep_us;
  }
  /* Forced READs are counted in pause_reads only: the sync figures stay
   * the paper's (READs the sender needed to find free blocks). */
  pthread_mutex_lock(&s->lock);
  if (s->reads_pending)
    s->reads_pending--;
  if (!rd->forced) {
    s->stats.sync_reads++;
    s->stats.sync_read_ns_total += took;
    if (took > s->stats.sync_read_ns_max)
      s->stats.sync_read_ns_max = took;
    if (!any_free)
      s->stats.no_free_waits++;
    s->stats.held_skipped += held;
    s->stats.busy_skipped += busy;
  }
  pthread_mutex_unlock(&s->lock);
  sbr__sender_pause_seen(s, found + s->lane.pause_offset);
  if (s->lane.refused_offset)
    sbr__sender_refused_seen(s, found + s->lane.refused_offset);
  if (s->lane.features & SBR__FEATURE_KEY_UNIT)
    sbr__sender_key_units_seen(s, found + s->lane.key_unit_offset);
}

/* Is a forced READ due (pause_poll_us)?  Only while blocks flow (posted
 * since the newest READ, or queued) or a producer waits for a paused
 * device, and only with no READ in flight: that one brings the bitmap. */
static bool pause_read_wanted(struct sbr_sender *s,
                              struct status_byte_state *st)
{
  if (s->cfg.pause_poll_us == 0 || reads_in_flight(st) > 0)
    return false;
  return writes_since_read(st) > 0 || sbr__sender_has_queued(s) ||
         sbr__sender_pause_waiting(s);
}

static bool pause_read_due(struct sbr_sender *s, struct status_byte_state *st,
                           uint64_t now)
{
  return now >= st->last_read_ns + (uint64_t)s->cfg.pause_poll_us * 1000u &&
         pause_read_wanted(s, st);
}

/* How many receive blocks from i on are free in the cache, without
 * wrapping (the status bytes of a run must be contiguous). */
static uint32_t free_run(const struct sbr_sender *s,
                         const struct status_byte_state *st, uint32_t i)
{
  uint32_t k = 0;
  while (k < MAX_RUN && i + k < s->lane.block_count &&
         st->cache[i + k] == SBR__STATUS_EMPTY)
    k++;
  return k;
}

/* One chain: the data WRITEs of blocks[0..n) into receive blocks i..i+n-1,
 * then one signaled inline WRITE of their n status bytes.  A block placed
 * directly (n = 1, i its receive block) is in the lane already: its chain
 * is the status WRITE alone. */
static int post_run(struct sbr_sender *s, struct status_byte_state *st,
                    struct sbr_send_block *const *blocks, uint32_t n,
                    uint32_t i, bool *claimed)
{
  struct sbr__wr chain[MAX_RUN + 1];
  uint64_t run_end = st->in_flight_tail + n;
  uint32_t n_data = blocks[0]->direct_mem ? 0 : n;
  for (uint32_t k = 0; k < n_data; k++)
    chain[k] = (struct sbr__wr){
        .wr_id = run_end,
        .opcode = SBR__OP_WRITE,
        .local_addr = blocks[k]->mem,
        .length = blocks[k]->wire_len,
        .lkey = s->blocks_mr->lkey,
        .remote_addr = sbr__send_block_remote(s, i + k),
        .rkey = s->lane.blocks_rkey,
    };
  chain[n_data] = (struct sbr__wr){
      .wr_id = run_end,
      .opcode = SBR__OP_WRITE,
      .local_addr = st->run_status,
      .length = n,
      .remote_addr = s->lane.status_addr + i,
      .rkey = s->lane.status_rkey,
      .signaled = true,
      .inline_data = true,
  };
  /* A producer's own chain (claimed != NULL) may be claimed for it to
   * execute once it dropped engine_lock (transport.h, post_send_here). */
  note_post(st);
  int ret = claimed && !*claimed && s->ops->post_send_here
                ? s->ops->post_send_here(s->conn, chain, (int)n_data + 1)
                : s->ops->post_send(s->conn, chain, (int)n_data + 1);
  if (ret < 0)
    return ret;
  if (ret == 1)
    *claimed = true;
  for (uint32_t k = 0; k < n; k++) {
    st->in_flight[st->in_flight_tail++ % s->n_blocks] = blocks[k]->index;
    st->cache[i + k] = SBR__STATUS_DATA; /* at post time, as the design says */
    st->last_write[i + k] = ++st->writes;
  }
  if (n_data) { /* a direct block's was reserved, not counted free */
    st->cache_free -= n;
    st->cursor = (i + n) % s->lane.block_count;
  }
  return 0;
}

/* The first run of m free receive blocks in the cache that starts at or
 * after the cursor, else the first one before it; -1: none.  A span never
 * wraps past the lane's last block. */
static int find_free_run(const struct sbr_sender *s,
                         const struct status_byte_state *st, uint32_t m)
{
  int first = -1;
  uint32_t run = 0;
  for (uint32_t i = 0; i < s->lane.block_count; i++) {
    run = st->cache[i] == SBR__STATUS_EMPTY ? run + 1 : 0;
    if (run < m)
      continue;
    uint32_t start = i + 1 - m;
    if (start >= st->cursor)
      return (int)start;
    if (first < 0)
      first = (int)start;
  }
  return first;
}

/* What post_span did. */
enum span_post {
  SPAN_NONE,     /* the queue's head is no frame to span: post as ever */
  SPAN_POSTED,   /* posted as one spanning block */
  SPAN_WAIT,     /* no run known: wait for a READ, then decide */
  SPAN_FRAGMENT, /* no run: its fragments go as ever (counted) */
};

/* A frame of n fragments at the head of the queue (sbr_sender_send's), to
 * a receiver that takes spans, goes as one spanning block when the cache
 * knows m consecutive free receive blocks for it: n data WRITEs, each
 * fragment's part to its place in the span (the first with the header,
 * the last with the trailer: the payload sits in the send blocks cap
 * bytes apiece, not contiguous, so one WRITE a send block, as many WRs as
 * the fragments took), then ONE inline WRITE of the m status bytes, 1 and
 * m-1 SPAN.  Without such a run in the cache the frame waits for one
 * READ posted from then on (the cache is the lane as of the last READ,
 * and a READ that frees blocks usually frees a run), and then, still
 * without one, goes as fragments: a frame never waits for a run (a
 * receiver holding a block in the middle of the lane, a last-sample, say,
 * may keep every run short for as long as the sender waits, and with it
 * the frame that would release it: fragments keep the lane live, a span
 * costs at most one READ more).  max: blocks the caller may post (a producer:
 * its own n).  *posted: blocks posted; <0 on a failed post (requeued). */
static enum span_post post_span(struct sbr_sender *s,
                                struct status_byte_state *st, uint32_t max,
                                bool *claimed, int *posted)
{
  *posted = 0;
  if (!(s->lane.features & SBR__FEATURE_SPAN))
    return SPAN_NONE;
  uint32_t n = sbr__sender_head_frame_blocks(s);
  if (n == 0 || n > max || n > MAX_RUN)
    return SPAN_NONE;
  struct sbr_send_block *run[MAX_RUN];
  pthread_mutex_lock(&s->lock);
  /* Only the engine (engine_lock, held) takes from the queue: its head
   * stays until we take it. */
  struct sbr_send_block *head = sbr__queue_peek(&s->queue);
  uint32_t frame_size = head ? head->header.frame_size : 0;
  pthread_mutex_unlock(&s->lock);
  if (!head)
    return SPAN_NONE;
  uint32_t m = sbr__span_blocks(s->lane.block_size, frame_size);
  int i = m <= MAX_RUN ? find_free_run(s, st, m) : -1;
  if (i < 0) {
    if (m <= MAX_RUN &&
        (st->span_wait != head || st->reads_done <= st->span_wait_reads)) {
      /* The cache is old news (blocks the receiver released since the
       * last READ show busy; one it then held, in the middle of a run,
       * may be free): ask once more, READing from now on, then decide. */
      if (st->span_wait != head) {
        st->span_wait = head;
        st->span_wait_reads = st->reads_posted;
      }
      return SPAN_WAIT;
    }
    pthread_mutex_lock(&s->lock);
    if (sbr__queue_peek(&s->queue) == head) {
      head->frame_blocks = 0;
      s->stats.span_fallbacks++;
    }
    pthread_mutex_unlock(&s->lock);
    st->span_wait = NULL;
    return SPAN_FRAGMENT;
  }
  st->span_wait = NULL;
  uint32_t got = sbr__sender_take_span(s, run, n);
  if (got == 0)
    return SPAN_NONE;
  uint32_t cap = s->block_size - SBR__BLOCK_OVERHEAD;
  uint64_t base = sbr__send_block_remote(s, (uint32_t)i);
  struct sbr__wr chain[MAX_RUN + 1];
  uint64_t run_end = st->in_flight_tail + got;
  for (uint32_t k = 0; k < got; k++) {
    struct sbr_send_block *b = run[k];
    uint32_t chunk = b->wire_len - SBR__BLOCK_OVERHEAD;
    chain[k] = (struct sbr__wr){
        .wr_id = run_end,
        .opcode = SBR__OP_WRITE,
        .local_addr = k == 0 ? b->mem : b->mem + SBR__HEADER_SIZE,
        .length = chunk + (k == 0 ? SBR__HEADER_SIZE : 0) +
                  (k == got - 1 ? SBR__TRAILER_SIZE : 0),
        .lkey = s->blocks_mr->lkey,
        .remote_addr =
            k == 0 ? base : base + SBR__HEADER_SIZE + (uint64_t)k * cap,
        .rkey = s->lane.blocks_rkey,
    };
  }
  uint8_t status[MAX_RUN];
  status[0] = SBR__STATUS_DATA;
  memset(status + 1, SBR__STATUS_SPAN, m - 1);
  chain[got] = (struct sbr__wr){
      .wr_id = run_end,
      .opcode = SBR__OP_WRITE,
      .local_addr = status,
      .length = m,
      .remote_addr = s->lane.status_addr + (uint32_t)i,
      .rkey = s->lane.status_rkey,
      .signaled = true,
      .inline_data = true, /* copied at post: the stack buffer may go */
  };
  /* Counted as one block (the wire carries one), before posting. */
  sbr__sender_count_posts(s, run, 1, got + 1, 1);
  pthread_mutex_lock(&s->lock);
  s->stats.span_frames++;
  pthread_mutex_unlock(&s->lock);
  note_post(st);
  int ret = claimed && !*claimed && s->ops->post_send_here
                ? s->ops->post_send_here(s->conn, chain, (int)got + 1)
                : s->ops->post_send(s->conn, chain, (int)got + 1);
  if (ret < 0) {
    sbr__sender_requeue_front(s, run, got);
    *posted = ret;
    return SPAN_POSTED;
  }
  if (ret == 1)
    *claimed = true;
  for (uint32_t k = 0; k < got; k++)
    st->in_flight[st->in_flight_tail++ % s->n_blocks] = run[k]->index;
  for (uint32_t k = 0; k < m; k++) {
    st->cache[(uint32_t)i + k] = SBR__STATUS_DATA;
    st->last_write[(uint32_t)i + k] = ++st->writes;
  }
  st->cache_free -= m;
  st->cursor = ((uint32_t)i + m) % s->lane.block_count;
  *posted = (int)got;
  return SPAN_POSTED;
}

/* Posts one run: queued blocks, at most max, into the free receive blocks
 * from i on, which find_free returned (-1: none known free), or a block
 * placed directly at the head of the queue, into its own (claimed: as
 * post_run).  Returns the blocks posted, 0 when nothing is queued that can
 * go, or <0 when the post failed (the blocks are queued again). */
static int post_run_at(struct sbr_sender *s, struct status_byte_state *st,
                       int i, uint32_t max, bool *claimed, bool *span_wait)
{
  /* Frames post_span would span, which take_queued leaves to it. */
  uint32_t span_max = 0;
  if (s->lane.features & SBR__FEATURE_SPAN)
    span_max = max < MAX_RUN ? max : MAX_RUN;
  struct sbr_send_block *run[MAX_RUN];
  uint32_t got;
  for (;;) {
    int posted;
    enum span_post sp = post_span(s, st, max, claimed, &posted);
    *span_wait = sp == SPAN_WAIT;
    if (sp == SPAN_POSTED || sp == SPAN_WAIT)
      return posted;
    uint32_t k = i >= 0 ? free_run(s, st, (uint32_t)i) : 0;
    if (k > max)
      k = max;
    got = sbr__sender_take_queued(s, run, k, st->batch_bytes, span_max);
    if (got > 0)
      break;
    /* Producers queue under s->lock alone: a frame queued after
     * post_span found the queue empty now heads it. */
    uint32_t n = sbr__sender_head_frame_blocks(s);
    if (n == 0 || n > span_max)
      return 0;
  }
  bool direct = run[0]->direct_mem != NULL;
  uint32_t at = direct ? run[0]->direct_index : (uint32_t)i;
  /* Counted before posting, like the sliding window (there the ACK thread
   * may recycle a block as soon as it is posted). */
  sbr__sender_count_posts(s, run, got, direct ? 1 : got + 1, 1);
  int ret = post_run(s, st, run, got, at, claimed);
  if (ret < 0) {
    sbr__sender_requeue_front(s, run, got);
    return ret;
  }
  return (int)got;
}

/* A status WRITE completed: its run and every run before it are done (an
 * RC send queue completes in order). */
static void runs_completed(struct sbr_sender *s, struct status_byte_state *st,
                           uint64_t run_end)
{
  uint64_t end = run_end < st->in_flight_tail ? run_end : st->in_flight_tail;
  /* The ring's entries up to end, in at most two stretches (it wraps). */
  while (st->in_flight_head < end) {
    uint32_t at = (uint32_t)(st->in_flight_head % s->n_blocks);
    uint64_t n = end - st->in_flight_head;
    if (n > s->n_blocks - at)
      n = s->n_blocks - at;
    sbr__sender_blocks_done(s, &st->in_flight[at], (uint32_t)n);
    st->in_flight_head += n;
  }
}

/* Direct placement (sender-direct.c): moves free cache entries into the
 * pool producers draw on, as many as it takes now.  True when it wanted
 * more than the cache knows free (then a READ is due). */
static bool refill_direct(struct sbr_sender *s, struct status_byte_state *st)
{
  uint32_t room = sbr__direct_room(s);
  if (room == 0)
    return false;
  uint32_t n = 0;
  for (uint32_t k = 0; k < s->lane.block_count && n < room; k++) {
    uint32_t i = (st->cursor + k) % s->lane.block_count;
    if (st->cache[i] != SBR__STATUS_EMPTY)
      continue;
    st->cache[i] = CACHE_RESERVED;
    st->direct_scratch[n++] = i;
  }
  st->cache_free -= n;
  if (n)
    sbr__direct_pool_add(s, st->direct_scratch, n);
  return n < room;
}

/* Copies are queued and the cache knows no free receive block: the pool's
 * unused ones come back first (the copying half of the lane is for caps,
 * EOS and fallbacks, which mustn't wait behind reservations).  Returns how
 * many came back. */
static uint32_t reclaim_direct(struct sbr_sender *s,
                               struct status_byte_state *st)
{
  uint32_t n =
      sbr__direct_pool_take_back(s, st->direct_scratch, s->lane.block_count);
  for (uint32_t k = 0; k < n; k++)
    st->cache[st->direct_scratch[k]] = SBR__STATUS_EMPTY;
  st->cache_free += n;
  return n;
}

/* Read-ahead: a READ once k or fewer blocks are known free, spaced a
 * quarter of the lane apart so that up to MAX_READS of them cover one
 * window. */
static bool read_ahead_due(const struct sbr_sender *s,
                           const struct status_byte_state *st)
{
  uint32_t k = s->cfg.read_ahead;
  uint32_t spacing = s->lane.block_count / MAX_READS;
  return k > 0 && st->cache_free <= k &&
         writes_since_read(st) >= (spacing ? spacing : 1) &&
         reads_in_flight(st) < MAX_READS;
}

/* Work outstanding and the NIC silent past the deadline (see
 * completion_deadline_ns): -ETIMEDOUT, counted and said; else 0.  Called
 * only after a poll found nothing: a sender thread the host starved for
 * longer finds its completions waiting and is not fooled. */
static int check_deadline(struct sbr_sender *s, struct status_byte_state *st,
                          uint64_t now)
{
  if (!st->deadline_ns || !awaits_completion(st) || now < st->heard_ns ||
      now - st->heard_ns < st->deadline_ns)
    return 0;
  pthread_mutex_lock(&s->lock);
  s->stats.completion_timeouts++;
  pthread_mutex_unlock(&s->lock);
  SBR_WARN("sender: no completion for %.1f s with %u status READ(s) and %llu "
           "block(s) outstanding (the deadline: %.1f s): the lane is taken "
           "for dead",
           (double)(now - st->heard_ns) / 1e9, reads_in_flight(st),
           (unsigned long long)(st->in_flight_tail - st->in_flight_head),
           (double)st->deadline_ns / 1e9);
  return -ETIMEDOUT;
}

static int sb_progress(struct sbr_sender *s)
{
  struct status_byte_state *st = s->engine_state;
  struct sbr__wc wc[POLL_BATCH];
  int progress = 0;

  /* When the poll looked, for the deadline: a thread preempted after an
   * empty poll must not take the time it lost for the NIC's silence. */
  uint64_t polled_ns = st->deadline_ns ? sbr__now_ns() : 0;
  int n = s->ops->poll_cq(s->conn, wc, POLL_BATCH);
  if (n < 0)
    return n;
  if (n > 0 && st->deadline_ns)
    st->heard_ns = polled_ns;
  for (int k = 0; k < n; k++) {
    if (wc[k].status != SBR__WC_SUCCESS) {
      SBR_WARN("sender: work request %s failed (%s, vendor error 0x%x)",
               wc[k].wr_id == READ_WR_ID ? "status READ" : "block WRITE",
               wc[k].status == SBR__WC_FLUSH ? "flushed" : "error",
               wc[k].vendor_err);
      return -EIO;
    }
    if (wc[k].wr_id == READ_WR_ID)
      read_completed(s, st);
    else
      runs_completed(s, st, wc[k].wr_id);
    progress++;
  }
  bool waiting = false; /* a block is queued and no free one is known */
  int posted = 0;
  for (;;) {
    int i = find_free(s, st);
    bool span_wait;
    int got = post_run_at(s, st, i, UINT32_MAX, NULL, &span_wait);
    if (got < 0)
      return got;
    if (got == 0 && (i < 0 || span_wait) && sbr__sender_has_queued(s) &&
        reclaim_direct(s, st) > 0)
      continue; /* copies go before the pool: retry with those */
    if (got == 0) {
      waiting = (i < 0 || span_wait) && sbr__sender_has_queued(s);
      break;
    }
    posted += got;
    if (read_ahead_due(s, st)) {
      int ret = post_status_read(s, st, false);
      if (ret < 0)
        return ret;
      progress++;
    }
  }
  progress += posted;
  /* Runs a producer posted itself (sb_post_own) come to this thread only
   * to be reaped: their read-ahead is due here, after them, as it would
   * have been between runs had this thread posted them. */
  if (!waiting && read_ahead_due(s, st)) {
    int ret = post_status_read(s, st, false);
    if (ret < 0)
      return ret;
    progress++;
  }
  /* What copies left free goes to the direct placement pool, if it wants
   * some; a pool that finds no free block in the cache READs as a queued
   * copy would. */
  bool direct_short = false;
  if (!waiting)
    direct_short = refill_direct(s, st);
  /* Sync when a block waits for a free one and no READ that could free one
   * is on its way (sync-when-empty). */
  uint64_t now = sbr__now_ns();
  if (n == 0) {
    int ret = check_deadline(s, st, polled_ns);
    if (ret < 0)
      return ret;
  }
  if ((waiting || direct_short) && reads_in_flight(st) == 0 &&
      now >= st->next_read_ns) {
    int ret = post_status_read(s, st, false);
    if (ret < 0)
      return ret;
    progress++;
  } else if (!waiting && pause_read_due(s, st, now)) {
    /* After this call's runs, so they aren't delayed behind it; what they
     * carried for a just-paused device is within the documented bound.
     * Not while blocks wait for a free one: then the sync READs above
     * bring the bitmap (at most max_sleep_us apart), and nothing is
     * posted meanwhile anyway. */
    int ret = post_status_read(s, st, true);
    if (ret < 0)
      return ret;
    progress++;
  }
  return progress;
}

/* A producer posts the n blocks it just queued (sender.c, post_queued):
 * only into receive blocks the cache already knows free, only its own
 * blocks (nothing else was queued; at most n are taken).  It doesn't reap
 * or READ: work for other cameras stays on the sender thread.  On shm its
 * chain may be claimed for it to copy after it dropped engine_lock
 * (*claimed), so a producer slow in its copy holds up no post or reap,
 * only the chains queued behind its own, as a slow NIC thread would. */
static int sb_post_own(struct sbr_sender *s, uint32_t n, bool *claimed)
{
  struct status_byte_state *st = s->engine_state;
  uint32_t posted = 0;
  while (posted < n) {
    int i = find_free(s, st);
    bool span_wait; /* the sender thread READs: the blocks stay queued */
    int got = post_run_at(s, st, i, n - posted, claimed, &span_wait);
    if (got < 0)
      return got;
    if (got == 0)
      break;
    posted += (uint32_t)got;
  }
  return (int)posted;
}

/* Waits for a completion (a status READ, a run's status WRITE): the
 * transport's completion channel wakes us when one comes, and a submit
 * while asleep kicks the wait (kick_cq), so a queued block is posted
 * behind the ones in flight rather than after their completion.  A sender
 * with nothing in flight sleeps on work_cond instead. */
static int sb_sleep(struct sbr_sender *s, uint32_t timeout_us)
{
  struct status_byte_state *st = s->engine_state;
  uint64_t now = sbr__now_ns();
  if (st->next_read_ns > now) {
    /* A fruitless READ is to be repeated then: don't oversleep it. */
    uint64_t left_us = (st->next_read_ns - now + 999u) / 1000u;
    if (left_us < timeout_us)
      timeout_us = (uint32_t)left_us;
  }
  if (pause_read_wanted(s, st)) {
    /* Nor a forced READ.  Once due, sb_progress below posts it. */
    uint64_t due = st->last_read_ns + (uint64_t)s->cfg.pause_poll_us * 1000u;
    uint64_t left_us = due > now ? (due - now + 999u) / 1000u : 0;
    if (left_us < timeout_us)
      timeout_us = (uint32_t)left_us;
  }
  /* From here a producer that queues a block kicks the wait (sender.c):
   * the block goes out behind the one in flight, not after it.  A block
   * queued before the arm is seen by the poll below. */
  sbr__sender_engine_sleeps(s, true);
  s->ops->arm_cq(s->conn);
  int r = sb_progress(s); /* what came before the arm */
  if (r == 0)
    s->ops->wait_cq(s->conn, timeout_us);
  sbr__sender_engine_sleeps(s, false);
  return r;
}

static void sb_refill_direct(struct sbr_sender *s)
{
  if (s->engine_state)
    refill_direct(s, s->engine_state);
}

const struct sbr__sender_engine sbr__sender_status_byte = {
    .name = "status-byte",
    .start = sb_start,
    .stop = sb_stop,
    .progress = sb_progress,
    .sleep = sb_sleep,
    .post_own = sb_post_own,
    .refill_direct = sb_refill_direct,
};
