/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmaallocator.h - a GstAllocator whose memories are the payload areas
 * of registered send blocks, so upstream renders a frame straight into the
 * memory the NIC reads (zero copy from upstream to the wire).
 *
 * rdmasink offers one in propose_allocation.  A memory is one send block
 * taken with sbr_sender_acquire; when rdmasink renders a buffer made of one
 * such memory it submits the block (sbr_sender_submit) instead of copying.
 * From then on the block belongs to the library and will be reused for
 * other frames, so the memory is "retired": it can't be mapped any more
 * and is flagged READONLY, and the buffer gets GST_BUFFER_FLAG_TAG_MEMORY
 * so that a buffer pool (videotestsrc's, say) discards it on release instead
 * of handing the spent memory out again; the next buffer then gets a fresh
 * block.  A memory freed before it was rendered abandons its block.
 *
 * When no block can back a request the allocator still returns memory, from
 * the heap, so upstream never fails to allocate:
 *   - size (+ prefix/padding) above one block's payload, or an alignment or
 *     prefix the payload start can't honour: plain system memory, rendered
 *     by the copying path (which fragments large frames);
 *   - not connected, or no send block came within the backpressure policy:
 *     heap memory of this allocator.  It is retired when rendered, so a
 *     pool doesn't keep a blockless buffer in rotation; when the block was
 *     refused by backpressure the library already counted the frame as
 *     dropped, and rendering it drops it without waiting a second time.
 */
#ifndef __GST_RDMA_ALLOCATOR_H__
#define __GST_RDMA_ALLOCATOR_H__

#include <gst/gst.h>
#include <sbr.h>

#include "gstrdmaconnection.h"

G_BEGIN_DECLS

#define GST_RDMA_ALLOCATOR_NAME "RdmaSendBlock"

#define GST_TYPE_RDMA_ALLOCATOR (gst_rdma_allocator_get_type())
G_DECLARE_FINAL_TYPE(GstRdmaAllocator, gst_rdma_allocator, GST, RDMA_ALLOCATOR,
                     GstAllocator)

/* An allocator over conn's send blocks for one device (the device is only
 * used to count a backpressure drop against the right stream). */
GstAllocator *gst_rdma_allocator_new(GstRdmaConnection *conn, guint8 device);

typedef enum {
  GST_RDMA_MEMORY_FOREIGN, /* not ours, or not usable as a whole block */
  GST_RDMA_MEMORY_BLOCK,   /* a claimed send block: submit it */
  GST_RDMA_MEMORY_DROPPED, /* backpressure refused a block: already counted */
  GST_RDMA_MEMORY_HEAP,    /* ours but no block: copy it */
} GstRdmaMemoryKind;

/* For render: classifies a buffer for conn's sender.  BLOCK (a buffer of
 * exactly one of our block memories) claims the block (*block set; only
 * one caller ever gets it) and retires the memory: the caller must submit
 * the block or abandon it.  DROPPED and HEAP memories are retired too.
 * FOREIGN leaves the buffer alone. */
GstRdmaMemoryKind gst_rdma_buffer_claim(GstBuffer *buffer,
                                        GstRdmaConnection *conn,
                                        sbr_send_block **block);

G_END_DECLS

#endif /* __GST_RDMA_ALLOCATOR_H__ */
