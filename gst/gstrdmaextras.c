/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmaextras.c - a buffer's flags and metas as a structure and back
 * (gstrdmaextras.h).
 *
 * "rdma-frame, flags=(uint)F, metas=(structure)<...>": F holds only
 * GST_RDMA_EXTRAS_FLAGS (GstBufferFlags values, stable ABI); each meta is
 * a structure named after what it was, with the fields its add function
 * takes.  A receiver skips a meta structure it doesn't know, so a newer
 * sender's metas cost an older receiver nothing but the count.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstrdmaextras.h"

#include "gstrdmacommon.h"

gboolean gst_rdma_extras_layout_differs(GstBuffer *buf,
                                        const GstVideoInfo *info)
{
  GstVideoMeta *vm = gst_buffer_get_video_meta(buf);

  if (!vm)
    return FALSE;
  if (!info || vm->format != GST_VIDEO_INFO_FORMAT(info) ||
      vm->width != (guint)GST_VIDEO_INFO_WIDTH(info) ||
      vm->height != (guint)GST_VIDEO_INFO_HEIGHT(info) ||
      vm->n_planes != GST_VIDEO_INFO_N_PLANES(info))
    return TRUE;
  for (guint i = 0; i < vm->n_planes; i++)
    if (vm->offset[i] != GST_VIDEO_INFO_PLANE_OFFSET(info, i) ||
        vm->stride[i] != GST_VIDEO_INFO_PLANE_STRIDE(info, i))
      return TRUE;
  return FALSE;
}

/* Every meta but the layout (the copy has the default one). */
static gboolean copy_meta(GstBuffer *src, GstMeta **meta, gpointer data)
{
  GstBuffer *dest = data;
  const GstMetaInfo *info = (*meta)->info;
  GstMetaTransformCopy copy = {FALSE, 0, (gsize)-1};

  (void)src;
  /* A meta about the memories (their layout) says nothing of the copy's. */
  if (gst_meta_api_type_has_tag(
          info->api, g_quark_from_static_string(GST_META_TAG_MEMORY_STR)))
    return TRUE;
  if (info->api != GST_VIDEO_META_API_TYPE && info->transform_func)
    info->transform_func(dest, *meta, src, _gst_meta_transform_copy, &copy);
  return TRUE;
}

GstBuffer *gst_rdma_extras_to_default_layout(GstBuffer *buf,
                                             const GstVideoInfo *info)
{
  GstVideoFrame in, out;
  GstBuffer *copy;

  if (!gst_video_frame_map(&in, (GstVideoInfo *)info, buf, GST_MAP_READ))
    return buf;
  copy = gst_buffer_new_allocate(NULL, GST_VIDEO_INFO_SIZE(info), NULL);
  if (!gst_video_frame_map(&out, (GstVideoInfo *)info, copy, GST_MAP_WRITE)) {
    gst_video_frame_unmap(&in);
    gst_buffer_unref(copy);
    return buf;
  }
  gst_video_frame_copy(&out, &in);
  gst_video_frame_unmap(&out);
  gst_video_frame_unmap(&in);
  gst_buffer_copy_into(
      copy, buf, GST_BUFFER_COPY_FLAGS | GST_BUFFER_COPY_TIMESTAMPS, 0, -1);
  gst_buffer_foreach_meta(buf, copy_meta, copy);
  gst_buffer_unref(buf);
  return copy;
}

static GstStructure *video_meta_to_structure(const GstVideoMeta *vm)
{
  GValue offsets = G_VALUE_INIT, strides = G_VALUE_INIT;
  GstStructure *s;

  gst_value_array_init(&offsets, vm->n_planes);
  gst_value_array_init(&strides, vm->n_planes);
  for (guint i = 0; i < vm->n_planes; i++) {
    GValue v = G_VALUE_INIT;

    g_value_init(&v, G_TYPE_UINT64);
    g_value_set_uint64(&v, vm->offset[i]);
    gst_value_array_append_and_take_value(&offsets, &v);
    g_value_init(&v, G_TYPE_INT);
    g_value_set_int(&v, vm->stride[i]);
    gst_value_array_append_and_take_value(&strides, &v);
  }
  s = gst_structure_new("video-meta", "format", G_TYPE_STRING,
                        gst_video_format_to_string(vm->format), "width",
                        G_TYPE_UINT, vm->width, "height", G_TYPE_UINT,
                        vm->height, "flags", G_TYPE_UINT, (guint)vm->flags,
                        NULL);
  gst_structure_take_value(s, "offsets", &offsets);
  gst_structure_take_value(s, "strides", &strides);
  return s;
}

