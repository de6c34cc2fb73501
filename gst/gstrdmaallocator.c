/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmaallocator.c - memories over registered send blocks (see the
 * header for the life of a memory).
 */
#include "gstrdmaallocator.h"

GST_DEBUG_CATEGORY_STATIC(gst_rdma_allocator_debug);
#define GST_CAT_DEFAULT gst_rdma_allocator_debug

/* Send block payloads start 64 bytes into page-aligned, 64-byte-multiple
 * blocks: any alignment up to 64 holds. */
#define PAYLOAD_ALIGN_MASK 63
/* A map for writing waits for the kept block's WRITE this long at most: a
 * WRITE completes or its connection fails well within it. */
#define MAP_WRITE_WAIT_MS 10000

typedef struct {
  GstMemory mem;
  GstRdmaConnection *conn; /* referenced: the block memory lives in it */
  sbr_send_block *block;   /* NULL for heap memory */
  guint8 *data;            /* payload (block) or aligned heap pointer */
  gpointer heap;           /* g_malloc'd, for heap memory */
  gint dropped;            /* atomic, heap: backpressure refused a block and
                              counted the drop; cleared when rendered */
  gint claimed;            /* atomic: submitted; the block is the library's */
  gint kept;               /* atomic: submitted to be kept (submit_keep): the
                              block is ours until the memory is freed */
} GstRdmaMemory;

struct _GstRdmaAllocator {
  GstAllocator parent;
  GstRdmaConnection *conn; /* referenced */
  guint8 device;
};

G_DEFINE_TYPE(GstRdmaAllocator, gst_rdma_allocator, GST_TYPE_ALLOCATOR);

static GstRdmaMemory *memory_new(GstRdmaAllocator *self, gsize maxsize,
                                 gsize align, gsize size)
{
  GstRdmaMemory *m = g_new0(GstRdmaMemory, 1);

  /* Shareable as a whole: a buffer copy (imagefreeze, videorate, a tee's
   * branches) refers to the same memory, which keeps its block until the
   * last reference goes (sbr_sender_submit_keep).  A part of it can't be
   * shared (rdma_mem_share returns NULL), so GStreamer copies that. */
  gst_memory_init(GST_MEMORY_CAST(m), 0, GST_ALLOCATOR_CAST(self), NULL,
                  maxsize, align, 0, size);
  m->conn = gst_rdma_connection_ref(self->conn);
  return m;
}

static GstMemory *heap_memory_new(GstRdmaAllocator *self, gsize size,
                                  const GstAllocationParams *params,
                                  gboolean dropped)
{
  gsize align = params->align | PAYLOAD_ALIGN_MASK;
  gsize maxsize = size + params->prefix + params->padding;
  GstRdmaMemory *m = memory_new(self, maxsize, align, size);

  m->heap = g_malloc(maxsize + align);
  m->data = (guint8 *)(((guintptr)m->heap + align) & ~(guintptr)align);
  m->dropped = dropped;
  if (params->prefix) {
    GST_MEMORY_CAST(m)->offset = params->prefix;
    if (params->flags & GST_MEMORY_FLAG_ZERO_PREFIXED)
      memset(m->data, 0, params->prefix);
  }
  if (params->padding && (params->flags & GST_MEMORY_FLAG_ZERO_PADDED))
    memset(m->data + params->prefix + size, 0, params->padding);
  return GST_MEMORY_CAST(m);
}

static GstMemory *gst_rdma_allocator_alloc(GstAllocator *allocator, gsize size,
                                           GstAllocationParams *params)
{
  GstRdmaAllocator *self = GST_RDMA_ALLOCATOR(allocator);
  sbr_sender *sender = gst_rdma_connection_get_sender(self->conn);
  GstAllocationParams defaults;
  sbr_send_block *block;
  size_t capacity;
  void *payload;
  int ret;

  if (!params) {
    gst_allocation_params_init(&defaults);
    params = &defaults;
  }
  if (!sender || gst_rdma_connection_get_state(self->conn, NULL) !=
                     GST_RDMA_CONNECTION_CONNECTED) {
    GST_LOG_OBJECT(self, "not connected: heap memory of %" G_GSIZE_FORMAT,
                   size);
    return heap_memory_new(self, size, params, FALSE);
  }
  /* The payload must start exactly at the memory's data, and fit one block:
   * otherwise the frame goes the copying (and fragmenting) way. */
  if (size + params->prefix + params->padding >
          sbr_sender_block_payload_size(sender) ||
      params->prefix != 0 || params->align > PAYLOAD_ALIGN_MASK) {
    GST_LOG_OBJECT(self,
                   "%" G_GSIZE_FORMAT " bytes (prefix %" G_GSIZE_FORMAT
                   ", align %" G_GSIZE_FORMAT ") don't fit a %" G_GSIZE_FORMAT
                   "-byte payload: system memory",
                   size, params->prefix, params->align,
                   sbr_sender_block_payload_size(sender));
    return gst_allocator_alloc(NULL, size, params);
  }

  ret = sbr_sender_acquire(sender, self->device, &block);
  if (ret < 0) {
    GST_DEBUG_OBJECT(self, "no send block for device %u: %s", self->device,
                     g_strerror(-ret));
    /* Backpressure or a refused device: the drop is counted already. */
    return heap_memory_new(self, size, params,
                           ret == -EAGAIN || ret == -EADDRINUSE);
  }
  payload = sbr_send_block_payload(block, &capacity);
  GstRdmaMemory *m =
      memory_new(self, capacity - params->padding, PAYLOAD_ALIGN_MASK, size);
  m->block = block;
  m->data = payload;
  if (params->padding && (params->flags & GST_MEMORY_FLAG_ZERO_PADDED))
    memset(m->data + size, 0, params->padding);
  return GST_MEMORY_CAST(m);
}

