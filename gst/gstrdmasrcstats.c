/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasrcstats.c - rdmasrc's stats structure (gstrdmasrcstats.h).
 *
 * Why a field per device: the per-device structures used to travel as a
 * GstValueArray under "devices".  gst-launch-1.0 -m prints that as a list
 * of escaped strings, prints an empty one as "devices=(int)< >", and
 * PyGObject reads it only through the deprecated GValueArray.  Every
 * nesting prints escaped in -m (gst-launch uses gst_structure_to_string,
 * which keeps the pre-1.20 escaped form for nested structures, in every
 * GStreamer version), so readable lines come from the ticker instead: it
 * also posts each device's structure as a message of its own
 * (gstrdmacommon.c).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstrdmasrcstats.h"

#include <string.h>

#include "gstrdmacommon.h"
#include "gstrdmakeyunit.h"
#include "gstrdmasrcpad.h"

GParamSpec *gst_rdma_src_stats_param_spec(void)
{
  /* The fields are listed in the element documentation (gstrdmasrc.c),
   * which tests/gst/test-rdma-output.c checks against what is built here. */
  return gst_rdma_param_spec_stats(
      "Counters: element-wide, then one structure \"device-<N>\" per device "
      "with a pad (the element documentation lists the fields)");
}

/* One device's structure: the receiver's counters of it, its ownership,
 * then the pad's queue, share and drops by reason. */
/* How the device's buffers are stamped, and what the estimator of its
 * sender's clock found (it runs in every mode, gstrdmasrcframe.h). */
static void add_time_stats(GstStructure *s, const GstRdmaTimeStats *t,
                           GstRdmaTimestampMode mode)
{
  gst_structure_set(
      s, "timestamp-mode", G_TYPE_STRING, gst_rdma_timestamp_mode_nick(mode),
      "rate-ppm", G_TYPE_DOUBLE, t->rate_ppm, "rate-known", G_TYPE_BOOLEAN,
      t->has_rate, "clock-offset", G_TYPE_INT64, (gint64)t->clock_offset,
      "skew-observed", G_TYPE_UINT64, t->skew.observed, "skew-outliers",
      G_TYPE_UINT64, t->skew.outliers, "skew-invalid", G_TYPE_UINT64,
      t->skew.invalid, "skew-rebases", G_TYPE_UINT64, t->skew.rebases,
      "skew-rate-clamps", G_TYPE_UINT64, t->skew.rate_clamps,
      "skew-level-shifts", G_TYPE_UINT64, t->skew.level_shifts, "skew-steps",
      G_TYPE_UINT64, t->skew.steps, "skew-resets", G_TYPE_UINT64,
      t->skew.resets, "capture-invalid", G_TYPE_UINT64, t->capture_invalid,
      NULL);
}

static GstStructure *device_stats_new(sbr_receiver *receiver,
                                      GstRdmaSrcDevice *dev, guint share,
                                      GstRdmaTimestampMode mode)
{
  struct sbr_device_stats ds;
  GstStructure *s;

  sbr_receiver_get_device_stats(receiver, (uint8_t)dev->device, &ds);
  s = gst_structure_new(
      "rdmasrc-device-stats", "device-id", G_TYPE_UINT, dev->device, "frames",
      G_TYPE_UINT64, (guint64)ds.frames, "blocks", G_TYPE_UINT64,
      (guint64)ds.blocks, "bytes", G_TYPE_UINT64, (guint64)ds.bytes, "drops",
      G_TYPE_UINT64, (guint64)ds.drops, "gaps", G_TYPE_UINT64, (guint64)ds.gaps,
      "rejected", G_TYPE_UINT64, (guint64)ds.rejected, "refused", G_TYPE_UINT64,
      dev->refused, "losses", G_TYPE_UINT64, dev->losses, "owner",
      G_TYPE_STRING, dev->owned ? dev->owner_peer : "", "sender-latency",
      G_TYPE_UINT64, (guint64)dev->sender_latency, NULL);
  gst_rdma_src_pad_add_stats(dev->pad, s);
  gst_rdma_src_key_unit_add_stats(dev, s);
  /* Per device: each has its own lane's share (gst_rdma_src_budget). */
  gst_structure_set(s, "device-blocks", G_TYPE_UINT, share, NULL);
  add_time_stats(s, &dev->time_stats,
                 gst_rdma_src_pad_timestamp_mode(dev->pad, mode));
  return s;
}

