/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmaframeset.h - rdmaframeset: the frames of every camera captured at
 * one instant, as one buffer list (the SECTION in gstrdmaframeset.c).  No
 * RDMA here: it aggregates any live sources whose PTS say when their frames
 * were captured (rdmasrc timestamp-mode=capture does).
 *
 * What an application reads, from C or from Python (GstCustomMeta: no type
 * of ours to introspect):
 *   every buffer of a set: gst_buffer_get_custom_meta (buf,
 *     GST_RDMA_FRAME_META_NAME), its structure "rdma-frame";
 *   the set's first buffer also: gst_buffer_get_custom_meta (buf,
 *     GST_RDMA_FRAME_SET_META_NAME), its structure "rdma-frame-set".
 * Both are registered when the element's type is.
 */
#ifndef __GST_RDMA_FRAME_SET_H__
#define __GST_RDMA_FRAME_SET_H__

#include <gst/base/gstaggregator.h>
#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_RDMA_FRAME_META_NAME "GstRdmaFrameMeta"
#define GST_RDMA_FRAME_SET_META_NAME "GstRdmaFrameSetMeta"

#define GST_TYPE_RDMA_FRAME_SET_PAD (gst_rdma_frame_set_pad_get_type())
G_DECLARE_FINAL_TYPE(GstRdmaFrameSetPad, gst_rdma_frame_set_pad, GST,
                     RDMA_FRAME_SET_PAD, GstAggregatorPad)

#define GST_TYPE_RDMA_FRAME_SET (gst_rdma_frame_set_get_type())
G_DECLARE_FINAL_TYPE(GstRdmaFrameSet, gst_rdma_frame_set, GST, RDMA_FRAME_SET,
                     GstAggregator)

G_END_DECLS

#endif /* __GST_RDMA_FRAME_SET_H__ */
