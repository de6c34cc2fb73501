/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-verbs-async.c - what the verbs back end does with each of a
 * device's async events (lib/transport/verbs/verbs-async.h), and the
 * receiver's list of lanes an event marks, on any host: the mapping is a
 * pure function, and the list needs no device.  The events themselves are
 * read in the Soft-RoCE VM (tests/engine/test-accept.c).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "test.h"
#include "transport/verbs/verbs-async.h"
#include "transport/verbs/verbs-internal.h"

static void qp_and_cq_errors_end_the_connection(void)
{
  ASSERT_EQ(sbr__verbs_async_action(IBV_EVENT_QP_FATAL),
            SBR__VERBS_ASYNC_CONN_FAILED);
  ASSERT_EQ(sbr__verbs_async_action(IBV_EVENT_QP_REQ_ERR),
            SBR__VERBS_ASYNC_CONN_FAILED);
  ASSERT_EQ(sbr__verbs_async_action(IBV_EVENT_QP_ACCESS_ERR),
            SBR__VERBS_ASYNC_CONN_FAILED);
  ASSERT_EQ(sbr__verbs_async_action(IBV_EVENT_CQ_ERR),
            SBR__VERBS_ASYNC_CONN_FAILED);
}

static void port_events_are_logged(void)
{
  ASSERT_EQ(sbr__verbs_async_action(IBV_EVENT_PORT_ERR), SBR__VERBS_ASYNC_PORT);
  ASSERT_EQ(sbr__verbs_async_action(IBV_EVENT_PORT_ACTIVE),
            SBR__VERBS_ASYNC_PORT);
  ASSERT_EQ(sbr__verbs_async_action(IBV_EVENT_LID_CHANGE),
            SBR__VERBS_ASYNC_PORT);
  ASSERT_EQ(sbr__verbs_async_action(IBV_EVENT_GID_CHANGE),
            SBR__VERBS_ASYNC_PORT);
}

static void device_fatal_and_comm_est(void)
{
  ASSERT_EQ(sbr__verbs_async_action(IBV_EVENT_DEVICE_FATAL),
            SBR__VERBS_ASYNC_DEVICE_FATAL);
  ASSERT_EQ(sbr__verbs_async_action(IBV_EVENT_COMM_EST),
            SBR__VERBS_ASYNC_COMM_EST);
}

static void the_rest_changes_nothing(void)
{
  static const enum ibv_event_type rest[] = {
      IBV_EVENT_PATH_MIG,          IBV_EVENT_PATH_MIG_ERR,
      IBV_EVENT_SQ_DRAINED,        IBV_EVENT_SRQ_ERR,
      IBV_EVENT_SRQ_LIMIT_REACHED, IBV_EVENT_QP_LAST_WQE_REACHED,
      IBV_EVENT_PKEY_CHANGE,       IBV_EVENT_SM_CHANGE,
      IBV_EVENT_CLIENT_REREGISTER, IBV_EVENT_WQ_FATAL,
  };
  for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++)
    ASSERT_EQ(sbr__verbs_async_action(rest[i]), SBR__VERBS_ASYNC_NOTHING);
}

/* A marked lane is reported once; a closing one or one rdma_cm already
 * reported is not; one taken out of the list is not. */
static void marked_lanes_are_reported_once(void)
{
  struct sbr__listener *l = calloc(1, sizeof *l);
  struct sbr__conn *c = calloc(4, sizeof *c);
  ASSERT(l && c);
  pthread_mutex_init(&l->lanes_lock, NULL);
  for (int i = 0; i < 4; i++) {
    c[i].listener = l;
    sbr__verbs_lanes_add(l, &c[i]);
  }
  ASSERT(sbr__verbs_lanes_take_failed(l) == NULL);

  atomic_store(&c[0].async_failed, true);
  atomic_store(&c[0].closing, true); /* its owner closes it anyway */
  atomic_store(&c[1].async_failed, true);
  atomic_store(&c[1].disconnected, true); /* rdma_cm said it first */
  atomic_store(&c[2].async_failed, true);
  atomic_store(&c[3].async_failed, true);
  sbr__verbs_lanes_remove(l, &c[3]); /* being freed */

  ASSERT(sbr__verbs_lanes_take_failed(l) == &c[2]);
  ASSERT(atomic_load(&c[2].disconnected));
  ASSERT(sbr__verbs_lanes_take_failed(l) == NULL);
  for (int i = 0; i < 3; i++)
    sbr__verbs_lanes_remove(l, &c[i]);
  ASSERT(l->lanes == NULL);
  pthread_mutex_destroy(&l->lanes_lock);
  free(c);
  free(l);
}

