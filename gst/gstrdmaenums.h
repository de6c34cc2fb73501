/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmaenums.h - the GEnums behind the transport, mechanism and
 * backpressure properties, and their mapping onto libsbr's enums.
 *
 * The GEnum values equal the library's wire-independent enum values, but the
 * conversion goes through explicit functions so a change on either side
 * can't silently reinterpret a property.
 */
#ifndef __GST_RDMA_ENUMS_H__
#define __GST_RDMA_ENUMS_H__

#include <gst/gst.h>
#include <sbr.h>

G_BEGIN_DECLS

/**
 * GstRdmaTransport:
 * @GST_RDMA_TRANSPORT_VERBS: rdma-core (RoCE, InfiniBand, Soft-RoCE)
 * @GST_RDMA_TRANSPORT_SHM: same host, through shared memory (tests, demos)
 */
typedef enum {
  GST_RDMA_TRANSPORT_VERBS = 0,
  GST_RDMA_TRANSPORT_SHM = 1,
} GstRdmaTransport;

/**
 * GstRdmaMechanism:
 * @GST_RDMA_MECHANISM_STATUS_BYTE: one-sided WRITEs plus a status byte
 * @GST_RDMA_MECHANISM_SLIDING_WINDOW: WRITE WITH IMMEDIATE and ACKs (baseline)
 */
typedef enum {
  GST_RDMA_MECHANISM_STATUS_BYTE = 0,
  GST_RDMA_MECHANISM_SLIDING_WINDOW = 1,
} GstRdmaMechanism;

/**
 * GstRdmaBackpressure:
 * @GST_RDMA_BACKPRESSURE_WAIT: wait up to wait-timeout for a free send block
 * @GST_RDMA_BACKPRESSURE_DROP: drop the frame at once
 */
typedef enum {
  GST_RDMA_BACKPRESSURE_WAIT = 0,
  GST_RDMA_BACKPRESSURE_DROP = 1,
} GstRdmaBackpressure;

/**
 * GstRdmaOverBudget:
 * @GST_RDMA_OVER_BUDGET_DROP_OLDEST: drop the device's oldest queued frames
 *   (next buffer DISCONT); copy the new frame when downstream holds the
 *   budget
 * @GST_RDMA_OVER_BUDGET_COPY: copy the new frame out of the lane
 * @GST_RDMA_OVER_BUDGET_PAUSE: tell the device's sender to stop (pause
 *   flag), copy what still arrives
 *
 * What rdmasrc does with a device that occupies its whole share of the
 * lane (see rdmasrc's device-blocks).
 */
typedef enum {
  GST_RDMA_OVER_BUDGET_DROP_OLDEST = 0,
  GST_RDMA_OVER_BUDGET_COPY = 1,
  GST_RDMA_OVER_BUDGET_PAUSE = 2,
} GstRdmaOverBudget;

#define GST_TYPE_RDMA_TRANSPORT (gst_rdma_transport_get_type())
GType gst_rdma_transport_get_type(void);
#define GST_TYPE_RDMA_MECHANISM (gst_rdma_mechanism_get_type())
GType gst_rdma_mechanism_get_type(void);
#define GST_TYPE_RDMA_BACKPRESSURE (gst_rdma_backpressure_get_type())
GType gst_rdma_backpressure_get_type(void);

#define GST_TYPE_RDMA_OVER_BUDGET (gst_rdma_over_budget_get_type())
GType gst_rdma_over_budget_get_type(void);

/**
 * GstRdmaPollMode:
 * @GST_RDMA_POLL_MODE_ADAPTIVE: learn each device's frame period, sleep
 *   until just before its next frame, poll through a short window; back
 *   off for streams that aren't periodic
 * @GST_RDMA_POLL_MODE_BUSY: spin on the status bytes (lowest latency, a
 *   whole core)
 * @GST_RDMA_POLL_MODE_BACKOFF: spin 20 us, then sleep doubling up to 1 ms
 *
 * How rdmasrc's receive thread waits for frames (libsbr's sbr_poll_mode).
 */
typedef enum {
  GST_RDMA_POLL_MODE_ADAPTIVE = 0,
  GST_RDMA_POLL_MODE_BUSY = 1,
  GST_RDMA_POLL_MODE_BACKOFF = 2,
} GstRdmaPollMode;

#define GST_TYPE_RDMA_POLL_MODE (gst_rdma_poll_mode_get_type())
GType gst_rdma_poll_mode_get_type(void);
enum sbr_poll_mode gst_rdma_poll_mode_to_sbr(GstRdmaPollMode mode);

/**
 * GstRdmaTimestampMode:
 * @GST_RDMA_TIMESTAMP_MODE_SKEW: the sender's running time through an
 *   estimate of its clock's rate and offset against ours (follows each
 *   sender's clock)
 * @GST_RDMA_TIMESTAMP_MODE_CAPTURE: each frame's capture time (the
 *   sender's wall clock) through this host's wall clock: cameras of hosts
 *   whose wall clocks agree (NTP, PTP) align
 * @GST_RDMA_TIMESTAMP_MODE_SENDER: the sender's running time as it is
 *   (pipelines sharing a network clock and base time)
 * @GST_RDMA_TIMESTAMP_MODE_ARRIVAL: each frame's arrival
 *
 * How rdmasrc stamps each device's buffers (rdmasrc's SECTION,
 * "Timestamps").
 */
typedef enum {
  GST_RDMA_TIMESTAMP_MODE_SKEW = 0,
  GST_RDMA_TIMESTAMP_MODE_CAPTURE = 1,
  GST_RDMA_TIMESTAMP_MODE_SENDER = 2,
  GST_RDMA_TIMESTAMP_MODE_ARRIVAL = 3,
} GstRdmaTimestampMode;

#define GST_TYPE_RDMA_TIMESTAMP_MODE (gst_rdma_timestamp_mode_get_type())
GType gst_rdma_timestamp_mode_get_type(void);

enum sbr_backend gst_rdma_transport_to_sbr(GstRdmaTransport transport);
enum sbr_mechanism gst_rdma_mechanism_to_sbr(GstRdmaMechanism mechanism);
enum sbr_backpressure
gst_rdma_backpressure_to_sbr(GstRdmaBackpressure backpressure);

/* The property nick of a value ("verbs", "status-byte", ...). */
const gchar *gst_rdma_transport_nick(GstRdmaTransport transport);
const gchar *gst_rdma_mechanism_nick(GstRdmaMechanism mechanism);
const gchar *gst_rdma_over_budget_nick(GstRdmaOverBudget policy);
const gchar *gst_rdma_timestamp_mode_nick(GstRdmaTimestampMode mode);

G_END_DECLS

#endif /* __GST_RDMA_ENUMS_H__ */
