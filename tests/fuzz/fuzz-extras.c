/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz-extras.c - libFuzzer target: a frame's extras as rdmasrc takes them
 * off the wire (gst/gstrdmaextras.c), the text of an EVENT block any
 * connected sender can write, parsed and put on a buffer, and then used
 * as a consumer would: the video frame mapped through whatever layout it
 * brought, and copied into the caps' own.  Then rdmasink's side of the
 * same structure: made to fit a bound (max-meta-size).
 *
 * Input: one byte choosing the stream's caps (bits 0-1: none, GRAY8
 * 64x4, NV12 64x48, I420 32x16; bit 2: the frame in two memories), one
 * byte for the bound (x 16 bytes), the rest the block's text.
 */
#include <gst/gst.h>
#include <gst/video/video.h>

#include "fuzz-common.h"
#include "gstrdmaextras.h"

static const char *const caps_of[] = {
    NULL,
    "video/x-raw,format=GRAY8,width=64,height=4,framerate=25/1",
    "video/x-raw,format=NV12,width=64,height=48,framerate=25/1",
    "video/x-raw,format=I420,width=32,height=16,framerate=25/1",
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc;
  (void)argv;
  gst_init(NULL, NULL);
  return 0;
}

static guint metas_in(const GstStructure *s)
{
  const GValue *metas = gst_structure_get_value(s, "metas");

  return metas && GST_VALUE_HOLDS_ARRAY(metas) ? gst_value_array_get_size(metas)
                                               : 0;
}

/* Its metas but the layouts (video-meta), which fitting never drops. */
static guint droppable_in(const GstStructure *s)
{
  const GValue *metas = gst_structure_get_value(s, "metas");
  guint n = 0;

  for (guint i = 0; i < metas_in(s); i++) {
    const GValue *v = gst_value_array_get_value(metas, i);

    n += !GST_VALUE_HOLDS_STRUCTURE(v) ||
         !gst_structure_has_name(gst_value_get_structure(v), "video-meta");
  }
  return n;
}

/* What rdmasrc does with extras for a frame: apply, then hand the buffer
 * on as a consumer without GstVideoMeta needs it. */
static void receive(const GstStructure *s, const char *caps_str,
                    gboolean two_memories)
{
  GstVideoInfo info;
  gboolean video = FALSE;
  gsize size = 256;
  GstBuffer *buf;

  if (caps_str) {
    GstCaps *caps = gst_caps_from_string(caps_str);

    video = gst_video_info_from_caps(&info, caps);
    gst_caps_unref(caps);
    FUZZ_CHECK(video);
    size = GST_VIDEO_INFO_SIZE(&info);
  }
  buf = gst_buffer_new_allocate(NULL, two_memories ? size / 2 : size, NULL);
  if (two_memories)
    gst_buffer_append_memory(buf,
                             gst_allocator_alloc(NULL, size - size / 2, NULL));
  gst_buffer_memset(buf, 0, 0x5a, size);
  FUZZ_CHECK(gst_rdma_extras_apply(s, buf, video ? &info : NULL, NULL, NULL) <=
             metas_in(s));
  /* A layout the checks let through must be safe to read whole: the copy
   * into the caps' layout reads every pixel through its offsets and
   * strides (ASan sees a plane past the memory). */
  if (video && gst_rdma_extras_layout_differs(buf, &info))
    buf = gst_rdma_extras_to_default_layout(buf, &info);
  gst_buffer_unref(buf);
}

/* What rdmasink does before it sends extras: fit them. */
static void fit(const GstStructure *s, gsize max)
{
  GstStructure *copy = gst_structure_copy(s);
  guint before = metas_in(copy);
  guint dropped = gst_rdma_extras_fit(&copy, max);

  FUZZ_CHECK(dropped <= before);
  if (!copy)
    return;
  gchar *text = gst_structure_to_string(copy);

  /* Fitted, or nothing left but the flags and the layouts. */
  FUZZ_CHECK(strlen(text) <= max || droppable_in(copy) == 0);
  FUZZ_CHECK(metas_in(copy) == before - dropped);
  g_free(text);
  gst_structure_free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct fuzz_in in = {data, size};
  uint8_t choice = fuzz_u8(&in);
  gsize max = (gsize)fuzz_u8(&in) * 16u;
  GstStructure *s = gst_rdma_event_parse((const gchar *)in.p, in.left);

  if (!s)
    return 0;
  if (gst_structure_has_name(s, "rdma-frame")) {
    receive(s, caps_of[choice & 3], (choice & 4) != 0);
    fit(s, max);
  }
  gst_structure_free(s);
  return 0;
}