static GstStructure *time_code_to_structure(const GstVideoTimeCodeMeta *tm)
{
  const GstVideoTimeCode *tc = &tm->tc;
  GstStructure *s = gst_structure_new(
      "timecode-meta", "fps-n", G_TYPE_INT, tc->config.fps_n, "fps-d",
      G_TYPE_INT, tc->config.fps_d, "flags", G_TYPE_UINT,
      (guint)tc->config.flags, "hours", G_TYPE_UINT, tc->hours, "minutes",
      G_TYPE_UINT, tc->minutes, "seconds", G_TYPE_UINT, tc->seconds, "frames",
      G_TYPE_UINT, tc->frames, "field-count", G_TYPE_UINT, tc->field_count,
      NULL);

  if (tc->config.latest_daily_jam) {
    gchar *jam = g_date_time_format_iso8601(tc->config.latest_daily_jam);

    gst_structure_set(s, "daily-jam", G_TYPE_STRING, jam, NULL);
    g_free(jam);
  }
  return s;
}

static GstStructure *roi_to_structure(const GstVideoRegionOfInterestMeta *rm)
{
  GstStructure *s = gst_structure_new(
      "roi-meta", "roi-type", G_TYPE_STRING, g_quark_to_string(rm->roi_type),
      "id", G_TYPE_INT, rm->id, "parent-id", G_TYPE_INT, rm->parent_id, "x",
      G_TYPE_UINT, rm->x, "y", G_TYPE_UINT, rm->y, "w", G_TYPE_UINT, rm->w, "h",
      G_TYPE_UINT, rm->h, NULL);
  GValue params = G_VALUE_INIT;

  gst_value_array_init(&params, g_list_length(rm->params));
  for (GList *l = rm->params; l; l = l->next) {
    GValue v = G_VALUE_INIT;

    g_value_init(&v, GST_TYPE_STRUCTURE);
    g_value_set_boxed(&v, l->data);
    gst_value_array_append_and_take_value(&params, &v);
  }
  gst_structure_take_value(s, "params", &params);
  return s;
}

static GstStructure *caption_to_structure(const GstVideoCaptionMeta *cm)
{
  GstBuffer *data = gst_buffer_new_memdup(cm->data, cm->size);
  GstStructure *s = gst_structure_new("caption-meta", "type", G_TYPE_INT,
                                      (gint)cm->caption_type, "data",
                                      GST_TYPE_BUFFER, data, NULL);

  gst_buffer_unref(data);
  return s;
}

static GstStructure *reference_to_structure(const GstReferenceTimestampMeta *rm)
{
  gchar *caps = gst_caps_to_string(rm->reference);
  GstStructure *s = gst_structure_new(
      "reference-timestamp-meta", "reference", G_TYPE_STRING, caps, "timestamp",
      G_TYPE_UINT64, (guint64)rm->timestamp, "duration", G_TYPE_UINT64,
      (guint64)rm->duration, NULL);

  g_free(caps);
  return s;
}

/* The capture time is the block's own field (gstrdmacapture.c). */
static gboolean is_unix_reference(const GstReferenceTimestampMeta *rm)
{
  GstCaps *unix_caps = gst_rdma_unix_timestamp_caps();
  gboolean is = gst_caps_is_equal(rm->reference, unix_caps);

  gst_caps_unref(unix_caps);
  return is;
}

/* meta as a structure; NULL with *skip when it needn't cross, NULL alone
 * when it can't. */
