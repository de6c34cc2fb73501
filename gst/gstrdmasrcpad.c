/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmasrcpad.c - one device's src pad of rdmasrc (see gstrdmasrcpad.h).
 *
 * Why a thread per pad: a sink waits in preroll, a queue blocks when full,
 * an analysis element takes 200 ms a frame.  With one streaming thread for
 * every device (as rdmasrc had, like a demuxer), any of those stops every
 * other camera: three fakesinks linked straight to the pads never prerolled,
 * and one slow consumer set the pace of all twelve cameras.  Here the
 * receive thread only queues; each pad's task pushes its own queue, so a
 * blocked push blocks that device alone, and the device's budget (lane
 * blocks it may keep, frames it may queue) bounds what it can take from the
 * lane that every device shares.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstrdmasrcpad.h"

#include "gstrdmaextras.h"

GST_DEBUG_CATEGORY_STATIC(gst_rdma_src_pad_debug);
#define GST_CAT_DEFAULT gst_rdma_src_pad_debug

enum {
  PROP_0,
  PROP_OVER_BUDGET,
  PROP_TIMESTAMP_MODE,
  PROP_WAIT_FOR_KEYFRAME,
  N_PROPERTIES,
};

/* A queued buffer or serialized event. */
typedef struct {
  GstMiniObject *obj;
  guint lane_blocks; /* buffers: lane blocks it wraps (0 when copied) */
} QueueItem;

struct _GstRdmaSrcPad {
  GstPad parent;

  guint device;
  GstRdmaSharedFlow *flow; /* the element's, outlives the pad task */
  GstRdmaBlockCount *blocks_out;

  /* Everything below: lock. */
  GMutex lock;
  GCond cond;
  GQueue queue;                 /* QueueItem */
  guint queued_buffers;         /* buffers in queue */
  guint queued_blocks;          /* lane blocks they wrap */
  gboolean running;             /* PLAYING: the task pushes */
  gboolean held;                /* not exposed yet: the task waits to push */
  gboolean flushing;            /* stopping: the task pauses itself */
  gboolean gap_pending;         /* a frame was lost (on the way, dropped on
                                   arrival, or the newest queued one dropped):
                                   mark the next one queued DISCONT */
  gboolean need_key;            /* after a gap on a delta stream: its deltas
                                   are dropped until a key frame */
  gboolean saw_delta;           /* the stream's frames carry DELTA_UNIT */
  gboolean caps_encoded;        /* its caps are neither video/x-raw nor
                                   audio/x-raw */
  gboolean wait_key;            /* property, or the element's default */
  gboolean wait_key_set;        /* the property was set on the pad */
  gboolean eos;                 /* EOS queued or returned from downstream */
  gboolean has_stream;          /* stream-start sent or queued since the last
                                   state cycle (end_stream) */
  gboolean task_waits;          /* the task sleeps on cond for an item: the
                                   next one queued wakes it, later ones don't */
  GstRdmaOverBudget policy;     /* property; also read by admit */
  gboolean policy_set;          /* the property was set: the stream's
                                   liveness doesn't change the policy */
  gboolean hold_back;           /* a stream that isn't live, on the default
                                   policy: frames over the share stay in the
                                   lane, never dropped (admit) */
  GstRdmaTimestampMode ts_mode; /* property: overrides the element's */
  gboolean ts_mode_set;         /* ... once set */
  gboolean paused;              /* the sender was told to stop */
  gint64 paused_since;          /* monotonic us */
  guint64 paused_us;            /* total of finished pauses */
  guint64 pauses;
  guint64 copies;      /* frames copied because over budget */
  guint64 fragmented;  /* frames pushed in several memories: a map of the
                          whole buffer merges them, a copy (a sender that
                          couldn't span them: an older one, or no run of
                          free blocks in the lane) */
  guint64 drops_leaky; /* queued frames dropped to make room */
  guint64 drops_not_playing;
  guint64 drops_ended;       /* after EOS */
  guint64 drops_no_layout;   /* padded planes whose layout was lost */
  guint64 drops_waiting_key; /* deltas whose references were lost */
  guint64 pushed;
  guint64 wakeups;                /* items queued that woke the sleeping task */
  GstClockTime late_max;          /* most a buffer's push was after its PTS */
  GstClockTime latency_announced; /* what the last LATENCY answer said */

  guint64 layout_copies; /* frames copied into their caps' default layout:
                            padded planes (GstVideoMeta) for a consumer
                            that doesn't take the meta */

  /* Pad task only. */
  gboolean eos_pushed;     /* downstream had EOS: a new stream flushes first */
  GstVideoInfo video_info; /* the raw video caps pushed last ... */
  gboolean has_video_info; /* ... when they are */
  gboolean video_meta_ok;  /* downstream takes GstVideoMeta (allocation
                              query after those caps) */
  gboolean layout_learnt;  /* the two above are for the caps pushed last */
};

G_DEFINE_TYPE(GstRdmaSrcPad, gst_rdma_src_pad, GST_TYPE_PAD);

static GParamSpec *properties[N_PROPERTIES];

static void gst_rdma_src_pad_loop(gpointer data);

static void queue_item_free(QueueItem *item)
{
  gst_mini_object_unref(item->obj);
  g_free(item);
}

