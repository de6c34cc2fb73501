/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmareceiver.c - the process-wide registry of shared receivers (see
 * the header for the model: members, routes, agreement).
 *
 * Locks, taken in this order: registry_lock (the table, and every join and
 * leave, so membership is stable while a join checks it), then
 * receiver->lock (the member list and the routes).  A member's own lock is
 * never taken under either: the receive thread holds it while it runs the
 * member's code, which posts on the bus and adds pads, and an application
 * may start another rdmasrc from there.  libsbr calls are made with no
 * lock held.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstrdmareceiver.h"

#include <errno.h>
#include <string.h>

GST_DEBUG_CATEGORY_STATIC(gst_rdma_receiver_debug);
#define GST_CAT_DEFAULT gst_rdma_receiver_debug

/* The receive thread re-checks for leaving, idle timeouts and paused
 * devices at least this often even if a wakeup were lost. */
#define LOOP_TIMEOUT_MS 100
#define PAUSED_LOOP_TIMEOUT_MS 10

struct _GstRdmaReceiver {
  gchar *key;                /* "transport:address:port" */
  gchar *description;        /* "shm port 7000", for messages */
  GstRdmaReceiverConfig cfg; /* as first joined; strings below */
  gchar *address;
  gchar *allowed;
  sbr_receiver *sbr;        /* listening from the first join */
  GstRdmaHeldCounter *held; /* g_atomic_rc_box; buffers may outlive us */
  gint n_pads;              /* atomic */
  guint64 unclaimed;        /* (lock) frames of devices nobody asked for */
  GThread *thread;          /* the receive thread */
  gint stopping;            /* atomic: the receive thread leaves */

  GMutex lock;
  GCond cond;         /* stopping, for a receive thread that failed */
  GPtrArray *members; /* GstRdmaReceiverMember *, not owned */
  GstRdmaReceiverMember *route[SBR_MAX_DEVICES]; /* device-id=N, or a
                                                    pads_only member's pad */
  GstRdmaReceiverMember *catch_all;              /* device-id=-1 */
  /* Devices the catch-all has a pad for (requested or made when the
   * camera came): a pads_only member may not take them. */
  gboolean catch_all_pads[SBR_MAX_DEVICES];
  GHashTable *lane_devices; /* lane id -> devices of every member it owns
                               (the automatic share); absent: none */
  guint generation;         /* members changed */
  gboolean broken;          /* receiving failed: no new member */
  gboolean orphaned;        /* the last member left on the receive thread: it
                               frees the receiver when it returns */

  /* Receive thread only. */
  GPtrArray *snapshot; /* the members as of snap_generation, referenced */
  guint snap_generation;
  gchar *caps[SBR_MAX_DEVICES];        /* the last caps each device sent */
  gboolean caps_live[SBR_MAX_DEVICES]; /* ... from a live source */
  guint32 caps_lane[SBR_MAX_DEVICES];
  /* The last run of HEADER frames each device sent after its caps (GBytes;
   * NULL: none), for a member that joins after them, as the caps. */
  GPtrArray *headers[SBR_MAX_DEVICES];
  gboolean headers_open[SBR_MAX_DEVICES]; /* the last frame was one */
};

static GMutex registry_lock;
static GCond registry_cond;  /* a receiver finished closing */
static GHashTable *registry; /* key -> receiver (members > 0) */
static GHashTable *closing;  /* keys whose last member is closing them */

static void debug_init(void)
{
  static gsize done = 0;

  if (g_once_init_enter(&done)) {
    GST_DEBUG_CATEGORY_INIT(gst_rdma_receiver_debug, "rdmareceiver", 0,
                            "Shared RDMA receivers");
    registry = g_hash_table_new(g_str_hash, g_str_equal);
    closing = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_once_init_leave(&done, 1);
  }
}

void gst_rdma_receiver_member_init(GstRdmaReceiverMember *member,
                                   GstElement *element,
                                   const GstRdmaReceiverMemberFuncs *funcs)
{
  memset(member, 0, sizeof *member);
  member->element = element;
  member->device = -1;
  member->funcs = funcs;
  g_mutex_init(&member->lock);
}

