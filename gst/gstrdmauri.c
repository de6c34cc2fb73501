/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmauri.c - rdma:// URIs (gstrdmauri.h).
 *
 * A URI is checked whole before anything is set: a bad key or value
 * leaves the element as it was, and the error names what is wrong.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstrdmauri.h"

#include <string.h>

/* The property HOST sets: rdmasink connects to "host", rdmasrc listens
 * on "address". */
static const gchar *host_property(GstURIHandler *handler)
{
  return g_object_class_find_property(G_OBJECT_GET_CLASS(handler), "host")
             ? "host"
             : "address";
}

static const gchar *const *gst_rdma_uri_protocols(GType type)
{
  static const gchar *const protocols[] = {"rdma", NULL};

  (void)type;
  return protocols;
}

static GstURIType gst_rdma_src_uri_type(GType type)
{
  (void)type;
  return GST_URI_SRC;
}

static GstURIType gst_rdma_sink_uri_type(GType type)
{
  (void)type;
  return GST_URI_SINK;
}

/* rdma://HOST:PORT/DEVICE?transport=NICK from the properties now. */
static gchar *gst_rdma_uri_get(GstURIHandler *handler)
{
  gchar *host = NULL, *transport, *path = NULL, *str;
  guint port = 0;
  gint device = -1;
  GValue v = G_VALUE_INIT;
  GstUri *uri;

  g_object_get(handler, host_property(handler), &host, "port", &port,
               "device-id", &device, NULL);
  g_value_init(&v, G_PARAM_SPEC_VALUE_TYPE(g_object_class_find_property(
                       G_OBJECT_GET_CLASS(handler), "transport")));
  g_object_get_property(G_OBJECT(handler), "transport", &v);
  transport = gst_value_serialize(&v);
  g_value_unset(&v);
  if (device >= 0)
    path = g_strdup_printf("/%d", device);
  uri = gst_uri_new("rdma", NULL, host, port, path, NULL, NULL);
  gst_uri_set_query_value(uri, "transport", transport);
  str = gst_uri_to_string(uri);
  gst_uri_unref(uri);
  g_free(host);
  g_free(path);
  g_free(transport);
  return str;
}

/* One property name and its value, parsed and checked. */
typedef struct {
  const gchar *name;
  GValue value;
} Setting;

static void setting_clear(gpointer data)
{
  Setting *s = data;

  if (G_IS_VALUE(&s->value))
    g_value_unset(&s->value);
}

/* value (a URI's text) as a value of the element's property name. */
static gboolean parse_setting(GstURIHandler *handler, const gchar *name,
                              const gchar *value, Setting *out, GError **error)
{
  GParamSpec *pspec =
      g_object_class_find_property(G_OBJECT_GET_CLASS(handler), name);

  if (!pspec || !(pspec->flags & G_PARAM_WRITABLE) ||
      (pspec->flags & G_PARAM_CONSTRUCT_ONLY) ||
      !g_strcmp0(name, host_property(handler)) || !g_strcmp0(name, "port") ||
      !g_strcmp0(name, "device-id")) {
    g_set_error(error, GST_URI_ERROR, GST_URI_ERROR_BAD_URI,
                "%s has no property \"%s\" a URI can set (host, port and "
                "device are the URI's own)",
                G_OBJECT_TYPE_NAME(handler), name);
    return FALSE;
  }
  out->name = pspec->name; /* static: outlives the query table */
  g_value_init(&out->value, G_PARAM_SPEC_VALUE_TYPE(pspec));
  if (!value || !gst_value_deserialize(&out->value, value) ||
      g_param_value_validate(pspec, &out->value)) {
    g_set_error(error, GST_URI_ERROR, GST_URI_ERROR_BAD_URI,
                "\"%s\" is not a value of %s's %s", value ? value : "",
                G_OBJECT_TYPE_NAME(handler), name);
    g_value_unset(&out->value);
    return FALSE;
  }
  return TRUE;
}

/* GstUri takes any number as a port and reads 0 as none
 * (GST_URI_NO_PORT): the port is checked here, where the application
 * (playbin, gst-play-1.0) hears what is wrong, rather than have GObject
 * refuse it with a warning, or the default port taken, and the element
 * wait on a port nobody named.  GUri tells 0 from none (-1). */
static gboolean uri_port_ok(const gchar *str)
{
  GError *err = NULL;
  gint port = -1;

  if (!g_uri_split_network(str, G_URI_FLAGS_NONE, NULL, NULL, &port, &err)) {
    /* Anything else wrong is GstUri's to say. */
    gboolean bad_port = g_error_matches(err, G_URI_ERROR, G_URI_ERROR_BAD_PORT);

    g_error_free(err);
    return !bad_port;
  }
  return port != 0;
}