static void gst_rdma_src_pad_finalize(GObject *object)
{
  GstRdmaSrcPad *pad = GST_RDMA_SRC_PAD(object);

  g_queue_clear_full(&pad->queue, (GDestroyNotify)queue_item_free);
  g_atomic_rc_box_release(pad->blocks_out);
  g_mutex_clear(&pad->lock);
  g_cond_clear(&pad->cond);
  G_OBJECT_CLASS(gst_rdma_src_pad_parent_class)->finalize(object);
}

static void gst_rdma_src_pad_set_property(GObject *object, guint prop_id,
                                          const GValue *value,
                                          GParamSpec *pspec)
{
  GstRdmaSrcPad *pad = GST_RDMA_SRC_PAD(object);

  switch (prop_id) {
  case PROP_OVER_BUDGET:
    g_mutex_lock(&pad->lock);
    pad->policy = g_value_get_enum(value);
    pad->policy_set = TRUE;
    pad->hold_back = FALSE;
    g_mutex_unlock(&pad->lock);
    break;
  case PROP_TIMESTAMP_MODE:
    g_mutex_lock(&pad->lock);
    pad->ts_mode = g_value_get_enum(value);
    pad->ts_mode_set = TRUE;
    g_mutex_unlock(&pad->lock);
    break;
  case PROP_WAIT_FOR_KEYFRAME:
    g_mutex_lock(&pad->lock);
    pad->wait_key = g_value_get_boolean(value);
    pad->wait_key_set = TRUE;
    g_mutex_unlock(&pad->lock);
    break;
  default:
    G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    break;
  }
}

static void gst_rdma_src_pad_get_property(GObject *object, guint prop_id,
                                          GValue *value, GParamSpec *pspec)
{
  GstRdmaSrcPad *pad = GST_RDMA_SRC_PAD(object);

  switch (prop_id) {
  case PROP_OVER_BUDGET:
    g_mutex_lock(&pad->lock);
    g_value_set_enum(value, pad->policy);
    g_mutex_unlock(&pad->lock);
    break;
  case PROP_TIMESTAMP_MODE: {
    /* Unset: what applies, the element's. */
    GstObject *parent = gst_object_get_parent(GST_OBJECT(pad));
    GstRdmaTimestampMode mode = GST_RDMA_TIMESTAMP_MODE_SKEW;

    if (parent) {
      g_object_get(parent, "timestamp-mode", &mode, NULL);
      gst_object_unref(parent);
    }
    g_value_set_enum(value, gst_rdma_src_pad_timestamp_mode(pad, mode));
    break;
  }
  case PROP_WAIT_FOR_KEYFRAME:
    g_mutex_lock(&pad->lock);
    g_value_set_boolean(value, pad->wait_key);
    g_mutex_unlock(&pad->lock);
    break;
  default:
    G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    break;
  }
}

static void gst_rdma_src_pad_class_init(GstRdmaSrcPadClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);

  gobject_class->finalize = gst_rdma_src_pad_finalize;
  gobject_class->set_property = gst_rdma_src_pad_set_property;
  gobject_class->get_property = gst_rdma_src_pad_get_property;

  properties[PROP_OVER_BUDGET] = g_param_spec_enum(
      "over-budget", "Over budget",
      "What to do when this device occupies its whole share of the lane "
      "(rdmasrc device-blocks): drop its oldest queued frames, copy new "
      "frames out of the lane, or tell its sender to pause",
      GST_TYPE_RDMA_OVER_BUDGET, GST_RDMA_OVER_BUDGET_DROP_OLDEST,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING);
  properties[PROP_TIMESTAMP_MODE] = g_param_spec_enum(
      "timestamp-mode", "Timestamp mode",
      "How this device's buffers are stamped, once set (else rdmasrc's "
      "timestamp-mode); a change starts its mapping again",
      GST_TYPE_RDMA_TIMESTAMP_MODE, GST_RDMA_TIMESTAMP_MODE_SKEW,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING);
  properties[PROP_WAIT_FOR_KEYFRAME] = g_param_spec_boolean(
      "wait-for-keyframe", "Wait for keyframe",
      "After a gap (frames dropped or lost), push no delta frame until the "
      "next key frame, on a stream whose frames carry DELTA_UNIT or whose "
      "caps are not raw video or audio (default: rdmasrc's "
      "wait-for-keyframe)",
      GST_RDMA_SRC_DEFAULT_WAIT_FOR_KEYFRAME,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING);
  g_object_class_install_properties(gobject_class, N_PROPERTIES, properties);

  GST_DEBUG_CATEGORY_INIT(gst_rdma_src_pad_debug, "rdmasrcpad", 0,
                          "RDMA source pads");
}

static void gst_rdma_src_pad_init(GstRdmaSrcPad *pad)
{
  g_mutex_init(&pad->lock);
  g_cond_init(&pad->cond);
  g_queue_init(&pad->queue);
  pad->blocks_out = g_atomic_rc_box_new0(GstRdmaBlockCount);
  pad->wait_key = GST_RDMA_SRC_DEFAULT_WAIT_FOR_KEYFRAME;
}