void gst_rdma_receiver_member_clear(GstRdmaReceiverMember *member)
{
  g_mutex_clear(&member->lock);
}

/* The address only matters to verbs: shm listens by port alone. */
static gchar *make_key(const GstRdmaReceiverConfig *cfg)
{
  return g_strdup_printf(
      "%s:%s:%u", gst_rdma_transport_nick(cfg->transport),
      cfg->transport == GST_RDMA_TRANSPORT_SHM ? "" : cfg->address, cfg->port);
}

/* The first setting in which a and b differ: its property name, and both
 * values in *va and *vb (to be freed); NULL when they agree. */
static const gchar *config_difference(const GstRdmaReceiverConfig *a,
                                      const GstRdmaReceiverConfig *b,
                                      gchar **va, gchar **vb)
{
#define UINT_SETTING(field, name)                                              \
  if (a->field != b->field) {                                                  \
    *va = g_strdup_printf("%u", a->field);                                     \
    *vb = g_strdup_printf("%u", b->field);                                     \
    return name;                                                               \
  }
  if (a->mechanism != b->mechanism) {
    *va = g_strdup(gst_rdma_mechanism_nick(a->mechanism));
    *vb = g_strdup(gst_rdma_mechanism_nick(b->mechanism));
    return "mechanism";
  }
  UINT_SETTING(blocks, "blocks");
  UINT_SETTING(block_size, "block-size");
  UINT_SETTING(max_senders, "max-senders");
  UINT_SETTING(max_connects_per_second, "max-connects-per-second");
  UINT_SETTING(max_frame_size, "max-frame-size");
  UINT_SETTING(probe_after, "probe-after");
#define INT_SETTING(field, name)                                               \
  if (a->field != b->field) {                                                  \
    *va = g_strdup_printf("%d", a->field);                                     \
    *vb = g_strdup_printf("%d", b->field);                                     \
    return name;                                                               \
  }
  INT_SETTING(tos, "tos");
  UINT_SETTING(ack_timeout, "ack-timeout");
  INT_SETTING(comp_vector, "comp-vector");
  INT_SETTING(numa_node, "numa-node");
  INT_SETTING(huge_pages, "huge-pages");
  UINT_SETTING(max_held, "max-held");
  if (a->poll_mode != b->poll_mode) {
    *va = g_strdup_printf("%d", a->poll_mode);
    *vb = g_strdup_printf("%d", b->poll_mode);
    return "poll-mode";
  }
  if (g_strcmp0(a->allowed_senders ? a->allowed_senders : "",
                b->allowed_senders ? b->allowed_senders : "") != 0) {
    *va =
        g_strdup_printf("\"%s\"", a->allowed_senders ? a->allowed_senders : "");
    *vb =
        g_strdup_printf("\"%s\"", b->allowed_senders ? b->allowed_senders : "");
    return "allowed-senders";
  }
#undef UINT_SETTING
#undef INT_SETTING
  return NULL;
}

/* The receive thread's members, referenced, fresh after every change. */
static void resnap(GstRdmaReceiver *r)
{
  g_mutex_lock(&r->lock);
  if (r->snap_generation == r->generation) {
    g_mutex_unlock(&r->lock);
    return;
  }
  GPtrArray *old = r->snapshot;
  r->snapshot = g_ptr_array_new();
  for (guint i = 0; i < r->members->len; i++) {
    GstRdmaReceiverMember *m = g_ptr_array_index(r->members, i);

    gst_object_ref(m->element);
    g_ptr_array_add(r->snapshot, m);
  }
  r->snap_generation = r->generation;
  g_mutex_unlock(&r->lock);
  /* Outside the lock: the last reference to an element that left may go
   * here, and its finalize must not find us locked. */
  for (guint i = 0; i < old->len; i++)
    gst_object_unref(
        ((GstRdmaReceiverMember *)g_ptr_array_index(old, i))->element);
  g_ptr_array_unref(old);
}

/* libsbr refused a sender (receive thread, inside next_frame): every
 * member's application hears of it (each pipeline has its own bus). */