GstStructure *gst_rdma_src_stats_new(sbr_receiver *receiver,
                                     GstRdmaSrcDevice *const *devices,
                                     const GstRdmaSrcCounters *counters)
{
  struct sbr_receiver_stats rs;
  GstStructure *per_device[SBR_MAX_DEVICES] = {NULL};
  guint64 pushed = 0;
  GstStructure *s;

  memset(&rs, 0, sizeof rs);
  if (receiver) {
    sbr_receiver_get_stats(receiver, &rs);
    for (guint d = 0; d < SBR_MAX_DEVICES; d++) {
      guint64 dev_pushed = 0;

      if (!devices[d])
        continue;
      per_device[d] = device_stats_new(
          receiver, devices[d], counters->shares[d], counters->timestamp_mode);
      gst_structure_get_uint64(per_device[d], "pushed", &dev_pushed);
      pushed += dev_pushed;
    }
  }
  s = gst_structure_new(
      "rdmasrc-stats", "lanes-opened", G_TYPE_UINT64, (guint64)rs.lanes_opened,
      "lanes-closed", G_TYPE_UINT64, (guint64)rs.lanes_closed, "lanes-active",
      G_TYPE_UINT, (guint)rs.lanes_active, "blocks", G_TYPE_UINT64,
      (guint64)rs.blocks, "bytes", G_TYPE_UINT64, (guint64)rs.bytes, "rejected",
      G_TYPE_UINT64, (guint64)rs.rejected, "blocks-held", G_TYPE_UINT64,
      (guint64)rs.blocks_held, "frames-copied", G_TYPE_UINT64,
      (guint64)rs.frames_copied, "recv-wr-posted", G_TYPE_UINT64,
      (guint64)rs.recv_wr_posted, "copies", G_TYPE_UINT64, counters->copies,
      "held", G_TYPE_UINT, counters->held, "no-caps-drops", G_TYPE_UINT64,
      counters->no_caps_drops, "pushed", G_TYPE_UINT64, pushed, "device-blocks",
      G_TYPE_UINT, counters->device_blocks, "unclaimed-drops", G_TYPE_UINT64,
      counters->unclaimed_drops, "receiver-members", G_TYPE_UINT,
      counters->receiver_members, "events-received", G_TYPE_UINT64,
      counters->events_received, "events-dropped", G_TYPE_UINT64,
      counters->events_dropped, "extras-dropped", G_TYPE_UINT64,
      counters->extras_dropped, "metas-not-restored", G_TYPE_UINT64,
      counters->metas_not_restored, NULL);
  gst_structure_set(
      s, "refused-connections", G_TYPE_UINT64, (guint64)rs.refused,
      "lanes-windowed", G_TYPE_UINT64, (guint64)rs.lanes_windowed,
      "poll-sleeps", G_TYPE_UINT64, (guint64)rs.poll_sleeps, "frames-predicted",
      G_TYPE_UINT64, (guint64)rs.frames_predicted, "frames-missed",
      G_TYPE_UINT64, (guint64)rs.frames_missed, "poll-sleeps-woken",
      G_TYPE_UINT64, (guint64)rs.poll_sleeps_woken, "poll-sleeps-timed-out",
      G_TYPE_UINT64, (guint64)rs.poll_sleeps_timed_out, "async-errors",
      G_TYPE_UINT64, (guint64)rs.async_errors, NULL);
  /* Absent, not 0, where the NIC doesn't count them: 0 would claim no
   * rogue ever tried. */
  if (receiver && rs.nic_remote_access_errors != SBR_COUNTER_ABSENT)
    gst_structure_set(s, "nic-remote-access-errors", G_TYPE_UINT64,
                      (guint64)rs.nic_remote_access_errors, NULL);
  for (guint reason = SBR_REFUSAL_VERSION; reason <= SBR_REFUSAL_DEVICE;
       reason++) {
    gchar name[48];

    g_snprintf(name, sizeof name, "refused-%s",
               sbr_refusal_name((enum sbr_refusal)reason));
    gst_structure_set(s, name, G_TYPE_UINT64,
                      (guint64)rs.refused_by_reason[reason], NULL);
  }
  /* The devices last, in device order, so the element-wide counters lead
   * a printed line. */
  for (guint d = 0; d < SBR_MAX_DEVICES; d++) {
    GValue v = G_VALUE_INIT;
    gchar name[16];

    if (!per_device[d])
      continue;
    g_snprintf(name, sizeof name, "device-%u", d);
    g_value_init(&v, GST_TYPE_STRUCTURE);
    g_value_take_boxed(&v, per_device[d]);
    gst_structure_take_value(s, name, &v);
  }
  return s;
}
