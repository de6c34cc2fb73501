/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmaallocator.h - a GstAllocator whose memories are the payload areas
 * of registered send blocks, so upstream renders a frame straight into the
 * memory the NIC reads (zero copy from upstream to the wire), and the
 * buffer pool rdmasink proposes with it.
 *
 * rdmasink offers both in propose_allocation.  A memory is one send block
 * taken with sbr_sender_acquire.  The memory contract (issue 19,
 * docs/design.md "The memory contract"): a GstMemory stays readable, and
 * its bytes stay its frame, as long as anyone holds it; render never
 * changes a buffer or memory it doesn't own.  So the block goes back to
 * the sender only when the memory is freed and its WRITE has completed:
 * render submits it with sbr_sender_submit_keep, the memory's free
 * function releases it (sbr_sender_release), and a second render, or a
 * map for writing, first waits for the previous WRITE
 * (sbr_sender_wait_block).  When render alone can reach the memory
 * (basesink holds the buffer's only reference, the buffer the memory's
 * only one, and the buffer comes from no pool or from the pool below,
 * which never recycles) it submits the block plainly, to be taken back at
 * completion: over shm a block placed in the receiver's lane then goes
 * without a copy, where keeping it would copy it out of the lane.  A
 * memory freed without having been submitted abandons its block.
 *
 * When no block can back a request the allocator still returns memory, from
 * the heap, so upstream never fails to allocate:
 *   - size (+ prefix/padding) above one block's payload, or an alignment or
 *     prefix the payload start can't honour: plain system memory, rendered
 *     by the copying path (which fragments large frames);
 *   - not connected, or no send block came within the backpressure policy:
 *     heap memory of this allocator, copied when rendered.  When the block
 *     was refused by backpressure the library already counted the frame as
 *     dropped, and its first render drops it without waiting a second
 *     time; rendered again, it is copied like any frame.
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
  GST_RDMA_MEMORY_KEPT,    /* a send block someone else may read or render
                              again: wait for its last WRITE, submit it kept */
} GstRdmaMemoryKind;

/* The pool rdmasink proposes: a plain GstBufferPool (configured by
 * upstream with the allocator above) that frees every buffer released to
 * it instead of recycling it, so the next buffer gets a fresh block. */
#define GST_TYPE_RDMA_BUFFER_POOL (gst_rdma_buffer_pool_get_type())
G_DECLARE_FINAL_TYPE(GstRdmaBufferPool, gst_rdma_buffer_pool, GST,
                     RDMA_BUFFER_POOL, GstBufferPool)
GstBufferPool *gst_rdma_buffer_pool_new(void);

/* For render: classifies a buffer for conn's sender, changing neither the
 * buffer nor its flags.  BLOCK (a buffer of exactly one of our block
 * memories that only render can reach, see above) claims the block
 * (*block set; only one caller ever gets it): the caller must submit the
 * block or abandon it.  KEPT (any other buffer of exactly one of our
 * block memories): *block set, the memory keeps it; the caller waits for
 * its previous WRITE and submits it with sbr_sender_submit_keep, or
 * copies the buffer when that fails.  DROPPED: heap memory whose block
 * backpressure refused, rendered for the first time.  HEAP and FOREIGN
 * are copied. */
GstRdmaMemoryKind gst_rdma_buffer_claim(GstBuffer *buffer,
                                        GstRdmaConnection *conn,
                                        sbr_send_block **block);

G_END_DECLS

#endif /* __GST_RDMA_ALLOCATOR_H__ */