GstRdmaSrcPad *gst_rdma_src_pad_new(GstPadTemplate *templ, guint device,
                                    GstRdmaOverBudget policy,
                                    GstRdmaSharedFlow *flow)
{
  gchar *name = g_strdup_printf("src_%u", device);
  GstRdmaSrcPad *pad =
      g_object_new(GST_TYPE_RDMA_SRC_PAD, "name", name, "direction",
                   GST_PAD_SRC, "template", templ, NULL);

  g_free(name);
  pad->device = device;
  pad->policy = policy;
  pad->flow = flow;
  return pad;
}

guint gst_rdma_src_pad_get_device(GstRdmaSrcPad *pad)
{
  return pad->device;
}

GstRdmaBlockCount *gst_rdma_src_pad_block_count(GstRdmaSrcPad *pad)
{
  return pad->blocks_out;
}

void gst_rdma_src_pad_set_default_policy(GstRdmaSrcPad *pad,
                                         GstRdmaOverBudget policy,
                                         gboolean hold_back)
{
  g_mutex_lock(&pad->lock);
  if (!pad->policy_set) {
    if (pad->policy != policy || pad->hold_back != hold_back)
      GST_INFO_OBJECT(pad, "over-budget %s%s for this stream",
                      gst_rdma_over_budget_nick(policy),
                      hold_back ? ", holding back (not live)" : "");
    pad->policy = policy;
    pad->hold_back = hold_back;
  }
  g_mutex_unlock(&pad->lock);
}

void gst_rdma_src_pad_set_default_wait_for_keyframe(GstRdmaSrcPad *pad,
                                                    gboolean wait)
{
  g_mutex_lock(&pad->lock);
  if (!pad->wait_key_set)
    pad->wait_key = wait;
  g_mutex_unlock(&pad->lock);
}

GstRdmaOverBudget gst_rdma_src_pad_get_policy(GstRdmaSrcPad *pad)
{
  GstRdmaOverBudget policy;

  g_mutex_lock(&pad->lock);
  policy = pad->policy;
  g_mutex_unlock(&pad->lock);
  return policy;
}

GstRdmaTimestampMode gst_rdma_src_pad_timestamp_mode(GstRdmaSrcPad *pad,
                                                     GstRdmaTimestampMode dflt)
{
  GstRdmaTimestampMode mode;

  g_mutex_lock(&pad->lock);
  mode = pad->ts_mode_set ? pad->ts_mode : dflt;
  g_mutex_unlock(&pad->lock);
  return mode;
}

/* ------------------------------------------------------------ queue */

/* Lock held.  Does a gap cost this stream its deltas until a key frame?
 * Only where its frames refer to others: raw video and audio never carry
 * DELTA_UNIT and keep every frame. */
static gboolean waits_for_key(GstRdmaSrcPad *pad)
{
  return pad->wait_key && (pad->saw_delta || pad->caps_encoded);
}

static gboolean is_delta(GstMiniObject *obj)
{
  return GST_IS_BUFFER(obj) &&
         GST_BUFFER_FLAG_IS_SET(GST_BUFFER_CAST(obj),
                                GST_BUFFER_FLAG_DELTA_UNIT);
}

/* A stream header (SPS/PPS, codec setup: HEADER, rdmasink sends them again
 * on a new lane): what the next key frame needs to decode at all.  Never
 * dropped for room or while waiting for a key frame, and it ends no
 * wait: the frames after it may still lack their references. */
static gboolean is_header(GstMiniObject *obj)
{
  return GST_IS_BUFFER(obj) &&
         GST_BUFFER_FLAG_IS_SET(GST_BUFFER_CAST(obj), GST_BUFFER_FLAG_HEADER);
}

/* Lock held.  A frame of a stream that waits for key frames went (dropped
 * from the queue at from's predecessor): the queued deltas after it refer
 * to it, directly or through each other, and go too, up to the next
 * queued key frame, which the pad task pushes with DISCONT.  Without one,
 * the queue is left with no buffer of that stream, and the pad waits for
 * the next key frame to arrive.  Dropping to the next key rather than
 * keeping the newest GOP: drop-oldest's promise is that the oldest frames
 * go first, and this drops the fewest frames that keeps it (everything it
 * drops could not be decoded anyway). */
static GList *drop_references(GstRdmaSrcPad *pad, GList *from)
{
  GList *l = from;

  while (l) {
    GList *next = l->next;
    QueueItem *item = l->data;

    if (GST_IS_BUFFER(item->obj) && !is_header(item->obj)) {
      if (!is_delta(item->obj))
        return l; /* a key frame: decodable again from here */
      g_queue_delete_link(&pad->queue, l);
      pad->queued_buffers--;
      pad->queued_blocks -= item->lane_blocks;
      pad->drops_waiting_key++;
      queue_item_free(item);
    }
    l = next;
  }
  GST_DEBUG_OBJECT(pad, "no key frame queued: waiting for the next one");
  pad->need_key = TRUE;
  return NULL;
}

/* Lock held.  A queued frame went; from is what followed it.  The next
 * frame pushed after the gap says so (DISCONT), and on a stream that
 * waits for key frames that is the next key frame. */
