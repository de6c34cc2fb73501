/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasrcstats.h - rdmasrc's "stats" property and "rdmasrc-stats"
 * message: what the structure holds and how it is laid out.
 *
 * Layout: the element-wide counters, then one field per device that has a
 * pad, "device-<N>" (device-0 ... device-255), whose value is a
 * "rdmasrc-device-stats" structure.  A field per device, not an array of
 * structures: an application asks for the camera it means
 * (gst_structure_get (s, "device-3", GST_TYPE_STRUCTURE, &d, NULL), in
 * Python s.get_value ("device-3") is a Gst.Structure), where a
 * GstValueArray needs a search and, in PyGObject, the deprecated
 * GValueArray; and no devices means no fields, not "devices=(int)< >".
 *
 * Threads: build the structure with the element's object lock held (it
 * guards the device table and the counters read here).
 */
#ifndef __GST_RDMA_SRC_STATS_H__
#define __GST_RDMA_SRC_STATS_H__

#include <gst/gst.h>
#include <sbr.h>

#include "gstrdmasrcdevice.h"

G_BEGIN_DECLS

/* What rdmasrc counts itself, element-wide. */
typedef struct {
  guint64 copies;                /* frames copied: over a share or max-held */
  guint64 no_caps_drops;         /* frames of a device without a stream */
  guint64 events_received;       /* EVENT blocks pushed as events */
  guint64 events_dropped;        /* EVENT blocks not understood */
  guint64 extras_dropped;        /* frame extras whose frame didn't come */
  guint64 metas_not_restored;    /* metas of frame extras not put back */
  guint held;                    /* lane blocks out (queued or downstream) */
  guint device_blocks;           /* the smallest device's share now (each has
                                    its lane's); 0 when stopped */
  guint shares[SBR_MAX_DEVICES]; /* each device's share now (its
                                    device-blocks) */
  guint64 unclaimed_drops;       /* the shared receiver's: frames of devices no
                                    rdmasrc on it asked for */
  guint receiver_members;        /* rdmasrcs sharing the receiver; 0 stopped */
  GstRdmaTimestampMode timestamp_mode; /* running with, else the property */
} GstRdmaSrcCounters;

/* The "stats" property, its blurb naming every field built below. */
GParamSpec *gst_rdma_src_stats_param_spec(void);

/* The "rdmasrc-stats" structure (see above).  receiver may be NULL (not
 * started): then only the counters, all zero, and no device fields. */
GstStructure *gst_rdma_src_stats_new(sbr_receiver *receiver,
                                     GstRdmaSrcDevice *const *devices,
                                     const GstRdmaSrcCounters *counters);

G_END_DECLS

#endif /* __GST_RDMA_SRC_STATS_H__ */