static void gst_rdma_allocator_free(GstAllocator *allocator, GstMemory *mem)
{
  GstRdmaMemory *m = (GstRdmaMemory *)mem;

  (void)allocator;
  if (m->block && !g_atomic_int_get(&m->claimed)) {
    /* Kept: back to the sender now, or when its WRITE completes; never
     * rendered: back unsent (sbr_sender_release abandons it). */
    sbr_sender_release(gst_rdma_connection_get_sender(m->conn), m->block);
  }
  g_free(m->heap);
  gst_rdma_connection_unref(m->conn);
  g_free(m);
}

static gpointer rdma_mem_map(GstMemory *mem, gsize maxsize, GstMapFlags flags)
{
  GstRdmaMemory *m = (GstRdmaMemory *)mem;
  int ret;

  (void)maxsize;
  if (!m->block)
    return m->data;
  /* A memory is submitted without being kept only when nobody else can
   * reach it (see gst_rdma_buffer_claim), so this never happens to a
   * correct caller; should it, the block may carry another frame already:
   * refuse rather than show its bytes. */
  if (g_atomic_int_get(&m->claimed))
    return NULL;
  if ((flags & GST_MAP_WRITE) && g_atomic_int_get(&m->kept)) {
    /* The NIC may still be reading the frame rendered last: writing now
     * would send a torn one. */
    ret = sbr_sender_wait_block(gst_rdma_connection_get_sender(m->conn),
                                m->block, MAP_WRITE_WAIT_MS);
    if (ret < 0) {
      GST_WARNING("send block still in flight after %d ms: not writable",
                  MAP_WRITE_WAIT_MS);
      return NULL;
    }
  }
  /* Not m->data: a kept block placed in the receiver's lane moved into
   * its own memory when it was submitted (sbr_sender_submit_keep). */
  return sbr_send_block_payload(m->block, NULL);
}

static void rdma_mem_unmap(GstMemory *mem)
{
  (void)mem;
}

static GstMemory *rdma_mem_copy(GstMemory *mem, gssize offset, gssize size)
{
  GstMapInfo in;
  GstMemory *copy;

  if (size == -1)
    size = (gssize)mem->size > offset ? (gssize)mem->size - offset : 0;
  if (!gst_memory_map(mem, &in, GST_MAP_READ))
    return NULL;
  copy = gst_allocator_alloc(NULL, (gsize)size, NULL);
  if (copy) {
    GstMapInfo out;
    if (gst_memory_map(copy, &out, GST_MAP_WRITE)) {
      memcpy(out.data, in.data + offset, (gsize)size);
      gst_memory_unmap(copy, &out);
    }
  }
  gst_memory_unmap(mem, &in);
  return copy;
}

static GstMemory *rdma_mem_share(GstMemory *mem, gssize offset, gssize size)
{
  /* A sub-memory would need the block's payload, which moves when a block
   * placed in the receiver's lane is kept; NULL makes GStreamer copy the
   * part instead (a whole memory is shared by reference). */
  (void)mem;
  (void)offset;
  (void)size;
  return NULL;
}

static void gst_rdma_allocator_finalize(GObject *object)
{
  GstRdmaAllocator *self = GST_RDMA_ALLOCATOR(object);

  gst_rdma_connection_unref(self->conn);
  G_OBJECT_CLASS(gst_rdma_allocator_parent_class)->finalize(object);
}

static void gst_rdma_allocator_class_init(GstRdmaAllocatorClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstAllocatorClass *allocator_class = GST_ALLOCATOR_CLASS(klass);

  gobject_class->finalize = gst_rdma_allocator_finalize;
  allocator_class->alloc = gst_rdma_allocator_alloc;
  allocator_class->free = gst_rdma_allocator_free;
  GST_DEBUG_CATEGORY_INIT(gst_rdma_allocator_debug, "rdmaallocator", 0,
                          "Memories over RDMA send blocks");
}

static void gst_rdma_allocator_init(GstRdmaAllocator *self)
{
  GstAllocator *allocator = GST_ALLOCATOR_CAST(self);

  allocator->mem_type = GST_RDMA_ALLOCATOR_NAME;
  allocator->mem_map = rdma_mem_map;
  allocator->mem_unmap = rdma_mem_unmap;
  allocator->mem_copy = rdma_mem_copy;
  allocator->mem_share = rdma_mem_share;
  /* Not a default allocator: gst_allocator_alloc(NULL) never lands here. */
  GST_OBJECT_FLAG_SET(self, GST_ALLOCATOR_FLAG_CUSTOM_ALLOC);
}