static GstStructure *meta_to_structure(GstBuffer *buf, GstMeta *meta,
                                       const GstVideoInfo *info,
                                       GstRdmaMetaWriter writer, gpointer data,
                                       gboolean *skip)
{
  GType api = meta->info->api;

  *skip = FALSE;
  if (api == GST_VIDEO_META_API_TYPE) {
    *skip = !gst_rdma_extras_layout_differs(buf, info);
    return *skip ? NULL : video_meta_to_structure((GstVideoMeta *)meta);
  }
  if (api == GST_VIDEO_TIME_CODE_META_API_TYPE)
    return time_code_to_structure((GstVideoTimeCodeMeta *)meta);
  if (api == GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)
    return roi_to_structure((GstVideoRegionOfInterestMeta *)meta);
  if (api == GST_VIDEO_CAPTION_META_API_TYPE)
    return caption_to_structure((GstVideoCaptionMeta *)meta);
  if (api == GST_REFERENCE_TIMESTAMP_META_API_TYPE) {
    *skip = is_unix_reference((GstReferenceTimestampMeta *)meta);
    return *skip ? NULL
                 : reference_to_structure((GstReferenceTimestampMeta *)meta);
  }
  if (api == GST_PROTECTION_META_API_TYPE)
    return gst_structure_new("protection-meta", "info", GST_TYPE_STRUCTURE,
                             ((GstProtectionMeta *)meta)->info, NULL);
  if (gst_meta_info_is_custom(meta->info)) {
    const GstStructure *fields =
        gst_custom_meta_get_structure((GstCustomMeta *)meta);

    return gst_structure_new("custom-meta", "name", G_TYPE_STRING,
                             g_type_name(meta->info->type), "fields",
                             GST_TYPE_STRUCTURE, fields, NULL);
  }
  if (writer) {
    GstStructure *fields = writer(buf, meta, data);

    if (fields) {
      GstStructure *ms =
          gst_structure_new("app-meta", "api", G_TYPE_STRING, g_type_name(api),
                            "fields", GST_TYPE_STRUCTURE, fields, NULL);

      gst_structure_free(fields);
      return ms;
    }
  }
  return NULL;
}

GstStructure *gst_rdma_extras_from_buffer(GstBuffer *buf,
                                          const GstVideoInfo *info,
                                          GstRdmaMetaWriter writer,
                                          gpointer data, guint *not_carried)
{
  guint flags = GST_BUFFER_FLAGS(buf) & GST_RDMA_EXTRAS_FLAGS;
  GValue metas = G_VALUE_INIT;
  gpointer state = NULL;
  GstStructure *s;
  GstMeta *meta;

  *not_carried = 0;
  gst_value_array_init(&metas, 0);
  while ((meta = gst_buffer_iterate_meta(buf, &state))) {
    gboolean skip;
    GstStructure *ms = meta_to_structure(buf, meta, info, writer, data, &skip);
    GValue v = G_VALUE_INIT;

    if (!ms) {
      if (!skip)
        (*not_carried)++;
      continue;
    }
    g_value_init(&v, GST_TYPE_STRUCTURE);
    g_value_take_boxed(&v, ms);
    gst_value_array_append_and_take_value(&metas, &v);
  }
  if (flags == 0 && gst_value_array_get_size(&metas) == 0) {
    g_value_unset(&metas);
    return NULL;
  }
  s = gst_structure_new("rdma-frame", "flags", G_TYPE_UINT, flags, NULL);
  gst_structure_take_value(s, "metas", &metas);
  return s;
}

GstStructure *gst_rdma_event_parse(const gchar *text, gsize len)
{
  GstStructure *s;
  gchar *str;

  if (!gst_rdma_wire_nesting_ok(text, len))
    return NULL;
  str = g_strndup(text, len);
  s = gst_structure_from_string(str, NULL);
  g_free(str);
  return s;
}

static gsize text_size(const GstStructure *s)
{
  gchar *str = gst_structure_to_string(s);
  gsize n = strlen(str);

  g_free(str);
  return n;
}

/* What an array element's text costs in the structure's: its own text
 * escaped once more (a structure in an array is a quoted string) and the
 * separator, so never less than this. */
static gsize element_size(const GValue *v)
{
  gchar *str = gst_value_serialize(v);
  gsize n = str ? strlen(str) + 2 : 2;

  g_free(str);
  return n;
}

/* Is this meta the frame's layout (a GstVideoMeta), which fitting keeps? */
static gboolean is_layout(const GValue *v)
{
  return GST_VALUE_HOLDS_STRUCTURE(v) &&
         gst_structure_has_name(gst_value_get_structure(v), "video-meta");
}

gboolean gst_rdma_extras_has_layout(const GstStructure *s)
{
  const GValue *metas = gst_structure_get_value(s, "metas");

  if (!metas || !GST_VALUE_HOLDS_ARRAY(metas))
    return FALSE;
  for (guint i = 0; i < gst_value_array_get_size(metas); i++)
    if (is_layout(gst_value_array_get_value(metas, i)))
      return TRUE;
  return FALSE;
}