static void on_refusal(void *data, const char *peer, enum sbr_refusal reason,
                       const char *text)
{
  GstRdmaReceiver *r = data;

  /* A member that joined while the thread waited in next_frame is in no
   * snapshot yet, and would miss what came in that same wait. */
  resnap(r);
  for (guint i = 0; i < r->snapshot->len; i++) {
    GstRdmaReceiverMember *m = g_ptr_array_index(r->snapshot, i);

    g_mutex_lock(&m->lock);
    if (m->alive)
      m->funcs->refused(m->element, peer, reason, text);
    g_mutex_unlock(&m->lock);
  }
}

/* A sender connected or left (receive thread, inside next_frame): every
 * member hears of it, as of refusals, since one sender's lane carries the
 * devices of any member. */
static void on_lane(void *data, uint32_t lane, const char *peer, bool opened)
{
  GstRdmaReceiver *r = data;

  /* A member that joined while the thread waited in next_frame is in no
   * snapshot yet, and would miss what came in that same wait. */
  resnap(r);
  for (guint i = 0; i < r->snapshot->len; i++) {
    GstRdmaReceiverMember *m = g_ptr_array_index(r->snapshot, i);

    g_mutex_lock(&m->lock);
    if (m->alive)
      m->funcs->sender(m->element, lane, peer, opened);
    g_mutex_unlock(&m->lock);
  }
}

/* Bounds of a device's kept headers (as rdmasink's). */
#define MAX_KEPT_HEADERS 16
#define MAX_KEPT_HEADER_BYTES (4u << 20)

/* Receive thread, before the frame goes to its member: a new stream (caps,
 * EOS) has no headers yet, a header after a frame starts a new run.  An
 * EVENT block (tags, a segment, a frame's extras) is neither: tags that
 * h264parse sends after the SPS/PPS cleared them once, and a late joiner
 * got none.  Returns a copy of the frame to keep (a header), for
 * keep_header after. */
static GBytes *headers_before(GstRdmaReceiver *r, const struct sbr_frame *frame)
{
  guint d = frame->info.device;

  if (frame->info.kind == SBR_KIND_EVENT)
    return NULL;
  if (frame->info.kind != SBR_KIND_DATA) {
    g_clear_pointer(&r->headers[d], g_ptr_array_unref);
    r->headers_open[d] = FALSE;
    return NULL;
  }
  if (frame->info.lane_id != r->caps_lane[d])
    return NULL; /* not the stream whose caps we keep */
  if (!(frame->info.flags & SBR_FLAG_HEADER)) {
    r->headers_open[d] = FALSE;
    return NULL;
  }
  if (!r->headers_open[d])
    g_clear_pointer(&r->headers[d], g_ptr_array_unref);
  r->headers_open[d] = TRUE;
  return gst_rdma_frame_copy_bytes(frame);
}

/* ... and after: the header joins its run (bounded as rdmasink's). */
static void keep_header(GstRdmaReceiver *r, guint d, GBytes *header)
{
  GPtrArray *h;
  gsize bytes = g_bytes_get_size(header);

  if (!r->headers[d])
    r->headers[d] =
        g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  h = r->headers[d];
  for (guint i = 0; i < h->len; i++)
    bytes += g_bytes_get_size(g_ptr_array_index(h, i));
  if (h->len < MAX_KEPT_HEADERS && bytes <= MAX_KEPT_HEADER_BYTES)
    g_ptr_array_add(h, header);
  else
    g_bytes_unref(header);
}

