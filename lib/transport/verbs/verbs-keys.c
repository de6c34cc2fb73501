/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* verbs-keys.c - a lane's keys: type-2 memory windows (verbs-keys.h). */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "util/log.h"
#include "transport/verbs/verbs-caps.h"
#include "transport/verbs/verbs-keys.h"

bool sbr__verbs_windows_disabled;
int sbr__verbs_window_binds_to_fail;
int sbr__verbs_window_binds_to_time_out;

bool sbr__verbs_windows_supported(struct ibv_context *ctx)
{
  struct ibv_device_attr attr;
  if (sbr__verbs_windows_disabled || !ctx || ibv_query_device(ctx, &attr))
    return false;
  return sbr__verbs_windows_usable(ctx->device->transport_type,
                                   attr.device_cap_flags, attr.max_mw);
}

bool sbr__verbs_windows_probe(struct ibv_context *ctx)
{
  /* Two windows, as a lane needs; freed at once.  A PD of its own, so the
   * probe touches nothing of a lane. */
  struct ibv_pd *pd = ibv_alloc_pd(ctx);
  if (!pd)
    return false;
  struct ibv_mw *mw[2] = {NULL, NULL};
  bool ok = true;
  for (int i = 0; i < 2 && ok; i++) {
    mw[i] = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
    ok = mw[i] != NULL;
  }
  if (!ok)
    SBR_INFO("verbs: %s advertises type-2 memory windows but cannot "
             "allocate one (%s): memory regions instead",
             ibv_get_device_name(ctx->device), strerror(errno));
  for (int i = 0; i < 2; i++)
    if (mw[i])
      ibv_dealloc_mw(mw[i]);
  ibv_dealloc_pd(pd);
  return ok;
}

int sbr__verbs_window_mr_access(void)
{
  /* Verbs wants LOCAL_WRITE under a window that grants REMOTE_WRITE
   * (IBTA C10-75); the READ and WRITE rights are the window's alone.
   * Never relaxed ordering (rule 1). */
  return IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;
}

int sbr__verbs_qp_to_rts(struct rdma_cm_id *id, uint8_t init_depth)
{
  struct ibv_qp_attr attr;
  int mask;

  memset(&attr, 0, sizeof attr);
  attr.qp_state = IBV_QPS_RTR;
  if (rdma_init_qp_attr(id, &attr, &mask))
    return errno > 0 ? -errno : -EIO;
  /* librdmacm's own workaround (ucma_modify_qp_rtr): on InfiniBand the
   * kernel reports RoCE-only mask bits that ibv_modify_qp refuses. */
  struct ibv_port_attr port;
  if (ibv_query_port(id->verbs, id->port_num, &port) == 0 &&
      port.link_layer == IBV_LINK_LAYER_INFINIBAND)
    mask &= (int)(UINT_MAX ^ 0xe00000u);
  /* rdma_accept's RDMA_MAX_RESP_RES: what the sender asked for, clipped
   * to the device; the REP will say the same. */
  struct ibv_device_attr dev;
  if (ibv_query_device(id->verbs, &dev) == 0 &&
      attr.max_dest_rd_atomic > dev.max_qp_rd_atom)
    attr.max_dest_rd_atomic = (uint8_t)dev.max_qp_rd_atom;
  int ret = ibv_modify_qp(id->qp, &attr, mask);
  if (ret)
    return ret > 0 ? -ret : -EIO;

  memset(&attr, 0, sizeof attr);
  attr.qp_state = IBV_QPS_RTS;
  if (rdma_init_qp_attr(id, &attr, &mask))
    return errno > 0 ? -errno : -EIO;
  attr.max_rd_atomic = init_depth;
  ret = ibv_modify_qp(id->qp, &attr, mask);
  return ret ? (ret > 0 ? -ret : -EIO) : 0;
}

/* A key byte nobody can predict from the previous ones (the rest of an
 * rkey is the driver's window index).  getrandom without GRND_RANDOM never
 * blocks once the pool is ready, which it is long before a lane opens;
 * if it can't answer, the driver's next key will do. */
