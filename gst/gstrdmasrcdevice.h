/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasrcdevice.h - one device's life as rdmasrc's receive thread sees
 * it: which sender connection (lane) owns it, when that sender is gone,
 * when the device falls silent.  Each of those is an event on the bus.
 *
 * Threads: the receive thread only (the element's state changes touch a
 * device while that thread is stopped), except frame_duration (object
 * lock, read by latency queries) and time_stats (object lock, read by the
 * stats).
 */
#ifndef __GST_RDMA_SRC_DEVICE_H__
#define __GST_RDMA_SRC_DEVICE_H__

#include <gst/gst.h>
#include <sbr.h>

#include "gstrdmasrcframe.h"
#include "gstrdmasrcpad.h"

G_BEGIN_DECLS

typedef struct {
  guint device;
  GstRdmaSrcPad *pad;
  GstCaps *caps;
  GstRdmaTimeMap time_map;     /* see rdmasrc's SECTION, "Timestamps" */
  GstRdmaTimeStats time_stats; /* (object lock) time_map's, for the stats */
  gint rebase_seen;            /* the element's rebase count it has applied */
  GstClockTime frame_duration;
  GstClockTime sender_latency; /* (object lock) its sender's upstream
                                  latency (CAPS blocks), NONE: unknown */
  gboolean pause_set;          /* we told its sender to stop */
  gint released;               /* atomic: its pad was released (1), and
                                  release_pad is done with it (2): the receive
                                  thread takes it out of the table */
  gboolean shares_lane;        /* counted in the automatic device-blocks share:
                                  its camera has come (a requested pad waits) */
  gboolean lane_counted;       /* (object lock) counted among counted_lane's
                                  devices on the shared receiver: it shares and
                                  a lane owns it (gst_rdma_src_device_recount) */
  guint32 counted_lane;

  /* Ownership: one sender connection at a time. */
  gboolean owned;
  guint32 owner_lane;
  gchar owner_peer[64];
  guint32 warned_lane; /* the intruder last warned about */
  guint64 refused;     /* frames of another sender, dropped */
  guint64 losses;      /* owners gone without EOS */
  gchar *refused_caps; /* what the refused sender sent (owned) */
  guint32 refused_caps_lane;

  /* Silence. */
  gint64 last_frame_us; /* monotonic */
  gboolean idle_posted;

  /* Key units asked of its sender (gstrdmakeyunit.c; object lock, but
   * asked_us: atomic). */
  struct {
    gint64 asked_us;  /* monotonic: the outstanding request's, 0 none */
    guint64 requests; /* made */
    guint64 upstream; /* for upstream force-key-unit events */
    guint64 gaps;     /* rdmasrc's own, after a gap */
    guint64 merged;   /* asked while one was outstanding: not made */
    guint64 answered; /* key frames that came while one was outstanding */
    GstClockTime last_round_trip; /* request to that key frame */
  } key_units;
  /* The next frame's extras (flags, metas: gstrdmasrcevents.c), for the
   * frame of that packet number on that lane and epoch. */
  GstStructure *extras;
  /* That frame's extras came but were not taken (over max-meta-size,
   * unparsable): its padded layout, if it had one, is unknown. */
  gboolean extras_lost;
  guint32 extras_lane;
  guint16 extras_epoch;
  guint16 extras_packet;
  /* Loss on the way: the packet number the next block should have. */
  gboolean packet_known;
  guint32 packet_lane;
  guint16 packet_epoch;
  guint16 next_packet;
} GstRdmaSrcDevice;

/* May lane deliver the device's frames?  The first lane to send a device
 * owns it until that lane closes; another lane's frames meanwhile are
 * refused (counted, one warning on the bus naming both senders per
 * intruder, and the lane's refused bit set so its sender stops and says
 * so).  A frame that may pass also counts as activity. */
gboolean gst_rdma_src_device_claim(GstRdmaSrcDevice *dev, GstElement *element,
                                   sbr_receiver *receiver, guint32 lane);

/* Has the owner's lane closed?  If so the device is free again (every
 * lane's refused bit for it cleared, so refused senders try again); unless its
 * stream had ended (EOS), posts "rdmasrc-device-lost" (device-id, peer,
 * lane) and returns TRUE (the caller may end the stream). */
gboolean gst_rdma_src_device_check_lane(GstRdmaSrcDevice *dev,
                                        GstElement *element,
                                        sbr_receiver *receiver);

/* Posts "rdmasrc-device-timeout" (device-id, timeout) once per silent
 * spell of timeout_ms without a frame of a device whose stream is on. */
void gst_rdma_src_device_check_idle(GstRdmaSrcDevice *dev, GstElement *element,
                                    guint timeout_ms, gint64 now_us);

/* Were blocks of the device lost before frame (its first packet number
 * is past the one its lane's previous frame of the device left off at)?
 * Every kind of frame takes numbers (caps and EOS one each); a frame the
 * library copied has no blocks left to count, so its count comes from its
 * size: senders fragment over whole blocks of block_payload bytes.  A new
 * lane or epoch starts the count again (stamping marks that frame). */
gboolean gst_rdma_src_device_packet_gap(GstRdmaSrcDevice *dev,
                                        const struct sbr_frame *frame,
                                        guint block_payload);

G_END_DECLS

#endif /* __GST_RDMA_SRC_DEVICE_H__ */