/* A frame to the member that asked for its device; nobody's is dropped. */
static void dispatch(GstRdmaReceiver *r, struct sbr_frame *frame)
{
  guint d = frame->info.device;
  guint32 lane = frame->info.lane_id;
  GstRdmaReceiverMember *m;
  GstElement *element = NULL;
  GBytes *header;

  if (frame->info.kind == SBR_KIND_CAPS) {
    g_free(r->caps[d]);
    r->caps[d] =
        g_strndup((const gchar *)frame->info.payload, frame->info.payload_len);
    r->caps_lane[d] = lane;
    r->caps_live[d] = !(frame->info.flags & SBR_FLAG_NOT_LIVE);
  }
  header = headers_before(r, frame);
  g_mutex_lock(&r->lock);
  m = r->route[d] ? r->route[d] : r->catch_all;
  if (m)
    element = gst_object_ref(m->element);
  else if (frame->info.kind == SBR_KIND_DATA)
    r->unclaimed++;
  g_mutex_unlock(&r->lock);
  if (frame->info.kind == SBR_KIND_EOS)
    g_clear_pointer(&r->caps[d], g_free); /* the next stream sends its own */
  if (!m) {
    GST_LOG("device %u: nobody asked for it, frame dropped", d);
    sbr_frame_release(frame);
    if (header)
      keep_header(r, d, header);
    return;
  }
  g_mutex_lock(&m->lock);
  if (m->alive)
    m->funcs->frame(element, frame,
                    r->caps[d] && r->caps_lane[d] == lane ? r->caps[d] : NULL,
                    r->caps_live[d],
                    r->caps[d] && r->caps_lane[d] == lane ? r->headers[d]
                                                          : NULL);
  else
    sbr_frame_release(frame);
  g_mutex_unlock(&m->lock);
  gst_object_unref(element);
  if (header)
    keep_header(r, d, header);
}

static void receiver_free(GstRdmaReceiver *r);

static gpointer receive_thread(gpointer data)
{
  GstRdmaReceiver *r = data;

  while (!g_atomic_int_get(&r->stopping)) {
    gboolean any_paused = FALSE;
    struct sbr_frame frame;
    int ret;

    resnap(r);
    for (guint i = 0; i < r->snapshot->len; i++) {
      GstRdmaReceiverMember *m = g_ptr_array_index(r->snapshot, i);

      g_mutex_lock(&m->lock);
      if (m->alive && m->funcs->turn(m->element))
        any_paused = TRUE;
      g_mutex_unlock(&m->lock);
    }
    ret = sbr_receiver_next_frame(
        r->sbr, any_paused ? PAUSED_LOOP_TIMEOUT_MS : LOOP_TIMEOUT_MS, &frame);
    if (g_atomic_int_get(&r->stopping)) {
      if (ret == 0)
        sbr_frame_release(&frame);
      break;
    }
    if (ret == 0) {
      dispatch(r, &frame);
    } else if (ret != -ETIMEDOUT && ret != -EINTR) {
      GST_WARNING("%s: receiving failed: %s", r->description, g_strerror(-ret));
      for (guint i = 0; i < r->snapshot->len; i++) {
        GstRdmaReceiverMember *m = g_ptr_array_index(r->snapshot, i);

        g_mutex_lock(&m->lock);
        if (m->alive)
          m->funcs->failed(m->element, ret);
        g_mutex_unlock(&m->lock);
      }
      /* No new member: the last one out closes it, then a new one can
       * listen again. */
      g_mutex_lock(&r->lock);
      r->broken = TRUE;
      while (!g_atomic_int_get(&r->stopping))
        g_cond_wait(&r->cond, &r->lock);
      g_mutex_unlock(&r->lock);
    }
  }
  g_mutex_lock(&r->lock);
  r->generation++; /* drops every reference below */
  g_mutex_unlock(&r->lock);
  resnap(r);
  if (r->orphaned)
    receiver_free(r);
  return NULL;
}

static void receiver_free(GstRdmaReceiver *r)
{
  GST_INFO("%s: closing the listener", r->description);
  /* Buffers still downstream keep their lanes until they are freed. */
  if (r->sbr)
    sbr_receiver_free(r->sbr);
  gst_rdma_held_counter_unref(r->held);
  for (guint d = 0; d < SBR_MAX_DEVICES; d++) {
    g_free(r->caps[d]);
    g_clear_pointer(&r->headers[d], g_ptr_array_unref);
  }
  g_ptr_array_unref(r->snapshot);
  g_ptr_array_unref(r->members);
  g_hash_table_unref(r->lane_devices);
  g_cond_clear(&r->cond);
  g_mutex_clear(&r->lock);
  g_free(r->key);
  g_free(r->description);
  g_free(r->address);
  g_free(r->allowed);
  g_free(r);
}