static void mark_gap(GstRdmaSrcPad *pad, GList *from)
{
  if (waits_for_key(pad))
    from = drop_references(pad, from);
  for (GList *l = from; l; l = l->next) {
    QueueItem *item = l->data;

    if (GST_IS_BUFFER(item->obj)) {
      /* Only this queue has it: writable without a copy. */
      GST_BUFFER_FLAG_SET(GST_BUFFER_CAST(item->obj), GST_BUFFER_FLAG_DISCONT);
      return;
    }
  }
  pad->gap_pending = TRUE; /* none queued: the next one to come */
}

/* Lock held.  Reads the kind of stream from its caps. */
static void note_caps(GstRdmaSrcPad *pad, GstCaps *caps)
{
  const gchar *name;

  if (!caps || gst_caps_is_empty(caps) || gst_caps_is_any(caps))
    return;
  name = gst_structure_get_name(gst_caps_get_structure(caps, 0));
  pad->caps_encoded =
      !g_str_equal(name, "video/x-raw") && !g_str_equal(name, "audio/x-raw");
}

/* Lock held.  Drops the oldest queued buffer (events stay), or with
 * lane_only the oldest that holds lane blocks (dropping a copy frees none);
 * FALSE if none. */
static gboolean drop_oldest_buffer(GstRdmaSrcPad *pad, gboolean lane_only)
{
  for (GList *l = pad->queue.head; l; l = l->next) {
    QueueItem *item = l->data;
    GList *next = l->next;

    if (!GST_IS_BUFFER(item->obj) || is_header(item->obj) ||
        (lane_only && item->lane_blocks == 0))
      continue;
    g_queue_delete_link(&pad->queue, l);
    pad->queued_buffers--;
    pad->queued_blocks -= item->lane_blocks;
    pad->drops_leaky++;
    GST_DEBUG_OBJECT(pad, "dropped the oldest queued frame for room");
    /* Frees the memories: their blocks go back to the sender now. */
    queue_item_free(item);
    mark_gap(pad, next);
    return TRUE;
  }
  return FALSE;
}

/* Lock held: lane blocks out, when a frame of n more would overrun. */
static gboolean lane_over_budget(GstRdmaSrcPad *pad, guint n, guint budget)
{
  guint out = (guint)g_atomic_int_get(&pad->blocks_out->blocks);

  /* A frame bigger than the whole budget still goes when the device has
   * nothing else out: a budget never stops a stream outright. */
  return out > 0 && out + n > budget;
}

GstRdmaAdmit gst_rdma_src_pad_admit(GstRdmaSrcPad *pad, guint n_blocks,
                                    guint budget, guint max_queued,
                                    gboolean *over_budget)
{
  GstRdmaAdmit admit;
  gboolean over;

  budget = MAX(budget, 1);
  g_mutex_lock(&pad->lock);
  over = lane_over_budget(pad, n_blocks, budget);
  if (pad->hold_back) {
    /* Not live: nothing is dropped and nothing copied.  Over its share
     * the frame stays in the lane, so the lane itself holds the sender
     * back (no free receive block, or no free slot) as far as the pause
     * hasn't already; the queue is bounded by the lane. */
    g_mutex_unlock(&pad->lock);
    if (over_budget)
      *over_budget = over;
    return GST_RDMA_ADMIT_WRAP;
  }
  if (pad->policy == GST_RDMA_OVER_BUDGET_DROP_OLDEST) {
    /* Live video: the newest frame matters, the oldest queued one goes. */
    while (lane_over_budget(pad, n_blocks, budget) &&
           drop_oldest_buffer(pad, TRUE))
      ;
    while (pad->queued_buffers >= budget && drop_oldest_buffer(pad, FALSE))
      ;
  } else {
    /* copy / pause keep what is queued while the queue has room. */
    while (pad->queued_buffers >= MAX(budget, max_queued) &&
           drop_oldest_buffer(pad, FALSE))
      ;
  }
  /* What downstream holds can't be dropped: copy the new frame instead, so
   * the lane stays free for the other devices. */
  admit = lane_over_budget(pad, n_blocks, budget) ? GST_RDMA_ADMIT_COPY
                                                  : GST_RDMA_ADMIT_WRAP;
  if (admit == GST_RDMA_ADMIT_COPY)
    pad->copies++;
  g_mutex_unlock(&pad->lock);
  if (over_budget)
    *over_budget = over;
  return admit;
}

/* Lock held.  The hand-off to the pad task costs a futex wake-up (and,
 * when that thread's vCPU is idle, the host waking it: B9), so it is paid
 * only when the task sleeps for an item: one queued while the task pushes
 * the previous one is found by its next turn without a signal.  The
 * caller signals after unlocking (*wake), so the woken task doesn't block
 * at once on the lock the receive thread still holds. */
static void queue_item(GstRdmaSrcPad *pad, GstMiniObject *obj,
                       guint lane_blocks, gboolean *wake)
{
  QueueItem *item = g_new(QueueItem, 1);

  item->obj = obj;
  item->lane_blocks = lane_blocks;
  g_queue_push_tail(&pad->queue, item);
  *wake = pad->task_waits;
  if (pad->task_waits) {
    pad->task_waits = FALSE; /* one wake-up per sleep is enough */
    pad->wakeups++;
  }
}

