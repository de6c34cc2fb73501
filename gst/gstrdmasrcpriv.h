/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasrcpriv.h - rdmasrc's instance, shared by the element
 * (gstrdmasrc.c: properties, state changes, EOS sent to it), its receive
 * thread (gstrdmasrcreceive.c: frames to pads, pauses, lives) and its pad
 * table (gstrdmasrcpadtable.c: which devices have a pad,
 * requested or added, their stream events, EOS and latency).
 */
#ifndef __GST_RDMA_SRC_PRIV_H__
#define __GST_RDMA_SRC_PRIV_H__

#include <gst/base/gstflowcombiner.h>
#include <gst/gst.h>
#include <sbr.h>

#include "gstrdmacommon.h"
#include "gstrdmaenums.h"
#include "gstrdmareceiver.h"
#include "gstrdmasrc.h"
#include "gstrdmasrcdevice.h"
#include "gstrdmasrcpad.h"

G_BEGIN_DECLS

GST_DEBUG_CATEGORY_EXTERN(gst_rdma_src_debug);

struct _GstRdmaSrc {
  GstElement parent;

  /* Properties (object lock). */
  gchar *address;
  gchar *uri_error; /* a uri that could not be set: open fails with it */
  guint port;
  GstRdmaTransport transport;
  GstRdmaMechanism mechanism;
  guint blocks;
  guint block_size;
  guint max_held;
  guint device_blocks;
  guint max_queued;
  GstRdmaOverBudget over_budget;
  gboolean over_budget_set; /* set by the application: it wins over the
                               stream's liveness (gstrdmasrcreceive.c) */
  /* New pads' default wait-for-keyframe. */
  gboolean wait_for_keyframe;
  guint max_senders;
  gchar *allowed_senders; /* NULL: anyone */
  guint max_connects_per_second;
  guint max_frame_size; /* bytes; larger frames are rejected */
  guint probe_after;    /* ms of a quiet lane before it is probed; 0 off */
  gint tos;             /* -1: rdma_cm's default */
  guint max_meta_size;  /* bytes of a frame's extras taken from the wire */
  guint ack_timeout;    /* exponent; 0: rdma_cm's default */
  gint comp_vector;     /* -1: lanes spread over the vectors */
  gint numa_node;       /* lane memory: -1 the NIC's node, -2 none */
  gboolean huge_pages;  /* lane memory: transparent huge pages */
  gint latency;
  guint timeout;
  gboolean device_lost_eos;
  gboolean request_keyframe; /* ask for a key unit after a gap */
  guint stats_interval;
  GstRdmaPollMode poll_mode;
  GstRdmaTimestampMode timestamp_mode;

  gint device_id; /* -1: every device no other rdmasrc asked for */

  /* The receiver this element shares with every rdmasrc of the process on
   * the same transport, address and port (gstrdmareceiver.h), from
   * READY->PAUSED to PAUSED->READY.  Its receive thread runs the functions
   * below for us, with member.lock held: it takes our devices' frames and
   * queues each on its device's pad, never pushes downstream. */
  GstRdmaReceiver *shared; /* object lock */
  GstRdmaReceiverMember member;
  GMutex state_lock;      /* pads start and stop in step with the state */
  sbr_receiver *receiver; /* the shared one's: the receive thread's while
                             joined; others use it only under the object
                             lock while shared is set (cleared before we
                             leave, as the last one out frees it) */
  gint playing;           /* atomic: frames are queued, else dropped */
  gint rebase_count;      /* atomic: PAUSED->PLAYING moved running time */
  gint eos_requested;     /* atomic: an application sent EOS to us */
  gboolean eos_done;      /* receive thread: EOS sent, ignore the rest */
  GstRdmaStatsTicker *ticker;
  GstRdmaHeldCounter *held; /* the shared receiver's, referenced */
  GstRdmaSharedFlow flow;
  GstRdmaRefusals *refusals; /* receive thread: refused senders warned of */

  /* The device table changes on the receive thread (and on state changes
   * while it is stopped) under the object lock; the receive thread reads
   * it without. */
  GstRdmaSrcDevice *devices[SBR_MAX_DEVICES];
  /* Pads requested while the receive thread may run wait here (object
   * lock) until it adopts them into devices[] at its next turn. */
  GstRdmaSrcDevice *requested[SBR_MAX_DEVICES];
  gint have_requested; /* atomic: something in requested[], or a released
                          pad in devices[] to take out */
  guint group_id;
  guint max_held_now;      /* max_held as started, clamped */
  guint device_blocks_now; /* device_blocks as started; 0 = automatic */
  guint usable_blocks;     /* what the automatic share divides */
  guint n_pads;            /* our devices with a share (shares_lane); a
                              device with no lane yet divides every
                              member's (gst_rdma_src_budget) */
  guint n_paused;          /* receive thread: devices with pause_set */
  guint max_queued_now;
  gboolean can_pause; /* the mechanism carries pause flags */
  guint timeout_now;
  gboolean device_lost_eos_now;
  GstRdmaTimestampMode timestamp_mode_now; /* the receive thread's */
  gint64 last_life_check;                  /* monotonic us */
  gint64 last_activity;                    /* monotonic us of the last frame */
  gboolean timeout_posted;

  /* Counters (object lock). */
  guint64 pushed;
  guint64 copies;
  guint64 no_caps_drops;
  guint64 events_received; /* EVENT blocks taken (gstrdmasrcevents.c) */
  guint64 events_dropped;  /* EVENT blocks not understood */
  guint64 extras_dropped;  /* frame extras whose frame didn't come */
  guint64 metas_not_restored;

