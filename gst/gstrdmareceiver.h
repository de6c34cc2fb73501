/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmareceiver.h - the process-wide registry of shared receivers, the
 * receiving side's twin of gstrdmaconnection.h.
 *
 * Every rdmasrc in a process that names the same transport, address and
 * port uses ONE GstRdmaReceiver: one sbr_receiver (one listener, one lane
 * and one QP per sender) and one receive thread, whether the rdmasrcs sit
 * in one pipeline or in twelve (OpenCV's one VideoCapture per camera).
 * The rdmasrcs are its members, from READY->PAUSED (join) to PAUSED->READY
 * (leave); the first join listens, the last leave closes the listener.
 *
 * Which member gets a device's frames: the member that asked for that
 * device (device-id=N, or a pad named for it on a member that joined
 * beside one taking every device), else the member that takes every
 * device (the first with device-id=-1), else nobody: the frame is dropped
 * and counted (unclaimed-drops).  So `rdmasrc name=r r.src_0` and
 * `rdmasrc name=s s.src_1` in two pipelines on one port each get their
 * camera: s joins with pads and no device-id beside r, and takes just
 * src_1's device (and the devices of pads requested on it later).  The last
 * caps each device sent are kept, so a member that joins after its camera
 * started still gets its stream.
 *
 * Members must agree on what makes the receiver (mechanism, geometry,
 * access rules, poll mode, max-held): a join that differs, or that asks
 * for a device another member has, fails with an error naming both.
 *
 * Threads: join and leave from any thread but the receive thread's own
 * callbacks; the callbacks run on the receive thread with the member's
 * lock held, so a member that left is never called again.
 */
#ifndef __GST_RDMA_RECEIVER_H__
#define __GST_RDMA_RECEIVER_H__

#include <gst/gst.h>
#include <sbr.h>

#include "gstrdmaenums.h"
#include "gstrdmasrcframe.h"

G_BEGIN_DECLS

typedef struct _GstRdmaReceiver GstRdmaReceiver;

/* What a receiver is made with.  transport, address and port are the
 * registry key; every other field must be equal between members. */
typedef struct {
  GstRdmaTransport transport;
  const gchar *address;
  guint port;
  GstRdmaMechanism mechanism;
  guint blocks;
  guint block_size;
  guint max_senders;
  const gchar *allowed_senders; /* NULL or "": anyone */
  guint max_connects_per_second;
  guint max_frame_size;
  guint probe_after; /* ms of silence before a lane is probed, 0 = never */
  gint tos;          /* -1: rdma_cm's default */
  guint ack_timeout; /* exponent; 0: rdma_cm's default */
  gint comp_vector;  /* -1: lanes spread over the vectors */
  gint numa_node;    /* lane memory: -1 the NIC's node, -2 none */
  gboolean huge_pages;
  GstRdmaPollMode poll_mode;
  guint max_held;
} GstRdmaReceiverConfig;

/* What the receive thread calls on a member, with the member's lock held
 * (see above).  frame: takes the frame; known_caps is the last caps its
 * device sent on the frame's lane, for a member that missed them (NULL if
 * none), known_live whether those caps came from a live source, and
 * known_headers (GBytes, NULL if none) the stream headers (HEADER frames)
 * it sent after them and before this frame.  turn:
 * before each wait; TRUE when the member has paused senders (the thread then
 * waits less).  has_device: does the member have a pad for device (called from
 * join, not on the receive thread). leaving: from leave, after the last
 * callback and before the listener may close: what the member told senders
 * (pauses, refusals) is undone. */
typedef struct {
  gboolean (*turn)(GstElement *member);
  void (*frame)(GstElement *member, struct sbr_frame *frame,
                const gchar *known_caps, gboolean known_live,
                GPtrArray *known_headers);
  void (*failed)(GstElement *member, gint err);
  void (*refused)(GstElement *member, const gchar *peer, gint reason,
                  const gchar *text);
  /* A sender's lane opened (connected TRUE) or closed: every member. */
  void (*sender)(GstElement *member, guint lane, const gchar *peer,
                 gboolean connected);
  gboolean (*has_device)(GstElement *member, guint device);
  void (*leaving)(GstElement *member);
} GstRdmaReceiverMemberFuncs;

/* A member, embedded in the element; gst_rdma_receiver_member_init before
 * the first join, _clear when the element is finalized. */
typedef struct {
  GstElement *element;
  gint device; /* -1: every device no other member asked for */
  /* (the receiver's lock) device -1 beside a member that takes every
   * device: this one takes just the devices of its pads. */
  gboolean pads_only;
  const GstRdmaReceiverMemberFuncs *funcs;
  GMutex lock;    /* held while the receive thread works for the member */
  gboolean alive; /* (lock) joined: the receive thread may call it */
} GstRdmaReceiverMember;

void gst_rdma_receiver_member_init(GstRdmaReceiverMember *member,
                                   GstElement *element,
                                   const GstRdmaReceiverMemberFuncs *funcs);
void gst_rdma_receiver_member_clear(GstRdmaReceiverMember *member);

/* Joins the receiver for cfg with member->device set, making it (and
 * listening) if this is the first member.  NULL with error set when the
 * listener can't be made (RESOURCE OPEN_READ) or the member conflicts
 * with another (RESOURCE SETTINGS, naming both).  The receive thread
 * calls the member from now on. */
GstRdmaReceiver *gst_rdma_receiver_join(const GstRdmaReceiverConfig *cfg,
                                        GstRdmaReceiverMember *member,
                                        GError **error);
/* The member leaves: when this returns the receive thread no longer runs
 * its callbacks and never will.  The last member closes the listener
 * (buffers still downstream keep their lanes until they are freed). */
void gst_rdma_receiver_leave(GstRdmaReceiver *receiver,
                             GstRdmaReceiverMember *member);

sbr_receiver *gst_rdma_receiver_get_sbr(GstRdmaReceiver *receiver);
/* Blocks of every member out downstream, per lane against max-held (a
 * lane is shared by the members, so is its bound): the receiver's
 * counter, not referenced. */
GstRdmaHeldCounter *gst_rdma_receiver_get_held(GstRdmaReceiver *receiver);
/* Devices of every member with a share (their camera came), whatever
 * their lane: what a device that has no lane yet divides (the least it
 * could get on any lane): add delta, return the sum. */
guint gst_rdma_receiver_add_pads(GstRdmaReceiver *receiver, gint delta);
/* Devices of every member owned by lane (one sender connection), which
 * divide that lane's blocks (the automatic device-blocks share): add
 * delta (0 to read), return the sum. */
guint gst_rdma_receiver_add_lane_devices(GstRdmaReceiver *receiver,
                                         guint32 lane, gint delta);
/* Called with the member's element's object lock held, when it has a
 * pad for device (claim) or no more: a pads_only member's frames of
 * device come to it, or no longer; the catch-all's pads are noted, so
 * that a pads_only member can't take their devices.  Nothing for a
 * device-id member. */
void gst_rdma_receiver_route_pad(GstRdmaReceiver *receiver,
                                 GstRdmaReceiverMember *member, guint device,
                                 gboolean claim);
/* Is device routed to another member than this one, or a pad of the
 * catch-all when this one is not it? */
gboolean gst_rdma_receiver_device_taken(GstRdmaReceiver *receiver,
                                        GstRdmaReceiverMember *member,
                                        guint device);
/* Frames of devices no member asked for, dropped. */
guint64 gst_rdma_receiver_unclaimed_drops(GstRdmaReceiver *receiver);
/* Members now. */
guint gst_rdma_receiver_members(GstRdmaReceiver *receiver);

G_END_DECLS

#endif /* __GST_RDMA_RECEIVER_H__ */
