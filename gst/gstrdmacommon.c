/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmacommon.c - the helpers rdmasink and rdmasrc share besides their
 * properties (gstrdmaproperties.c): the stats message, refused senders,
 * caps in system memory.
 */
#include "gstrdmacommon.h"

#include <string.h>
#include <time.h>

#include <sbr.h>

/* ------------------------------------------------------------ ticker */

struct _GstRdmaStatsTicker {
  GstClock *clock;     /* the system clock */
  GstClockID id;       /* periodic, waited on asynchronously */
  GstElement *element; /* referenced until stop */
  GstRdmaStatsFunc func;
};

static gboolean ticker_fired(GstClock *clock, GstClockTime time, GstClockID id,
                             gpointer user_data)
{
  GstRdmaStatsTicker *ticker = user_data;
  GstObject *src = GST_OBJECT(ticker->element);
  GPtrArray *nested;
  GstStructure *s;

  (void)clock;
  (void)time;
  (void)id;
  s = ticker->func(ticker->element);
  if (!s)
    return TRUE;
  /* gst-launch -m prints a nested structure as one escaped string (it
   * uses gst_structure_to_string, which keeps the pre-1.20 form), so each
   * one (rdmasrc's "device-<N>") goes out as a message of its own, which
   * it prints plainly, and only so: in the element's message too, every
   * device would be posted twice. */
  nested = g_ptr_array_new();
  for (gint i = gst_structure_n_fields(s) - 1; i >= 0; i--) {
    const gchar *name = gst_structure_nth_field_name(s, (guint)i);
    const GValue *v = gst_structure_get_value(s, name);

    if (G_VALUE_HOLDS(v, GST_TYPE_STRUCTURE)) {
      g_ptr_array_insert(nested, 0,
                         gst_structure_copy(gst_value_get_structure(v)));
      gst_structure_remove_field(s, name);
    }
  }
  gst_element_post_message(ticker->element, gst_message_new_element(src, s));
  for (guint i = 0; i < nested->len; i++)
    gst_element_post_message(ticker->element,
                             gst_message_new_element(src, nested->pdata[i]));
  g_ptr_array_free(nested, TRUE);
  return TRUE;
}

static void ticker_free(gpointer data)
{
  GstRdmaStatsTicker *ticker = data;

  gst_object_unref(ticker->element);
  gst_object_unref(ticker->clock);
  g_free(ticker);
}

GstRdmaStatsTicker *gst_rdma_stats_ticker_start(GstElement *element,
                                                guint interval_ms,
                                                GstRdmaStatsFunc func)
{
  GstRdmaStatsTicker *ticker;
  GstClockTime interval = (GstClockTime)interval_ms * GST_MSECOND;

  if (interval_ms == 0)
    return NULL;
  ticker = g_new0(GstRdmaStatsTicker, 1);
  ticker->clock = gst_system_clock_obtain();
  ticker->element = gst_object_ref(element);
  ticker->func = func;
  ticker->id = gst_clock_new_periodic_id(
      ticker->clock, gst_clock_get_time(ticker->clock) + interval, interval);
  /* The clock owns the ticker from here: ticker_free runs when the id is
   * unscheduled and its last callback has returned. */
  if (gst_clock_id_wait_async(ticker->id, ticker_fired, ticker, ticker_free) !=
      GST_CLOCK_OK) {
    gst_clock_id_unref(ticker->id);
    ticker_free(ticker);
    return NULL;
  }
  return ticker;
}

void gst_rdma_stats_ticker_stop(GstRdmaStatsTicker *ticker)
{
  GstClockID id;

  if (!ticker)
    return;
  id = ticker->id;
  gst_clock_id_unschedule(id);
  gst_clock_id_unref(id);
}

/* ------------------------------------------------------------ helpers */

guint64 gst_rdma_realtime_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_REALTIME, &ts);
  return (guint64)ts.tv_sec * GST_SECOND + (guint64)ts.tv_nsec;
}

GstCaps *gst_rdma_unix_timestamp_caps(void)
{
  static GstStaticCaps caps = GST_STATIC_CAPS("timestamp/x-unix");

  return gst_static_caps_get(&caps);
}

/* ------------------------------------------------------------ caps */

static gboolean features_are_system_memory(const GstCapsFeatures *f)
{
  return !f ||
         gst_caps_features_is_equal(f, GST_CAPS_FEATURES_MEMORY_SYSTEM_MEMORY);
}

gboolean gst_rdma_caps_is_system_memory(const GstCaps *caps)
{
  if (gst_caps_is_any(caps))
    return FALSE;
  for (guint i = 0; i < gst_caps_get_size(caps); i++)
    if (!features_are_system_memory(gst_caps_get_features(caps, i)))
      return FALSE;
  return TRUE;
}

GstCaps *gst_rdma_caps_system_memory_only(GstCaps *caps)
{
  GstCaps *out;

  if (!caps || gst_caps_is_any(caps))
    return caps ? gst_caps_ref(caps) : NULL;
  out = gst_caps_new_empty();
  for (guint i = 0; i < gst_caps_get_size(caps); i++) {
    GstCapsFeatures *f = gst_caps_get_features(caps, i);

    if (features_are_system_memory(f))
      gst_caps_append_structure_full(
          out, gst_structure_copy(gst_caps_get_structure(caps, i)),
          f ? gst_caps_features_copy(f) : NULL);
  }
  return out;
}

