/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmalog.c - one-time setup shared by rdmasink and rdmasrc.
 *
 * libsbr never prints: it hands every message to one process-wide log
 * handler.  Here that handler forwards to the "sbr" debug category, so
 * GST_DEBUG=sbr:5 shows what the library saw (rdma_cm events, lanes,
 * rejected blocks) next to the elements' own logs.  The handler is installed
 * once per process behind g_once_init_enter, whichever element registers
 * first.
 */
#include "gstrdmaelements.h"
#include "gstrdmaenums.h"

#include <sbr.h>

GST_DEBUG_CATEGORY_STATIC(gst_rdma_lib_debug);

static void gst_rdma_log_handler(void *user_data, enum sbr_log_level level,
                                 const char *message)
{
  GstDebugLevel gst_level;

  (void)user_data;
  switch (level) {
  case SBR_LOG_ERROR:
    gst_level = GST_LEVEL_ERROR;
    break;
  case SBR_LOG_WARNING:
    gst_level = GST_LEVEL_WARNING;
    break;
  case SBR_LOG_INFO:
    gst_level = GST_LEVEL_INFO;
    break;
  case SBR_LOG_DEBUG:
  default:
    gst_level = GST_LEVEL_DEBUG;
    break;
  }
  GST_CAT_LEVEL_LOG(gst_rdma_lib_debug, gst_level, NULL, "%s", message);
}

void gst_rdma_element_init(GstPlugin *plugin)
{
  static gsize done = 0;

  (void)plugin;
  if (g_once_init_enter(&done)) {
    GST_DEBUG_CATEGORY_INIT(gst_rdma_lib_debug, "sbr", 0,
                            "libsbr, the status-byte RDMA block transport");
    sbr_set_log_handler(gst_rdma_log_handler, NULL);
    /* The property types are public API of this plugin (gst-inspect and
     * the documentation list their values). */
    gst_type_mark_as_plugin_api(GST_TYPE_RDMA_TRANSPORT, 0);
    gst_type_mark_as_plugin_api(GST_TYPE_RDMA_MECHANISM, 0);
    gst_type_mark_as_plugin_api(GST_TYPE_RDMA_BACKPRESSURE, 0);
    gst_type_mark_as_plugin_api(GST_TYPE_RDMA_OVER_BUDGET, 0);
    gst_type_mark_as_plugin_api(GST_TYPE_RDMA_POLL_MODE, 0);
    gst_type_mark_as_plugin_api(GST_TYPE_RDMA_TIMESTAMP_MODE, 0);
    g_once_init_leave(&done, 1);
  }
}
