/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engine-fixture.h - sender + receiver in one process over the shm back end.
 *
 * The receiver accepts on a thread of its own, but its receive thread
 * (whoever calls sbr_receiver_next) takes the new lane in, and calls
 * on_lane / on_refusal, so connecting runs on a helper thread while the
 * test thread pumps the receiver.
 */
#ifndef SBR_ENGINE_FIXTURE_H
#define SBR_ENGINE_FIXTURE_H

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "engine/sender-internal.h"
#include "sbr-testing.h"
#include "wire/private-data.h"
#include "test.h"

static inline uint16_t fixture_port(void)
{
  /* Unique per process and per call: tests may run in parallel. */
  static uint16_t n;
  return (uint16_t)(20000 + (getpid() % 2000) * 8 + (n++ % 8));
}

static inline void fixture_receiver_config(struct sbr_receiver_config *cfg,
                                           uint16_t port, uint32_t blocks,
                                           uint32_t block_size)
{
  sbr_receiver_config_init(cfg);
  cfg->backend = SBR_BACKEND_SHM;
  cfg->port = port;
  cfg->block_count = blocks;
  cfg->block_size = block_size;
}

static inline void fixture_sender_config(struct sbr_sender_config *cfg,
                                         uint16_t port)
{
  sbr_sender_config_init(cfg);
  cfg->backend = SBR_BACKEND_SHM;
  cfg->port = port;
  /* A hang bound: on a loaded host the handshake's few round trips can
   * take seconds (3 s was seen to run out at 1-2% of a CPU). */
  cfg->connect_timeout_ms = 10000;
}

struct connect_job {
  const struct sbr_sender_config *cfg;
  const struct sbr__sender_knobs *knobs; /* NULL: none */
  sbr_sender *sender;
  int ret;
  char err[256];
  volatile int done;
};

