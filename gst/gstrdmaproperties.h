/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmaproperties.h - the property helper rdmasink and rdmasrc share: the
 * specs of the properties both have (so the two document them alike), and
 * one set/get for every property that is a plain field of the instance, as
 * srt's elements hand theirs to gst_srt_object_set_property_helper.
 *
 * An element lists where each such property lives (a GstRdmaPropertyTable
 * of field offsets by property id) and its set_property/get_property hand
 * everything else to the helper after handling what does more than store
 * a value (stats, device-id's pad, a latency message).  The helper takes
 * the object lock for fields and not for "uri", whose handler sets the
 * other properties itself.
 */
#ifndef __GST_RDMA_PROPERTIES_H__
#define __GST_RDMA_PROPERTIES_H__

#include <gst/gst.h>

#include "gstrdmaenums.h"

G_BEGIN_DECLS

#define GST_RDMA_DEFAULT_PORT 7471
#define GST_RDMA_DEFAULT_TRANSPORT GST_RDMA_TRANSPORT_VERBS
#define GST_RDMA_DEFAULT_MECHANISM GST_RDMA_MECHANISM_STATUS_BYTE
/* Periodic stats messages are opt-in, as upstream's elements do (srt,
 * rtpbin): 0 = none; the stats property is always there. */
#define GST_RDMA_DEFAULT_STATS_INTERVAL 0
/* Fabric settings (libsbr's configs, docs/hardware.md "Fabric
 * settings"); verbs only, shm ignores them. */
#define GST_RDMA_DEFAULT_TOS (-1)
#define GST_RDMA_DEFAULT_ACK_TIMEOUT 15
#define GST_RDMA_DEFAULT_COMP_VECTOR (-1)
/* A frame's flags and metas on the wire (gstrdmaextras.h): 64 KiB holds
 * hundreds of regions of interest; the receiver's bound is the same, so
 * the two defaults agree. */
#define GST_RDMA_DEFAULT_MAX_META_SIZE 65536

/* Property specs both elements install (G_PARAM_STATIC_STRINGS, and
 * GST_PARAM_MUTABLE_READY where the value is only read at start). */
GParamSpec *gst_rdma_param_spec_port(const gchar *blurb);
GParamSpec *gst_rdma_param_spec_transport(void);
GParamSpec *gst_rdma_param_spec_mechanism(void);
GParamSpec *gst_rdma_param_spec_stats(const gchar *blurb);
GParamSpec *gst_rdma_param_spec_tos(void);
GParamSpec *gst_rdma_param_spec_ack_timeout(void);
GParamSpec *gst_rdma_param_spec_comp_vector(void);
GParamSpec *gst_rdma_param_spec_max_meta_size(const gchar *blurb);
/* nested_name: what the structures nested in the stats are called (they
 * are posted on their own too, see the ticker), or NULL. */
GParamSpec *gst_rdma_param_spec_stats_interval(const gchar *message_name,
                                               const gchar *nested_name);

/* Where an element keeps its properties: fields[prop_id] is the offset in
 * the instance of the field a plain property is stored in (0: not one;
 * its type follows the spec's: guint, gint, gboolean, an enum, gchar *),
 * uri_error the offset of the gchar * that keeps why a "uri" could not
 * be set (the start fails with it, gstrdmauri.h). */
typedef struct {
  const gsize *fields;
  guint n_fields;
  gsize uri_error;
} GstRdmaPropertyTable;

/* FALSE when prop_id is none of the table's (and not "uri"): the caller
 * warns, as for any invalid property id.  A string set to NULL takes the
 * spec's default. */
gboolean gst_rdma_property_set(GObject *object,
                               const GstRdmaPropertyTable *table, guint prop_id,
                               GParamSpec *pspec, const GValue *value);
gboolean gst_rdma_property_get(GObject *object,
                               const GstRdmaPropertyTable *table, guint prop_id,
                               GParamSpec *pspec, GValue *value);

G_END_DECLS

#endif /* __GST_RDMA_PROPERTIES_H__ */
