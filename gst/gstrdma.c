/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdma.c - the "rdma" plugin: registers rdmasink, rdmasrc and
 * rdmaframeset, nothing else (one-time setup lives in gstrdmalog.c, run by
 * the RDMA elements' registration; rdmaframeset has none).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstrdmaelements.h"

static gboolean plugin_init(GstPlugin *plugin)
{
  gboolean ret = FALSE;

  ret |= GST_ELEMENT_REGISTER(rdmasink, plugin);
  ret |= GST_ELEMENT_REGISTER(rdmasrc, plugin);
  ret |= GST_ELEMENT_REGISTER(rdmaframeset, plugin);
  return ret;
}

GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, rdma,
                  "Live video between hosts over one-sided RDMA (status-byte "
                  "block transport)",
                  plugin_init, PACKAGE_VERSION, GST_LICENSE, GST_PACKAGE_NAME,
                  GST_PACKAGE_ORIGIN)
