/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * receiver-accept.c - the receiver's accept thread ("sbr-accept"): it takes
 * the listener's events, screens and refuses connection requests, sets up
 * each accepted lane (memory, registration, keys, the engine) and hands
 * lanes, disconnects and refusals to the receive thread through the
 * hand-off queue (receiver.c takes them in: handoff_take, lane_adopt).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "sbr-testing.h"
#include "engine/receiver-internal.h"

/* The accept thread waits for a listener event this long at a time: the
 * bound on how long sbr_receiver_free waits for it to end. */
#define ACCEPT_WAIT_MS 20
/* Listener events an inline look handles (r->accept_inline). */
#define ACCEPT_INLINE_EVENTS 16

/* The fabric settings of cfg for the lane lane_id (its place in the
 * spread over completion vectors).  The retry count is the sender's: a
 * receiver's QP takes it from the connect request. */
void sbr__receiver_fabric(const struct sbr_receiver_config *cfg,
                          uint32_t lane_id, struct sbr__fabric *f)
{
  sbr__fabric_defaults(f);
  f->tos = cfg->tos;
  f->ack_timeout = cfg->ack_timeout;
  f->comp_vector = cfg->comp_vector;
  f->comp_index = lane_id;
  f->numa_node = cfg->numa_node;
  f->huge_pages = cfg->huge_pages;
}

/* Queues h for the receive thread (accept thread). */
static void handoff_push(struct sbr_receiver *r, struct sbr__handoff *h)
{
  h->next = NULL;
  pthread_mutex_lock(&r->handoff_lock);
  *r->handoff_tail = h;
  r->handoff_tail = &h->next;
  atomic_store_explicit(&r->handoff_ready, true, memory_order_release);
  pthread_cond_signal(&r->handoff_cond);
  pthread_mutex_unlock(&r->handoff_lock);
}

/* The one place a connection is refused (accept thread): the refusal is
 * logged, counted and queued for on_refusal, then the sender is told why
 * (unless the back end already did, when its accept failed): a sender
 * that hears of it finds it counted. */
static void lane_refuse(struct sbr_receiver *r, struct sbr__conn_request *req,
                        const struct sbr__refusal *why, bool answered)
{
  char text[256];
  sbr_refusal_describe((enum sbr_refusal)why->reason, why->receiver_value,
                       why->sender_value, text, sizeof text);
  /* A flood is refused as busy: one warning per attempt would be a flood
   * of its own (the application hears of each through on_refusal). */
  sbr__log(why->reason == SBR_REFUSAL_BUSY ? SBR_LOG_DEBUG : SBR_LOG_WARNING,
           "receiver: refused %s (%s): %s", req->peer,
           sbr_refusal_name((enum sbr_refusal)why->reason), text);
  pthread_mutex_lock(&r->stats_lock);
  r->stats.refused++;
  if (why->reason < SBR_REFUSAL_SLOTS)
    r->stats.refused_by_reason[why->reason]++;
  pthread_mutex_unlock(&r->stats_lock);
  /* on_refusal runs on the receive thread (sbr.h): the application's
   * handler may touch what that thread owns. */
  struct sbr__handoff *h = r->cfg.on_refusal ? calloc(1, sizeof *h) : NULL;
  if (h) {
    h->kind = SBR__HANDOFF_REFUSAL;
    h->reason = (enum sbr_refusal)why->reason;
    snprintf(h->peer, sizeof h->peer, "%s", req->peer);
    snprintf(h->text, sizeof h->text, "%s", text);
    handoff_push(r, h);
  } else if (r->cfg.on_refusal) {
    SBR_WARN("receiver: out of memory: the application is not told of "
             "this refusal");
  }
  if (!answered)
    r->ops->reject(r->listener, req, why);
}

/* The checks every request meets first, before anything is allocated
 * for it and before the back end's own answer: is the sender on the
 * access list, and is there a token left in the connection-rate bucket?
 * A refused sender does not use a token up, so a flood from outside the
 * list can't starve the senders on it.  A clock read and a few compares. */