/* A listener for cfg (registry_lock held), without its thread yet. */
static GstRdmaReceiver *receiver_new(const GstRdmaReceiverConfig *cfg,
                                     gchar *key, GError **error)
{
  GstRdmaReceiver *r = g_new0(GstRdmaReceiver, 1);
  struct sbr_receiver_config sc;
  char errbuf[256] = "";
  int ret;

  r->key = key;
  r->cfg = *cfg;
  r->address = g_strdup(cfg->address);
  r->allowed = g_strdup(cfg->allowed_senders);
  r->cfg.address = r->address;
  r->cfg.allowed_senders = r->allowed;
  r->description =
      g_strdup_printf("%s %s:%u", gst_rdma_transport_nick(cfg->transport),
                      cfg->address, cfg->port);
  g_mutex_init(&r->lock);
  g_cond_init(&r->cond);
  r->members = g_ptr_array_new();
  r->lane_devices = g_hash_table_new(NULL, NULL);
  r->snapshot = g_ptr_array_new();
  r->held = gst_rdma_held_counter_new();

  sbr_receiver_config_init(&sc);
  sc.backend = gst_rdma_transport_to_sbr(cfg->transport);
  sc.mechanism = gst_rdma_mechanism_to_sbr(cfg->mechanism);
  sc.address = r->address;
  sc.port = (uint16_t)cfg->port;
  sc.block_count = cfg->blocks;
  sc.block_size = cfg->block_size;
  sc.max_lanes = cfg->max_senders;
  sc.poll_mode = gst_rdma_poll_mode_to_sbr(cfg->poll_mode);
  sc.allowed_senders = r->allowed;
  sc.max_connects_per_s = cfg->max_connects_per_second;
  sc.max_frame_size = cfg->max_frame_size;
  sc.probe_after_ms = cfg->probe_after;
  sc.tos = cfg->tos;
  sc.ack_timeout = (uint8_t)cfg->ack_timeout;
  sc.comp_vector = cfg->comp_vector;
  sc.numa_node = cfg->numa_node;
  sc.huge_pages = cfg->huge_pages != FALSE;
  sc.on_refusal = on_refusal;
  sc.refusal_user_data = r;
  sc.on_lane = on_lane;
  sc.lane_user_data = r;
  ret = sbr_receiver_new(&sc, &r->sbr, errbuf, sizeof errbuf);
  if (ret < 0) {
    g_set_error(error, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_OPEN_READ,
                "%s (%s)", errbuf[0] ? errbuf : g_strerror(-ret),
                g_strerror(-ret));
    r->sbr = NULL;
    receiver_free(r);
    return NULL;
  }
  GST_INFO("%s: listening (%s), %u blocks of %u bytes", r->description,
           sbr_mechanism_name(sc.mechanism), sc.block_count, sc.block_size);
  return r;
}

/* registry_lock held, membership stable: does member conflict with
 * another one?  The error names both. */
static gboolean check_member(GstRdmaReceiver *r,
                             const GstRdmaReceiverConfig *cfg,
                             GstRdmaReceiverMember *member,
                             const gboolean *pads, gboolean has_pads,
                             GError **error)
{
  GstRdmaReceiverMember *first = g_ptr_array_index(r->members, 0);
  GstRdmaReceiverMember *other = NULL;
  gchar *va = NULL, *vb = NULL;
  const gchar *setting;
  gchar *why = NULL;

  setting = config_difference(cfg, &r->cfg, &va, &vb);
  if (setting) {
    why = g_strdup_printf("differ in %s (%s and %s)", setting, va, vb);
    other = first;
  } else if (r->broken) {
    why = g_strdup("can't share it: receiving failed there");
    other = first;
  } else if (member->device < 0 && r->catch_all && !has_pads) {
    why = g_strdup("both take every device (device-id=-1, no pads named); "
                   "give one a device-id or name its pads (r.src_N)");
    other = r->catch_all;
  } else if (member->device >= 0 && r->route[member->device]) {
    why = g_strdup_printf("both ask for device %d", member->device);
    other = r->route[member->device];
  } else if (member->device >= 0 && r->catch_all &&
             r->catch_all->funcs->has_device(r->catch_all->element,
                                             (guint)member->device)) {
    why = g_strdup_printf("both ask for device %d (a pad of the other)",
                          member->device);
    other = r->catch_all;
  } else if (member->device < 0) {
    for (guint d = 0; d < SBR_MAX_DEVICES && !why; d++) {
      if (!pads[d])
        continue;
      if (r->route[d]) {
        why = g_strdup_printf("both ask for device %u (a pad of the first)", d);
        other = r->route[d];
      } else if (r->catch_all &&
                 r->catch_all->funcs->has_device(r->catch_all->element, d)) {
        why = g_strdup_printf("both ask for device %u (a pad of each)", d);
        other = r->catch_all;
      }
    }
  }
  if (why) {
    g_set_error(error, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_SETTINGS,
                "%s and %s listen on %s and %s.",
                GST_OBJECT_NAME(member->element),
                GST_OBJECT_NAME(other->element), r->description, why);
  }
  g_free(va);
  g_free(vb);
  g_free(why);
  return why == NULL;
}

