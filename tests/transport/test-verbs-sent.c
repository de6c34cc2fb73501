/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* test-verbs-sent.c - the verbs back end's ring of send WRs in flight
 * (lib/transport/verbs/verbs-sent.h), fed completions in post order (IB,
 * RoCE) and in siw's order (a READ completes after the WRITEs posted after
 * it), without a device.
 */
#include <stdbool.h>

#include "transport/transport.h"
#include "transport/verbs/verbs-sent.h"
#include "test.h"

#define CAP 8
#define READ_ID UINT64_MAX /* as the status-byte engine's status READ */

struct ring {
  struct verbs_sent sent[CAP];
  uint32_t head;
  uint32_t count;
};

/* As verbs-datapath.c's sent_push. */
static void push(struct ring *r, uint64_t wr_id, enum sbr__opcode op,
                 bool signaled)
{
  ASSERT(r->count < CAP);
  r->sent[(r->head + r->count) % CAP] = (struct verbs_sent){
      .wr_id = wr_id, .opcode = (uint8_t)op, .signaled = signaled};
  r->count++;
}

/* One status-byte run: an unsignaled data WRITE, then the signaled status
 * WRITE, both named by the run's wr_id. */
static void push_run(struct ring *r, uint64_t wr_id)
{
  push(r, wr_id, SBR__OP_WRITE, false);
  push(r, wr_id, SBR__OP_WRITE, true);
}

/* Retires a completion that must be found; returns its opcode. */
static enum sbr__opcode complete(struct ring *r, uint64_t wr_id, bool success)
{
  uint8_t op = 0xff;
  bool found =
      verbs_sent_retire(r->sent, CAP, &r->head, &r->count, wr_id, success, &op);
  ASSERT_MSG(found, "completion for wr_id %llu not in flight",
             (unsigned long long)wr_id);
  return (enum sbr__opcode)op;
}

static void in_order_is_a_fifo(void)
{
  struct ring r = {.head = 6}; /* wraps */
  push(&r, READ_ID, SBR__OP_READ, true);
  push_run(&r, 1);
  push_run(&r, 2);
  ASSERT_EQ(complete(&r, READ_ID, true), SBR__OP_READ);
  ASSERT_EQ(r.count, 4);
  ASSERT_EQ(r.head, 7);
  ASSERT_EQ(complete(&r, 1, true), SBR__OP_WRITE);
  ASSERT_EQ(r.count, 2);
  ASSERT_EQ(r.head, 1);
  ASSERT_EQ(complete(&r, 2, true), SBR__OP_WRITE);
  ASSERT_EQ(r.count, 0);
  ASSERT_EQ(r.head, 3);
}

/* siw: the run posted after the READ completes first.  The READ keeps its
 * entry (its completion is found, as a READ) and its slot. */
static void write_completing_before_a_read_leaves_it_in_flight(void)
{
  struct ring r = {0};
  push_run(&r, 1);
  push(&r, READ_ID, SBR__OP_READ, true);
  push_run(&r, 2);
  ASSERT_EQ(complete(&r, 1, true), SBR__OP_WRITE);
  ASSERT_EQ(r.count, 3);
  ASSERT_EQ(complete(&r, 2, true), SBR__OP_WRITE);
  ASSERT_EQ(r.count, 1); /* the READ's slot, still taken */
  ASSERT_EQ(CAP - r.count, CAP - 1);
  ASSERT_EQ(complete(&r, READ_ID, true), SBR__OP_READ);
  ASSERT_EQ(r.count, 0);
  /* Posting goes on from where the ring stands. */
  push_run(&r, 3);
  ASSERT_EQ(complete(&r, 3, true), SBR__OP_WRITE);
  ASSERT_EQ(r.count, 0);
}

/* Two READs in flight, runs between and after them, across the ring's
 * wrap; the runs complete first, then the READs in their order. */