guint gst_rdma_extras_fit(GstStructure **s, gsize max)
{
  const GValue *metas = gst_structure_get_value(*s, "metas");
  GValue kept = G_VALUE_INIT;
  gsize total = text_size(*s), *sizes;
  guint n, dropped = 0, flags = 0;

  if (total <= max || !metas || !GST_VALUE_HOLDS_ARRAY(metas))
    return 0;
  n = gst_value_array_get_size(metas);
  /* Each meta's share of the text, 0 once dropped (or when it must stay):
   * the largest go first, so what fits is as many metas as can.  The
   * layout stays whatever it costs: without it a padded frame would be
   * read in the caps' layout, garbage (a GstVideoMeta is ~200 bytes). */
  sizes = g_new0(gsize, n ? n : 1);
  for (guint i = 0; i < n; i++) {
    const GValue *v = gst_value_array_get_value(metas, i);

    if (!is_layout(v))
      sizes[i] = element_size(v);
  }
  /* The savings are counted low (element_size), so the estimate is an
   * upper bound of the text: one serialization at the end, not one a
   * drop (thousands of regions would cost megabytes each). */
  while (total > max) {
    guint largest = 0;

    for (guint i = 1; i < n; i++)
      if (sizes[i] > sizes[largest])
        largest = i;
    if (n == 0 || sizes[largest] == 0)
      break; /* only the layout left */
    total = total > sizes[largest] ? total - sizes[largest] : 0;
    sizes[largest] = 0;
    dropped++;
  }
  gst_value_array_init(&kept, n - dropped);
  for (guint i = 0; i < n; i++) {
    const GValue *v = gst_value_array_get_value(metas, i);

    if (sizes[i] || is_layout(v))
      gst_value_array_append_value(&kept, v);
  }
  g_free(sizes);
  gst_structure_take_value(*s, "metas", &kept); /* metas is gone now */
  gst_structure_get_uint(*s, "flags", &flags);
  metas = gst_structure_get_value(*s, "metas");
  if (flags == 0 && gst_value_array_get_size(metas) == 0)
    g_clear_pointer(s, gst_structure_free);
  return dropped;
}

/* Plane i's rows in a component of it, for info's height. */
static guint plane_rows(const GstVideoInfo *info, guint plane)
{
  const GstVideoFormatInfo *finfo = info->finfo;

  for (guint c = 0; c < GST_VIDEO_FORMAT_INFO_N_COMPONENTS(finfo); c++)
    if (GST_VIDEO_FORMAT_INFO_PLANE(finfo, c) == plane)
      return (guint)GST_VIDEO_FORMAT_INFO_SCALE_HEIGHT(
          finfo, c, GST_VIDEO_INFO_HEIGHT(info));
  return 0;
}

/* A layout from the wire is checked against the stream's caps and the
 * buffer before anything maps it (GstVideoFrame trusts a meta's offsets
 * and strides): the caps' format and size, their plane count, rows no
 * shorter than the caps' own, every plane inside the buffer. */
static gboolean apply_video_meta(const GstStructure *s, GstBuffer *buf,
                                 const GstVideoInfo *caps_info)
{
  const GValue *offsets = gst_structure_get_value(s, "offsets");
  const GValue *strides = gst_structure_get_value(s, "strides");
  gsize offset[GST_VIDEO_MAX_PLANES] = {0};
  gint stride[GST_VIDEO_MAX_PLANES] = {0};
  const gchar *format_str = gst_structure_get_string(s, "format");
  GstVideoFormat format =
      gst_video_format_from_string(format_str ? format_str : "");
  gsize size = gst_buffer_get_size(buf);
  guint width, height, flags, n;

  if (!caps_info || format != GST_VIDEO_INFO_FORMAT(caps_info) ||
      GST_VIDEO_FORMAT_INFO_IS_TILED(caps_info->finfo) || !offsets ||
      !strides || !GST_VALUE_HOLDS_ARRAY(offsets) ||
      !GST_VALUE_HOLDS_ARRAY(strides) ||
      !gst_structure_get_uint(s, "width", &width) ||
      !gst_structure_get_uint(s, "height", &height) ||
      !gst_structure_get_uint(s, "flags", &flags) ||
      width != (guint)GST_VIDEO_INFO_WIDTH(caps_info) ||
      height != (guint)GST_VIDEO_INFO_HEIGHT(caps_info))
    return FALSE;
  n = gst_value_array_get_size(offsets);
  if (n != GST_VIDEO_INFO_N_PLANES(caps_info) ||
      n != gst_value_array_get_size(strides))
    return FALSE;
  for (guint i = 0; i < n; i++) {
    const GValue *o = gst_value_array_get_value(offsets, i);
    const GValue *st = gst_value_array_get_value(strides, i);
    guint64 end;

    if (!G_VALUE_HOLDS_UINT64(o) || !G_VALUE_HOLDS_INT(st) ||
        g_value_get_int(st) < GST_VIDEO_INFO_PLANE_STRIDE(caps_info, i))
      return FALSE;
    end = g_value_get_uint64(o) +
          (guint64)g_value_get_int(st) * plane_rows(caps_info, i);
    if (g_value_get_uint64(o) > size || end > size)
      return FALSE;
    offset[i] = (gsize)g_value_get_uint64(o);
    stride[i] = g_value_get_int(st);
  }
  /* A plane is mapped from the memory holding its first byte: a frame
   * that came in several memories (fragments) is made one first. */
  if (gst_buffer_n_memory(buf) > 1)
    gst_buffer_replace_all_memory(buf, gst_buffer_get_all_memory(buf));
  gst_buffer_add_video_meta_full(buf, (GstVideoFrameFlags)flags, format, width,
                                 height, n, offset, stride);
  return TRUE;
}

