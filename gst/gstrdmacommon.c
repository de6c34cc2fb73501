/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmacommon.c - the helpers rdmasink and rdmasrc share (HOUSE-STYLE 11:
 * one place for the properties both have and for the stats message).
 */
#include "gstrdmacommon.h"

#include <time.h>

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
      "RDMA back end: \"verbs\" (rdma-core: RoCE, InfiniBand, Soft-RoCE) or "
      "\"shm\" (same host through shared memory; the port alone names the "
      "receiver)",
      GST_TYPE_RDMA_TRANSPORT, GST_RDMA_DEFAULT_TRANSPORT,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
}

GParamSpec *gst_rdma_param_spec_mechanism(void)
{
  return g_param_spec_enum(
      "mechanism", "Mechanism",
      "Block transfer mechanism; sender and receiver must agree: "
      "\"status-byte\" (one-sided, the receiver posts nothing) or "
      "\"sliding-window\" (the WRITE WITH IMMEDIATE baseline)",
      GST_TYPE_RDMA_MECHANISM, GST_RDMA_DEFAULT_MECHANISM,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
}

GParamSpec *gst_rdma_param_spec_stats(const gchar *blurb)
{
  return g_param_spec_boxed("stats", "Statistics", blurb, GST_TYPE_STRUCTURE,
                            G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
}

GParamSpec *gst_rdma_param_spec_stats_interval(const gchar *message_name,
                                               const gchar *nested_name)
{
  /* The blurb names the messages; interned so it can be static. */
  gchar *blurb =
      nested_name
          ? g_strdup_printf(
                "Post the stats as an element message \"%s\" every this "
                "many milliseconds (0 = never), each device's \"%s\" "
                "structure in it also as a message of its own (which "
                "gst-launch -m prints unescaped)",
                message_name, nested_name)
          : g_strdup_printf("Post the stats as an element message \"%s\" "
                            "every this many milliseconds (0 = never)",
                            message_name);
  const gchar *interned = g_intern_string(blurb);
  g_free(blurb);
  return g_param_spec_uint("stats-interval", "Stats interval", interned, 0,
                           G_MAXUINT, GST_RDMA_DEFAULT_STATS_INTERVAL,
                           G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                               GST_PARAM_MUTABLE_READY);
}

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
   * one (rdmasrc's "device-<N>") also goes out as a message of its own,
   * which it prints plainly.  Copied first: the bus owns s once posted. */
  nested = g_ptr_array_new();
  for (gint i = 0; i < gst_structure_n_fields(s); i++) {
    const GValue *v =
        gst_structure_get_value(s, gst_structure_nth_field_name(s, (guint)i));

    if (G_VALUE_HOLDS(v, GST_TYPE_STRUCTURE))
      g_ptr_array_add(nested, gst_structure_copy(gst_value_get_structure(v)));
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