gboolean gst_rdma_wire_nesting_ok(const gchar *text, gsize len)
{
  gint depth = 0;

  for (gsize i = 0; i < len; i++) {
    gchar c = text[i];

    if (c == '<' || c == '{' || c == '[')
      depth++;
    else if ((c == '>' || c == '}' || c == ']') && depth > 0)
      depth--;
    if (depth > GST_RDMA_WIRE_MAX_NESTING)
      return FALSE;
  }
  return TRUE;
}

GstCaps *gst_rdma_caps_from_wire(const gchar *str)
{
  GstCaps *caps = gst_rdma_wire_nesting_ok(str, strlen(str))
                      ? gst_caps_from_string(str)
                      : NULL;

  if (!caps || gst_caps_is_any(caps))
    return caps;
  caps = gst_caps_make_writable(caps);
  for (guint i = 0; i < gst_caps_get_size(caps); i++)
    if (!features_are_system_memory(gst_caps_get_features(caps, i)))
      gst_caps_set_features(caps, i, NULL);
  return caps;
}

/* ------------------------------------------------------------ refusals */

typedef struct {
  gint64 posted_us; /* monotonic time of the last warning posted */
  guint repeats;    /* refusals not posted since */
} RefusalEntry;

struct _GstRdmaRefusals {
  GHashTable *seen; /* "host|reason" -> RefusalEntry */
};

GstRdmaRefusals *gst_rdma_refusals_new(void)
{
  GstRdmaRefusals *r = g_new0(GstRdmaRefusals, 1);

  r->seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  return r;
}

void gst_rdma_refusals_free(GstRdmaRefusals *refusals)
{
  if (!refusals)
    return;
  g_hash_table_unref(refusals->seen);
  g_free(refusals);
}

static gboolean refusal_expired(gpointer key, gpointer value, gpointer data)
{
  const RefusalEntry *e = value;
  (void)key;
  return *(const gint64 *)data - e->posted_us >
         GST_RDMA_REFUSAL_REPOST_S * G_USEC_PER_SEC;
}

void gst_rdma_refusals_warn(GstRdmaRefusals *refusals, GstElement *element,
                            const gchar *peer, gint reason, const gchar *text)
{
  gint64 now = g_get_monotonic_time();
  const gchar *colon = strrchr(peer, ':');
  gsize host_len = strlen(peer);
  RefusalEntry *e;
  GstStructure *details;
  GstResourceError code;
  gchar *key, *debug;
  guint repeats;

  /* One sender host: a verbs peer's port changes with every attempt
   * ("10.0.0.2:41234"); "shm:pid=7" names one process. */
  if (colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1))
    host_len = (gsize)(colon - peer);
  key = g_strdup_printf("%.*s|%d", (int)host_len, peer, reason);
  e = g_hash_table_lookup(refusals->seen, key);
  if (e && now - e->posted_us < GST_RDMA_REFUSAL_REPOST_S * G_USEC_PER_SEC) {
    e->repeats++;
    g_free(key);
    return;
  }
  if (!e) {
    if (g_hash_table_size(refusals->seen) >= 64)
      g_hash_table_foreach_remove(refusals->seen, refusal_expired, &now);
    e = g_new0(RefusalEntry, 1);
    g_hash_table_insert(refusals->seen, key, e);
  } else {
    g_free(key);
  }
  repeats = e->repeats;
  e->repeats = 0;
  e->posted_us = now;

  switch (reason) {
  case SBR_REFUSAL_LANES_FULL:
  case SBR_REFUSAL_RESOURCES:
  case SBR_REFUSAL_BUSY:
    code = GST_RESOURCE_ERROR_BUSY;
    break;
  case SBR_REFUSAL_NOT_ALLOWED:
    code = GST_RESOURCE_ERROR_NOT_AUTHORIZED;
    break;
  default: /* version, mechanism, geometry, malformed: the two ends differ */
    code = GST_RESOURCE_ERROR_SETTINGS;
    break;
  }
  debug =
      repeats
          ? g_strdup_printf("reason %s; %u more refusal(s) of %.*s for "
                            "it in the last %d s were not posted",
                            sbr_refusal_name((enum sbr_refusal)reason), repeats,
                            (int)host_len, peer, GST_RDMA_REFUSAL_REPOST_S)
          : g_strdup_printf("reason %s; repeats from %.*s are posted at "
                            "most every %d s",
                            sbr_refusal_name((enum sbr_refusal)reason),
                            (int)host_len, peer, GST_RDMA_REFUSAL_REPOST_S);
  details = gst_structure_new("rdma-refusal", "peer", G_TYPE_STRING, peer,
                              "reason", G_TYPE_STRING,
                              sbr_refusal_name((enum sbr_refusal)reason),
                              "repeats", G_TYPE_UINT, repeats, NULL);
  gst_element_message_full_with_details(
      element, GST_MESSAGE_WARNING, GST_RESOURCE_ERROR, code,
      g_strdup_printf("Refused the sender at %s: %s.", peer, text), debug,
      __FILE__, GST_FUNCTION, __LINE__, details);
  /* The same as an element message, named like rdmasrc's others, for
   * applications that watch senders come and go rather than warnings. */
  gst_element_post_message(
      element,
      gst_message_new_element(
          GST_OBJECT(element),
          gst_structure_new("rdmasrc-sender-refused", "peer", G_TYPE_STRING,
                            peer, "reason", G_TYPE_STRING,
                            sbr_refusal_name((enum sbr_refusal)reason),
                            "description", G_TYPE_STRING, text, "repeats",
                            G_TYPE_UINT, repeats, NULL)));
}