static gboolean apply_time_code(const GstStructure *s, GstBuffer *buf)
{
  gint fps_n, fps_d;
  guint flags, h, m, sec, frames, fields;
  const gchar *jam_str = gst_structure_get_string(s, "daily-jam");
  GDateTime *jam = jam_str ? g_date_time_new_from_iso8601(jam_str, NULL) : NULL;
  gboolean ok;

  /* What gst_video_time_code_is_valid would refuse with a critical. */
  ok = gst_structure_get(s, "fps-n", G_TYPE_INT, &fps_n, "fps-d", G_TYPE_INT,
                         &fps_d, "flags", G_TYPE_UINT, &flags, "hours",
                         G_TYPE_UINT, &h, "minutes", G_TYPE_UINT, &m, "seconds",
                         G_TYPE_UINT, &sec, "frames", G_TYPE_UINT, &frames,
                         "field-count", G_TYPE_UINT, &fields, NULL) &&
       fps_n > 0 && fps_d > 0 && h < 24 && m < 60 && sec < 60 &&
       frames < (guint)(fps_n / fps_d + 1) && fields <= 2;
  ok = ok &&
       gst_buffer_add_video_time_code_meta_full(
           buf, (guint)MAX(fps_n, 0), (guint)MAX(fps_d, 0), jam,
           (GstVideoTimeCodeFlags)flags, h, m, sec, frames, fields) != NULL;
  if (jam)
    g_date_time_unref(jam);
  return ok;
}

static gboolean apply_roi(const GstStructure *s, GstBuffer *buf)
{
  const gchar *type = gst_structure_get_string(s, "roi-type");
  const GValue *params = gst_structure_get_value(s, "params");
  GstVideoRegionOfInterestMeta *rm;
  guint x, y, w, h;
  gint id, parent_id;

  if (!type ||
      !gst_structure_get(s, "id", G_TYPE_INT, &id, "parent-id", G_TYPE_INT,
                         &parent_id, "x", G_TYPE_UINT, &x, "y", G_TYPE_UINT, &y,
                         "w", G_TYPE_UINT, &w, "h", G_TYPE_UINT, &h, NULL))
    return FALSE;
  rm = gst_buffer_add_video_region_of_interest_meta(buf, type, x, y, w, h);
  rm->id = id;
  rm->parent_id = parent_id;
  if (params && GST_VALUE_HOLDS_ARRAY(params))
    for (guint i = 0; i < gst_value_array_get_size(params); i++) {
      const GValue *p = gst_value_array_get_value(params, i);

      if (GST_VALUE_HOLDS_STRUCTURE(p))
        gst_video_region_of_interest_meta_add_param(
            rm, gst_structure_copy(gst_value_get_structure(p)));
    }
  return TRUE;
}

static gboolean apply_caption(const GstStructure *s, GstBuffer *buf)
{
  GstBuffer *data = NULL;
  GstMapInfo map;
  gint type;
  gboolean ok;

  if (!gst_structure_get(s, "type", G_TYPE_INT, &type, "data", GST_TYPE_BUFFER,
                         &data, NULL))
    return FALSE;
  ok = gst_buffer_map(data, &map, GST_MAP_READ);
  if (ok && map.size == 0) {
    gst_buffer_unmap(data, &map);
    ok = FALSE;
  }
  if (ok) {
    gst_buffer_add_video_caption_meta(buf, (GstVideoCaptionType)type, map.data,
                                      map.size);
    gst_buffer_unmap(data, &map);
  }
  gst_buffer_unref(data);
  return ok;
}

