/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmaextras.h - what a buffer carries beyond the block header: the
 * buffer flags the header has no bit for (MARKER, DROPPABLE, CORRUPTED,
 * GAP, DECODE_ONLY, RESYNC, NON_DROPPABLE) and its metas, as one
 * "rdma-frame" structure that rdmasink sends as an EVENT block right
 * before the frame and rdmasrc puts back on it (docs/protocol.md,
 * "Frame extras").
 *
 * GStreamer 1.22 has no meta serialization (unixfdsink's came in 1.24),
 * so the metas that cross are the ones written here: GstVideoMeta whose
 * layout isn't the caps' default (padded strides, planes apart), time
 * codes, regions of interest with their parameters, captions, reference
 * timestamps other than timestamp/x-unix (which is the block's capture
 * time), protection metas, and every custom meta
 * (gst_meta_register_custom: its structure, restored when the receiving
 * process registered the same name).  Others can't be written out: they
 * go where the application writes them out (rdmasink's serialize-meta)
 * and reads them back (rdmasrc's deserialize-meta), else are counted, not
 * sent.  A frame with nothing of this sends no event.
 */
#ifndef GST_RDMA_EXTRAS_H
#define GST_RDMA_EXTRAS_H

#include <gst/gst.h>
#include <gst/video/video.h>

G_BEGIN_DECLS

/* The buffer flags that cross in the extras. */
#define GST_RDMA_EXTRAS_FLAGS                                                  \
  (GST_BUFFER_FLAG_DROPPABLE | GST_BUFFER_FLAG_CORRUPTED |                     \
   GST_BUFFER_FLAG_GAP | GST_BUFFER_FLAG_DECODE_ONLY |                         \
   GST_BUFFER_FLAG_RESYNC | GST_BUFFER_FLAG_NON_DROPPABLE)

/* An application's writer and reader of metas this file doesn't know
 * (rdmasink's "serialize-meta" and rdmasrc's "deserialize-meta"
 * signals): the meta's fields (transfer full), or NULL when the writer
 * doesn't know it either; TRUE when the reader put a meta of api back. */
typedef GstStructure *(*GstRdmaMetaWriter)(GstBuffer *buf, GstMeta *meta,
                                           gpointer data);
typedef gboolean (*GstRdmaMetaReader)(GstBuffer *buf, const gchar *api,
                                      const GstStructure *fields,
                                      gpointer data);

/* buf's extras, or NULL when it has none.  info: the stream's video
 * layout from its caps (NULL for other caps), so a GstVideoMeta that only
 * says it goes unsent.  *not_carried: metas of buf that can't cross. */
GstStructure *gst_rdma_extras_from_buffer(GstBuffer *buf,
                                          const GstVideoInfo *info,
                                          GstRdmaMetaWriter writer,
                                          gpointer data, guint *not_carried);

/* An EVENT block's text as a structure, or NULL: not text GStreamer
 * parses, or nested too deep to parse safely (gst_rdma_wire_nesting_ok,
 * gstrdmacommon.h). */
GstStructure *gst_rdma_event_parse(const gchar *text, gsize len);

/* Makes *s fit max bytes as text (what goes on the wire): drops its
 * largest metas until it does.  Returns how many it dropped; *s becomes
 * NULL (freed) when nothing is left to say (no flags, no metas). */
guint gst_rdma_extras_fit(GstStructure **s, gsize max);

/* Puts s's flags and metas on buf (writable); info: the stream's video
 * caps (NULL for others), which a layout must fit.  Returns how many
 * metas could not be restored (a custom meta this process hasn't
 * registered, a malformed entry, a layout that doesn't fit the caps or
 * the buffer). */
guint gst_rdma_extras_apply(const GstStructure *s, GstBuffer *buf,
                            const GstVideoInfo *info, GstRdmaMetaReader reader,
                            gpointer data);

/* Does s carry a frame layout (a GstVideoMeta)? */
gboolean gst_rdma_extras_has_layout(const GstStructure *s);

/* buf's GstVideoMeta layout as a GstVideoInfo (stride and offset of each
 * plane), TRUE when it differs from info's default one. */
gboolean gst_rdma_extras_layout_differs(GstBuffer *buf,
                                        const GstVideoInfo *info);

/* buf's frame copied into info's default layout, for a consumer that
 * doesn't read GstVideoMeta (GStreamer's rule: non-default strides only
 * where the allocation query says downstream takes the meta); its other
 * metas, flags and times kept.  Takes buf; returns it as it is when it
 * can't be mapped as a frame of info. */
GstBuffer *gst_rdma_extras_to_default_layout(GstBuffer *buf,
                                             const GstVideoInfo *info);

G_END_DECLS

#endif