static inline void *connect_thread(void *arg)
{
  struct connect_job *j = arg;
  j->ret = sbr__sender_new_knobs(j->cfg, j->knobs, &j->sender, j->err,
                                 sizeof j->err);
  __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* receiver.c (test only): the accept thread is handling an event. */
bool sbr__receiver_accept_busy(sbr_receiver *r);

/* After a sender heard its answer: waits until the accept thread has
 * queued what it did, then lets the receive thread take it in (the new
 * lane, on_lane, on_refusal), so the test sees the receiver as the sender
 * does.  Thread pumping r only. */
static inline void fixture_settle(sbr_receiver *r)
{
  while (sbr__receiver_accept_busy(r))
    usleep(1000);
  sbr_block *b;
  if (sbr_receiver_next(r, 0, &b) == 0)
    FAIL("a block arrived before any sender connected");
}

/* Connects a sender with knobs (NULL: none, as sbr_sender_new) while
 * pumping r; returns the sender's result. */
static inline int fixture_connect_knobs(sbr_receiver *r,
                                        const struct sbr_sender_config *cfg,
                                        const struct sbr__sender_knobs *knobs,
                                        sbr_sender **out, char *err,
                                        size_t errlen)
{
  struct connect_job j = {.cfg = cfg, .knobs = knobs};
  pthread_t t;
  ASSERT(pthread_create(&t, NULL, connect_thread, &j) == 0);
  while (!__atomic_load_n(&j.done, __ATOMIC_ACQUIRE)) {
    sbr_block *b;
    if (sbr_receiver_next(r, 5, &b) == 0)
      FAIL("a block arrived before any sender connected");
  }
  pthread_join(t, NULL);
  fixture_settle(r);
  if (err)
    snprintf(err, errlen, "%s", j.err);
  *out = j.sender;
  return j.ret;
}

static inline int fixture_connect(sbr_receiver *r,
                                  const struct sbr_sender_config *cfg,
                                  sbr_sender **out, char *err, size_t errlen)
{
  return fixture_connect_knobs(r, cfg, NULL, out, err, errlen);
}

/* A receiver with cfg, or the test fails saying why. */
static inline sbr_receiver *
fixture_receiver_new(const struct sbr_receiver_config *cfg)
{
  sbr_receiver *r = NULL;
  char err[256];
  int ret = sbr_receiver_new(cfg, &r, err, sizeof err);
  ASSERT_MSG(ret == 0, "receiver on port %u: %d %s", cfg->port, ret, err);
  return r;
}

/* The usual receiver: fixture_receiver_config's, blocks x block_size. */
static inline sbr_receiver *fixture_receiver(uint16_t port, uint32_t blocks,
                                             uint32_t block_size)
{
  struct sbr_receiver_config rc;
  fixture_receiver_config(&rc, port, blocks, block_size);
  return fixture_receiver_new(&rc);
}

static inline sbr_sender *
fixture_sender_knobs(sbr_receiver *r, const struct sbr_sender_config *cfg,
                     const struct sbr__sender_knobs *knobs)
{
  sbr_sender *s = NULL;
  char err[256];
  int ret = fixture_connect_knobs(r, cfg, knobs, &s, err, sizeof err);
  ASSERT_MSG(ret == 0, "sender could not connect: %d %s", ret, err);
  return s;
}

static inline sbr_sender *fixture_sender(sbr_receiver *r,
                                         const struct sbr_sender_config *cfg)
{
  return fixture_sender_knobs(r, cfg, NULL);
}

/* Lanes accepted from now on take spanning blocks (the default) or, like
 * a receiver that predates them, only fragments: for the tests of
 * fragments. */
static inline void fixture_spans(bool on)
{
  if (on)
    atomic_fetch_or(&sbr__receiver_features, SBR__FEATURE_SPAN);
  else
    atomic_fetch_and(&sbr__receiver_features, ~SBR__FEATURE_SPAN);
}

/* Deterministic payload byte for (device, frame, offset). */
static inline uint8_t fixture_byte(unsigned device, unsigned frame,
                                   size_t offset)
{
  return (uint8_t)(device * 31u + frame * 7u + offset * 13u + (offset >> 8));
}

static inline void fixture_fill(uint8_t *p, size_t len, unsigned device,
                                unsigned frame)
{
  for (size_t i = 0; i < len; i++)
    p[i] = fixture_byte(device, frame, i);
}

/* Sends one frame: pts = frame * 40 ms, pattern payload. */
static inline int fixture_send(sbr_sender *s, unsigned device, unsigned frame,
                               size_t len)
{
  uint8_t *p = malloc(len ? len : 1);
  fixture_fill(p, len, device, frame);
  struct sbr_block_meta m;
  sbr_block_meta_init(&m, (uint8_t)device);
  m.pts = (uint64_t)frame * 40000000u;
  int ret = sbr_sender_send(s, &m, p, len);
  free(p);
  return ret;
}

/* Frame number and pattern check of a received frame. */
static inline unsigned fixture_check_frame(const struct sbr_frame *f)
{
  unsigned frame = (unsigned)(f->info.pts / 40000000u);
  uint32_t off = 0;
  if (f->copy) {
    for (uint32_t i = 0; i < f->size; i++)
      ASSERT_MSG(f->copy[i] == fixture_byte(f->info.device, frame, i),
                 "device %u frame %u byte %u wrong (copied frame)",
                 f->info.device, frame, i);
    return frame;
  }
  for (uint32_t k = 0; k < f->n_blocks; k++) {
    const struct sbr_block_info *bi = sbr_block_get_info(f->blocks[k]);
    ASSERT_EQ(bi->frame_offset, off);
    for (uint32_t i = 0; i < bi->payload_len; i++)
      ASSERT_MSG(bi->payload[i] == fixture_byte(f->info.device, frame, off + i),
                 "device %u frame %u byte %u wrong (fragment %u)",
                 f->info.device, frame, off + i, k);
    off += bi->payload_len;
  }
  ASSERT_EQ(off, f->size);
  return frame;
}

/* A thread inside sbr_receiver_next while a sender reconnects: a receiver
 * accepts only while someone is in there.  No block may arrive meanwhile. */
struct fixture_pump {
  sbr_receiver *r;
  atomic_bool stop;
};

static inline void *fixture_pump_thread(void *arg)
{
  struct fixture_pump *p = arg;
  while (!atomic_load(&p->stop)) {
    sbr_block *b;
    if (sbr_receiver_next(p->r, 5, &b) == 0)
      FAIL("a block arrived while the sender reconnected");
  }
  return NULL;
}

/* After a flush: waits until the sender thread is out of the engine (it
 * sleeps idle on work_cond, engine_lock free), where a producer posts its
 * own frame; a loaded host may take far longer than the usual 20 ms. */
static inline void wait_sender_thread_idle(sbr_sender *s)
{
  usleep(20000);
  for (unsigned ms = 0; ms < 10000; ms++) {
    pthread_mutex_lock(&s->lock);
    bool sleeps = s->engine_sleeps;
    pthread_mutex_unlock(&s->lock);
    if (!sleeps && pthread_mutex_trylock(&s->engine_lock) == 0) {
      pthread_mutex_unlock(&s->engine_lock);
      return;
    }
    usleep(1000);
  }
  FAIL("the sender thread stayed in the engine for 10 s");
}

#endif
