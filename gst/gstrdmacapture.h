/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmacapture.h - a frame's capture instant by this host's wall clock,
 * what rdmasink sends as the block's capture time.
 */
#ifndef GST_RDMA_CAPTURE_H
#define GST_RDMA_CAPTURE_H

#include <gst/gst.h>

G_BEGIN_DECLS

/* Nanoseconds of CLOCK_REALTIME since the Unix epoch at which buf was
 * captured.  running_time is buf's PTS as a running time
 * (GST_CLOCK_TIME_NONE: none); element gives the pipeline clock. */
guint64 gst_rdma_capture_time(GstElement *element, GstBuffer *buf,
                              GstClockTime running_time);

G_END_DECLS

#endif /* GST_RDMA_CAPTURE_H */