static void reads_keep_their_order_across_the_wrap(void)
{
  struct ring r = {.head = 5};
  push(&r, 100, SBR__OP_READ, true); /* slot 5 */
  push_run(&r, 1);                   /* 6, 7 */
  push(&r, 101, SBR__OP_READ, true); /* 0 */
  push_run(&r, 2);                   /* 1, 2 */
  ASSERT_EQ(r.count, 6);
  ASSERT_EQ(complete(&r, 2, true), SBR__OP_WRITE);
  /* Run 1 completed with it (unsignaled data before a later completion;
   * its own signaled status WRITE is still to come, so it stays). */
  ASSERT_EQ(r.count, 3);
  ASSERT_EQ(complete(&r, 1, true), SBR__OP_WRITE);
  ASSERT_EQ(r.count, 2);
  ASSERT_EQ(r.sent[r.head].wr_id, 100);
  ASSERT_EQ(r.sent[(r.head + 1) % CAP].wr_id, 101);
  ASSERT_EQ(complete(&r, 100, true), SBR__OP_READ);
  ASSERT_EQ(complete(&r, 101, true), SBR__OP_READ);
  ASSERT_EQ(r.count, 0);
}

/* The queue is full while a READ is outstanding even if every WRITE after
 * it completed: the READ's slot is counted until its own completion. */
static void a_full_queue_counts_the_outstanding_read(void)
{
  struct ring r = {.head = 3};
  push(&r, READ_ID, SBR__OP_READ, true);
  for (uint64_t id = 1; id <= 3; id++)
    push_run(&r, id);
  ASSERT_EQ(r.count, 7);
  ASSERT_EQ(complete(&r, 3, true), SBR__OP_WRITE);
  ASSERT_EQ(r.count, 3); /* READ plus runs 1 and 2's status WRITEs */
  ASSERT_EQ(complete(&r, 1, true), SBR__OP_WRITE);
  ASSERT_EQ(complete(&r, 2, true), SBR__OP_WRITE);
  ASSERT_EQ(r.count, 1);
  for (uint64_t id = 4; id < 4 + (CAP - 1) / 2; id++)
    push_run(&r, id);
  push(&r, 99, SBR__OP_WRITE, true);
  ASSERT_EQ(r.count, CAP); /* exactly full, not one over */
  ASSERT_EQ(complete(&r, READ_ID, true), SBR__OP_READ);
  ASSERT_EQ(r.count, CAP - 1);
}

/* A disconnect with a READ outstanding: the WRITEs behind it flush first
 * (each its own completion, unsignaled ones too), then the READ. */
static void flushes_behind_an_outstanding_read(void)
{
  struct ring r = {0};
  push(&r, READ_ID, SBR__OP_READ, true);
  push_run(&r, 1);
  ASSERT_EQ(complete(&r, 1, false), SBR__OP_WRITE); /* the data WRITE */
  ASSERT_EQ(r.count, 2);
  ASSERT_EQ(complete(&r, 1, false), SBR__OP_WRITE); /* the status WRITE */
  ASSERT_EQ(r.count, 1);
  ASSERT_EQ(complete(&r, READ_ID, false), SBR__OP_READ);
  ASSERT_EQ(r.count, 0);
}

static void an_unknown_completion_leaves_the_ring_alone(void)
{
  struct ring r = {.head = 2};
  push(&r, READ_ID, SBR__OP_READ, true);
  push_run(&r, 1);
  uint8_t op = 0;
  ASSERT(!verbs_sent_retire(r.sent, CAP, &r.head, &r.count, 7, true, &op));
  /* A success names a signaled WR: the unsignaled data WRITE of run 1
   * alone is no match either. */
  r.sent[(r.head + 2) % CAP].wr_id = 9;
  ASSERT(!verbs_sent_retire(r.sent, CAP, &r.head, &r.count, 1, true, &op));
  ASSERT_EQ(r.count, 3);
  ASSERT_EQ(r.head, 2);
}

int main(int argc, char **argv)
{
  static const struct test_entry tests[] = {
      {"in_order_is_a_fifo", in_order_is_a_fifo, ANY_BACKEND},
      {"write_completing_before_a_read_leaves_it_in_flight",
       write_completing_before_a_read_leaves_it_in_flight, ANY_BACKEND},
      {"reads_keep_their_order_across_the_wrap",
       reads_keep_their_order_across_the_wrap, ANY_BACKEND},
      {"a_full_queue_counts_the_outstanding_read",
       a_full_queue_counts_the_outstanding_read, ANY_BACKEND},
      {"flushes_behind_an_outstanding_read", flushes_behind_an_outstanding_read,
       ANY_BACKEND},
      {"an_unknown_completion_leaves_the_ring_alone",
       an_unknown_completion_leaves_the_ring_alone, ANY_BACKEND},
      {NULL, NULL, ANY_BACKEND},
  };
  return test_main(tests, argc, argv);
}
