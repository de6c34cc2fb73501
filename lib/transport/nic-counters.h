/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * nic-counters.h - the NIC's own error counters, read from sysfs
 * (<root>/<device>/ports/<port>/hw_counters/<name>, root normally
 * /sys/class/infiniband).
 *
 * Which counters: the receiver is the responder of its senders' WRITEs and
 * READs, so the one that counts a rogue's bad rkey, bad address or bad
 * access right is the responder's remote-access-error count.  Names differ
 * per driver; the table in nic-counters.c lists the ones we know (mlx5:
 * resp_remote_access_errors).  rxe (Linux 6.1) has none: its hw_counters
 * are ack_deferred, completer_retry_err, duplicate_request, lifespan,
 * link_downed, out_of_seq_request, rcvd_pkts, rcvd_rnr_err, rcvd_seq_err,
 * rdma_recvs, rdma_sends, retry_exceeded_err, retry_rnr_exceeded_err,
 * send_err, send_rnr_err, sent_pkts, and none of them moves on a remote
 * access error (measured in the Soft-RoCE VM).
 *
 * The counters are the NIC port's, all processes together, since the
 * driver loaded.  No GLib, no verbs: plain files.
 */
#ifndef SBR_NIC_COUNTERS_H
#define SBR_NIC_COUNTERS_H

#include <stdint.h>

#define SBR__SYSFS_INFINIBAND "/sys/class/infiniband"

/* Tests only: where the device directories are (default above). */
extern const char *sbr__nic_sysfs_root;

/* The port's remote-access-error count as its driver names it: 0 and
 * *value, -ENOENT when the port has no counter we know, -errno. */
int sbr__nic_remote_access_errors(const char *device, unsigned port,
                                  uint64_t *value);

#endif