void gst_rdma_src_pad_queue_buffer(GstRdmaSrcPad *pad, GstBuffer *buf,
                                   guint lane_blocks, gboolean copied)
{
  gboolean wake, header, waiting;

  (void)copied;
  g_mutex_lock(&pad->lock);
  if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_DELTA_UNIT))
    pad->saw_delta = TRUE;
  if (!pad->running || pad->eos) {
    /* Live: a frame that can't be pushed now is worth nothing later. */
    if (pad->eos)
      pad->drops_ended++;
    else
      pad->drops_not_playing++;
    GST_DEBUG_OBJECT(pad, "frame dropped: %s",
                     pad->eos ? "stream ended" : "not playing");
    pad->gap_pending = TRUE;
    g_mutex_unlock(&pad->lock);
    gst_buffer_unref(buf);
    return;
  }
  /* Any gap before this frame (DISCONT from the sender, which marks its
   * own drops, or from stamping: a new lane, the first frame of a late
   * join; or one seen here) leaves a delta stream without the references
   * of its next deltas. */
  if (waits_for_key(pad) &&
      (pad->gap_pending ||
       GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_DISCONT)))
    pad->need_key = TRUE;
  /* A header is pushed for the key frame to come, and ends no wait: that
   * key frame still says DISCONT (gap_pending stays). */
  header = is_header(GST_MINI_OBJECT_CAST(buf));
  waiting = pad->need_key && waits_for_key(pad);
  if (waiting && !header) {
    if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_DELTA_UNIT)) {
      pad->drops_waiting_key++;
      pad->gap_pending = TRUE; /* the key frame that ends it says so */
      GST_LOG_OBJECT(pad, "delta frame dropped: waiting for a key frame");
      g_mutex_unlock(&pad->lock);
      gst_buffer_unref(buf);
      return;
    }
    GST_DEBUG_OBJECT(pad, "key frame: pushing again");
  }
  if (!(waiting && header))
    pad->need_key = FALSE;
  if (pad->gap_pending) {
    /* Made on the receive thread and not yet shared: writable. */
    GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_DISCONT);
    if (!(waiting && header))
      pad->gap_pending = FALSE;
  }
  pad->queued_buffers++;
  pad->queued_blocks += lane_blocks;
  queue_item(pad, GST_MINI_OBJECT_CAST(buf), lane_blocks, &wake);
  g_mutex_unlock(&pad->lock);
  if (wake)
    g_cond_signal(&pad->cond);
}

void gst_rdma_src_pad_queue_event(GstRdmaSrcPad *pad, GstEvent *event)
{
  gboolean wake;

  g_mutex_lock(&pad->lock);
  if (GST_EVENT_TYPE(event) == GST_EVENT_EOS)
    pad->eos = TRUE;
  if (GST_EVENT_TYPE(event) == GST_EVENT_STREAM_START)
    pad->has_stream = TRUE;
  if (GST_EVENT_TYPE(event) == GST_EVENT_CAPS) {
    GstCaps *caps;

    gst_event_parse_caps(event, &caps);
    note_caps(pad, caps);
  }
  queue_item(pad, GST_MINI_OBJECT_CAST(event), 0, &wake);
  g_mutex_unlock(&pad->lock);
  if (wake)
    g_cond_signal(&pad->cond);
}

void gst_rdma_src_pad_count_drop(GstRdmaSrcPad *pad, GstRdmaDropReason why)
{
  static const gchar *const reasons[] = {
      [GST_RDMA_DROP_NOT_PLAYING] = "not playing",
      [GST_RDMA_DROP_ENDED] = "stream ended",
      [GST_RDMA_DROP_NO_LAYOUT] = "its padded layout was lost",
  };

  g_mutex_lock(&pad->lock);
  pad->gap_pending = TRUE;
  switch (why) {
  case GST_RDMA_DROP_NOT_PLAYING:
    pad->drops_not_playing++;
    break;
  case GST_RDMA_DROP_ENDED:
    pad->drops_ended++;
    break;
  case GST_RDMA_DROP_NO_LAYOUT:
    pad->drops_no_layout++;
    break;
  }
  GST_DEBUG_OBJECT(pad, "frame dropped on arrival: %s", reasons[why]);
  g_mutex_unlock(&pad->lock);
}

gboolean gst_rdma_src_pad_waiting_for_key(GstRdmaSrcPad *pad)
{
  gboolean waiting;

  g_mutex_lock(&pad->lock);
  waiting = pad->need_key && waits_for_key(pad);
  g_mutex_unlock(&pad->lock);
  return waiting;
}

gboolean gst_rdma_src_pad_is_eos(GstRdmaSrcPad *pad)
{
  gboolean eos;

  g_mutex_lock(&pad->lock);
  eos = pad->eos;
  g_mutex_unlock(&pad->lock);
  return eos;
}

gboolean gst_rdma_src_pad_has_stream(GstRdmaSrcPad *pad)
{
  gboolean has;

  g_mutex_lock(&pad->lock);
  has = pad->has_stream;
  g_mutex_unlock(&pad->lock);
  return has;
}

void gst_rdma_src_pad_note_gap(GstRdmaSrcPad *pad)
{
  g_mutex_lock(&pad->lock);
  pad->gap_pending = TRUE;
  g_mutex_unlock(&pad->lock);
}

void gst_rdma_src_pad_mark_stream(GstRdmaSrcPad *pad)
{
  GstCaps *caps = gst_pad_get_current_caps(GST_PAD(pad));

  g_mutex_lock(&pad->lock);
  note_caps(pad, caps);
  g_clear_pointer(&caps, gst_caps_unref);
  pad->has_stream = TRUE;
  pad->eos = FALSE;
  g_mutex_unlock(&pad->lock);
}

