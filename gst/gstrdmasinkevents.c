/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasinkevents.c - rdmasink's stream events across the link: the
 * stream's tags (a camera's title, location, encoder) go as an EVENT block
 * (docs/protocol.md, kind 4) in their place before the next frame, and
 * again after the caps on every new lane, as the caps and headers do: a
 * receiver that starts mid-stream gets them too.  The newest TAG event of
 * each scope is kept; the payload is an "rdma-tags" structure serialized
 * (send_event).
 *
 * A receiver of an older version doesn't take EVENT blocks (libsbr says
 * -ENOTSUP): the tags stay on this side, said once.  Tags that don't fit
 * one block (an image) are left out, said once.  Streaming thread only.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>

#include "gstrdmasinkpriv.h"

#define GST_CAT_DEFAULT gst_rdma_sink_debug

void gst_rdma_sink_events_tag(GstRdmaSink *self, GstEvent *event)
{
  GstTagList *tags = NULL;
  GstEvent **slot;

  gst_event_parse_tag(event, &tags);
  slot = gst_tag_list_get_scope(tags) == GST_TAG_SCOPE_GLOBAL
             ? &self->tags_global
             : &self->tags_stream;
  gst_event_replace(slot, event);
  self->tags_pending = TRUE;
}

void gst_rdma_sink_events_clear(GstRdmaSink *self)
{
  gst_event_replace(&self->tags_stream, NULL);
  self->tags_pending = FALSE;
}

void gst_rdma_sink_events_free(GstRdmaSink *self)
{
  gst_event_replace(&self->tags_stream, NULL);
  gst_event_replace(&self->tags_global, NULL);
}

/* A TAG event as an EVENT block, "rdma-tags, scope=(string)stream|global,
 * taglist=(taglist)...": 0, or libsbr's error. */
static int send_event(GstRdmaSink *self, sbr_sender *sender, GstEvent *event)
{
  struct sbr_block_meta meta;
  GstTagList *tags = NULL;
  GstStructure *s;
  gchar *str;
  int ret;

  gst_event_parse_tag(event, &tags);
  s = gst_structure_new("rdma-tags", "scope", G_TYPE_STRING,
                        gst_tag_list_get_scope(tags) == GST_TAG_SCOPE_GLOBAL
                            ? "global"
                            : "stream",
                        "taglist", GST_TYPE_TAG_LIST, tags, NULL);
  str = gst_structure_to_string(s);
  gst_structure_free(s);

  sbr_block_meta_init(&meta, self->device);
  meta.kind = SBR_KIND_EVENT;
  ret = gst_rdma_sink_send(self, sender, &meta, str, strlen(str));
  g_free(str);
  return ret;
}

GstFlowReturn gst_rdma_sink_events_send(GstRdmaSink *self, sbr_sender *sender,
                                        guint generation)
{
  GstEvent *events[2] = {self->tags_global, self->tags_stream};

  if (!self->tags_pending)
    return GST_FLOW_OK;
  for (guint i = 0; i < G_N_ELEMENTS(events); i++) {
    int ret;

    if (!events[i])
      continue;
    ret = send_event(self, sender, events[i]);
    if (ret == -ENOTSUP || ret == -EMSGSIZE) {
      if (!self->events_warned)
        GST_WARNING_OBJECT(self, "tags not sent: %s",
                           ret == -ENOTSUP ? "the receiver predates events"
                                           : "they don't fit one block");
      self->events_warned = TRUE;
      continue;
    }
    if (ret != 0)
      /* Pending still: they go before the next frame that goes. */
      return gst_rdma_sink_handle_result(self, ret, 0, sender, generation);
    GST_OBJECT_LOCK(self);
    self->events_sent++;
    GST_OBJECT_UNLOCK(self);
  }
  self->tags_pending = FALSE;
  return GST_FLOW_OK;
}
