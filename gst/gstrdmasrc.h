/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef __GST_RDMA_SRC_H__
#define __GST_RDMA_SRC_H__

#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_RDMA_SRC (gst_rdma_src_get_type())
G_DECLARE_FINAL_TYPE(GstRdmaSrc, gst_rdma_src, GST, RDMA_SRC, GstElement)

G_END_DECLS

#endif /* __GST_RDMA_SRC_H__ */