static bool request_screened_out(struct sbr_receiver *r,
                                 const struct sbr__conn_request *req,
                                 struct sbr__refusal *why)
{
  if (r->allowed && !sbr_addr_list_allows(
                        r->allowed, (const struct sockaddr *)&req->peer_addr)) {
    sbr__refusal_set(why, SBR_REFUSAL_NOT_ALLOWED, 0, 0);
    return true;
  }
  uint32_t rate = r->cfg.max_connects_per_s;
  if (rate == 0)
    return false;
  uint64_t now = sbr__now_ns();
  r->connect_tokens += (double)(now - r->connect_refill_ns) * rate / 1e9;
  if (r->connect_tokens > rate)
    r->connect_tokens = rate;
  r->connect_refill_ns = now;
  if (r->connect_tokens < 1.0) {
    sbr__refusal_set(why, SBR_REFUSAL_BUSY, rate, 0);
    return true;
  }
  r->connect_tokens -= 1.0;
  return false;
}

/* Why this receiver can't take req, or false.  Geometry: the receiver
 * decides block size and count and a sender adapts to any within the
 * protocol's limits, which sbr_receiver_new enforces, except that a
 * sliding-window sender acknowledges at most as many slots as it posts ACK
 * receives for (sender-connect.c sizes its queue before it knows the lane). */
static bool request_refused(struct sbr_receiver *r,
                            const struct sbr__conn_request *req,
                            struct sbr__refusal *why)
{
  if (req->mechanism != r->cfg.mechanism) {
    sbr__refusal_set(why, SBR_REFUSAL_MECHANISM, r->cfg.mechanism,
                     req->mechanism);
    return true;
  }
  if (r->cfg.mechanism == SBR_MECH_SLIDING_WINDOW && req->no_write_imm) {
    /* Its engine's first WRITE with immediate would fail (EINVAL) and end
     * the lane with no word to the sender, which would reconnect forever.
     * Not retryable: the device won't change. */
    sbr__refusal_set(why, SBR_REFUSAL_DEVICE, r->cfg.mechanism, 0);
    return true;
  }
  if (r->cfg.mechanism == SBR_MECH_SLIDING_WINDOW) {
    uint32_t can_ack =
        req->block_count ? req->block_count : SBR__SW_DEFAULT_ACK_SLOTS;
    if (r->cfg.block_count > can_ack) {
      sbr__refusal_set(why, SBR_REFUSAL_GEOMETRY, r->cfg.block_count, can_ack);
      return true;
    }
  }
  /* lane_close, on the receive thread, lowers it. */
  pthread_mutex_lock(&r->stats_lock);
  bool full = r->stats.lanes_active >= r->cfg.max_lanes;
  pthread_mutex_unlock(&r->stats_lock);
  if (full) {
    sbr__refusal_set(why, SBR_REFUSAL_LANES_FULL, r->cfg.max_lanes, 0);
    return true;
  }
  return false;
}

/* Notes the RDMA port conn runs on, for nic_remote_access_errors. */
static void remember_nic_port_locked(struct sbr_receiver *r,
                                     struct sbr__conn *conn)
{
  struct sbr__nic_port p;
  if (!r->ops->nic_port || r->ops->nic_port(conn, &p) < 0)
    return;
  for (unsigned i = 0; i < r->n_nic_ports; i++)
    if (r->nic_ports[i].port == p.port &&
        strcmp(r->nic_ports[i].device, p.device) == 0)
      return;
  if (r->n_nic_ports < SBR__MAX_NIC_PORTS)
    r->nic_ports[r->n_nic_ports++] = p;
}

void (*_Atomic sbr__receiver_test_accept_hook)(const char *peer);

/* Accept thread: sets up a lane for req (memory, registration, keys,
 * the engine) and hands it to the receive thread, which adopts it
 * (lane_adopt).  It counts as active from here, for max_lanes. */