static bool watched(struct sbr__listener *l, const struct ibv_context *ctx)
{
  unsigned seen = 0;
  for (unsigned i = 0; i < l->watched.n; i++)
    seen += l->watched.v[i] == ctx;
  ASSERT_MSG(seen <= 1, "a context watched %u times", seen);
  return seen == 1;
}

/* A wildcard listener's lanes may be on every device of the host (ten
 * or more on GPU servers, more with SR-IOV functions): the async fds of
 * all of them are watched, each once and made non-blocking.  There were
 * 8 slots: lanes on a ninth device had their events unread.  A device
 * given up on stays out while used; one nothing uses is forgotten. */
static void every_device_of_the_lanes_is_watched(void)
{
  enum { N = 12 };
  struct sbr__listener *l = calloc(1, sizeof *l);
  struct ibv_device *dev = calloc(N, sizeof *dev);
  struct ibv_context *ctx = calloc(N, sizeof *ctx);
  struct rdma_cm_id *id = calloc(2 * N, sizeof *id);
  struct sbr__conn *c = calloc(2 * N, sizeof *c);
  ASSERT(l && dev && ctx && id && c);
  pthread_mutex_init(&l->lanes_lock, NULL);
  int fds[N][2];
  for (int i = 0; i < N; i++) {
    ASSERT(pipe(fds[i]) == 0);
    snprintf(dev[i].name, sizeof dev[i].name, "fake%d", i);
    ctx[i].device = &dev[i];
    ctx[i].async_fd = fds[i][0];
  }
  /* Two lanes per device. */
  for (int i = 0; i < 2 * N; i++) {
    id[i].verbs = &ctx[i % N];
    c[i].id = &id[i];
    c[i].listener = l;
    sbr__verbs_lanes_add(l, &c[i]);
  }

  ASSERT_EQ(sbr__verbs_listener_watched(l), N);
  for (int i = 0; i < N; i++) {
    ASSERT_MSG(watched(l, &ctx[i]), "device %d not watched", i);
    ASSERT(fcntl(fds[i][0], F_GETFL) & O_NONBLOCK);
  }

  sbr__verbs_listener_unwatch(l, &ctx[3]); /* its fd failed */
  ASSERT_EQ(sbr__verbs_listener_watched(l), N - 1);
  ASSERT(!watched(l, &ctx[3]));
  sbr__verbs_lanes_remove(l, &c[5]);
  sbr__verbs_lanes_remove(l, &c[5 + N]);
  ASSERT_EQ(sbr__verbs_listener_watched(l), N - 2);
  ASSERT(!watched(l, &ctx[5]));
  /* Device 3's lanes go too: forgotten, so a new device that gets its
   * context's address is watched. */
  sbr__verbs_lanes_remove(l, &c[3]);
  sbr__verbs_lanes_remove(l, &c[3 + N]);
  ASSERT_EQ(sbr__verbs_listener_watched(l), N - 2);
  ASSERT_EQ(l->dead.n, 0);
  sbr__verbs_lanes_add(l, &c[3]);
  ASSERT_EQ(sbr__verbs_listener_watched(l), N - 1);
  ASSERT(watched(l, &ctx[3]));

  for (int i = 0; i < 2 * N; i++)
    if (i != 5 && i != 5 + N && i != 3 + N)
      sbr__verbs_lanes_remove(l, &c[i]);
  ASSERT(l->lanes == NULL);
  sbr__verbs_listener_watch_free(l);
  for (int i = 0; i < N; i++) {
    close(fds[i][0]);
    close(fds[i][1]);
  }
  pthread_mutex_destroy(&l->lanes_lock);
  free(c);
  free(id);
  free(ctx);
  free(dev);
  free(l);
}

int main(int argc, char **argv)
{
  static const struct test_entry tests[] = {
      {"qp_and_cq_errors_end_the_connection",
       qp_and_cq_errors_end_the_connection, ANY_BACKEND},
      {"port_events_are_logged", port_events_are_logged, ANY_BACKEND},
      {"device_fatal_and_comm_est", device_fatal_and_comm_est, ANY_BACKEND},
      {"the_rest_changes_nothing", the_rest_changes_nothing, ANY_BACKEND},
      {"marked_lanes_are_reported_once", marked_lanes_are_reported_once,
       ANY_BACKEND},
      {"every_device_of_the_lanes_is_watched",
       every_device_of_the_lanes_is_watched, ANY_BACKEND},
      {NULL, NULL, ANY_BACKEND},
  };
  return test_main(tests, argc, argv);
}
