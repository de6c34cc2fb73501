/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmaelements.h - what the plugin file registers, and the one-time setup
 * every element runs before its first use.
 */
#ifndef __GST_RDMA_ELEMENTS_H__
#define __GST_RDMA_ELEMENTS_H__

#include <gst/gst.h>

G_BEGIN_DECLS

/* Who to write to about the elements (gst-inspect-1.0's "Author"): the
 * maintainers, as debian/copyright's Upstream-Contact. */
#define GST_RDMA_ELEMENT_AUTHOR                                                \
  "Seed 46b0f836 maintainers "                                                 \
  "<maintainers@users.noreply.a-seed-46b0f836.example>"

/* Routes libsbr's log into the "sbr" debug category and marks the enums as
 * plugin API (gstrdmalog.c).  Safe to call any number of times. */
void gst_rdma_element_init(GstPlugin *plugin);

GST_ELEMENT_REGISTER_DECLARE(rdmasink);
GST_ELEMENT_REGISTER_DECLARE(rdmasrc);
GST_ELEMENT_REGISTER_DECLARE(rdmaframeset);

G_END_DECLS

#endif /* __GST_RDMA_ELEMENTS_H__ */