static void lane_open(struct sbr_receiver *r, struct sbr__conn_request *req)
{
  struct sbr__refusal why;
  if (request_refused(r, req, &why)) {
    lane_refuse(r, req, &why, false);
    return;
  }
  struct sbr__handoff *h = NULL;
  struct sbr__lane *lane = calloc(1, sizeof *lane);
  if (!lane)
    goto out_reject;
  lane->blocks = calloc(r->cfg.block_count, sizeof *lane->blocks);
  h = calloc(1, sizeof *h);
  if (!lane->blocks || !h) {
    free(h);
    free(lane->blocks);
    free(lane);
    goto out_reject; /* nothing was answered yet */
  }
  lane->rx = r;
  lane->id = r->next_lane_id++;
  snprintf(lane->peer, sizeof lane->peer, "%s", req->peer);
  lane->peer_addr = req->peer_addr;
  lane->heard_ns = sbr__now_ns();
  lane->engine = r->engine;
  pthread_mutex_init(&lane->lock, NULL);
  /* Epochs start at 1 and never repeat on one receiver, so a block a
   * previous sender left in recycled memory is never accepted (rule 7). */
  lane->desc = (struct sbr__lane_desc){
      .mechanism = (uint8_t)r->cfg.mechanism,
      .epoch = ++r->next_epoch ? r->next_epoch : ++r->next_epoch,
      .block_size = r->cfg.block_size,
      .block_count = r->cfg.block_count,
      .lane_id = lane->id,
      .pause_offset = sbr__pause_offset_for(r->cfg.block_count),
      .refused_offset = sbr__refused_offset_for(r->cfg.block_count),
      /* Spans and key units on status-byte lanes only: a sliding-window
       * slot is one block, acknowledged alone (no spans), and its sender
       * never READs the status region (no key units:
       * sbr_receiver_request_key_unit says -ENOTSUP there).  Events are
       * blocks like any other: both. */
      .features =
          (r->cfg.mechanism == SBR_MECH_STATUS_BYTE
               ? SBR__FEATURE_SPAN | SBR__FEATURE_KEY_UNIT | SBR__FEATURE_EVENTS
               : SBR__FEATURE_EVENTS) &
          atomic_load(&sbr__receiver_features),
  };
  if (lane->desc.features & SBR__FEATURE_KEY_UNIT)
    lane->desc.key_unit_offset = sbr__key_unit_offset_for(r->cfg.block_count);
  /* One send slot: the liveness probe (the status-byte engine posts
   * nothing else). */
  struct sbr__fabric fabric;
  sbr__receiver_fabric(&r->cfg, lane->id, &fabric);
  struct sbr__queue_caps caps = {
      .max_send_wr = 1, .max_recv_wr = 0, .max_inline = 64, .fabric = &fabric};
  if (r->cfg.mechanism == SBR_MECH_SLIDING_WINDOW) {
    caps.max_send_wr = r->cfg.block_count + 4;
    caps.max_recv_wr = r->cfg.block_count + 4;
  }
  void (*hook)(const char *) = sbr__receiver_test_accept_hook;
  if (hook)
    hook(req->peer);
  int ret = r->ops->accept(r->listener, req, &caps, &lane->desc, &lane->conn,
                           &lane->mem);
  if (ret < 0) {
    /* The back end has refused the peer already, saying so: with its
     * own reason if it gave one (verbs: RLIMIT_MEMLOCK), else as out
     * of resources. */
    if (req->refusal.reason)
      why = req->refusal;
    else
      sbr__refusal_set(&why, SBR_REFUSAL_RESOURCES, (uint32_t)-ret, 0);
    lane_refuse(r, req, &why, true);
    goto out_destroy;
  }
  for (uint32_t i = 0; i < r->cfg.block_count; i++) {
    lane->blocks[i].lane = lane;
    lane->blocks[i].index = i;
    lane->blocks[i].state = SBR__RECV_FREE;
    lane->blocks[i].span = 1;
  }
  ret = lane->engine->start(lane);
  if (ret < 0) {
    SBR_WARN("receiver: lane for %s: %s engine failed: %s", req->peer,
             lane->engine->name, strerror(-ret));
    r->ops->close(lane->conn);
    goto out_destroy;
  }
  atomic_init(&lane->refs, 1);
  atomic_fetch_add(&r->refs, 1);
  pthread_mutex_lock(&r->stats_lock);
  r->stats.lanes_opened++;
  r->stats.lanes_active++;
  if (lane->mem.windows)
    r->stats.lanes_windowed++;
  remember_nic_port_locked(r, lane->conn);
  pthread_mutex_unlock(&r->stats_lock);
  SBR_INFO("receiver: lane %u for %s: %u blocks of %u bytes, epoch %u "
           "(sender hinted %u x %u; this receiver's configuration decides), "
           "keys: %s",
           lane->id, req->peer, lane->desc.block_count, lane->desc.block_size,
           lane->desc.epoch, req->block_count, req->block_size,
           lane->mem.windows ? "memory windows bound to its QP"
                             : "memory regions");
  h->kind = SBR__HANDOFF_LANE;
  h->lane = lane;
  handoff_push(r, h);
  return;

out_destroy:
  free(h);
  pthread_mutex_destroy(&lane->lock);
  free(lane->blocks);
  free(lane);
  return; /* the back end refused the peer, or it is connected and closed */
out_reject:
  sbr__refusal_set(&why, SBR_REFUSAL_RESOURCES, ENOMEM, 0);
  lane_refuse(r, req, &why, false);
}