  /* Receive thread: each device's upstream stream-start, from the EVENT
   * block before its CAPS block (gstrdmasrcevents.c), and whether the
   * stream it opens is still to start. */
  struct {
    GstStructure *stream;  /* the last one sent */
    GstStructure *started; /* the one the device's stream started with */
    guint32 lane;
    gboolean fresh;
  } upstream[SBR_MAX_DEVICES];
  GHashTable *groups; /* (lane << 32 | sender's group-id) -> ours */
};

/* gstrdmasrcreceive.c: what the shared receive thread does for us
 * (GstRdmaReceiverMemberFuncs).  It calls into the pad table; the pad
 * table never calls back. */
gboolean gst_rdma_src_turn(GstElement *element);
void gst_rdma_src_frame(GstElement *element, struct sbr_frame *frame,
                        const gchar *known_caps, gboolean known_live,
                        GPtrArray *known_headers);
void gst_rdma_src_failed(GstElement *element, gint err);
void gst_rdma_src_leaving(GstElement *element);

/* gstrdmasrcpadtable.c */
/* Object lock held: dev's share of its lane now (device-blocks); dev
 * NULL: a device's that no lane owns yet. */
guint gst_rdma_src_budget(GstRdmaSrc *self, GstRdmaSrcDevice *dev);
/* Object lock held: the smallest share of our devices now. */
guint gst_rdma_src_least_budget(GstRdmaSrc *self);
/* Object lock held: dev counted on the lane that owns it, or on none,
 * after its ownership, share or release changed. */
void gst_rdma_src_device_recount(GstRdmaSrc *self, GstRdmaSrcDevice *dev);
/* Object lock held, leaving the shared receiver: no device counted. */
void gst_rdma_src_uncount_lanes(GstRdmaSrc *self);
/* The element's LATENCY answer: live, the largest minimum of its pads,
 * the smallest maximum (see gst_rdma_src_device_latency). */
void gst_rdma_src_answer_latency(GstRdmaSrc *self, GstQuery *query);
GstPad *gst_rdma_src_request_new_pad(GstElement *element, GstPadTemplate *templ,
                                     const gchar *name, const GstCaps *caps);
void gst_rdma_src_release_pad(GstElement *element, GstPad *pad);
/* Frees a device out of the table, and its pad (finalize, retirement). */
void gst_rdma_src_device_free(GstRdmaSrcDevice *dev);
/* Has the element a pad for device (receiver's join checks). */
gboolean gst_rdma_src_has_device(GstElement *element, guint device);
/* Receive thread (or with it stopped): requested pads join the table. */
void gst_rdma_src_adopt_requested(GstRdmaSrc *self);
/* Receive thread: a sometimes pad for a device nobody asked for; NULL
 * when the device was requested meanwhile (adopted: use the table). */
GstRdmaSrcDevice *gst_rdma_src_add_pad(GstRdmaSrc *self, guint device,
                                       GstCaps *caps);
/* Starts a pad's task if PLAYING (state lock held). */
void gst_rdma_src_sync_pad(GstRdmaSrc *self, GstRdmaSrcDevice *dev);
/* PAUSED->READY, threads stopped: every device's stream is over. */
void gst_rdma_src_end_streams(GstRdmaSrc *self);
/* Ends dev's stream (its pad task pushes EOS after what is queued). */
void gst_rdma_src_device_eos(GstRdmaSrc *self, GstRdmaSrcDevice *dev);
/* stream-start, caps, a TIME segment for dev's new stream. */
GstEvent **gst_rdma_src_stream_events(GstRdmaSrc *self, GstRdmaSrcDevice *dev,
                                      GstCaps *caps, GstEvent *events[3]);
/* Frame duration from the caps' framerate, if any. */
GstClockTime gst_rdma_src_caps_frame_duration(GstCaps *caps);

/* rdmasrc's GstChildProxy: its src pads are its children, so that
 * "rdmasrc src_3::over-budget=pause" on a launch line reaches pad src_3
 * when it is added (rdmasrc announces it with child-added).
 * gstrdmasrcpadtable.c. */
void gst_rdma_src_child_proxy_init(gpointer g_iface, gpointer data);

/* gstrdmasrc.c: the "deserialize-meta" signal's id. */
extern guint gst_rdma_src_deserialize_meta_signal;

/* gstrdmasrcevents.c, receive thread: an EVENT block of a device; a
 * data frame's extras, if the block before it brought them (FALSE: the
 * frame can't be read, its padded layout lost on the way); the
 * stream-start of a stream a device opens (the upstream's, once its
 * sender said it); whether a CAPS block of lane comes after a stream-start
 * (a new upstream stream); and the stream-starts kept, freed.  The next
 * frame's extras are forgotten with gst_rdma_src_clear_extras. */
void gst_rdma_src_handle_event(GstRdmaSrc *self, const struct sbr_frame *frame,
                               GstClockTime now);
void gst_rdma_src_clear_extras(GstRdmaSrcDevice *dev);
gboolean gst_rdma_src_apply_extras(GstRdmaSrc *self, GstRdmaSrcDevice *dev,
                                   const struct sbr_block_info *info,
                                   GstBuffer *buf);
GstEvent *gst_rdma_src_stream_start_event(GstRdmaSrc *self,
                                          GstRdmaSrcDevice *dev);
gboolean gst_rdma_src_events_caps_from(GstRdmaSrc *self, guint device,
                                       guint32 lane);
void gst_rdma_src_events_free(GstRdmaSrc *self);

G_END_DECLS

#endif /* __GST_RDMA_SRC_PRIV_H__ */
