/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * receiver.c - the receiver: listens (its accept thread, receiver-accept.c,
 * gives every connecting sender its own lane: rule 5), takes in the lanes,
 * validates what arrives (rule 3), delivers each lane's blocks in sequence
 * order (so every device's in packet order), from which receiver-frames.c
 * reassembles fragmented frames, and keeps the statistics.  The mechanism
 * halves only find arrived blocks and hand released ones back.
 *
 * Ordering: a sender posts its blocks on one RC QP in sequence order, so
 * they land in that order.  A scan of the status bytes may still see block
 * s+1 before block s (it reads the array in index order while the NIC
 * writes).  A block whose predecessor is missing is therefore delivered only
 * after one more complete scan: by then anything posted before it has
 * landed, so a still-missing predecessor was really lost (rejected, or
 * dropped across a reconnect) and the gap is counted.  Where placement
 * order breaks (docs/protocol.md, "Placement order") a status byte can
 * land before its data: such a block is behind the lane's next and waits
 * (stale_expired), and a predecessor that lands after its successors went
 * is dropped, never delivered out of order.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/log.h"
#include "sbr-testing.h"
#include "util/sized.h"
#include "engine/receiver-internal.h"

#define DEFAULT_BLOCK_COUNT 16
#define DEFAULT_BLOCK_SIZE (1u << 20)
#define DEFAULT_MAX_LANES 8
/* While serving senders, never sleep longer than this at a time: the
 * bound on how late a wakeup is noticed. */
#define EVENT_CHECK_NS 10000000u
/* Liveness of a quiet lane (sbr.h, probe_after_ms and ack_timeout): a
 * second of silence, then a probe the NIC gives up on after 7 tries of
 * 134 ms: a dead sender's lane closes about 2 s after its last block. */
#define DEFAULT_PROBE_AFTER_MS 1000
#define DEFAULT_ACK_TIMEOUT 15
/* With no sender at all, wait for the accept thread's hand-off in slices
 * this long (ms): the bound on how late a wakeup or timeout is noticed
 * while idle. */
#define IDLE_LISTEN_MS 10
/* Adaptive mode: a sleep shorter than this is spun instead. */
#define MIN_SLEEP_NS 10000u
/* max_frame_size by default: every 4K format up to 8 bytes a pixel
 * (3840 x 2160 x 8 = 63.3 MiB), 8K 4:2:0 8-bit (47.5 MiB); larger needs
 * saying so.  It bounds what one device of one lane can make the receiver
 * allocate to reassemble a frame (sbr.h). */
#define DEFAULT_MAX_FRAME_SIZE (64u << 20)
/* Connection attempts a second, by default. */
#define DEFAULT_MAX_CONNECTS_PER_S 50

static void config_defaults(struct sbr_receiver_config *cfg)
{
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->backend = SBR_BACKEND_VERBS;
  cfg->mechanism = SBR_MECH_STATUS_BYTE;
  cfg->address = "0.0.0.0";
  cfg->port = SBR_DEFAULT_PORT;
  cfg->block_count = DEFAULT_BLOCK_COUNT;
  cfg->block_size = DEFAULT_BLOCK_SIZE;
  cfg->max_lanes = DEFAULT_MAX_LANES;
  cfg->max_connects_per_s = DEFAULT_MAX_CONNECTS_PER_S;
  cfg->max_frame_size = DEFAULT_MAX_FRAME_SIZE;
  cfg->probe_after_ms = DEFAULT_PROBE_AFTER_MS;
  cfg->ack_timeout = DEFAULT_ACK_TIMEOUT;
  struct sbr__fabric f;
  sbr__fabric_defaults(&f);
  cfg->tos = f.tos;
  cfg->comp_vector = f.comp_vector;
  cfg->numa_node = f.numa_node;
  cfg->huge_pages = f.huge_pages;
  memset(cfg->device_mask, 0xff, sizeof cfg->device_mask);
  cfg->poll_mode = SBR_POLL_ADAPTIVE;
  sbr__backoff_config_fill(&cfg->backoff);
}

void sbr_receiver_config_init_sized(struct sbr_receiver_config *cfg,
                                    size_t size)
{
  struct sbr_receiver_config d;
  config_defaults(&d);
  sbr__sized_config_init(cfg, size, &d, sizeof d);
}

int sbr__receiver_config_read(const struct sbr_receiver_config *app,
                              size_t min_size, struct sbr_receiver_config *cfg,
                              char *errbuf, size_t errlen)
{
  config_defaults(cfg);
  return sbr__sized_config_read(cfg, sizeof *cfg, app, min_size,
                                "sbr_receiver_config", errbuf, errlen);
}

/* The application's config (its struct_size) over the defaults. */
static int config_read(const struct sbr_receiver_config *app,
                       struct sbr_receiver_config *cfg, char *errbuf,
                       size_t errlen)
{
  return sbr__receiver_config_read(app, SBR__RECEIVER_CONFIG_MIN_SIZE, cfg,
                                   errbuf, errlen);
}

static inline int block_state(const struct sbr_block *b)
{
  return __atomic_load_n(&b->state, __ATOMIC_ACQUIRE);
}

static inline void set_block_state(struct sbr_block *b, int state)
{
  __atomic_store_n(&b->state, state, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------ lifetime */

static void receiver_unref(struct sbr_receiver *r)
{
  if (atomic_fetch_sub(&r->refs, 1) != 1)
    return;
  pthread_cond_destroy(&r->handoff_cond);
  pthread_mutex_destroy(&r->handoff_lock);
  pthread_mutex_destroy(&r->stats_lock);
  sbr_addr_list_free(r->allowed);
  free(r);
}

static void lane_unref(struct sbr__lane *lane)
{
  if (atomic_fetch_sub(&lane->refs, 1) != 1)
    return;
  struct sbr_receiver *r = lane->rx;
  /* Order: the engine stops posting (sliding window), then the connection
   * goes with its QP, MRs and the lane memory. */
  lane->engine->stop(lane);
  uint64_t posted = r->ops->posted_recv_count(lane->conn);
  r->ops->close(lane->conn);
  pthread_mutex_lock(&r->stats_lock);
  r->recv_wr_closed_lanes += posted;
  r->stats.lanes_closed++;
  pthread_mutex_unlock(&r->stats_lock);
  SBR_INFO("receiver: lane %u freed", lane->id);
  pthread_mutex_destroy(&lane->lock);
  free(lane->blocks);
  free(lane);
  receiver_unref(r);
}

uint64_t sbr__warn_summary_ns = 10000000000ull;

/* One summary line per reason with warnings held back since the last. */
static void invalid_summary(struct sbr__lane *lane)
{
  for (unsigned e = 0; e <= SBR__BLOCK_ERROR_LAST; e++) {
    uint64_t n = lane->invalid[e].suppressed;
    if (!n)
      continue;
    lane->invalid[e].suppressed = 0;
    SBR_WARN("receiver: lane %u: %llu more blocks dropped: %s", lane->id,
             (unsigned long long)n,
             sbr__block_error_str((enum sbr__block_error)e));
  }
}

/* A block failed validation: log it if it's the lane's first of that
 * reason, else count it for the next summary.  A flood of invalid blocks
 * (a rogue, or a sender gone wrong) costs a log line per reason and per
 * summary interval, not one per block; the stats count each. */
static void invalid_warn(struct sbr__lane *lane, uint32_t index,
                         enum sbr__block_error err)
{
  uint64_t now = sbr__now_ns();
  if (!lane->invalid[err].warned) {
    lane->invalid[err].warned = true;
    SBR_WARN("receiver: lane %u block %u dropped: %s (more of these are "
             "summed up)",
             lane->id, index, sbr__block_error_str(err));
  } else {
    lane->invalid[err].suppressed++;
  }
  if (lane->invalid_summary_ns == 0) {
    lane->invalid_summary_ns = now + sbr__warn_summary_ns;
  } else if (now >= lane->invalid_summary_ns) {
    invalid_summary(lane);
    lane->invalid_summary_ns = now + sbr__warn_summary_ns;
  }
}

/* The sender left: no more scans; blocks the application holds keep the
 * lane alive until released.  notify: tell the application (on_lane),
 * except when sbr_receiver_free closes the lanes of a receiver whose owner
 * is going away. */
static void lane_close(struct sbr_receiver *r, struct sbr__lane *lane,
                       bool notify)
{
  pthread_mutex_lock(&r->stats_lock); /* also guards the list for stats */
  for (struct sbr__lane **p = &r->lanes; *p; p = &(*p)->next) {
    if (*p == lane) {
      *p = lane->next;
      break;
    }
  }
  r->stats.lanes_active--;
  pthread_mutex_unlock(&r->stats_lock);
  for (int d = 0; d < SBR_MAX_DEVICES; d++)
    sbr__lane_drop_partial(lane, &lane->dev[d]);
  atomic_store(&lane->closed, true);
  invalid_summary(lane); /* nothing held back is lost */
  /* The sender learns now, not when the application releases the last
   * block it holds (that keeps only the memory). */
  r->ops->disconnect(lane->conn);
  SBR_INFO("receiver: lane %u closed", lane->id);
  /* Before the unref: the lane (its peer) may go with it. */
  if (notify && r->cfg.on_lane)
    r->cfg.on_lane(r->cfg.lane_user_data, lane->id, lane->peer, false);
  lane_unref(lane);
}

/* The sender left.  What it wrote before it went has landed (its writes
 * completed before it could see them complete), so one last scan takes it
 * in (see sbr_receiver_next); the lane closes once that is delivered. */
void sbr__lane_disconnected(struct sbr__lane *lane)
{
  SBR_INFO("receiver: lane %u: sender disconnected", lane->id);
  lane->disconnected = true;
}

/* Receive thread: a lane the accept thread set up joins the open ones.
 * Devices paused meanwhile are paused in it too.  The sender may have
 * READ the empty bitmap already: to it this looks like a bit set just
 * after a READ (protocol.md, "Pause"). */
static void lane_adopt(struct sbr_receiver *r, struct sbr__lane *lane)
{
  sbr__lane_replace_quiet(r, lane);
  pthread_mutex_lock(&r->stats_lock);
  sbr__lane_store_pause_locked(r, lane);
  lane->next = r->lanes;
  r->lanes = lane;
  pthread_mutex_unlock(&r->stats_lock);
  if (r->cfg.on_lane)
    r->cfg.on_lane(r->cfg.lane_user_data, lane->id, lane->peer, true);
}

/* Receive thread: takes in what the accept thread queued, in order (a
 * lane's disconnect never comes before the lane). */
static void handoff_take(struct sbr_receiver *r)
{
  pthread_mutex_lock(&r->handoff_lock);
  struct sbr__handoff *h = r->handoff_head;
  r->handoff_head = NULL;
  r->handoff_tail = &r->handoff_head;
  atomic_store_explicit(&r->handoff_ready, false, memory_order_relaxed);
  pthread_mutex_unlock(&r->handoff_lock);
  while (h) {
    struct sbr__handoff *next = h->next;
    if (h->kind == SBR__HANDOFF_LANE) {
      lane_adopt(r, h->lane);
    } else if (h->kind == SBR__HANDOFF_DISCONNECTED) {
      for (struct sbr__lane *l = r->lanes; l; l = l->next)
        if (l->conn == h->conn && !l->disconnected)
          sbr__lane_disconnected(l);
    } else if (h->kind == SBR__HANDOFF_REFUSAL && r->cfg.on_refusal) {
      r->cfg.on_refusal(r->cfg.refusal_user_data, h->peer, h->reason, h->text);
    }
    free(h);
    h = next;
  }
}

/* Receive thread, no lane open: sleeps until the accept thread queues
 * something or wait_ms passes. */
static void handoff_wait(struct sbr_receiver *r, int wait_ms)
{
  if (wait_ms <= 0)
    return;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)wait_ms * 1000000u;
  ts.tv_sec += (time_t)(ns / 1000000000u);
  ts.tv_nsec = (long)(ns % 1000000000u);
  pthread_mutex_lock(&r->handoff_lock);
  if (!r->handoff_head)
    pthread_cond_timedwait(&r->handoff_cond, &r->handoff_lock, &ts);
  pthread_mutex_unlock(&r->handoff_lock);
}

/* ----------------------------------------------------------- creation */

static int receiver_new(const struct sbr_receiver_config *app,
                        const struct sbr__transport_ops *ops,
                        bool accept_inline, sbr_receiver **out, char *errbuf,
                        size_t errlen);

int sbr_receiver_new(const struct sbr_receiver_config *app, sbr_receiver **out,
                     char *errbuf, size_t errlen)
{
  sbr__errf(errbuf, errlen, "%s", "");
  if (!app || !out)
    return -EINVAL;
  struct sbr_receiver_config cfg;
  int ret = config_read(app, &cfg, errbuf, errlen);
  if (ret < 0)
    return ret;
  const struct sbr__transport_ops *ops = sbr__transport_get(cfg.backend);
  if (!ops) {
    sbr__backend_missing_errf(errbuf, errlen, cfg.backend);
    return -ENOTSUP;
  }
  return receiver_new(&cfg, ops, false, out, errbuf, errlen);
}

int sbr__receiver_new_without_accept_thread(
    const struct sbr_receiver_config *cfg, const struct sbr__transport_ops *ops,
    sbr_receiver **out, char *errbuf, size_t errlen)
{
  return receiver_new(cfg, ops, true, out, errbuf, errlen);
}

static int receiver_new(const struct sbr_receiver_config *app,
                        const struct sbr__transport_ops *ops,
                        bool accept_inline, sbr_receiver **out, char *errbuf,
                        size_t errlen)
{
  sbr__errf(errbuf, errlen, "%s", "");
  if (!app || !ops || !out)
    return -EINVAL;
  struct sbr_receiver_config full;
  int ret = config_read(app, &full, errbuf, errlen);
  if (ret < 0)
    return ret;
  const struct sbr_receiver_config *cfg = &full;
  if (cfg->block_size != 0 && (cfg->block_size < SBR__BLOCK_OVERHEAD + 1 ||
                               cfg->block_size > (64u << 20))) {
    sbr__errf(errbuf, errlen, "block size %u out of range (%u..%u)",
              cfg->block_size, SBR__BLOCK_OVERHEAD + 1, 64u << 20);
    return -EINVAL;
  }
  if (cfg->poll_mode != SBR_POLL_ADAPTIVE && cfg->poll_mode != SBR_POLL_BUSY &&
      cfg->poll_mode != SBR_POLL_BACKOFF) {
    sbr__errf(errbuf, errlen, "unknown poll mode %d", (int)cfg->poll_mode);
    return -EINVAL;
  }
  struct sbr__fabric fabric;
  sbr__receiver_fabric(cfg, 0, &fabric);
  int fret = sbr__fabric_check(&fabric, errbuf, errlen);
  if (fret)
    return fret;
  SBR_DEBUG("receiver: fabric settings: tos %d, ACK timeout %u, completion "
            "vector %d, NUMA node %d, huge pages %s",
            cfg->tos, cfg->ack_timeout, cfg->comp_vector, cfg->numa_node,
            cfg->huge_pages ? "on" : "off");
  sbr_addr_list *allowed = NULL;
  ret = sbr_addr_list_parse(cfg->allowed_senders, &allowed, errbuf, errlen);
  if (ret < 0)
    return ret;
  struct sbr_receiver *r = calloc(1, sizeof *r);
  if (!r) {
    sbr_addr_list_free(allowed);
    return -ENOMEM;
  }
  r->cfg = *cfg;
  r->cfg.allowed_senders = NULL; /* the caller's string; parsed here */
  r->allowed = allowed;
  r->connect_tokens = cfg->max_connects_per_s;
  r->connect_refill_ns = sbr__now_ns();
  snprintf(r->address, sizeof r->address, "%s",
           cfg->address ? cfg->address : "0.0.0.0");
  r->cfg.address = r->address;
  if (r->cfg.port == 0)
    r->cfg.port = SBR_DEFAULT_PORT;
  if (r->cfg.block_count == 0)
    r->cfg.block_count = DEFAULT_BLOCK_COUNT;
  if (r->cfg.max_frame_size == 0)
    r->cfg.max_frame_size = DEFAULT_MAX_FRAME_SIZE;
  if (r->cfg.block_count < 2 || r->cfg.block_count > 65536) {
    /* One block could never hold a frame's next fragment while the first
     * is kept; senders refuse more than 65536. */
    sbr__errf(errbuf, errlen, "block count %u out of range (2..65536)",
              r->cfg.block_count);
    sbr_addr_list_free(r->allowed);
    free(r);
    return -EINVAL;
  }
  if (r->cfg.block_size == 0)
    r->cfg.block_size = DEFAULT_BLOCK_SIZE;
  if (r->cfg.max_lanes == 0)
    r->cfg.max_lanes = DEFAULT_MAX_LANES;
  /* Block size a multiple of 64: headers stay aligned. */
  r->cfg.block_size = (r->cfg.block_size + 63u) & ~63u;
  sbr__backoff_config_fill(&r->cfg.backoff);
  sbr__backoff_init(&r->backoff, &r->cfg.backoff);
  sbr__pace_init(&r->pace);
  r->ops = ops;
  r->engine = cfg->mechanism == SBR_MECH_SLIDING_WINDOW
                  ? &sbr__receiver_sliding_window
                  : &sbr__receiver_status_byte;
  atomic_init(&r->refs, 1);
  pthread_mutex_init(&r->stats_lock, NULL);
  pthread_mutex_init(&r->handoff_lock, NULL);
  /* Timed waits on the monotonic clock: a wall-clock step must not
   * stretch the idle receive thread's slices. */
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&r->handoff_cond, &ca);
  pthread_condattr_destroy(&ca);
  r->handoff_tail = &r->handoff_head;
  ret = ops->listen(r->address, r->cfg.port, &r->listener, errbuf, errlen);
  if (ret < 0)
    goto out_free;
  r->accept_inline = accept_inline;
  ret = accept_inline ? 0
                      : -pthread_create(&r->accept_thread, NULL,
                                        sbr__receiver_accept_main, r);
  if (ret < 0) {
    sbr__errf(errbuf, errlen, "could not start the accept thread: %s",
              strerror(-ret));
    goto out_close_listener;
  }
  SBR_INFO("receiver: listening on %s:%u (%s, %s, poll mode %s)", r->address,
           r->cfg.port, ops->name, r->engine->name,
           sbr_poll_mode_name(r->cfg.poll_mode));
  *out = r;
  return 0;

out_close_listener:
  ops->close_listener(r->listener);
out_free:
  pthread_cond_destroy(&r->handoff_cond);
  pthread_mutex_destroy(&r->handoff_lock);
  pthread_mutex_destroy(&r->stats_lock);
  sbr_addr_list_free(r->allowed);
  free(r);
  return ret;
}

void sbr_receiver_free(sbr_receiver *r)
{
  if (!r)
    return;
  /* Order: the accept thread ends (nothing new is queued), the lanes it
   * handed over and nobody took yet close with the open ones, then the
   * listener goes. */
  atomic_store(&r->accept_stop, true);
  if (!r->accept_inline)
    pthread_join(r->accept_thread, NULL);
  struct sbr__handoff *h = r->handoff_head;
  r->handoff_head = NULL;
  while (h) {
    struct sbr__handoff *next = h->next;
    if (h->kind == SBR__HANDOFF_LANE) {
      h->lane->next = r->lanes;
      r->lanes = h->lane;
    }
    free(h);
    h = next;
  }
  while (r->lanes)
    lane_close(r, r->lanes, false);
  r->ops->close_listener(r->listener);
  r->listener = NULL;
  receiver_unref(r);
}

void sbr_receiver_wakeup(sbr_receiver *r)
{
  atomic_store(&r->wakeup, true);
}

/* ------------------------------------------------------------ arrival */

/* Long enough for a segment that iWARP's TCP lost and sends again (RTO:
 * 200 ms minimum in Linux, then doubling), far longer than any reordering
 * on a PCIe bus or across adaptive routes (microseconds). */
uint64_t sbr__stale_bound_ns = 1000000000ull;

_Atomic uint32_t sbr__receiver_features =
    SBR__FEATURE_SPAN | SBR__FEATURE_KEY_UNIT | SBR__FEATURE_EVENTS;

/* The backstop (docs/protocol.md, "Placement order"): a valid block whose
 * seq is behind the lane's next is the block that was there before, seen
 * because the status byte was placed before the new data.  Until the
 * bound it is "not landed yet": its status stays 1, every scan looks at it
 * again, and it holds up nothing else (later blocks go after one more
 * scan, as for any missing predecessor).  True once the bound has passed:
 * drop it. */
static bool stale_expired(struct sbr__lane *lane, struct sbr_block *b)
{
  uint64_t now = sbr__now_ns();
  if (b->stale_since_ns == 0) {
    b->stale_since_ns = now ? now : 1;
    struct sbr_receiver *r = lane->rx;
    pthread_mutex_lock(&r->stats_lock);
    r->stats.stale_seen++;
    pthread_mutex_unlock(&r->stats_lock);
    SBR_DEBUG("receiver: lane %u block %u: seq behind %llu, not landed yet",
              lane->id, b->index, (unsigned long long)lane->next_seq);
    return false;
  }
  return now - b->stale_since_ns >= sbr__stale_bound_ns;
}

/* How many receive blocks a block at index may span: those left in the
 * lane, on a lane that announced spans; else 1. */
static uint32_t span_room(const struct sbr__lane *lane, uint32_t index)
{
  if (!(lane->desc.features & SBR__FEATURE_SPAN))
    return 1;
  return lane->desc.block_count - index;
}

enum span_verdict {
  SPAN_OURS,    /* every continuation block is this span's */
  SPAN_LANDING, /* a continuation byte is still 0: its WRITE is landing */
  SPAN_FOREIGN, /* a continuation block is not the span's */
};

/* A span's continuation blocks, index+1 .. index+k-1: each must carry the
 * sender's SPAN status byte and be free on the receiver's side (not
 * pending, delivered, held or another span's).  A 0 there means the
 * status WRITE is still landing (a NIC may place its bytes in any order;
 * the shm NIC stores them first to last, so a scan between its head's
 * store and the rest sees it): looked at again, like a block whose data
 * has not landed. */
static enum span_verdict span_check(struct sbr__lane *lane, uint32_t index,
                                    uint32_t k)
{
  enum span_verdict v = SPAN_OURS;
  for (uint32_t j = index + 1; j < index + k; j++) {
    /* State first, status second (sbr_block_release's order): a FREE
     * block's status read after it is at least its release's 0. */
    if (block_state(&lane->blocks[j]) != SBR__RECV_FREE) {
      /* sbr_block_release stores a block's 0 before its state goes FREE:
       * a sender that READ that 0 may already have spanned over it.  A
       * release under way finishes soon: looked at again, not dropped
       * (dropped, its continuations' SPAN bytes would stay for good). */
      if (__atomic_load_n(&lane->mem.status[j], __ATOMIC_ACQUIRE) ==
              SBR__STATUS_SPAN &&
          atomic_load(&lane->releasing) > 0) {
        v = SPAN_LANDING;
        continue;
      }
      return SPAN_FOREIGN;
    }
    uint8_t st = __atomic_load_n(&lane->mem.status[j], __ATOMIC_ACQUIRE);
    if (st == SBR__STATUS_EMPTY)
      v = SPAN_LANDING;
    else if (st != SBR__STATUS_SPAN)
      return SPAN_FOREIGN;
  }
  return v;
}

/* Not landed yet, as far as the span's continuation bytes go: true once
 * it has been so for the backstop's bound (then it is dropped). */
static bool span_landing_expired(struct sbr__lane *lane, struct sbr_block *b)
{
  uint64_t now = sbr__now_ns();
  if (b->stale_since_ns == 0) {
    b->stale_since_ns = now ? now : 1;
    SBR_DEBUG("receiver: lane %u block %u: span's status bytes landing",
              lane->id, b->index);
    return false;
  }
  return now - b->stale_since_ns >= sbr__stale_bound_ns;
}

void sbr__lane_arrived(struct sbr__lane *lane, uint32_t index)
{
  struct sbr_receiver *r = lane->rx;
  struct sbr_block *b = &lane->blocks[index];
  lane->heard_ns = r->scan_ns; /* its sender's NIC is alive: no probe */
  if (block_state(b) != SBR__RECV_FREE)
    return;
  const uint8_t *mem = lane->mem.blocks + (size_t)index * lane->desc.block_size;
  struct sbr__header h = {0}; /* device read below even on early errors */
  enum sbr__block_error err =
      sbr__block_decode_span(mem, lane->desc.block_size, span_room(lane, index),
                             r->cfg.device_mask, lane->desc.epoch, &h);
  /* A frame larger than this receiver takes: every fragment is refused
   * here, so reassembly never allocates for it (a rogue's FIRST fragment
   * claiming 4 GB costs nothing). */
  if (err == SBR__BLOCK_OK && h.kind == SBR_KIND_DATA &&
      h.frame_size > r->cfg.max_frame_size)
    err = SBR__BLOCK_FRAME_TOO_LARGE;
  /* The blocks this one gives back when dropped: a span's continuations
   * only once they are known to be its own (an honest sender's span of a
   * refused device, say, must not leak them; a forged one must not free
   * blocks it has no claim on). */
  uint32_t span = 1;
  if (err == SBR__BLOCK_OK && lane->engine->looks_again && lane->seq_known &&
      h.seq < lane->next_seq) {
    /* The previous occupant (its continuation bytes are not its own any
     * more): not landed yet, a span or not. */
    if (!stale_expired(lane, b))
      return; /* not landed yet: status left at 1, the next scan looks */
    err = SBR__BLOCK_STALE;
  } else if (h.span > 1) {
    enum span_verdict v = span_check(lane, index, h.span);
    if (v == SPAN_LANDING && !span_landing_expired(lane, b))
      return; /* looked at again at the next scan */
    if (v == SPAN_OURS)
      span = h.span;
    else if (err == SBR__BLOCK_OK)
      err = SBR__BLOCK_BAD_SPAN;
  }
  b->stale_since_ns = 0;
  b->span = span;
  if (err != SBR__BLOCK_OK) {
    invalid_warn(lane, index, err);
    pthread_mutex_lock(&r->stats_lock);
    r->stats.rejected++;
    if (err == SBR__BLOCK_STALE)
      r->stats.stale_dropped++;
    /* Past magic and version the device byte is the sender's own. */
    if (err >= SBR__BLOCK_BAD_KIND)
      r->dev_stats[h.device].rejected++;
    pthread_mutex_unlock(&r->stats_lock);
    lane->engine->release(lane, index);
    b->span = 1;
    return;
  }
  /* Nothing lands in the continuation blocks until the head goes back. */
  for (uint32_t j = 1; j < span; j++)
    set_block_state(&lane->blocks[index + j], SBR__RECV_SPANNED);
  b->info = (struct sbr_block_info){
      .lane_id = lane->id,
      .epoch = h.epoch,
      .device = h.device,
      .kind = h.kind,
      .flags = h.flags & (uint8_t)~SBR__FLAG_SPAN,
      .packet = h.packet,
      .seq = h.seq,
      .pts = h.pts,
      .dts = h.dts,
      .duration = h.duration,
      .capture_time = h.capture_time,
      .frame_offset = h.frame_offset,
      .frame_size = h.frame_size,
      .payload = mem + SBR__HEADER_SIZE,
      .payload_len = h.payload_len,
      .index = index,
  };
  b->found_scan = lane->scan_gen;
  set_block_state(b, SBR__RECV_PENDING);
  lane->n_pending++;
  /* A frame's first fragment tells when the device's frames land. */
  if (r->cfg.poll_mode == SBR_POLL_ADAPTIVE && h.kind == SBR_KIND_DATA &&
      (h.flags & SBR_FLAG_FIRST)) {
    uint64_t hint =
        __atomic_load_n(&r->period_hint[h.device], __ATOMIC_RELAXED);
    r->pace_verdicts[sbr__pace_arrival(&r->pace, h.device, r->scan_ns, hint,
                                       r->after_sleep)]++;
  }
}

/* The lane's expected next block when it is pending where it usually is:
 * the sender fills receive blocks round robin, so right after the last one
 * delivered.  It is the lane's smallest pending seq (nothing older can
 * still be pending) and may always go. */
static struct sbr_block *lane_expected(struct sbr__lane *lane)
{
  if (lane->n_pending == 0 || !lane->seq_known)
    return NULL;
  struct sbr_block *b = &lane->blocks[lane->next_index];
  if (block_state(b) == SBR__RECV_PENDING && b->info.seq == lane->next_seq)
    return b;
  return NULL;
}

/* The lane's next block in sequence order, if it may go now. */
static struct sbr_block *lane_pick(struct sbr__lane *lane)
{
  if (lane->n_pending == 0)
    return NULL;
  struct sbr_block *expected = lane_expected(lane);
  if (expected)
    return expected;
  struct sbr_block *best = NULL;
  for (uint32_t i = 0; i < lane->desc.block_count; i++) {
    struct sbr_block *b = &lane->blocks[i];
    if (block_state(b) != SBR__RECV_PENDING)
      continue;
    if (!best || b->info.seq < best->info.seq)
      best = b;
  }
  if (!best)
    return NULL;
  if ((lane->seq_known && best->info.seq == lane->next_seq) ||
      lane->final_scan_done)
    return best;
  /* A predecessor is missing (or this is the lane's first block): wait for
   * one full scan that started after this block was found. */
  if (lane->scan_gen >= best->found_scan + 2)
    return best;
  return NULL;
}

static void deliver(struct sbr_receiver *r, struct sbr__lane *lane,
                    struct sbr_block *b)
{
  const struct sbr_block_info *in = &b->info;
  struct sbr__device_track *t = &lane->dev[in->device];
  /* Packets skipped: a step forward (mod 2^16) past the expected one.  A
   * step back is no loss (only a peer that breaks the protocol sends it):
   * counted as 65000-odd lost packets it hid every real gap. */
  int16_t step = (int16_t)(uint16_t)(in->packet - t->next_packet);
  uint16_t gap = t->seen && step > 0 ? (uint16_t)step : 0;
  t->seen = true;
  t->next_packet = (uint16_t)(in->packet + 1);
  lane->next_seq = in->seq + 1;
  lane->next_index = (b->index + b->span) % lane->desc.block_count;
  lane->seq_known = true;
  lane->n_pending--;
  set_block_state(b, SBR__RECV_DELIVERED);
  atomic_fetch_add(&lane->refs, 1);
  atomic_fetch_add(&lane->n_out, b->span);

  pthread_mutex_lock(&r->stats_lock);
  struct sbr_device_stats *d = &r->dev_stats[in->device];
  d->blocks++;
  d->bytes += in->payload_len;
  d->gaps += gap;
  if (in->kind == SBR_KIND_DATA && (in->flags & SBR_FLAG_LAST))
    d->frames++;
  if (r->cfg.poll_mode == SBR_POLL_ADAPTIVE) {
    const struct sbr__pace_dev *pd = &r->pace.dev[in->device];
    d->period_ns = sbr__pace_periodic(pd) ? pd->period_ns : 0;
  }
  r->stats.blocks++;
  r->stats.bytes += in->payload_len;
  r->stats.blocks_held++;
  pthread_mutex_unlock(&r->stats_lock);
  if (gap)
    SBR_DEBUG("receiver: lane %u device %u: %u packets missing before %u",
              lane->id, in->device, gap, in->packet);
}

/* Moves lane to the end of the receiver's list. */
static void lane_to_back(struct sbr_receiver *r, struct sbr__lane *lane)
{
  if (!lane->next)
    return;
  pthread_mutex_lock(&r->stats_lock);
  struct sbr__lane **p = &r->lanes;
  while (*p != lane)
    p = &(*p)->next;
  *p = lane->next;
  while (*p)
    p = &(*p)->next;
  *p = lane;
  lane->next = NULL;
  pthread_mutex_unlock(&r->stats_lock);
}

/* ------------------------------------------------------------ waiting */

/* One sbr_receiver_next call's waiting, added to the stats when it ends. */
struct wait {
  uint64_t start_ns;
  uint64_t slept_ns;
  uint64_t sleeps;
  bool slack_lowered;
  long saved_slack;
};

/* The lane whose sender may end our sleep: the back end can (shm: same
 * host) and the mechanism's arrival is a status byte.  One futex word per
 * lane (each lane is its own segment), so with several such lanes we sleep
 * on the one that delivered last (lane_to_back puts it at the end); the
 * others' frames wait for the sleep's end, as all did before. */
static struct sbr__lane *wake_lane(struct sbr_receiver *r)
{
  struct sbr__lane *pick = NULL;
  if (!r->ops->sleep_prepare)
    return NULL;
  for (struct sbr__lane *l = r->lanes; l; l = l->next)
    if (!l->disconnected && l->engine->landed)
      pick = l;
  return pick;
}

/* One lane is open and its writer can end our sleep (wake_lane). */
static bool only_lane_wakes(struct sbr_receiver *r)
{
  struct sbr__lane *l = r->lanes;
  return l && !l->next && !l->disconnected && wake_lane(r) == l;
}

/* Sleeps until t_ns (CLOCK_MONOTONIC) or, where the lane's writer can
 * wake us, until a status byte lands, whichever comes first.  True when
 * it ran to t_ns. */
static bool wait_sleep(struct sbr_receiver *r, struct wait *w, uint64_t t_ns)
{
  struct sbr__lane *l = wake_lane(r);
  uint64_t t0 = sbr__now_ns();
  bool woken = false;
  if (l) {
    uint32_t token = r->ops->sleep_prepare(l->conn);
    /* The look that closes the race (transport.h, sleep_prepare): a byte
     * stored before the announcement was seen is found here. */
    if (l->engine->landed(l)) {
      r->ops->sleep_end(l->conn);
      return false; /* no sleep: the caller scans at once */
    }
    woken = r->ops->sleep_wait(l->conn, token, t_ns) > 0;
    r->ops->sleep_end(l->conn);
  } else {
    sbr__sleep_until_ns(t_ns);
  }
  w->slept_ns += sbr__now_ns() - t0;
  w->sleeps++;
  if (woken)
    r->sleeps_woken++;
  else
    r->sleeps_timed_out++;
  r->after_sleep = true;
  return !woken;
}

static bool wait_sleep_until(struct sbr_receiver *r, struct wait *w,
                             uint64_t t_ns)
{
  /* Adaptive sleeps aim at a window tens of microseconds wide: the default
   * 50 us of timer slack would close it.  Lowered for the rest of the call
   * only (restored in sbr_receiver_next), so the caller's thread is left as
   * it was; two prctl calls per call that sleeps. */
  if (r->cfg.poll_mode == SBR_POLL_ADAPTIVE && !w->slack_lowered) {
    w->saved_slack = sbr__thread_lower_slack();
    w->slack_lowered = true;
  }
  return wait_sleep(r, w, t_ns);
}

/* Nothing was found: wait before the next poll, the poll mode's way. */
static void wait_for_more(struct sbr_receiver *r, struct wait *w,
                          uint64_t deadline)
{
  switch (r->cfg.poll_mode) {
  case SBR_POLL_BUSY:
    sbr__cpu_relax();
    return;
  case SBR_POLL_BACKOFF:
    /* sbr__backoff_wait, with the sleep counted. */
    if (!sbr__backoff_spin(&r->backoff))
      wait_sleep(r, w,
                 sbr__now_ns() +
                     (uint64_t)sbr__backoff_next_sleep_us(&r->backoff) * 1000u);
    return;
  case SBR_POLL_ADAPTIVE:
  default:
    break;
  }
  uint64_t now = sbr__now_ns();
  struct sbr__pace_plan plan;
  sbr__pace_plan(&r->pace, now, &plan);
  /* One lane whose writer ends our sleep when a status byte lands (shm):
   * no ceiling and no back-off, one sleep to the next window or until
   * woken (flat out nothing is periodic, and this sleep ends at each
   * landing: B6).  Its window is polled through only when the lane
   * carries one camera: then a sleeping thread's wake-up is most of each
   * frame's latency where idle cores are slow to wake (B9, one camera:
   * p50 125-231 us polling, 297-407 us woken); cameras captured together
   * land in a burst that one wake-up serves, and a thread polling beside
   * the writer took the core the writer needed (twelve: p50 188-205 us
   * polling, 91-128 us woken, at twice the CPU).  With several lanes the
   * futex is one lane's, so the others' frames need the ceiling below. */
  bool woken_lane = only_lane_wakes(r);
  bool poll_window = !woken_lane || plan.active == 1;
  if (plan.action == SBR__PACE_SPIN && poll_window) {
    /* Poll, but let another thread of this core run: a receiver that
     * slept for most of a period is the scheduler's favourite when it
     * wakes, and on a busy host a pure spin through the window delayed
     * the very thread that would make the frame land (the shm NIC or the
     * sender, same host): 100 fps arrivals then alternated 9.6/10.5 ms
     * and most fell outside the window. */
    sched_yield();
    return;
  }
  /* Never past the caller's deadline, nor the next look for connects and
   * disconnects (that also bounds how late a wakeup is seen: 10 ms). */
  uint64_t cap = r->last_event_check_ns + EVENT_CHECK_NS;
  if (deadline < cap)
    cap = deadline;
  uint64_t t;
  bool to_window;
  if (woken_lane) {
    to_window =
        plan.action == SBR__PACE_SLEEP && poll_window && plan.until_ns < cap;
    t = to_window ? plan.until_ns : cap;
  } else {
    t = plan.until_ns;
    if (plan.action == SBR__PACE_SLEEP) {
      /* Never longer than the back-off's ceiling: a frame that comes early
       * (a burst at a stream's start, a sender that caught up) waits no
       * longer than it would in backoff mode.  Sleeping to the window in
       * one go let such frames wait up to a period, and twelve cameras'
       * delayed frames then reached rdmasrc in bursts its per-device share
       * dropped from (test-rdmasrc-streams). */
      uint64_t ceiling = now + (uint64_t)r->backoff.cfg.max_sleep_us * 1000u;
      if (ceiling < t)
        t = ceiling;
    } else if (plan.action == SBR__PACE_BACKOFF) {
      if (sbr__backoff_spin(&r->backoff))
        return;
      uint64_t backoff_end =
          now + (uint64_t)sbr__backoff_next_sleep_us(&r->backoff) * 1000u;
      if (backoff_end < t)
        t = backoff_end;
    }
    to_window = t == plan.until_ns;
    if (cap < t) {
      t = cap;
      to_window = false;
    }
  }
  if (t <= now + MIN_SLEEP_NS) {
    sbr__cpu_relax();
    return;
  }
  /* A sleep a frame ended early says nothing about oversleeping. */
  if (wait_sleep_until(r, w, t) && to_window) {
    uint64_t woke = sbr__now_ns();
    sbr__pace_overslept(&r->pace, woke > t ? woke - t : 0);
  }
}

static int receiver_next(sbr_receiver *r, int timeout_ms, sbr_block **out,
                         struct wait *w)
{
  uint64_t start = w->start_ns;
  uint64_t deadline =
      timeout_ms < 0 ? UINT64_MAX : start + (uint64_t)timeout_ms * 1000000u;
  sbr__backoff_reset(&r->backoff);
  for (;;) {
    if (atomic_exchange(&r->wakeup, false))
      return -EINTR;
    uint64_t now = sbr__now_ns();
    if (r->accept_inline &&
        (!r->lanes || now - r->last_event_check_ns >= EVENT_CHECK_NS))
      sbr__receiver_accept_inline(r);
    /* The accept thread's news: one atomic load per loop, the lock only
     * when there is some. */
    if (atomic_load_explicit(&r->handoff_ready, memory_order_acquire))
      handoff_take(r);
    if (!r->lanes) {
      /* Nobody connected: wait for the accept thread, in short slices so
       * a wakeup or the deadline is noticed soon. */
      uint64_t left_ms = now >= deadline ? 0 : (deadline - now) / 1000000u;
      handoff_wait(r, left_ms < IDLE_LISTEN_MS ? (int)left_ms : IDLE_LISTEN_MS);
      r->last_event_check_ns = sbr__now_ns();
      if (left_ms) {
        w->slept_ns += r->last_event_check_ns - now;
        w->sleeps++;
      }
      if (atomic_load_explicit(&r->handoff_ready, memory_order_acquire))
        handoff_take(r);
      now = r->last_event_check_ns;
    } else if (now - r->last_event_check_ns >= EVENT_CHECK_NS) {
      r->last_event_check_ns = now;
    }
    r->scan_ns = now; /* arrival time of what these scans find */
    /* A scan finds every block that landed; until they are delivered, the
     * next in sequence can go without scanning again. */
    for (struct sbr__lane *l = r->lanes; l; l = l->next) {
      struct sbr_block *b = l->disconnected ? NULL : lane_expected(l);
      if (b) {
        deliver(r, l, b);
        lane_to_back(r, l);
        *out = b;
        return 0;
      }
    }
    for (struct sbr__lane *l = r->lanes, *next; l; l = next) {
      next = l->next;
      if (l->disconnected) {
        /* Nothing new can land.  The last scan waits for releases in
         * progress: their blocks may hold the sender's last writes. */
        if (!l->final_scan_done) {
          if (atomic_load(&l->releasing))
            continue;
          l->engine->scan(l); /* a failure now only means it's gone */
          l->final_scan_done = true;
        }
        if (l->n_pending == 0)
          lane_close(r, l, true);
        continue;
      }
      bool quiet = atomic_load(&l->releasing) == 0;
      if (l->engine->scan(l) < 0) {
        SBR_WARN("receiver: lane %u failed", l->id);
        lane_close(r, l, true);
        continue;
      }
      if (quiet)
        l->scan_gen++; /* a complete scan, nothing skipped mid-release */
      if (sbr__receiver_probes_lanes(r))
        sbr__lane_check_alive(r, l, now);
    }
    r->after_sleep = false;
    for (struct sbr__lane *l = r->lanes; l; l = l->next) {
      struct sbr_block *b = lane_pick(l);
      if (b) {
        deliver(r, l, b);
        lane_to_back(r, l); /* fairness: the others go first next time */
        *out = b;
        return 0;
      }
    }
    if (timeout_ms == 0 || sbr__now_ns() >= deadline)
      return -ETIMEDOUT;
    wait_for_more(r, w, deadline);
  }
}

int sbr_receiver_next(sbr_receiver *r, int timeout_ms, sbr_block **out)
{
  struct wait w = {.start_ns = sbr__now_ns()};
  int ret = receiver_next(r, timeout_ms, out, &w);
  uint64_t awake = sbr__now_ns() - w.start_ns - w.slept_ns;
  pthread_mutex_lock(&r->stats_lock);
  r->stats.poll_sleeps += w.sleeps;
  r->stats.poll_sleep_ns += w.slept_ns;
  r->stats.poll_busy_ns += awake;
  r->stats.poll_sleeps_woken += r->sleeps_woken;
  r->stats.poll_sleeps_timed_out += r->sleeps_timed_out;
  r->sleeps_woken = r->sleeps_timed_out = 0;
  if (r->cfg.poll_mode == SBR_POLL_ADAPTIVE) {
    r->stats.frames_unpredicted += r->pace_verdicts[SBR__PACE_UNPREDICTED];
    r->stats.frames_predicted += r->pace_verdicts[SBR__PACE_PREDICTED];
    r->stats.frames_missed += r->pace_verdicts[SBR__PACE_MISSED];
    memset(r->pace_verdicts, 0, sizeof r->pace_verdicts);
    r->stats.periodic_devices = sbr__pace_periodic_count(&r->pace);
  }
  pthread_mutex_unlock(&r->stats_lock);
  if (w.slack_lowered)
    sbr__thread_restore_slack(w.saved_slack);
  return ret;
}

const struct sbr_block_info *sbr_block_get_info(const sbr_block *b)
{
  return &b->info;
}

uint32_t sbr_block_lane_blocks(const sbr_block *b)
{
  return b->span;
}

void sbr_block_hold(sbr_block *b)
{
  struct sbr__lane *lane = b->lane;
  if (!atomic_load(&lane->closed))
    lane->engine->hold(lane, b->index);
}

void sbr_block_release(sbr_block *b)
{
  struct sbr__lane *lane = b->lane;
  struct sbr_receiver *r = lane->rx;
  pthread_mutex_lock(&r->stats_lock);
  r->stats.blocks_held--;
  pthread_mutex_unlock(&r->stats_lock);
  /* Status first, state second: a scan that sees FREE then reads a status
   * that is at least this 0 (see the status-byte scan).  In between, the
   * sender may already write the next block here while scans skip it: the
   * releasing count stops those scans from counting towards the "one more
   * full scan" rule, or a later block could overtake it. */
  atomic_fetch_add(&lane->releasing, 1);
  if (!atomic_load(&lane->closed))
    lane->engine->release(lane, b->index);
  /* Read before the head is FREE: then the receive thread may reuse it. */
  uint32_t span = b->span;
  for (uint32_t j = 1; j < span; j++)
    set_block_state(&lane->blocks[b->index + j], SBR__RECV_FREE);
  set_block_state(b, SBR__RECV_FREE);
  atomic_fetch_sub(&lane->releasing, 1);
  atomic_fetch_sub(&lane->n_out, span);
  lane_unref(lane);
}

/* -------------------------------------------------------------- stats */

int sbr_receiver_get_stats_sized(sbr_receiver *r,
                                 struct sbr_receiver_stats *app, size_t size)
{
  struct sbr_receiver_stats st;
  struct sbr_receiver_stats *out = &st;
  pthread_mutex_lock(&r->stats_lock);
  *out = r->stats;
  out->recv_wr_posted = r->recv_wr_closed_lanes;
  for (struct sbr__lane *l = r->lanes; l; l = l->next)
    out->recv_wr_posted += r->ops->posted_recv_count(l->conn);
  struct sbr__nic_port ports[SBR__MAX_NIC_PORTS];
  unsigned n_ports = r->n_nic_ports;
  memcpy(ports, r->nic_ports, n_ports * sizeof ports[0]);
  pthread_mutex_unlock(&r->stats_lock);
  /* The back end reads the NIC's counters (verbs: sysfs files), outside
   * the lock.  Only a back end that named ports has them. */
  out->nic_remote_access_errors = SBR_COUNTER_ABSENT;
  for (unsigned i = 0; i < n_ports; i++) {
    uint64_t v;
    if (r->ops->nic_remote_access_errors(&ports[i], &v) < 0)
      continue;
    if (out->nic_remote_access_errors == SBR_COUNTER_ABSENT)
      out->nic_remote_access_errors = 0;
    out->nic_remote_access_errors += v;
  }
  sbr__sized_write(app, size, &st, sizeof st);
  return 0;
}

int sbr_receiver_get_device_stats_sized(sbr_receiver *r, uint8_t device,
                                        struct sbr_device_stats *out,
                                        size_t size)
{
  pthread_mutex_lock(&r->stats_lock);
  struct sbr_device_stats st = r->dev_stats[device];
  pthread_mutex_unlock(&r->stats_lock);
  sbr__sized_write(out, size, &st, sizeof st);
  return 0;
}
