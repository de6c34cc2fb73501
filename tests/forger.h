/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * forger.h - a hand-made sender over the shm back end: it connects with
 * the transport alone and WRITEs whatever block and status bytes a test
 * wants, in the order it wants, as a rogue or a misordering NIC would.
 *
 * The receiver accepts only while someone pumps it: run forger_connect on
 * a thread and call sbr_receiver_next until f.done.
 */
#ifndef SBR_FORGER_H
#define SBR_FORGER_H

#include <pthread.h>
#include <unistd.h>

#include "test.h"
#include "transport/transport.h"

struct forger {
  struct sbr__conn *conn;
  struct sbr__lane_desc lane;
  volatile int done;
  int ret;
  uint16_t port;
};

static inline void *forger_connect(void *arg)
{
  struct forger *f = arg;
  uint8_t priv[SBR__CONNECT_PRIV_SIZE];
  sbr__connect_priv_encode(priv, SBR_MECH_STATUS_BYTE, 0, 0);
  struct sbr__queue_caps caps = {.max_send_wr = 8, .max_inline = 64};
  char err[128];
  f->ret = sbr__transport_shm.connect("127.0.0.1", f->port, NULL, priv,
                                      sizeof priv, &caps, 3000, &f->conn,
                                      &f->lane, err, sizeof err);
  __atomic_store_n(&f->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

static inline void forge_write(struct forger *f, uint8_t *blk, uint32_t len,
                               uint32_t index)
{
  static const uint8_t one = 1;
  struct sbr__wr chain[2] = {
      {.wr_id = 1,
       .opcode = SBR__OP_WRITE,
       .local_addr = blk,
       .length = len,
       .remote_addr =
           f->lane.blocks_addr + (uint64_t)index * f->lane.block_size,
       .rkey = f->lane.blocks_rkey},
      {.wr_id = 2,
       .opcode = SBR__OP_WRITE,
       .local_addr = (void *)&one,
       .length = 1,
       .remote_addr = f->lane.status_addr + index,
       .rkey = f->lane.status_rkey,
       .signaled = true,
       .inline_data = true},
  };
  ASSERT_OK(sbr__transport_shm.post_send(f->conn, chain, 2));
  struct sbr__wc wc;
  int n;
  while ((n = sbr__transport_shm.poll_cq(f->conn, &wc, 1)) == 0)
    usleep(100);
  ASSERT_EQ(n, 1);
  ASSERT_EQ(wc.status, SBR__WC_SUCCESS);
}

static inline uint8_t forge_read_status(struct forger *f, uint32_t index)
{
  uint8_t st[64];
  struct sbr__wr wr = {.wr_id = 3,
                       .opcode = SBR__OP_READ,
                       .local_addr = st,
                       .length = f->lane.block_count,
                       .remote_addr = f->lane.status_addr,
                       .rkey = f->lane.status_rkey,
                       .signaled = true};
  ASSERT_OK(sbr__transport_shm.post_send(f->conn, &wr, 1));
  struct sbr__wc wc;
  int n;
  while ((n = sbr__transport_shm.poll_cq(f->conn, &wc, 1)) == 0)
    usleep(100);
  ASSERT_EQ(wc.status, SBR__WC_SUCCESS);
  return st[index];
}

/* WRITEs status byte `index` alone, as a NIC that places the status
 * WRITE before the data WRITE chained ahead of it would. */
static inline void forge_status(struct forger *f, uint32_t index, uint8_t v)
{
  struct sbr__wr wr = {.wr_id = 4,
                       .opcode = SBR__OP_WRITE,
                       .local_addr = &v,
                       .length = 1,
                       .remote_addr = f->lane.status_addr + index,
                       .rkey = f->lane.status_rkey,
                       .signaled = true,
                       .inline_data = true};
  ASSERT_OK(sbr__transport_shm.post_send(f->conn, &wr, 1));
  struct sbr__wc wc;
  int n;
  while ((n = sbr__transport_shm.poll_cq(f->conn, &wc, 1)) == 0)
    usleep(100);
  ASSERT_EQ(n, 1);
  ASSERT_EQ(wc.status, SBR__WC_SUCCESS);
}

/* Connects f while pumping r (which delivers nothing meanwhile). */
static inline void forger_connect_pumping(struct forger *f, sbr_receiver *r)
{
  pthread_t t;
  ASSERT(pthread_create(&t, NULL, forger_connect, f) == 0);
  sbr_block *b;
  while (!__atomic_load_n(&f->done, __ATOMIC_ACQUIRE))
    ASSERT(sbr_receiver_next(r, 5, &b) == -ETIMEDOUT);
  pthread_join(t, NULL);
  ASSERT_OK(f->ret);
}

#endif