static gboolean apply_reference(const GstStructure *s, GstBuffer *buf)
{
  const gchar *ref = gst_structure_get_string(s, "reference");
  GstCaps *caps = ref ? gst_caps_from_string(ref) : NULL;
  guint64 ts, duration;
  gboolean ok;

  ok = caps && gst_structure_get(s, "timestamp", G_TYPE_UINT64, &ts, "duration",
                                 G_TYPE_UINT64, &duration, NULL);
  if (ok)
    gst_buffer_add_reference_timestamp_meta(buf, caps, ts, duration);
  if (caps)
    gst_caps_unref(caps);
  return ok;
}

static gboolean copy_field(GQuark field, const GValue *value, gpointer data)
{
  gst_structure_id_set_value(data, field, value);
  return TRUE;
}

static gboolean apply_custom(const GstStructure *s, GstBuffer *buf)
{
  const gchar *name = gst_structure_get_string(s, "name");
  const GValue *fields = gst_structure_get_value(s, "fields");
  const GstMetaInfo *info = name ? gst_meta_get_info(name) : NULL;
  GstCustomMeta *cm;

  /* Only a custom meta: its structure is all it is.  A meta of another
   * kind registered under the name would be read as something it isn't. */
  if (!info || !gst_meta_info_is_custom(info) || !fields ||
      !GST_VALUE_HOLDS_STRUCTURE(fields))
    return FALSE;
  cm = gst_buffer_add_custom_meta(buf, name);
  if (!cm)
    return FALSE;
  gst_structure_foreach(gst_value_get_structure(fields), copy_field,
                        gst_custom_meta_get_structure(cm));
  return TRUE;
}

static gboolean apply_app_meta(const GstStructure *ms, GstBuffer *buf,
                               GstRdmaMetaReader reader, gpointer data)
{
  const gchar *api = gst_structure_get_string(ms, "api");
  const GValue *fields = gst_structure_get_value(ms, "fields");

  return reader && api && fields && GST_VALUE_HOLDS_STRUCTURE(fields) &&
         reader(buf, api, gst_value_get_structure(fields), data);
}

static gboolean apply_meta(const GstStructure *ms, GstBuffer *buf,
                           const GstVideoInfo *info, GstRdmaMetaReader reader,
                           gpointer data)
{
  if (gst_structure_has_name(ms, "app-meta"))
    return apply_app_meta(ms, buf, reader, data);
  if (gst_structure_has_name(ms, "video-meta"))
    return apply_video_meta(ms, buf, info);
  if (gst_structure_has_name(ms, "timecode-meta"))
    return apply_time_code(ms, buf);
  if (gst_structure_has_name(ms, "roi-meta"))
    return apply_roi(ms, buf);
  if (gst_structure_has_name(ms, "caption-meta"))
    return apply_caption(ms, buf);
  if (gst_structure_has_name(ms, "reference-timestamp-meta"))
    return apply_reference(ms, buf);
  if (gst_structure_has_name(ms, "protection-meta")) {
    const GValue *v = gst_structure_get_value(ms, "info");

    if (!v || !GST_VALUE_HOLDS_STRUCTURE(v))
      return FALSE;
    gst_buffer_add_protection_meta(
        buf, gst_structure_copy(gst_value_get_structure(v)));
    return TRUE;
  }
  if (gst_structure_has_name(ms, "custom-meta"))
    return apply_custom(ms, buf);
  return FALSE;
}

guint gst_rdma_extras_apply(const GstStructure *s, GstBuffer *buf,
                            const GstVideoInfo *info, GstRdmaMetaReader reader,
                            gpointer data)
{
  const GValue *metas = gst_structure_get_value(s, "metas");
  guint flags = 0, failed = 0;

  if (gst_structure_get_uint(s, "flags", &flags))
    GST_BUFFER_FLAG_SET(buf, flags & GST_RDMA_EXTRAS_FLAGS);
  if (!metas || !GST_VALUE_HOLDS_ARRAY(metas))
    return 0;
  for (guint i = 0; i < gst_value_array_get_size(metas); i++) {
    const GValue *v = gst_value_array_get_value(metas, i);

    if (!GST_VALUE_HOLDS_STRUCTURE(v) ||
        !apply_meta(gst_value_get_structure(v), buf, info, reader, data))
      failed++;
  }
  return failed;
}