GstAllocator *gst_rdma_allocator_new(GstRdmaConnection *conn, guint8 device)
{
  GstRdmaAllocator *self = g_object_new(GST_TYPE_RDMA_ALLOCATOR, NULL);

  gst_object_ref_sink(self);
  self->conn = gst_rdma_connection_ref(conn);
  self->device = device;
  return GST_ALLOCATOR_CAST(self);
}

/* ------------------------------------------------------------- pool */

struct _GstRdmaBufferPool {
  GstBufferPool parent;
};

G_DEFINE_TYPE(GstRdmaBufferPool, gst_rdma_buffer_pool, GST_TYPE_BUFFER_POOL);

/* Never back into rotation: a buffer whose block was submitted has no
 * block any more, and one that kept its block (copied because someone
 * else held it) would pin a send block while idle, which the other
 * devices on the connection wait for.  The pool owns the buffer here, so
 * tagging it is its own business; the default release then frees it
 * (keeping the pool's count of buffers right), and the next acquire
 * allocates a fresh block. */
static void gst_rdma_buffer_pool_release_buffer(GstBufferPool *pool,
                                                GstBuffer *buffer)
{
  GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_TAG_MEMORY);
  GST_BUFFER_POOL_CLASS(gst_rdma_buffer_pool_parent_class)
      ->release_buffer(pool, buffer);
}

static void gst_rdma_buffer_pool_class_init(GstRdmaBufferPoolClass *klass)
{
  GST_BUFFER_POOL_CLASS(klass)->release_buffer =
      gst_rdma_buffer_pool_release_buffer;
}

static void gst_rdma_buffer_pool_init(GstRdmaBufferPool *self)
{
  (void)self;
}

GstBufferPool *gst_rdma_buffer_pool_new(void)
{
  GstBufferPool *pool = g_object_new(GST_TYPE_RDMA_BUFFER_POOL, NULL);

  gst_object_ref_sink(pool);
  return pool;
}

/* ------------------------------------------------------------ claim */

/* Can anyone but the caller's render reach this memory once render has
 * returned?  If not, it is submitted without being kept: the same cost
 * over verbs, and over shm a block placed in the receiver's lane is not
 * copied out of it (sbr_sender_submit_keep).  Only basesink holds the buffer
 * (the application, a tee, a videorate, imagefreeze or a last-sample would hold
 * another reference), only the buffer holds the memory, and the buffer is then
 * freed: it comes from no pool, or from ours, which never recycles.  A buffer
 * of a pool of upstream's own would go back into rotation with the memory in
 * it, so it is copied. */
static gboolean only_render_holds(GstBuffer *buffer, GstMemory *mem)
{
  return GST_MINI_OBJECT_REFCOUNT_VALUE(buffer) == 1 &&
         GST_MINI_OBJECT_REFCOUNT_VALUE(mem) == 1 &&
         (!buffer->pool || GST_IS_RDMA_BUFFER_POOL(buffer->pool));
}

GstRdmaMemoryKind gst_rdma_buffer_claim(GstBuffer *buffer,
                                        GstRdmaConnection *conn,
                                        sbr_send_block **block)
{
  GstMemory *mem;
  GstRdmaMemory *m;
  sbr_sender *sender;

  *block = NULL;
  if (gst_buffer_n_memory(buffer) != 1)
    return GST_RDMA_MEMORY_FOREIGN;
  mem = gst_buffer_peek_memory(buffer, 0);
  m = (GstRdmaMemory *)mem;
  if (!GST_IS_RDMA_ALLOCATOR(mem->allocator) || mem->parent)
    return GST_RDMA_MEMORY_FOREIGN;
  if (!m->block) {
    /* Dropped once: the library counted it when the block was refused.
     * Rendered again (a pool of upstream's recycled it, or it is pushed
     * twice), it is a frame like any other. */
    if (g_atomic_int_compare_and_exchange(&m->dropped, 1, 0))
      return GST_RDMA_MEMORY_DROPPED;
    return GST_RDMA_MEMORY_HEAP;
  }
  /* A block of another connection's sender, or a memory someone resized to
   * start past the payload start, can't be submitted as it is. */
  sender = gst_rdma_connection_get_sender(conn);
  if (m->conn != conn || mem->offset != 0 || !sender)
    return GST_RDMA_MEMORY_FOREIGN;
  if (g_atomic_int_get(&m->claimed))
    return GST_RDMA_MEMORY_FOREIGN; /* submitted before: can't be */
  *block = m->block;
  /* Nobody can read it after render: it goes back at its completion,
   * and over shm a block placed in the lane goes without any copy. */
  if (!g_atomic_int_get(&m->kept) && only_render_holds(buffer, mem) &&
      g_atomic_int_compare_and_exchange(&m->claimed, 0, 1))
    return GST_RDMA_MEMORY_BLOCK;
  /* Someone may read it after render, or render it again: the block stays
   * the memory's until it is freed. */
  g_atomic_int_set(&m->kept, 1);
  return GST_RDMA_MEMORY_KEPT;
}