void gst_rdma_src_pad_clear_eos(GstRdmaSrcPad *pad)
{
  g_mutex_lock(&pad->lock);
  pad->eos = FALSE;
  g_mutex_unlock(&pad->lock);
}

guint gst_rdma_src_pad_usage(GstRdmaSrcPad *pad)
{
  guint usage;

  g_mutex_lock(&pad->lock);
  usage = MAX((guint)g_atomic_int_get(&pad->blocks_out->blocks),
              pad->queued_buffers);
  g_mutex_unlock(&pad->lock);
  return usage;
}

void gst_rdma_src_pad_set_paused(GstRdmaSrcPad *pad, gboolean paused)
{
  g_mutex_lock(&pad->lock);
  if (paused && !pad->paused) {
    pad->paused_since = g_get_monotonic_time();
    pad->pauses++;
  } else if (!paused && pad->paused) {
    pad->paused_us += (guint64)(g_get_monotonic_time() - pad->paused_since);
  }
  pad->paused = paused;
  g_mutex_unlock(&pad->lock);
}

gboolean gst_rdma_src_pad_is_paused(GstRdmaSrcPad *pad)
{
  gboolean paused;

  g_mutex_lock(&pad->lock);
  paused = pad->paused;
  g_mutex_unlock(&pad->lock);
  return paused;
}

/* Lock held: drops every queued buffer (events stay, in order). */
static void flush_buffers(GstRdmaSrcPad *pad)
{
  GList *l = pad->queue.head;

  while (l) {
    GList *next = l->next;
    QueueItem *item = l->data;

    if (GST_IS_BUFFER(item->obj)) {
      g_queue_delete_link(&pad->queue, l);
      pad->drops_not_playing++;
      pad->gap_pending = TRUE;
      GST_DEBUG_OBJECT(pad, "queued frame dropped: no longer playing");
      queue_item_free(item);
    }
    l = next;
  }
  pad->queued_buffers = pad->queued_blocks = 0;
}

/* ------------------------------------------------------ streaming */

void gst_rdma_src_pad_start(GstRdmaSrcPad *pad)
{
  g_mutex_lock(&pad->lock);
  pad->running = TRUE;
  pad->flushing = FALSE;
  g_cond_signal(&pad->cond);
  g_mutex_unlock(&pad->lock);
  gst_pad_start_task(GST_PAD(pad), gst_rdma_src_pad_loop, pad, NULL);
}

void gst_rdma_src_pad_pause(GstRdmaSrcPad *pad)
{
  /* Don't wait for the task: it may be pushing into a sink that waits for
   * PLAYING.  It finds nothing to push and waits on the condition. */
  g_mutex_lock(&pad->lock);
  pad->running = FALSE;
  flush_buffers(pad);
  g_mutex_unlock(&pad->lock);
}

void gst_rdma_src_pad_stop(GstRdmaSrcPad *pad)
{
  g_mutex_lock(&pad->lock);
  pad->running = FALSE;
  pad->flushing = TRUE;
  g_cond_signal(&pad->cond);
  g_mutex_unlock(&pad->lock);
  /* Downstream is READY already: no push blocks, the join returns. */
  gst_pad_stop_task(GST_PAD(pad));
  g_mutex_lock(&pad->lock);
  g_queue_clear_full(&pad->queue, (GDestroyNotify)queue_item_free);
  pad->queued_buffers = pad->queued_blocks = 0;
  pad->gap_pending = pad->need_key = FALSE;
  g_mutex_unlock(&pad->lock);
  /* Downstream went to READY too: it has forgotten the EOS. */
  pad->eos_pushed = FALSE;
}

void gst_rdma_src_pad_end_stream(GstRdmaSrcPad *pad)
{
  g_mutex_lock(&pad->lock);
  g_queue_clear_full(&pad->queue, (GDestroyNotify)queue_item_free);
  pad->queued_buffers = pad->queued_blocks = 0;
  /* A new stream starts with DISCONT (stamping) and perhaps other caps. */
  pad->gap_pending = pad->need_key = FALSE;
  pad->saw_delta = FALSE;
  pad->eos = TRUE;
  pad->has_stream = FALSE;
  pad->late_max = 0; /* a new run, perhaps a new sender and path */
  if (pad->paused)
    pad->paused_us += (guint64)(g_get_monotonic_time() - pad->paused_since);
  pad->paused = FALSE;
  g_mutex_unlock(&pad->lock);
}

/* The combined flow of every pad, after this pad's. */
static GstFlowReturn combine(GstRdmaSrcPad *pad, GstFlowReturn flow)
{
  GstFlowReturn combined;

  g_mutex_lock(&pad->flow->lock);
  combined = gst_flow_combiner_update_pad_flow(pad->flow->combiner,
                                               GST_PAD(pad), flow);
  g_mutex_unlock(&pad->flow->lock);
  return combined;
}

/* What the LATENCY query answers from what was measured: twice the worst
 * lateness seen (jitter comes in bursts) plus a floor for the hand-off to
 * the pad task and the push, rounded up to a millisecond. */
