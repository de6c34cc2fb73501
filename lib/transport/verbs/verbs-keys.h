/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * verbs-keys.h - the keys a receiver's lane hands its sender (verbs back
 * end): type-2 memory windows bound to the lane's QP where the device has
 * them, the lane's MRs otherwise.
 *
 * Why windows: an MR's rkey is honoured for any QP in the MR's protection
 * domain; a type-2 window's only for the one QP it is bound to (IBTA
 * o10-37.2.x), and its key byte is ours to choose at each bind.  Each lane
 * already has its own PD, so with MRs a leaked or guessed rkey works on
 * that lane's QP only too; a window adds that the key is bound to the QP
 * itself (the IB spec's own guarantee, not our one-QP-per-PD layout), and
 * a random key byte instead of the driver's counter (rxe: an 8-bit LFSR,
 * about 15 distinct values in ReDMArk's measure).
 *
 * The order rdma_cm allows: a type-2 bind is a send work request, so the
 * QP must be in RTS; the sender must have the keys in the accept's private
 * data (the REP).  The IB CM's passive side may move its QP to RTR and RTS
 * before sending the REP (librdmacm's rdma_accept does exactly that, then
 * sends the REP), so: create the QP, take it to RTR and RTS ourselves with
 * rdma_init_qp_attr, bind the windows and wait for their completions, then
 * rdma_accept.  rdma_accept would try INIT -> RTR -> RTS again on an id
 * with a QP (and fail: RTS -> INIT is no transition); with no QP on the id
 * it leaves the QP alone and sends conn_param.qp_num in the REP, the path
 * librdmacm documents for QPs it did not create.  sbr__verbs_accept_ready
 * takes that path for the one call.  No remote access is possible before
 * the REP: the sender learns the QP number and keys from it.
 *
 * Threads: the receiver's thread, inside accept.
 */
#ifndef SBR_VERBS_KEYS_H
#define SBR_VERBS_KEYS_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

/* Tests only: pretend no device has type-2 windows (the MR fallback). */
extern bool sbr__verbs_windows_disabled;
/* Tests only: the next this many binds fail as if the device refused them
 * (the listener's fall back to MRs after a failed windowed accept). */
extern int sbr__verbs_window_binds_to_fail;
/* Tests only: the next this many binds time out (never complete). */
extern int sbr__verbs_window_binds_to_time_out;

/* Does the device bind type-2 memory windows (IBV_DEVICE_MEM_WINDOW_TYPE_2A
 * or _2B; we bind whole MRs, which either allows) and have two to spare,
 * and is it not iWARP (sbr__verbs_windows_usable)? */
bool sbr__verbs_windows_supported(struct ibv_context *ctx);
/* Can two type-2 windows really be allocated on it (some providers
 * advertise what they can't allocate)?  Allocates and frees them. */
bool sbr__verbs_windows_probe(struct ibv_context *ctx);

/* Access flags for a lane MR whose remote access a window grants: local
 * write and MW bind, no remote access on the MR itself. */
int sbr__verbs_window_mr_access(void);

/* Moves the id's QP (INIT, from rdma_create_qp) to RTR and RTS with the
 * connection's attributes, as rdma_accept would: responder resources from
 * the request, initiator depth init_depth.  0 or -errno. */
int sbr__verbs_qp_to_rts(struct rdma_cm_id *id, uint8_t init_depth);

/* Allocates a type-2 window in the MR's PD and binds it to the whole MR
 * on qp with access (IBV_ACCESS_REMOTE_*), with a random key byte; waits
 * (at most timeout_ms) for the bind's completion on send_cq, which must
 * have nothing else in flight.  0 and *mw, *rkey; -errno with nothing
 * left allocated (a failed bind also puts the QP in error), except
 * -ETIMEDOUT: *mw is set, to be deallocated once the QP is in error. */
int sbr__verbs_bind_window(struct ibv_qp *qp, struct ibv_cq *send_cq,
                           struct ibv_mr *mr, unsigned int access,
                           int timeout_ms, struct ibv_mw **mw, uint32_t *rkey);

/* rdma_accept for an id whose QP is in RTS already (see above).  Returns
 * what rdma_accept returns. */
int sbr__verbs_accept_ready(struct rdma_cm_id *id,
                            struct rdma_conn_param *param);

#endif
