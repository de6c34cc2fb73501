/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasrcdevice.c - a device's owner, departure and silence
 * (gstrdmasrcdevice.h).
 *
 * Why ownership: two sender processes (two hosts, say) that both send
 * device 0 used to be mixed on src_0, every buffer DISCONT, with no word
 * to anyone.  A device id names one camera; the first connection to send
 * it keeps it until it goes, and the bus says so when another tries.  The
 * other sender is told too, one-sidedly: its lane's refused bit for the
 * device (sbr_receiver_refuse_device), which its next status READ brings;
 * its rdmasink then stops sending and warns.  The bit clears when the
 * owner goes, so the refused sender tries again and takes the device over.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstrdmasrcdevice.h"

GST_DEBUG_CATEGORY_EXTERN(gst_rdma_src_debug);
#define GST_CAT_DEFAULT gst_rdma_src_debug

gboolean gst_rdma_src_device_claim(GstRdmaSrcDevice *dev, GstElement *element,
                                   sbr_receiver *receiver, guint32 lane)
{
  if (dev->owned && dev->owner_lane != lane &&
      sbr_receiver_lane_peer(receiver, dev->owner_lane, NULL, 0) == 0) {
    GST_OBJECT_LOCK(element); /* the stats read these */
    dev->refused++;
    GST_OBJECT_UNLOCK(element);
    /* Tell that sender (idempotent: a few frames come until it sees it). */
    sbr_receiver_refuse_device(receiver, lane, (uint8_t)dev->device, TRUE);
    if (dev->warned_lane != lane) {
      gchar peer[64] = "?";

      dev->warned_lane = lane;
      sbr_receiver_lane_peer(receiver, lane, peer, sizeof peer);
      GST_ELEMENT_WARNING_WITH_DETAILS(
          element, STREAM, FAILED,
          ("Device %u is already sent by %s; frames of device %u from %s "
           "are dropped.",
           dev->device, dev->owner_peer, dev->device, peer),
          ("lane %u owns device %u, lane %u refused", dev->owner_lane,
           dev->device, lane),
          ("device-id", G_TYPE_UINT, dev->device, "owner", G_TYPE_STRING,
           dev->owner_peer, "refused-peer", G_TYPE_STRING, peer, NULL));
    }
    return FALSE;
  }
  if (!dev->owned || dev->owner_lane != lane) {
    /* First sender, or the one after the previous owner left. */
    gchar peer[64] = "?";

    sbr_receiver_lane_peer(receiver, lane, peer, sizeof peer);
    GST_OBJECT_LOCK(element); /* the stats read these */
    dev->owned = TRUE;
    dev->owner_lane = lane;
    g_strlcpy(dev->owner_peer, peer, sizeof dev->owner_peer);
    GST_OBJECT_UNLOCK(element);
    dev->warned_lane = G_MAXUINT32;
    /* A lane refused before (under a previous owner) owns it now. */
    sbr_receiver_refuse_device(receiver, lane, (uint8_t)dev->device, FALSE);
    GST_INFO_OBJECT(element, "device %u: sent by %s (lane %u)", dev->device,
                    dev->owner_peer, lane);
  }
  dev->last_frame_us = g_get_monotonic_time();
  dev->idle_posted = FALSE;
  return TRUE;
}

gboolean gst_rdma_src_device_check_lane(GstRdmaSrcDevice *dev,
                                        GstElement *element,
                                        sbr_receiver *receiver)
{
  if (!dev->owned ||
      sbr_receiver_lane_peer(receiver, dev->owner_lane, NULL, 0) == 0)
    return FALSE;
  GST_OBJECT_LOCK(element);
  dev->owned = FALSE;
  GST_OBJECT_UNLOCK(element);
  /* Senders refused while it owned the device stopped sending it: let
   * them try again; the first frame to come claims it, the others are
   * refused anew. */
  sbr_receiver_refuse_device(receiver, SBR_LANE_ALL, (uint8_t)dev->device,
                             FALSE);
  if (gst_rdma_src_pad_is_eos(dev->pad)) {
    /* It said goodbye (EOS) before it went: nothing was lost. */
    return FALSE;
  }
  GST_OBJECT_LOCK(element);
  dev->losses++;
  GST_OBJECT_UNLOCK(element);
  GST_WARNING_OBJECT(element, "device %u: its sender %s is gone", dev->device,
                     dev->owner_peer);
  gst_element_post_message(
      element,
      gst_message_new_element(
          GST_OBJECT(element),
          gst_structure_new("rdmasrc-device-lost", "device-id", G_TYPE_UINT,
                            dev->device, "peer", G_TYPE_STRING, dev->owner_peer,
                            "lane", G_TYPE_UINT, dev->owner_lane, NULL)));
  return TRUE;
}

void gst_rdma_src_device_check_idle(GstRdmaSrcDevice *dev, GstElement *element,
                                    guint timeout_ms, gint64 now_us)
{
  if (timeout_ms == 0 || dev->idle_posted ||
      gst_rdma_src_pad_is_eos(dev->pad) ||
      now_us - dev->last_frame_us <
          (gint64)timeout_ms * G_TIME_SPAN_MILLISECOND)
    return;
  dev->idle_posted = TRUE;
  gst_element_post_message(
      element,
      gst_message_new_element(
          GST_OBJECT(element),
          gst_structure_new("rdmasrc-device-timeout", "device-id", G_TYPE_UINT,
                            dev->device, "timeout", G_TYPE_UINT64,
                            (guint64)timeout_ms * GST_MSECOND, NULL)));
}

gboolean gst_rdma_src_device_packet_gap(GstRdmaSrcDevice *dev,
                                        const struct sbr_frame *frame,
                                        guint block_payload)
{
  const struct sbr_block_info *info = &frame->info;
  guint n = frame->n_blocks;
  gboolean gap = FALSE;

  if (n == 0) {
    if (block_payload == 0) {
      dev->packet_known = FALSE; /* can't tell where the next one starts */
      return FALSE;
    }
    n = MAX(1u, (frame->size + block_payload - 1) / block_payload);
  }
  if (dev->packet_known && dev->packet_lane == info->lane_id &&
      dev->packet_epoch == info->epoch) {
    /* Forward (mod 2^16) past the expected one; a step back is no loss
     * (as libsbr counts it). */
    gint16 step = (gint16)(guint16)(info->packet - dev->next_packet);

    gap = step > 0;
  }
  if (gap)
    GST_DEBUG("device %u: packets %u to %u lost", dev->device, dev->next_packet,
              (guint16)(info->packet - 1));
  dev->packet_known = TRUE;
  dev->packet_lane = info->lane_id;
  dev->packet_epoch = info->epoch;
  dev->next_packet = (guint16)(info->packet + n);
  return gap;
}