#define LATENCY_FLOOR (2 * GST_MSECOND)

static GstClockTime latency_for(GstClockTime late_max)
{
  GstClockTime t = 2 * late_max + LATENCY_FLOOR;

  return (t + GST_MSECOND - 1) / GST_MSECOND * GST_MSECOND;
}

gboolean gst_rdma_src_pad_note_lateness(GstRdmaSrcPad *pad, GstClockTime late)
{
  gboolean announce = FALSE;

  g_mutex_lock(&pad->lock);
  if (late > pad->late_max) {
    pad->late_max = late;
    announce =
        latency_for(late) > pad->latency_announced + pad->latency_announced / 4;
  }
  g_mutex_unlock(&pad->lock);
  return announce;
}

GstClockTime gst_rdma_src_pad_latency(GstRdmaSrcPad *pad)
{
  GstClockTime t;

  g_mutex_lock(&pad->lock);
  t = pad->latency_announced = latency_for(pad->late_max);
  g_mutex_unlock(&pad->lock);
  return t;
}

void gst_rdma_src_pad_set_held(GstRdmaSrcPad *pad, gboolean held)
{
  g_mutex_lock(&pad->lock);
  pad->held = held;
  g_cond_signal(&pad->cond);
  g_mutex_unlock(&pad->lock);
}

/* Pad task.  After caps: are they raw video, and does downstream read
 * GstVideoMeta (so frames whose sender padded their planes go as they
 * are)?  Asked once per caps, as a source deciding its allocation does. */
static void learn_layout(GstRdmaSrcPad *pad, GstEvent *caps_event)
{
  GstCaps *caps;
  GstQuery *query;

  gst_event_parse_caps(caps_event, &caps);
  pad->has_video_info = gst_video_info_from_caps(&pad->video_info, caps);
  pad->video_meta_ok = FALSE;
  pad->layout_learnt = TRUE;
  if (!pad->has_video_info)
    return;
  query = gst_query_new_allocation(caps, FALSE);
  pad->video_meta_ok =
      gst_pad_peer_query(GST_PAD(pad), query) &&
      gst_query_find_allocation_meta(query, GST_VIDEO_META_API_TYPE, NULL);
  gst_query_unref(query);
}

/* Pad task: the caps a sometimes pad was made with are sticky on it, not
 * queued: pushed (if not yet) before downstream is asked about them. */
static void learn_current_layout(GstRdmaSrcPad *pad)
{
  GstEvent *caps = gst_pad_get_sticky_event(GST_PAD(pad), GST_EVENT_CAPS, 0);

  pad->layout_learnt = TRUE;
  pad->has_video_info = FALSE;
  if (!caps)
    return;
  /* The stored event itself: pushed only if downstream hasn't had it. */
  gst_pad_push_event(GST_PAD(pad), gst_event_ref(caps));
  learn_layout(pad, caps);
  gst_event_unref(caps);
}

/* Pad task: buf as downstream can read it.  Asked again when downstream
 * changed (a relink, a reconfigure). */
static GstBuffer *fit_layout(GstRdmaSrcPad *pad, GstBuffer *buf)
{
  GstBuffer *out;

  if (!gst_buffer_get_video_meta(buf))
    return buf;
  if (gst_pad_check_reconfigure(GST_PAD(pad)) || !pad->layout_learnt)
    learn_current_layout(pad);
  if (!pad->has_video_info || pad->video_meta_ok ||
      !gst_rdma_extras_layout_differs(buf, &pad->video_info))
    return buf;
  out = gst_rdma_extras_to_default_layout(buf, &pad->video_info);
  if (out != buf) {
    g_mutex_lock(&pad->lock);
    pad->layout_copies++;
    g_mutex_unlock(&pad->lock);
  }
  return out;
}

