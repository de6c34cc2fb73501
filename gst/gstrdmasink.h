/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef __GST_RDMA_SINK_H__
#define __GST_RDMA_SINK_H__

#include <gst/base/gstbasesink.h>
#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_RDMA_SINK (gst_rdma_sink_get_type())
G_DECLARE_FINAL_TYPE(GstRdmaSink, gst_rdma_sink, GST, RDMA_SINK, GstBaseSink)

G_END_DECLS

#endif /* __GST_RDMA_SINK_H__ */
