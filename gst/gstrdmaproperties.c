/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmaproperties.c - the property helper of rdmasink and rdmasrc
 * (gstrdmaproperties.h).
 */
#include "gstrdmaproperties.h"

#include "gstrdmauri.h"

GParamSpec *gst_rdma_param_spec_port(const gchar *blurb)
{
  return g_param_spec_uint(
      "port", "Port", blurb, 1, G_MAXUINT16, GST_RDMA_DEFAULT_PORT,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
}

GParamSpec *gst_rdma_param_spec_transport(void)
{
  return g_param_spec_enum(
      "transport", "Transport",
      "RDMA back end: verbs (rdma-core: RoCE, InfiniBand, Soft-RoCE) or shm "
      "(same host, through shared memory)",
      GST_TYPE_RDMA_TRANSPORT, GST_RDMA_DEFAULT_TRANSPORT,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
}

GParamSpec *gst_rdma_param_spec_mechanism(void)
{
  return g_param_spec_enum(
      "mechanism", "Mechanism",
      "Block transfer mechanism, the same at both ends: status-byte "
      "(one-sided) or sliding-window (the baseline)",
      GST_TYPE_RDMA_MECHANISM, GST_RDMA_DEFAULT_MECHANISM,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
}

GParamSpec *gst_rdma_param_spec_stats(const gchar *blurb)
{
  return g_param_spec_boxed("stats", "Statistics", blurb, GST_TYPE_STRUCTURE,
                            G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
}

GParamSpec *gst_rdma_param_spec_tos(void)
{
  return g_param_spec_int(
      "tos", "TOS",
      "IP TOS byte of the RDMA traffic (RoCE v2, iWARP: DSCP x 4, e.g. 96 "
      "for DSCP 24, to match a PFC/ECN class); -1 = rdma_cm's default",
      -1, 255, GST_RDMA_DEFAULT_TOS,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
}

GParamSpec *gst_rdma_param_spec_max_meta_size(const gchar *blurb)
{
  return g_param_spec_uint("max-meta-size", "Max meta size", blurb, 256,
                           G_MAXINT, GST_RDMA_DEFAULT_MAX_META_SIZE,
                           G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                               GST_PARAM_MUTABLE_PLAYING);
}

GParamSpec *gst_rdma_param_spec_ack_timeout(void)
{
  return g_param_spec_uint(
      "ack-timeout", "ACK timeout",
      "Exponent of the QP's ACK timeout, 4.096 us x 2^n a try (15: 134 ms); "
      "0 = rdma_cm's default",
      0, 31, GST_RDMA_DEFAULT_ACK_TIMEOUT,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
}

GParamSpec *gst_rdma_param_spec_comp_vector(void)
{
  return g_param_spec_int(
      "comp-vector", "Completion vector",
      "Completion vector of the connection's CQs (modulo the device's "
      "count); -1 = spread connections over them",
      -1, G_MAXINT, GST_RDMA_DEFAULT_COMP_VECTOR,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
}

GParamSpec *gst_rdma_param_spec_stats_interval(const gchar *message_name,
                                               const gchar *nested_name)
{
  /* The blurb names the messages; interned so it can be static. */
  gchar *blurb =
      nested_name
          ? g_strdup_printf("Milliseconds between stats messages (0 = none): "
                            "\"%s\" with the element-wide counters and one "
                            "\"%s\" per device",
                            message_name, nested_name)
          : g_strdup_printf("Milliseconds between \"%s\" element messages "
                            "(0 = none)",
                            message_name);
  const gchar *interned = g_intern_string(blurb);
  g_free(blurb);
  return g_param_spec_uint("stats-interval", "Stats interval", interned, 0,
                           G_MAXUINT, GST_RDMA_DEFAULT_STATS_INTERVAL,
                           G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                               GST_PARAM_MUTABLE_READY);
}

/* ------------------------------------------------------------ set/get */

static gpointer field_of(GObject *object, const GstRdmaPropertyTable *table,
                         guint prop_id)
{
  if (prop_id >= table->n_fields || table->fields[prop_id] == 0)
    return NULL;
  return G_STRUCT_MEMBER_P(object, table->fields[prop_id]);
}

static gboolean is_uri(GParamSpec *pspec)
{
  return g_str_equal(g_param_spec_get_name(pspec), "uri");
}

/* Object lock held: into the field from value (set), or out of it, as a
 * field of pspec's type is stored (guint, gint, gboolean, an enum as an
 * int, gchar *).  A string set to NULL takes the spec's default. */
static void field_transfer(gpointer field, GParamSpec *pspec, GValue *value,
                           gboolean set)
{
  const gchar *str;

  switch (G_TYPE_FUNDAMENTAL(G_PARAM_SPEC_VALUE_TYPE(pspec))) {
  case G_TYPE_UINT:
    if (set)
      *(guint *)field = g_value_get_uint(value);
    else
      g_value_set_uint(value, *(guint *)field);
    break;
  case G_TYPE_INT:
    if (set)
      *(gint *)field = g_value_get_int(value);
    else
      g_value_set_int(value, *(gint *)field);
    break;
  case G_TYPE_BOOLEAN:
    if (set)
      *(gboolean *)field = g_value_get_boolean(value);
    else
      g_value_set_boolean(value, *(gboolean *)field);
    break;
  case G_TYPE_ENUM:
    if (set)
      *(gint *)field = g_value_get_enum(value);
    else
      g_value_set_enum(value, *(gint *)field);
    break;
  case G_TYPE_STRING:
    if (!set) {
      g_value_set_string(value, *(gchar **)field);
      break;
    }
    str = g_value_get_string(value);
    g_free(*(gchar **)field);
    *(gchar **)field =
        g_strdup(str ? str : G_PARAM_SPEC_STRING(pspec)->default_value);
    break;
  default:
    g_assert_not_reached();
  }
}

/* set: value is only read. */
static gboolean property_transfer(GObject *object,
                                  const GstRdmaPropertyTable *table,
                                  guint prop_id, GParamSpec *pspec,
                                  GValue *value, gboolean set)
{
  gpointer field = field_of(object, table, prop_id);

  if (!field && is_uri(pspec)) {
    /* Not under the lock: the handler sets the other properties. */
    if (set)
      gst_rdma_uri_property_set(GST_URI_HANDLER(object),
                                g_value_get_string(value),
                                G_STRUCT_MEMBER_P(object, table->uri_error));
    else
      g_value_take_string(value,
                          gst_uri_handler_get_uri(GST_URI_HANDLER(object)));
    return TRUE;
  }
  if (!field)
    return FALSE;
  GST_OBJECT_LOCK(object);
  field_transfer(field, pspec, value, set);
  GST_OBJECT_UNLOCK(object);
  return TRUE;
}

gboolean gst_rdma_property_set(GObject *object,
                               const GstRdmaPropertyTable *table, guint prop_id,
                               GParamSpec *pspec, const GValue *value)
{
  return property_transfer(object, table, prop_id, pspec, (GValue *)value,
                           TRUE);
}

gboolean gst_rdma_property_get(GObject *object,
                               const GstRdmaPropertyTable *table, guint prop_id,
                               GParamSpec *pspec, GValue *value)
{
  return property_transfer(object, table, prop_id, pspec, value, FALSE);
}
