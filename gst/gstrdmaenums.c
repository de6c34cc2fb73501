/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmaenums.c - GEnum types for the rdma elements' properties.
 *
 * The nicks are what users type on a gst-launch line ("transport=shm"); an
 * unknown nick fails to deserialize, so gst-launch reports "could not set
 * property" instead of picking a default behind the user's back.
 */
#include "gstrdmaenums.h"

GType gst_rdma_transport_get_type(void)
{
  static gsize id = 0;
  static const GEnumValue values[] = {
      {GST_RDMA_TRANSPORT_VERBS,
       "rdma-core verbs (RoCE, InfiniBand, Soft-RoCE)", "verbs"},
      {GST_RDMA_TRANSPORT_SHM, "Shared memory on this host (tests, demos)",
       "shm"},
      {0, NULL, NULL},
  };
  if (g_once_init_enter(&id)) {
    GType t = g_enum_register_static("GstRdmaTransport", values);
    g_once_init_leave(&id, t);
  }
  return (GType)id;
}

GType gst_rdma_mechanism_get_type(void)
{
  static gsize id = 0;
  static const GEnumValue values[] = {
      {GST_RDMA_MECHANISM_STATUS_BYTE,
       "Status byte: one-sided WRITEs, the receiver posts nothing",
       "status-byte"},
      {GST_RDMA_MECHANISM_SLIDING_WINDOW,
       "Sliding window: WRITE WITH IMMEDIATE and ACKs (baseline)",
       "sliding-window"},
      {0, NULL, NULL},
  };
  if (g_once_init_enter(&id)) {
    GType t = g_enum_register_static("GstRdmaMechanism", values);
    g_once_init_leave(&id, t);
  }
  return (GType)id;
}

GType gst_rdma_over_budget_get_type(void)
{
  static gsize id = 0;
  static const GEnumValue values[] = {
      {GST_RDMA_OVER_BUDGET_DROP_OLDEST,
       "Drop the device's oldest queued frames (live video)", "drop-oldest"},
      {GST_RDMA_OVER_BUDGET_COPY, "Copy new frames out of the lane", "copy"},
      {GST_RDMA_OVER_BUDGET_PAUSE,
       "Pause the device's sender until the budget has room", "pause"},
      {0, NULL, NULL},
  };
  if (g_once_init_enter(&id)) {
    GType t = g_enum_register_static("GstRdmaOverBudget", values);
    g_once_init_leave(&id, t);
  }
  return (GType)id;
}

GType gst_rdma_backpressure_get_type(void)
{
  static gsize id = 0;
  static const GEnumValue values[] = {
      {GST_RDMA_BACKPRESSURE_WAIT,
       "Wait up to wait-timeout for a free send block, then drop", "wait"},
      {GST_RDMA_BACKPRESSURE_DROP, "Drop the frame at once", "drop"},
      {0, NULL, NULL},
  };
  if (g_once_init_enter(&id)) {
    GType t = g_enum_register_static("GstRdmaBackpressure", values);
    g_once_init_leave(&id, t);
  }
  return (GType)id;
}

GType gst_rdma_poll_mode_get_type(void)
{
  static gsize id = 0;
  static const GEnumValue values[] = {
      {GST_RDMA_POLL_MODE_ADAPTIVE,
       "Sleep until the next frame is due (learned period), then poll",
       "adaptive"},
      {GST_RDMA_POLL_MODE_BUSY, "Spin: lowest latency, costs a core", "busy"},
      {GST_RDMA_POLL_MODE_BACKOFF, "Spin 20 us, then sleep doubling up to 1 ms",
       "backoff"},
      {0, NULL, NULL},
  };
  if (g_once_init_enter(&id)) {
    GType t = g_enum_register_static("GstRdmaPollMode", values);
    g_once_init_leave(&id, t);
  }
  return (GType)id;
}

GType gst_rdma_timestamp_mode_get_type(void)
{
  static gsize id = 0;
  static const GEnumValue values[] = {
      {GST_RDMA_TIMESTAMP_MODE_SKEW,
       "The sender's running time through an estimate of its clock", "skew"},
      {GST_RDMA_TIMESTAMP_MODE_CAPTURE,
       "The capture time (sender's wall clock) through this host's wall "
       "clock",
       "capture"},
      {GST_RDMA_TIMESTAMP_MODE_SENDER,
       "The sender's running time as it is (a shared clock and base time)",
       "sender"},
      {GST_RDMA_TIMESTAMP_MODE_ARRIVAL, "The frame's arrival", "arrival"},
      {0, NULL, NULL},
  };
  if (g_once_init_enter(&id)) {
    GType t = g_enum_register_static("GstRdmaTimestampMode", values);
    g_once_init_leave(&id, t);
  }
  return (GType)id;
}

enum sbr_backend gst_rdma_transport_to_sbr(GstRdmaTransport transport)
{
  return transport == GST_RDMA_TRANSPORT_SHM ? SBR_BACKEND_SHM
                                             : SBR_BACKEND_VERBS;
}

enum sbr_mechanism gst_rdma_mechanism_to_sbr(GstRdmaMechanism mechanism)
{
  return mechanism == GST_RDMA_MECHANISM_SLIDING_WINDOW
             ? SBR_MECH_SLIDING_WINDOW
             : SBR_MECH_STATUS_BYTE;
}

enum sbr_backpressure
gst_rdma_backpressure_to_sbr(GstRdmaBackpressure backpressure)
{
  return backpressure == GST_RDMA_BACKPRESSURE_DROP ? SBR_BACKPRESSURE_DROP
                                                    : SBR_BACKPRESSURE_WAIT;
}

enum sbr_poll_mode gst_rdma_poll_mode_to_sbr(GstRdmaPollMode mode)
{
  switch (mode) {
  case GST_RDMA_POLL_MODE_BUSY:
    return SBR_POLL_BUSY;
  case GST_RDMA_POLL_MODE_BACKOFF:
    return SBR_POLL_BACKOFF;
  case GST_RDMA_POLL_MODE_ADAPTIVE:
  default:
    return SBR_POLL_ADAPTIVE;
  }
}

static const gchar *enum_nick(GType type, gint value)
{
  GEnumClass *klass = g_type_class_ref(type);
  GEnumValue *v = g_enum_get_value(klass, value);
  const gchar *nick = v ? v->value_nick : "?";
  /* Registered static enums live for the process: the nick stays valid. */
  g_type_class_unref(klass);
  return nick;
}

const gchar *gst_rdma_transport_nick(GstRdmaTransport transport)
{
  return enum_nick(GST_TYPE_RDMA_TRANSPORT, transport);
}

const gchar *gst_rdma_mechanism_nick(GstRdmaMechanism mechanism)
{
  return enum_nick(GST_TYPE_RDMA_MECHANISM, mechanism);
}

const gchar *gst_rdma_over_budget_nick(GstRdmaOverBudget policy)
{
  return enum_nick(GST_TYPE_RDMA_OVER_BUDGET, policy);
}

const gchar *gst_rdma_timestamp_mode_nick(GstRdmaTimestampMode mode)
{
  return enum_nick(GST_TYPE_RDMA_TIMESTAMP_MODE, mode);
}