GstRdmaReceiver *gst_rdma_receiver_join(const GstRdmaReceiverConfig *cfg,
                                        GstRdmaReceiverMember *member,
                                        GError **error)
{
  GstRdmaReceiver *r;
  gboolean fresh = FALSE, has_pads = FALSE;
  gboolean pads[SBR_MAX_DEVICES];
  gchar *key;

  debug_init();
  /* The member's pads, asked before any lock of ours is taken: the
   * element takes its object lock, and it holds that lock when it calls
   * us (gst_rdma_receiver_route_pad). */
  for (guint d = 0; d < SBR_MAX_DEVICES; d++) {
    pads[d] =
        member->device < 0 && member->funcs->has_device(member->element, d);
    has_pads |= pads[d];
  }
  key = make_key(cfg);
  g_mutex_lock(&registry_lock);
  /* The last member of the previous receiver on this port is closing
   * it: listening again before it has would fail. */
  while (g_hash_table_contains(closing, key))
    g_cond_wait(&registry_cond, &registry_lock);
  r = g_hash_table_lookup(registry, key);
  if (r) {
    g_free(key);
    if (!check_member(r, cfg, member, pads, has_pads, error)) {
      g_mutex_unlock(&registry_lock);
      return NULL;
    }
  } else {
    r = receiver_new(cfg, key, error);
    if (!r) {
      g_mutex_unlock(&registry_lock);
      return NULL;
    }
    g_hash_table_insert(registry, r->key, r);
    fresh = TRUE;
  }
  g_mutex_lock(&r->lock);
  g_ptr_array_add(r->members, member);
  member->pads_only = FALSE;
  if (member->device >= 0) {
    r->route[member->device] = member;
  } else if (!r->catch_all) {
    r->catch_all = member;
    memcpy(r->catch_all_pads, pads, sizeof r->catch_all_pads);
  } else {
    /* Beside one that takes every device (check_member: we have pads). */
    member->pads_only = TRUE;
    for (guint d = 0; d < SBR_MAX_DEVICES; d++)
      if (pads[d])
        r->route[d] = member;
  }
  r->generation++;
  g_mutex_unlock(&r->lock);
  g_mutex_lock(&member->lock);
  member->alive = TRUE;
  g_mutex_unlock(&member->lock);
  if (fresh)
    r->thread = g_thread_new("rdmasrc:receive", receive_thread, r);
  else
    sbr_receiver_wakeup(r->sbr); /* take the new member into account */
  GST_INFO("%s joins %s (device %d), %u member(s)",
           GST_OBJECT_NAME(member->element), r->description, member->device,
           r->members->len);
  g_mutex_unlock(&registry_lock);
  return r;
}

