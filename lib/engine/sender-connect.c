/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sender-connect.c - the sender's connection: connecting to the receiver
 * (queue sizes, checking the lane it gives, registering the send blocks,
 * starting the engine), reconnecting on the application's call, and
 * failing a connection, which reclaims every queued or posted block.
 * Callers hold engine_lock (sender-internal.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/log.h"
#include "engine/sender-internal.h"

/* The fabric settings of cfg; index: this connection's place in the
 * spread over completion vectors. */
void sbr__sender_fabric(const struct sbr_sender_config *cfg, uint32_t index,
                        struct sbr__fabric *f)
{
  sbr__fabric_defaults(f);
  f->tos = cfg->tos;
  f->ack_timeout = cfg->ack_timeout;
  f->retry_count = cfg->retry_count;
  f->comp_vector = cfg->comp_vector;
  f->comp_index = index;
}

int sbr__sender_connect_locked(struct sbr_sender *s, char *errbuf,
                               size_t errlen)
{
  uint8_t priv[SBR__CONNECT_PRIV_SIZE];
  sbr__connect_priv_encode(priv, (uint8_t)s->cfg.mechanism,
                           s->cfg.block_size_hint, s->cfg.block_count_hint);
  /* Queue bounds: every block is at most 2 WRs in flight, plus one status
   * READ; the sliding window also posts one receive per slot for ACKs. */
  /* Every connection of this process (senders, reconnects) takes the
   * next completion vector when they are spread. */
  static atomic_uint connections;
  struct sbr__fabric fabric;
  sbr__sender_fabric(&s->cfg, atomic_fetch_add(&connections, 1), &fabric);
  struct sbr__queue_caps caps = {
      .max_send_wr = 2 * s->n_blocks + 4,
      .max_recv_wr = 0,
      .max_inline = 64,
      .fabric = &fabric,
  };
  if (s->cfg.mechanism == SBR_MECH_SLIDING_WINDOW)
    caps.max_recv_wr =
        s->cfg.block_count_hint ? s->cfg.block_count_hint + 4 : 1024;
  struct sbr__lane_desc lane;
  struct sbr__conn *conn = NULL;
  int ret = s->ops->connect(s->host, s->cfg.port, s->cfg.source, priv,
                            sizeof priv, &caps, s->cfg.connect_timeout_ms,
                            &conn, &lane, errbuf, errlen);
  if (ret < 0)
    return ret;
  /* Before the first WR: a test's delay or failure holds from it on. */
  sbr__transport_inject_faults(s->ops, conn, &s->knobs.faults);
  if (lane.mechanism == SBR_MECH_SLIDING_WINDOW &&
      lane.block_count + 4 > caps.max_recv_wr) {
    /* One ACK receive per slot must be posted; the QP was sized before the
     * lane was known. */
    sbr__errf(errbuf, errlen,
              "receiver at %s:%u has %u slots; this sliding-window sender "
              "can take %u (set block_count_hint)",
              s->host, s->cfg.port, lane.block_count, caps.max_recv_wr - 4);
    ret = -EPROTO;
    goto out_close;
  }
  if (lane.mechanism != s->cfg.mechanism) {
    sbr__errf(errbuf, errlen, "receiver at %s:%u runs %s, this sender %s",
              s->host, s->cfg.port, sbr_mechanism_name(lane.mechanism),
              sbr_mechanism_name(s->cfg.mechanism));
    ret = -EPROTO;
    goto out_close;
  }
  if (lane.mechanism == SBR_MECH_SLIDING_WINDOW && s->ops->has_write_imm &&
      !s->ops->has_write_imm(conn)) {
    /* A receiver that knows refuses this itself (SBR_REFUSAL_DEVICE); an
     * older one accepts, and the first WRITE with immediate would fail
     * and reconnect in a loop. */
    sbr__errf(errbuf, errlen,
              "this sender's RDMA device is iWARP, which has no RDMA WRITE "
              "with immediate: the sliding-window mechanism can't run on it "
              "(use status-byte)");
    ret = -EPROTONOSUPPORT;
    goto out_close;
  }
  if (!s->block_mem) {
    ret = sbr__sender_alloc_blocks(s, lane.block_size);
    if (ret < 0) {
      sbr__errf(errbuf, errlen, "cannot allocate %u send blocks of %u bytes",
                s->n_blocks, lane.block_size);
      goto out_close;
    }
  } else if (lane.block_size < s->block_size) {
    /* Producers may hold pointers into the old blocks: they can't shrink. */
    sbr__errf(errbuf, errlen,
              "receiver's blocks shrank from %u to %u bytes; recreate the "
              "sender",
              s->block_size, lane.block_size);
    ret = -EPROTO;
    goto out_close;
  }
  ret = s->ops->reg_mr(conn, s->block_mem, (size_t)s->n_blocks * s->block_size,
                       SBR__ACCESS_LOCAL_WRITE, &s->blocks_mr);
  if (ret < 0) {
    sbr__errf(errbuf, errlen, "cannot register send blocks: %s",
              strerror(-ret));
    goto out_close;
  }
  /* Producers read the lane (epoch) under s->lock; the engine reads conn
   * and lane with engine_lock held, which the caller holds. */
  if (s->knobs.ignore_features) {
    lane.features = 0;
    lane.key_unit_offset = 0;
  }
  pthread_mutex_lock(&s->lock);
  s->conn = conn;
  s->lane = lane;
  /* Refusals belong to a lane: a new one starts with none. */
  memset(s->refused, 0, sizeof s->refused);
  /* So do key-unit requests: a new lane's area is zeros, and a nonzero
   * word at its first READ is a request made for this lane. */
  memset(s->key_seen, 0, sizeof s->key_seen);
  pthread_mutex_unlock(&s->lock);
  ret = s->engine->start(s);
  if (ret < 0) {
    sbr__errf(errbuf, errlen, "%s engine failed to start: %s", s->engine->name,
              strerror(-ret));
    goto out_dereg;
  }
  pthread_mutex_lock(&s->lock);
  s->connected = true;
  pthread_mutex_unlock(&s->lock);
  sbr__direct_connect(s);
  SBR_INFO("sender: connected to %s:%u over %s, lane %u: %u blocks of %u "
           "bytes, epoch %u",
           s->host, s->cfg.port, s->ops->name, lane.lane_id, lane.block_count,
           lane.block_size, lane.epoch);
  return 0;

out_dereg:
  s->ops->dereg_mr(s->blocks_mr);
  s->blocks_mr = NULL;
  s->conn = NULL;
out_close:
  s->ops->close(conn);
  return ret;
}

/* Called with engine_lock held (the thread is not in the engine). */
void sbr__sender_disconnect_engine_locked(struct sbr_sender *s)
{
  if (!s->conn)
    return;
  if (s->ops->async_failed && s->ops->async_failed(s->conn)) {
    pthread_mutex_lock(&s->lock);
    s->stats.async_errors++;
    pthread_mutex_unlock(&s->lock);
  }
  sbr__direct_disconnect(s);
  s->engine->stop(s);
  s->ops->dereg_mr(s->blocks_mr);
  s->blocks_mr = NULL;
  s->ops->close(s->conn);
  s->conn = NULL;
}

/* The connection failed: everything queued or in flight is lost.  Blocks
 * producers are filling stay theirs; submit will refuse them. */
void sbr__sender_fail_connection(struct sbr_sender *s, int err)
{
  pthread_mutex_lock(&s->lock);
  if (s->connected)
    SBR_WARN("sender: connection to %s:%u lost: %s", s->host, s->cfg.port,
             strerror(-err));
  s->connected = false;
  pthread_mutex_unlock(&s->lock);

  /* Stop the engine before reclaiming: posted blocks are the NIC's until the
   * QP is gone. */
  sbr__sender_disconnect_engine_locked(s);

  pthread_mutex_lock(&s->lock);
  for (uint32_t i = 0; i < s->n_blocks; i++) {
    struct sbr_send_block *b = &s->blocks[i];
    if (b->state == SBR__SEND_POSTED || b->state == SBR__SEND_QUEUED) {
      sbr__sender_count_drop_locked(s, b);
      /* A kept block stays the caller's (DONE): its memory may still be
       * read, and is released by its owner. */
      sbr__sender_settle_locked(s, b);
    }
  }
  sbr__queue_init(&s->queue, s->queue.fifo);
  s->n_queued = 0;
  s->n_posted = 0;
  pthread_cond_broadcast(&s->idle_cond);
  sbr__sender_wake_all_free_waiters_locked(s);
  pthread_mutex_unlock(&s->lock);
}

bool sbr_sender_is_connected(sbr_sender *s)
{
  pthread_mutex_lock(&s->lock);
  bool c = s->connected;
  pthread_mutex_unlock(&s->lock);
  return c;
}

int sbr_sender_reconnect(sbr_sender *s, char *errbuf, size_t errlen)
{
  sbr__errf(errbuf, errlen, "%s", "");
  pthread_mutex_lock(&s->engine_lock);
  pthread_mutex_lock(&s->lock);
  bool connected = s->connected;
  pthread_mutex_unlock(&s->lock);
  int ret = 0;
  if (!connected) {
    /* A half-dead connection (the engine saw no error yet) goes first. */
    sbr__sender_disconnect_engine_locked(s);
    ret = sbr__sender_connect_locked(s, errbuf, errlen);
    if (ret == 0) {
      pthread_mutex_lock(&s->lock);
      s->stats.reconnects++;
      pthread_cond_broadcast(&s->work_cond);
      pthread_mutex_unlock(&s->lock);
    }
  }
  pthread_mutex_unlock(&s->engine_lock);
  return ret;
}

int sbr__sender_test_fail_qp(struct sbr_sender *s)
{
  /* engine_lock keeps s->conn from being closed meanwhile. */
  pthread_mutex_lock(&s->engine_lock);
  int ret = s->conn ? s->ops->test_fail(s->conn) : -ENOTCONN;
  pthread_mutex_unlock(&s->engine_lock);
  return ret;
}