static void gst_rdma_src_pad_loop(gpointer data)
{
  GstRdmaSrcPad *pad = data;
  GstFlowReturn flow;
  QueueItem *item;

  g_mutex_lock(&pad->lock);
  while (!pad->flushing &&
         (!pad->running || pad->held || g_queue_is_empty(&pad->queue))) {
    pad->task_waits = TRUE;
    g_cond_wait(&pad->cond, &pad->lock);
    pad->task_waits = FALSE;
  }
  if (pad->flushing) {
    g_mutex_unlock(&pad->lock);
    gst_pad_pause_task(GST_PAD(pad));
    return;
  }
  item = g_queue_pop_head(&pad->queue);
  if (GST_IS_BUFFER(item->obj)) {
    pad->queued_buffers--;
    pad->queued_blocks -= item->lane_blocks;
    pad->pushed++;
    if (gst_buffer_n_memory(GST_BUFFER_CAST(item->obj)) > 1)
      pad->fragmented++;
  }
  g_mutex_unlock(&pad->lock);

  if (GST_IS_EVENT(item->obj)) {
    GstEvent *event = GST_EVENT_CAST(item->obj);
    gboolean eos = GST_EVENT_TYPE(event) == GST_EVENT_EOS;

    g_free(item);
    if (GST_EVENT_TYPE(event) == GST_EVENT_STREAM_START && pad->eos_pushed) {
      GstQuery *drain = gst_query_new_drain();

      /* Sinks drop everything after EOS but a flush: the device's new
       * stream flushes its branch first (running time kept, so the rest
       * of the pipeline's timing is untouched; the sink prerolls again).
       * Not before the old stream's end has been taken, though: a flush
       * drops what a queue still holds, the last frames and the EOS with
       * them (a slow consumer then saw one EOS for two streams).  A drain
       * query is serialized: a queue answers it only once it has pushed
       * everything before it, the EOS included, and a sink once it has
       * rendered them; deactivation (a state change) unblocks it. */
      GST_INFO_OBJECT(pad, "new stream after EOS: draining, then flushing "
                           "downstream");
      gst_pad_peer_query(GST_PAD(pad), drain);
      gst_query_unref(drain);
      gst_pad_push_event(GST_PAD(pad), gst_event_new_flush_start());
      gst_pad_push_event(GST_PAD(pad), gst_event_new_flush_stop(FALSE));
      pad->eos_pushed = FALSE;
    }
    if (GST_EVENT_TYPE(event) == GST_EVENT_CAPS) {
      gst_event_ref(event);
      gst_pad_push_event(GST_PAD(pad), event);
      learn_layout(pad, event);
      gst_event_unref(event);
    } else
      gst_pad_push_event(GST_PAD(pad), event);
    if (eos) {
      pad->eos_pushed = TRUE;
      combine(pad, GST_FLOW_EOS);
    }
    return;
  }

  flow =
      gst_pad_push(GST_PAD(pad), fit_layout(pad, GST_BUFFER_CAST(item->obj)));
  g_free(item);
  switch (flow) {
  case GST_FLOW_OK:
  case GST_FLOW_NOT_LINKED: /* nobody wants this device (yet): drop */
  case GST_FLOW_FLUSHING:   /* the branch is shutting down */
    combine(pad, flow);
    break;
  case GST_FLOW_EOS:
    /* Downstream wants no more of this device: end its stream here. */
    GST_INFO_OBJECT(pad, "downstream returned EOS");
    g_mutex_lock(&pad->lock);
    pad->eos = TRUE;
    flush_buffers(pad);
    g_mutex_unlock(&pad->lock);
    gst_pad_push_event(GST_PAD(pad), gst_event_new_eos());
    pad->eos_pushed = TRUE;
    combine(pad, flow);
    break;
  default: {
    GstObject *parent = gst_pad_get_parent(GST_PAD(pad));

    if (combine(pad, flow) == flow && parent) {
      /* Fatal (not-negotiated, error) on every pad that matters. */
      GST_ELEMENT_FLOW_ERROR(GST_ELEMENT_CAST(parent), flow);
    }
    GST_WARNING_OBJECT(pad, "streaming stopped: %s", gst_flow_get_name(flow));
    g_mutex_lock(&pad->lock);
    pad->eos = TRUE;
    flush_buffers(pad);
    g_mutex_unlock(&pad->lock);
    gst_pad_push_event(GST_PAD(pad), gst_event_new_eos());
    pad->eos_pushed = TRUE;
    if (parent)
      gst_object_unref(parent);
    break;
  }
  }
}

/* ------------------------------------------------------------ stats */

void gst_rdma_src_pad_add_stats(GstRdmaSrcPad *pad, GstStructure *s)
{
  guint64 paused_us;

  g_mutex_lock(&pad->lock);
  paused_us = pad->paused_us;
  if (pad->paused)
    paused_us += (guint64)(g_get_monotonic_time() - pad->paused_since);
  gst_structure_set(
      s, "queued", G_TYPE_UINT, pad->queued_buffers, "lane-blocks", G_TYPE_UINT,
      (guint)g_atomic_int_get(&pad->blocks_out->blocks), "held-downstream",
      G_TYPE_UINT,
      (guint)MAX(g_atomic_int_get(&pad->blocks_out->blocks) -
                     (gint)pad->queued_blocks,
                 0),
      "pushed", G_TYPE_UINT64, pad->pushed, "task-wakeups", G_TYPE_UINT64,
      pad->wakeups, "copies", G_TYPE_UINT64, pad->copies, "layout-copies",
      G_TYPE_UINT64, pad->layout_copies, "frames-fragmented", G_TYPE_UINT64,
      pad->fragmented, "drops-leaky", G_TYPE_UINT64, pad->drops_leaky,
      "drops-not-playing", G_TYPE_UINT64, pad->drops_not_playing, "drops-ended",
      G_TYPE_UINT64, pad->drops_ended, "drops-no-layout", G_TYPE_UINT64,
      pad->drops_no_layout, "waiting-for-key-drops", G_TYPE_UINT64,
      pad->drops_waiting_key, "waiting-for-key", G_TYPE_BOOLEAN,
      pad->need_key && waits_for_key(pad), "paused", G_TYPE_BOOLEAN,
      pad->paused, "pauses", G_TYPE_UINT64, pad->pauses, "paused-time",
      G_TYPE_UINT64, paused_us * GST_USECOND, "eos", G_TYPE_BOOLEAN, pad->eos,
      /* The policy's nick as a string: "(GstRdmaOverBudget)pause" would
       * not parse back where the plugin isn't loaded (a log reader). */
      "over-budget", G_TYPE_STRING, gst_rdma_over_budget_nick(pad->policy),
      NULL);
  g_mutex_unlock(&pad->lock);
}
