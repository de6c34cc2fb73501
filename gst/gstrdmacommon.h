/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmacommon.h - what rdmasink and rdmasrc share besides their
 * properties (gstrdmaproperties.h): the periodic stats message, warnings
 * about refused senders, caps in system memory, and small helpers.
 */
#ifndef __GST_RDMA_COMMON_H__
#define __GST_RDMA_COMMON_H__

#include <gst/gst.h>

#include "gstrdmaenums.h"
#include "gstrdmaproperties.h"

G_BEGIN_DECLS

/* Builds an element's stats structure; called from the ticker's thread. */
typedef GstStructure *(*GstRdmaStatsFunc)(GstElement *element);

/* Posts func(element) as an element message every interval_ms on the system
 * clock's thread, so stats keep coming while no data flows: without its
 * structure-valued fields, each of which follows as a message of its own.
 * The ticker holds a reference to the element until it is stopped. */
typedef struct _GstRdmaStatsTicker GstRdmaStatsTicker;
GstRdmaStatsTicker *gst_rdma_stats_ticker_start(GstElement *element,
                                                guint interval_ms,
                                                GstRdmaStatsFunc func);
void gst_rdma_stats_ticker_stop(GstRdmaStatsTicker *ticker);

/* Warnings about refused senders, collapsed per sender host and reason: a
 * sender that retries (every lane busy, or an old one that never learns)
 * must not flood the bus.  The first refusal is posted at once; repeats
 * within GST_RDMA_REFUSAL_REPOST_S are counted, and the next one posted
 * after that says how many were not.  One thread only (rdmasrc's receive
 * thread, where libsbr reports refusals). */
#define GST_RDMA_REFUSAL_REPOST_S 10
typedef struct _GstRdmaRefusals GstRdmaRefusals;
GstRdmaRefusals *gst_rdma_refusals_new(void);
void gst_rdma_refusals_free(GstRdmaRefusals *refusals);
/* A GST_ELEMENT_WARNING on element: "Refused the sender at PEER: TEXT.",
 * details "peer", "reason" (sbr_refusal_name) and "repeats"; then the
 * element message "rdmasrc-sender-refused" with those and "description"
 * (TEXT). */
void gst_rdma_refusals_warn(GstRdmaRefusals *refusals, GstElement *element,
                            const gchar *peer, gint reason, const gchar *text);

/* Caps and memory features.  The transport carries bytes, which arrive in
 * system memory: caps with any other memory feature (memory:VAMemory,
 * memory:DMABuf, memory:CUDAMemory, memory:GLMemory, ...) describe memory
 * neither end provides. */
/* Whether every structure of caps is in system memory (no features, or
 * only memory:SystemMemory). */
gboolean gst_rdma_caps_is_system_memory(const GstCaps *caps);
/* caps without the structures in other memory; NULL stays NULL. */
GstCaps *gst_rdma_caps_system_memory_only(GstCaps *caps);
/* A CAPS block's text as caps with every structure's features set to
 * system memory, or NULL if it doesn't parse: a sender (an older rdmasink,
 * another implementation) may have sent the features of memory it mapped
 * to send. */
GstCaps *gst_rdma_caps_from_wire(const gchar *str);

/* Is text from the wire (caps, an EVENT block) nested no deeper than
 * GST_RDMA_WIRE_MAX_NESTING arrays, lists and ranges?  GStreamer 1.22's
 * parser recurses once a level: 30,000 levels (60 KB of "<") overflow a
 * thread's stack, so a sender could crash the receiving process with one
 * block; no stream carries more than a few levels.  Every opening counts,
 * inside strings too: a structure nested in a string is parsed in its
 * turn, with its own levels. */
#define GST_RDMA_WIRE_MAX_NESTING 64
gboolean gst_rdma_wire_nesting_ok(const gchar *text, gsize len);

/* CLOCK_REALTIME in ns: the capture time the sender stamps on a frame. */
guint64 gst_rdma_realtime_ns(void);

/* The reference-timestamp caps for capture times ("timestamp/x-unix"). */
GstCaps *gst_rdma_unix_timestamp_caps(void);

G_END_DECLS

#endif /* __GST_RDMA_COMMON_H__ */