void gst_rdma_receiver_leave(GstRdmaReceiver *r, GstRdmaReceiverMember *member)
{
  gboolean last, own_thread = g_thread_self() == r->thread;

  g_mutex_lock(&registry_lock);
  g_mutex_lock(&r->lock);
  g_ptr_array_remove(r->members, member);
  for (guint d = 0; d < SBR_MAX_DEVICES; d++)
    if (r->route[d] == member)
      r->route[d] = NULL;
  member->pads_only = FALSE;
  if (r->catch_all == member) {
    r->catch_all = NULL;
    memset(r->catch_all_pads, 0, sizeof r->catch_all_pads);
  }
  r->generation++;
  last = r->members->len == 0;
  g_mutex_unlock(&r->lock);
  if (last) {
    g_hash_table_remove(registry, r->key);
    g_hash_table_add(closing, g_strdup(r->key));
  }
  g_mutex_unlock(&registry_lock);
  GST_INFO("%s leaves %s", GST_OBJECT_NAME(member->element), r->description);

  /* From now on the receive thread won't call it; wait until it is done
   * with what it is doing for it.  On that thread (a bus sync handler
   * stopping the pipeline) we hold the lock already. */
  if (!own_thread)
    g_mutex_lock(&member->lock);
  member->alive = FALSE;
  /* The listener is still open: the member undoes what it told senders. */
  member->funcs->leaving(member->element);
  if (!own_thread)
    g_mutex_unlock(&member->lock);
  if (!last)
    return;

  g_atomic_int_set(&r->stopping, 1);
  g_mutex_lock(&r->lock);
  g_cond_broadcast(&r->cond);
  g_mutex_unlock(&r->lock);
  sbr_receiver_wakeup(r->sbr);
  g_mutex_lock(&registry_lock);
  g_hash_table_remove(closing, r->key);
  g_cond_broadcast(&registry_cond);
  g_mutex_unlock(&registry_lock);
  if (own_thread) {
    /* Can't join ourselves: the thread frees it when it gets there. */
    GST_WARNING("%s: the last member left on the receive thread; the "
                "listener closes when it returns",
                r->description);
    r->orphaned = TRUE;
    g_thread_unref(r->thread);
    return;
  }
  g_thread_join(r->thread);
  receiver_free(r);
}

sbr_receiver *gst_rdma_receiver_get_sbr(GstRdmaReceiver *r)
{
  return r->sbr;
}

GstRdmaHeldCounter *gst_rdma_receiver_get_held(GstRdmaReceiver *r)
{
  return r->held;
}

guint gst_rdma_receiver_add_pads(GstRdmaReceiver *r, gint delta)
{
  return (guint)(g_atomic_int_add(&r->n_pads, delta) + delta);
}

guint gst_rdma_receiver_add_lane_devices(GstRdmaReceiver *r, guint32 lane,
                                         gint delta)
{
  gpointer key = GUINT_TO_POINTER(lane);
  gint n;

  g_mutex_lock(&r->lock);
  n = GPOINTER_TO_INT(g_hash_table_lookup(r->lane_devices, key)) + delta;
  g_warn_if_fail(n >= 0);
  /* Lane ids are never reused: a closed lane's entry goes with its last
   * device, so the table stays as small as the lanes open. */
  if (n > 0)
    g_hash_table_insert(r->lane_devices, key, GINT_TO_POINTER(n));
  else
    g_hash_table_remove(r->lane_devices, key);
  g_mutex_unlock(&r->lock);
  return (guint)MAX(n, 0);
}

void gst_rdma_receiver_route_pad(GstRdmaReceiver *r,
                                 GstRdmaReceiverMember *member, guint device,
                                 gboolean claim)
{
  g_mutex_lock(&r->lock);
  if (member->pads_only) {
    if (claim && !r->route[device])
      r->route[device] = member;
    else if (!claim && r->route[device] == member)
      r->route[device] = NULL;
  } else if (member == r->catch_all) {
    r->catch_all_pads[device] = claim;
  }
  g_mutex_unlock(&r->lock);
}

gboolean gst_rdma_receiver_device_taken(GstRdmaReceiver *r,
                                        GstRdmaReceiverMember *member,
                                        guint device)
{
  gboolean taken;

  g_mutex_lock(&r->lock);
  taken = (r->route[device] && r->route[device] != member) ||
          (r->catch_all && r->catch_all != member && r->catch_all_pads[device]);
  g_mutex_unlock(&r->lock);
  return taken;
}

guint64 gst_rdma_receiver_unclaimed_drops(GstRdmaReceiver *r)
{
  guint64 n;

  g_mutex_lock(&r->lock);
  n = (guint64)r->unclaimed;
  g_mutex_unlock(&r->lock);
  return n;
}

guint gst_rdma_receiver_members(GstRdmaReceiver *r)
{
  guint n;

  g_mutex_lock(&r->lock);
  n = r->members->len;
  g_mutex_unlock(&r->lock);
  return n;
}