static uint8_t key_byte(uint32_t old_rkey)
{
  uint8_t b;
  if (getrandom(&b, 1, GRND_NONBLOCK) != 1)
    return (uint8_t)(old_rkey + 1);
  return b;
}

static uint64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int sbr__verbs_bind_window(struct ibv_qp *qp, struct ibv_cq *send_cq,
                           struct ibv_mr *mr, unsigned int access,
                           int timeout_ms, struct ibv_mw **out, uint32_t *rkey)
{
  if (sbr__verbs_window_binds_to_fail > 0) {
    sbr__verbs_window_binds_to_fail--;
    return -EOPNOTSUPP;
  }
  if (sbr__verbs_window_binds_to_time_out > 0) {
    sbr__verbs_window_binds_to_time_out--;
    return -ETIMEDOUT; /* nothing allocated: *mw stays NULL */
  }
  struct ibv_mw *mw = ibv_alloc_mw(mr->pd, IBV_MW_TYPE_2);
  if (!mw)
    return errno > 0 ? -errno : -ENOMEM;
  uint32_t key = (mw->rkey & ~0xffu) | key_byte(mw->rkey);
  struct ibv_send_wr wr = {
      .wr_id = (uintptr_t)mw,
      .opcode = IBV_WR_BIND_MW,
      .send_flags = IBV_SEND_SIGNALED,
      .bind_mw =
          {
              .mw = mw,
              .rkey = key,
              .bind_info =
                  {
                      .mr = mr,
                      .addr = (uintptr_t)mr->addr,
                      .length = mr->length,
                      .mw_access_flags = access,
                  },
          },
  };
  struct ibv_send_wr *bad = NULL;
  int ret = ibv_post_send(qp, &wr, &bad);
  if (ret) {
    ret = ret > 0 ? -ret : -EIO;
    goto out_dealloc;
  }
  /* The bind is executed by the QP like any send WR; until its completion
   * the window grants nothing.  Nothing else is in flight on this CQ (the
   * lane isn't accepted yet), so the first completion is ours. */
  uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
  struct ibv_wc wc;
  int n;
  while ((n = ibv_poll_cq(send_cq, 1, &wc)) == 0) {
    if (now_ms() >= deadline) {
      /* Still queued: deallocating now would race the QP executing it.
       * The caller keeps the window and deallocates it once the QP is in
       * error (the bind flushed). */
      SBR_WARN("verbs: the memory window bind did not complete in %d ms",
               timeout_ms);
      *out = mw;
      return -ETIMEDOUT;
    }
    struct timespec ts = {0, 100000}; /* 0.1 ms: a bind is local work */
    nanosleep(&ts, NULL);
  }
  if (n < 0) {
    ret = -EIO;
    goto out_dealloc;
  }
  if (wc.status != IBV_WC_SUCCESS) {
    SBR_WARN("verbs: memory window bind failed: %s (status %d, vendor_err "
             "0x%x)",
             ibv_wc_status_str(wc.status), (int)wc.status, wc.vendor_err);
    ret = -EIO;
    goto out_dealloc;
  }
  /* The new key is the WR's (libibverbs updates mw->rkey only in
   * ibv_bind_mw, the type-1 path). */
  mw->rkey = key;
  *out = mw;
  *rkey = key;
  return 0;

out_dealloc:
  ibv_dealloc_mw(mw);
  return ret;
}

int sbr__verbs_accept_ready(struct rdma_cm_id *id,
                            struct rdma_conn_param *param)
{
  /* The QP stays the id's for everything else (rdma_disconnect moves it
   * to error, rdma_destroy_qp destroys it); only this call must not see
   * it.  The receiver's thread is the only one using the id here. */
  struct ibv_qp *qp = id->qp;
  param->qp_num = qp->qp_num;
  param->srq = 0;
  id->qp = NULL;
  int ret = rdma_accept(id, param);
  int saved = errno;
  id->qp = qp;
  errno = saved;
  return ret;
}