/* Connects and disconnects, on a thread of their own: allocating,
 * registering and binding a lane can take seconds on a slow device, and
 * the receive thread must go on delivering the open lanes' frames
 * meanwhile.  What it does reaches the receive thread through the
 * hand-off queue (lane_adopt, handoff_take). */
static void accept_event(struct sbr_receiver *r, struct sbr__listen_event *ev)
{
  struct sbr__refusal why;
  if ((ev->type == SBR__EV_CONNECT_REQUEST ||
       ev->type == SBR__EV_BAD_REQUEST) &&
      request_screened_out(r, &ev->req, &why)) {
    lane_refuse(r, &ev->req, &why, false);
  } else if (ev->type == SBR__EV_CONNECT_REQUEST) {
    lane_open(r, &ev->req);
  } else if (ev->type == SBR__EV_BAD_REQUEST) {
    lane_refuse(r, &ev->req, &ev->req.refusal, false);
  } else if (ev->type == SBR__EV_DISCONNECTED) {
    if (ev->async_error) {
      pthread_mutex_lock(&r->stats_lock);
      r->stats.async_errors++;
      pthread_mutex_unlock(&r->stats_lock);
    }
    struct sbr__handoff *h = calloc(1, sizeof *h);
    if (!h) {
      /* The lane ends when its sender's NIC stops answering the probe
       * (verbs) or its connection fails. */
      SBR_WARN("receiver: out of memory: a sender's disconnect is missed");
      return;
    }
    h->kind = SBR__HANDOFF_DISCONNECTED;
    h->conn = ev->conn;
    handoff_push(r, h);
  }
}

/* The accept thread's work on the receive thread, for a receiver made
 * without one (r->accept_inline): the events waiting now, at most a
 * few, so refusals can't hold the lanes' frames up for long. */
void sbr__receiver_accept_inline(struct sbr_receiver *r)
{
  for (int n = 0; n < ACCEPT_INLINE_EVENTS; n++) {
    struct sbr__listen_event ev;
    memset(&ev, 0, sizeof ev);
    if (r->ops->get_event(r->listener, 0, &ev) < 0 || ev.type == SBR__EV_NONE)
      return;
    accept_event(r, &ev);
  }
}

void *sbr__receiver_accept_main(void *arg)
{
  struct sbr_receiver *r = arg;
  pthread_setname_np(pthread_self(), "sbr-accept");
  while (!atomic_load(&r->accept_stop)) {
    struct sbr__listen_event ev;
    memset(&ev, 0, sizeof ev);
    int ret = r->ops->get_event(r->listener, ACCEPT_WAIT_MS, &ev);
    if (ret < 0) {
      sbr__sleep_us(ACCEPT_WAIT_MS * 1000u); /* never a spin on errors */
      continue;
    }
    if (ev.type == SBR__EV_NONE)
      continue;
    atomic_store(&r->accept_busy, true);
    accept_event(r, &ev);
    atomic_store(&r->accept_busy, false);
  }
  return NULL;
}

bool sbr__receiver_accept_busy(sbr_receiver *r)
{
  return atomic_load(&r->accept_busy);
}
