/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmauri.h - rdma:// URIs for rdmasink and rdmasrc (GstURIHandler), so
 * playbin, uridecodebin, gst-play-1.0, GstPlay and OpenCV's URI mode open
 * a camera:
 *
 *   rdma://HOST:PORT/DEVICE?transport=shm&over-budget=pause
 *
 * HOST is rdmasink's host (the receiver) and rdmasrc's address (where it
 * listens; shm ignores it), PORT the port, DEVICE the device-id (rdmasrc
 * without one takes every device); every query key is a property of the
 * element, its value as on a launch line.  Set only in NULL or READY.
 */
#ifndef __GST_RDMA_URI_H__
#define __GST_RDMA_URI_H__

#include <gst/gst.h>

G_BEGIN_DECLS

/* G_IMPLEMENT_INTERFACE (GST_TYPE_URI_HANDLER, ...) of each element. */
void gst_rdma_src_uri_handler_init(gpointer g_iface, gpointer data);
void gst_rdma_sink_uri_handler_init(gpointer g_iface, gpointer data);

/* The "uri" property of both elements (srtsink and srtsrc have one), so a
 * launch line takes a URI: reads and writes through the handler above. */
GParamSpec *gst_rdma_uri_param_spec(void);
/* Sets uri (NULL: nothing).  A URI the handler refuses changes nothing;
 * why is kept in *uri_error (under the object lock; NULL once a URI is
 * set) and fails the element's start, as a typo must not run with other
 * settings. */
void gst_rdma_uri_property_set(GstURIHandler *handler, const gchar *uri,
                               gchar **uri_error);
/* At start, object lock held: TRUE when no URI was refused; else the
 * lock is released, the element error posted, and FALSE. */
gboolean gst_rdma_uri_error_check_locked(GstElement *element,
                                         const gchar *uri_error);

G_END_DECLS

#endif /* __GST_RDMA_URI_H__ */