static gboolean gst_rdma_uri_set(GstURIHandler *handler, const gchar *str,
                                 GError **error)
{
  GstElement *element = GST_ELEMENT(handler);
  GArray *settings = g_array_new(FALSE, TRUE, sizeof(Setting));
  GHashTable *query = NULL;
  gboolean ok = FALSE;
  const gchar *path;
  gint device = -1;
  GstUri *uri;

  g_array_set_clear_func(settings, setting_clear);
  GST_OBJECT_LOCK(element);
  if (GST_STATE(element) > GST_STATE_READY) {
    GST_OBJECT_UNLOCK(element);
    g_set_error(error, GST_URI_ERROR, GST_URI_ERROR_BAD_STATE,
                "The URI of %s can't change while it runs",
                GST_OBJECT_NAME(element));
    g_array_unref(settings);
    return FALSE;
  }
  GST_OBJECT_UNLOCK(element);

  uri = gst_uri_from_string(str);
  if (!uri || g_strcmp0(gst_uri_get_scheme(uri), "rdma") != 0 ||
      !gst_uri_get_host(uri) || !gst_uri_get_host(uri)[0]) {
    g_set_error(error, GST_URI_ERROR, GST_URI_ERROR_BAD_URI,
                "Not an rdma://HOST:PORT/DEVICE URI: %s", str);
    goto out;
  }
  if (!uri_port_ok(str)) {
    g_set_error(error, GST_URI_ERROR, GST_URI_ERROR_BAD_URI,
                "The port is a number from 1 to 65535: %s", str);
    goto out;
  }
  path = gst_uri_get_path(uri);
  if (path && path[0] == '/')
    path++;
  if (path && path[0]) {
    gchar *end = NULL;
    guint64 n = g_ascii_strtoull(path, &end, 10);

    if (!g_ascii_isdigit(path[0]) || *end || n > 255) {
      g_set_error(error, GST_URI_ERROR, GST_URI_ERROR_BAD_URI,
                  "The device after the port is a number from 0 to 255: %s",
                  str);
      goto out;
    }
    device = (gint)n;
  }
  query = gst_uri_get_query_table(uri);
  if (query) {
    GHashTableIter iter;
    gpointer key, value;

    g_hash_table_iter_init(&iter, query);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
      Setting s = {0};

      if (!parse_setting(handler, key, value, &s, error))
        goto out;
      g_array_append_val(settings, s);
    }
  }

  /* All checked: set. */
  g_object_set(element, host_property(handler), gst_uri_get_host(uri), NULL);
  if (gst_uri_get_port(uri) != GST_URI_NO_PORT)
    g_object_set(element, "port", gst_uri_get_port(uri), NULL);
  if (device >= 0 || !g_strcmp0(host_property(handler), "address"))
    g_object_set(element, "device-id", device, NULL);
  for (guint i = 0; i < settings->len; i++) {
    Setting *s = &g_array_index(settings, Setting, i);

    g_object_set_property(G_OBJECT(element), s->name, &s->value);
  }
  ok = TRUE;
out:
  if (query)
    g_hash_table_unref(query);
  if (uri)
    gst_uri_unref(uri);
  g_array_unref(settings);
  return ok;
}

void gst_rdma_src_uri_handler_init(gpointer g_iface, gpointer data)
{
  GstURIHandlerInterface *iface = g_iface;

  (void)data;
  iface->get_type = gst_rdma_src_uri_type;
  iface->get_protocols = gst_rdma_uri_protocols;
  iface->get_uri = gst_rdma_uri_get;
  iface->set_uri = gst_rdma_uri_set;
}

void gst_rdma_sink_uri_handler_init(gpointer g_iface, gpointer data)
{
  GstURIHandlerInterface *iface = g_iface;

  (void)data;
  iface->get_type = gst_rdma_sink_uri_type;
  iface->get_protocols = gst_rdma_uri_protocols;
  iface->get_uri = gst_rdma_uri_get;
  iface->set_uri = gst_rdma_uri_set;
}

GParamSpec *gst_rdma_uri_param_spec(void)
{
  return g_param_spec_string(
      "uri", "URI",
      "rdma://HOST:PORT/DEVICE?property=value&...: host or address, port, "
      "device-id and any other property at once",
      NULL,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
}

static gchar *uri_set(GstURIHandler *handler, const gchar *uri)
{
  GError *error = NULL;
  gchar *why;

  if (!uri || gst_uri_handler_set_uri(handler, uri, &error))
    return NULL;
  why = g_strdup(error->message);
  GST_WARNING_OBJECT(handler, "uri not set: %s", why);
  g_error_free(error);
  return why;
}

void gst_rdma_uri_property_set(GstURIHandler *handler, const gchar *uri,
                               gchar **uri_error)
{
  /* The handler sets the other properties, taking the lock itself. */
  gchar *why = uri_set(handler, uri);

  GST_OBJECT_LOCK(handler);
  g_free(*uri_error);
  *uri_error = why;
  GST_OBJECT_UNLOCK(handler);
}

gboolean gst_rdma_uri_error_check_locked(GstElement *element,
                                         const gchar *uri_error)
{
  gchar *why;

  if (!uri_error)
    return TRUE;
  why = g_strdup(uri_error);
  GST_OBJECT_UNLOCK(element);
  GST_ELEMENT_ERROR(element, RESOURCE, SETTINGS, ("Bad uri: %s", why), (NULL));
  g_free(why);
  return FALSE;
}
