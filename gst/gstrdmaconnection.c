/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmaconnection.c - the process-wide registry of shared senders (see the
 * header for the model: users vs. refs, connecting on a thread).
 *
 * Locks, taken in this order: registry_lock (the hash table and each
 * connection's in_registry), then conn->lock (everything else mutable in a
 * connection).  libsbr calls are made without conn->lock except the
 * non-blocking sbr_sender_is_connected and the stats getters; the blocking
 * ones (sbr_sender_new, sbr_sender_reconnect) run on the connection's own
 * thread with no lock held.
 */
#include "gstrdmaconnection.h"

#include <errno.h>
#include <string.h>

GST_DEBUG_CATEGORY_STATIC(gst_rdma_connection_debug);
#define GST_CAT_DEFAULT gst_rdma_connection_debug

/* Pause between connect attempts that failed fast (nobody listening over
 * verbs is an immediate REJECTED), doubling up to the max. */
#define RETRY_MIN_MS 50
#define RETRY_MAX_MS 500
/* Reconnect back-off: the receiver is restarting, no need to hammer it. */
#define RECONNECT_MIN_MS 100
#define RECONNECT_MAX_MS 1000

typedef struct {
  GstElement *element;                   /* the sink; not referenced: it closes
                                            its device before it goes away */
  GstRdmaConnectionFailedFunc failed;    /* told when connecting fails */
  GstRdmaConnectionKeyUnitFunc key_unit; /* told of key-unit requests */
} DeviceUser;

struct _GstRdmaConnection {
  gint refs;                   /* atomic; see the header */
  guint id;                    /* process-unique serial, for stats */
  gchar *key;                  /* "transport:mechanism:host:port" */
  gchar *address;              /* "host:port" */
  gchar *description;          /* "shm, status-byte" */
  gchar *host;                 /* what sbr_cfg.host points at */
  GstRdmaConnectionConfig cfg; /* as opened; cfg.host points at host */
  struct sbr_sender_config sbr_cfg;

  gboolean in_registry; /* (registry_lock) the table maps key to us */

  GMutex lock;
  GCond cond; /* state changed, or users dropped, or a waiter must wake */
  GstRdmaConnectionState state;
  guint generation;   /* successful (re)connects */
  gchar *error;       /* FAILED: why, with the attempts */
  gchar *reason;      /* FAILED: what libsbr said (its errbuf) */
  gint error_code;    /* FAILED: libsbr's negative errno */
  sbr_sender *sender; /* set once, freed with the connection */
  guint users;
  DeviceUser devices[SBR_MAX_DEVICES];
};

static GMutex registry_lock;
static GHashTable *registry; /* key -> GstRdmaConnection (not referenced) */
static gint next_id;

static void debug_init(void)
{
  static gsize done = 0;

  if (g_once_init_enter(&done)) {
    GST_DEBUG_CATEGORY_INIT(gst_rdma_connection_debug, "rdmaconnection", 0,
                            "Shared RDMA sender connections");
    g_once_init_leave(&done, 1);
  }
}

GstRdmaConnection *gst_rdma_connection_ref(GstRdmaConnection *conn)
{
  g_atomic_int_inc(&conn->refs);
  return conn;
}

void gst_rdma_connection_unref(GstRdmaConnection *conn)
{
  if (!g_atomic_int_dec_and_test(&conn->refs))
    return;
  GST_DEBUG("freeing connection %u to %s", conn->id, conn->address);
  /* Drains what was submitted (bounded by the library), then disconnects:
   * nobody can reach the sender any more. */
  if (conn->sender)
    sbr_sender_free(conn->sender);
  g_free(conn->error);
  g_free(conn->reason);
  g_free(conn->key);
  g_free(conn->address);
  g_free(conn->description);
  g_free(conn->host);
  g_cond_clear(&conn->cond);
  g_mutex_clear(&conn->lock);
  g_free(conn);
}

/* The receiver asked for a key unit of device (libsbr's sender thread, no
 * library lock held): the sink sending it is told, outside our lock, with
 * a reference so that it can't go away meanwhile.  The sender is freed
 * before the connection, so conn outlives every call. */
static void connection_key_unit(void *user_data, uint8_t device,
                                bool all_headers)
{
  GstRdmaConnection *conn = user_data;
  GstRdmaConnectionKeyUnitFunc func = NULL;
  GstElement *element = NULL;

  g_mutex_lock(&conn->lock);
  if (conn->devices[device].element && conn->devices[device].key_unit) {
    element = gst_object_ref(conn->devices[device].element);
    func = conn->devices[device].key_unit;
  }
  g_mutex_unlock(&conn->lock);
  if (!element) {
    GST_DEBUG("connection %u: a key unit of device %u, which no sink sends",
              conn->id, device);
    return;
  }
  func(element, all_headers);
  gst_object_unref(element);
}

void gst_rdma_connection_set_key_unit_func(GstRdmaConnection *conn,
                                           guint device,
                                           GstRdmaConnectionKeyUnitFunc func)
{
  g_return_if_fail(device < SBR_MAX_DEVICES);
  g_mutex_lock(&conn->lock);
  if (conn->devices[device].element)
    conn->devices[device].key_unit = func;
  g_mutex_unlock(&conn->lock);
}

static gchar *make_key(const GstRdmaConnectionConfig *cfg)
{
  return g_strdup_printf("%s:%s:%s:%u", gst_rdma_transport_nick(cfg->transport),
                         gst_rdma_mechanism_nick(cfg->mechanism), cfg->host,
                         cfg->port);
}

static gboolean config_differs(const GstRdmaConnectionConfig *a,
                               const GstRdmaConnectionConfig *b)
{
  return a->send_blocks != b->send_blocks || a->block_size != b->block_size ||
         a->connect_timeout_ms != b->connect_timeout_ms ||
         a->backpressure != b->backpressure ||
         a->wait_timeout_ms != b->wait_timeout_ms ||
         a->read_ahead != b->read_ahead || a->tos != b->tos ||
         a->ack_timeout != b->ack_timeout || a->retry_count != b->retry_count ||
         a->comp_vector != b->comp_vector;
}

/* Errors no retry can fix (sbr.h, sbr_sender_new): the receiver refused
 * for good (another version, mechanism or geometry; not allowed; a request
 * it can't read), no RDMA device or no route, bad arguments, a back end
 * that isn't built in.  Full lanes (-EBUSY) and the rest may heal. */
gboolean gst_rdma_connection_error_is_fatal(gint err)
{
  return err == -EPROTONOSUPPORT || err == -EACCES || err == -EPROTO ||
         err == -ENODEV || err == -ENETUNREACH || err == -EINVAL ||
         err == -ENOTSUP || err == -ENOMEM || err == -EMSGSIZE;
}

/* Collects the users to tell about a failure (a GArray of DeviceUser with
 * the elements referenced); under conn->lock. */
static GArray *failed_users_locked(GstRdmaConnection *conn)
{
  GArray *users = g_array_new(FALSE, FALSE, sizeof(DeviceUser));

  for (guint d = 0; d < SBR_MAX_DEVICES; d++) {
    if (conn->devices[d].element && conn->devices[d].failed) {
      DeviceUser u = {gst_object_ref(conn->devices[d].element),
                      conn->devices[d].failed};
      g_array_append_val(users, u);
    }
  }
  return users;
}

static void leave_registry(GstRdmaConnection *conn)
{
  g_mutex_lock(&registry_lock);
  if (conn->in_registry) {
    g_hash_table_remove(registry, conn->key);
    conn->in_registry = FALSE;
  }
  g_mutex_unlock(&registry_lock);
}

/* Waits on the condition for ms or until the last user leaves. */
static void sleep_locked(GstRdmaConnection *conn, gint ms)
{
  gint64 until = g_get_monotonic_time() + (gint64)ms * G_TIME_SPAN_MILLISECOND;

  while (conn->users > 0 && g_get_monotonic_time() < until)
    if (!g_cond_wait_until(&conn->cond, &conn->lock, until))
      break;
}

/* Called with conn->lock held, returns with it released: the connection
 * has FAILED with ret (errbuf: what libsbr said; attempts: how hard we
 * tried, taken), leaves the registry so a later start tries afresh, and
 * every user is told. */
static void fail_and_report(GstRdmaConnection *conn, int ret,
                            const char *errbuf, gchar *attempts)
{
  conn->state = GST_RDMA_CONNECTION_FAILED;
  conn->error_code = ret;
  /* errbuf is what the transport (rdma_cm, shm) or the receiver said;
   * errno text if nothing. */
  g_free(conn->reason);
  conn->reason = g_strdup(errbuf[0] ? errbuf : g_strerror(-ret));
  g_free(conn->error);
  conn->error = g_strdup_printf("%s (%s)", conn->reason, attempts);
  g_free(attempts);
  GST_WARNING("connection %u to %s failed: %s", conn->id, conn->address,
              conn->error);
  g_cond_broadcast(&conn->cond);
  GArray *users = failed_users_locked(conn);
  gchar *error = g_strdup(conn->error);
  g_mutex_unlock(&conn->lock);

  leave_registry(conn);

  for (guint i = 0; i < users->len; i++) {
    DeviceUser *u = &g_array_index(users, DeviceUser, i);
    if (ret != -ECANCELED)
      u->failed(u->element, error);
    gst_object_unref(u->element);
  }
  g_array_unref(users);
  g_free(error);
}

static gpointer connect_thread(gpointer data)
{
  GstRdmaConnection *conn = data;
  gint64 start = g_get_monotonic_time();
  gint64 deadline =
      start + (gint64)conn->cfg.connect_timeout_ms * G_TIME_SPAN_MILLISECOND;
  gint retry_ms = RETRY_MIN_MS;
  gint attempts = 0;
  char errbuf[256] = "";
  /* The receiver's last retryable refusal (every lane busy): the reason to
   * report when a later attempt merely runs out of time. */
  char refused[256] = "";
  int refused_ret = 0;
  int ret = 0;

  g_mutex_lock(&conn->lock);
  for (;;) {
    struct sbr_sender_config cfg = conn->sbr_cfg;
    sbr_sender *sender = NULL;
    gint64 now = g_get_monotonic_time();
    gint64 left_ms = (deadline - now) / G_TIME_SPAN_MILLISECOND;

    if (conn->users == 0) {
      ret = -ECANCELED;
      g_snprintf(errbuf, sizeof errbuf, "every rdmasink stopped");
      break;
    }
    g_mutex_unlock(&conn->lock);

    /* One attempt may use all the time left: the shm back end keeps dialing
     * inside it, and a verbs receiver that is there but not yet reading
     * (PAUSED) answers later within it.  Slicing would leave half-accepted
     * lanes behind on the receiver. */
    cfg.connect_timeout_ms = (int)MAX(left_ms, 1);
    attempts++;
    ret = sbr_sender_new(&cfg, &sender, errbuf, sizeof errbuf);
    GST_DEBUG("connect attempt %d to %s: %d (%s)", attempts, conn->address, ret,
              errbuf);

    g_mutex_lock(&conn->lock);
    if (ret == 0) {
      conn->sender = sender;
      conn->state = GST_RDMA_CONNECTION_CONNECTED;
      conn->generation++;
      g_cond_broadcast(&conn->cond);
      GST_INFO(
          "connection %u to %s (%s) up after %d attempt(s): %" G_GSIZE_FORMAT
          " payload bytes per block",
          conn->id, conn->address, conn->description, attempts,
          sbr_sender_block_payload_size(sender));
      g_mutex_unlock(&conn->lock);
      gst_rdma_connection_unref(conn);
      return NULL;
    }
    if (ret == -EBUSY) {
      g_strlcpy(refused, errbuf, sizeof refused);
      refused_ret = ret;
    }
    if (gst_rdma_connection_error_is_fatal(ret) ||
        g_get_monotonic_time() >= deadline)
      break;
    sleep_locked(conn, retry_ms);
    retry_ms = MIN(retry_ms * 2, RETRY_MAX_MS);
  }
  if (ret == -ETIMEDOUT && refused_ret) {
    ret = refused_ret;
    g_strlcpy(errbuf, refused, sizeof errbuf);
  }

  /* Failed (or nobody wants it any more). */
  fail_and_report(
      conn, ret, errbuf,
      g_strdup_printf(
          "%d attempt(s) in %" G_GINT64_FORMAT " ms of connect-timeout %d",
          attempts, (g_get_monotonic_time() - start) / G_TIME_SPAN_MILLISECOND,
          conn->cfg.connect_timeout_ms));
  gst_rdma_connection_unref(conn);
  return NULL;
}

static gpointer reconnect_thread(gpointer data)
{
  GstRdmaConnection *conn = data;
  gint backoff_ms = RECONNECT_MIN_MS;
  gint attempts = 0;
  char errbuf[256] = "";

  g_mutex_lock(&conn->lock);
  while (conn->users > 0) {
    g_mutex_unlock(&conn->lock);
    attempts++;
    int ret = sbr_sender_reconnect(conn->sender, errbuf, sizeof errbuf);
    g_mutex_lock(&conn->lock);
    if (ret == 0) {
      conn->state = GST_RDMA_CONNECTION_CONNECTED;
      conn->generation++;
      g_cond_broadcast(&conn->cond);
      GST_INFO("connection %u to %s back after %d attempt(s)", conn->id,
               conn->address, attempts);
      break;
    }
    GST_DEBUG("reconnect attempt %d to %s: %s (%s)", attempts, conn->address,
              errbuf, g_strerror(-ret));
    if (gst_rdma_connection_error_is_fatal(ret)) {
      /* The receiver came back refusing us for good (another mechanism,
       * say): waiting won't change that. */
      fail_and_report(conn, ret, errbuf,
                      g_strdup_printf("reconnect attempt %d", attempts));
      gst_rdma_connection_unref(conn);
      return NULL;
    }
    sleep_locked(conn, backoff_ms);
    backoff_ms = MIN(backoff_ms * 2, RECONNECT_MAX_MS);
  }
  g_mutex_unlock(&conn->lock);
  gst_rdma_connection_unref(conn);
  return NULL;
}

static GstRdmaConnection *connection_new(const GstRdmaConnectionConfig *cfg,
                                         gchar *key)
{
  GstRdmaConnection *conn = g_new0(GstRdmaConnection, 1);

  conn->refs = 1;
  conn->id = (guint)g_atomic_int_add(&next_id, 1) + 1;
  conn->key = key;
  conn->host = g_strdup(cfg->host);
  conn->cfg = *cfg;
  conn->cfg.host = conn->host;
  conn->address = g_strdup_printf("%s:%u", cfg->host, cfg->port);
  conn->description =
      g_strdup_printf("%s, %s", gst_rdma_transport_nick(cfg->transport),
                      gst_rdma_mechanism_nick(cfg->mechanism));
  g_mutex_init(&conn->lock);
  g_cond_init(&conn->cond);
  conn->state = GST_RDMA_CONNECTION_CONNECTING;

  sbr_sender_config_init(&conn->sbr_cfg);
  conn->sbr_cfg.backend = gst_rdma_transport_to_sbr(cfg->transport);
  conn->sbr_cfg.mechanism = gst_rdma_mechanism_to_sbr(cfg->mechanism);
  conn->sbr_cfg.host = conn->host;
  conn->sbr_cfg.port = (uint16_t)cfg->port;
  conn->sbr_cfg.send_blocks = cfg->send_blocks;
  conn->sbr_cfg.block_size_hint = cfg->block_size;
  conn->sbr_cfg.connect_timeout_ms = cfg->connect_timeout_ms;
  conn->sbr_cfg.backpressure = gst_rdma_backpressure_to_sbr(cfg->backpressure);
  conn->sbr_cfg.wait_timeout_ms = cfg->wait_timeout_ms;
  conn->sbr_cfg.read_ahead = cfg->read_ahead;
  conn->sbr_cfg.tos = cfg->tos;
  conn->sbr_cfg.ack_timeout = (uint8_t)cfg->ack_timeout;
  conn->sbr_cfg.retry_count = (uint8_t)cfg->retry_count;
  conn->sbr_cfg.comp_vector = cfg->comp_vector;
  conn->sbr_cfg.on_key_unit = connection_key_unit;
  conn->sbr_cfg.key_unit_user_data = conn;
  return conn;
}

GstRdmaConnection *gst_rdma_connection_open(const GstRdmaConnectionConfig *cfg,
                                            guint device, GstElement *user,
                                            GstRdmaConnectionFailedFunc failed,
                                            gboolean *differs, GError **error)
{
  GstRdmaConnection *conn;
  gchar *key;
  gboolean created = FALSE;

  g_return_val_if_fail(device < SBR_MAX_DEVICES, NULL);
  debug_init();
  key = make_key(cfg);
  *differs = FALSE;

  g_mutex_lock(&registry_lock);
  if (!registry)
    registry = g_hash_table_new(g_str_hash, g_str_equal);
  conn = g_hash_table_lookup(registry, key);
  if (!conn) {
    conn = connection_new(cfg, key);
    key = NULL; /* the connection owns it */
    conn->in_registry = TRUE;
    g_hash_table_insert(registry, conn->key, conn);
    created = TRUE;
  } else {
    gst_rdma_connection_ref(conn);
  }

  g_mutex_lock(&conn->lock);
  if (conn->devices[device].element) {
    g_set_error(error, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_BUSY,
                "Device %u is already sent by %s on the connection to %s (%s): "
                "every rdmasink on one connection needs its own device-id",
                device, GST_ELEMENT_NAME(conn->devices[device].element),
                conn->address, conn->description);
    g_mutex_unlock(&conn->lock);
    g_mutex_unlock(&registry_lock);
    g_free(key);
    gst_rdma_connection_unref(conn);
    return NULL;
  }
  conn->devices[device].element = user;
  conn->devices[device].failed = failed;
  conn->users++;
  *differs = !created && config_differs(&conn->cfg, cfg);
  GST_DEBUG("%s opened device %u on connection %u (%s), %u user(s)",
            GST_ELEMENT_NAME(user), device, conn->id, conn->key, conn->users);
  g_mutex_unlock(&conn->lock);
  g_mutex_unlock(&registry_lock);
  g_free(key);

  if (created) {
    GThread *thread;
    GError *err = NULL;

    gst_rdma_connection_ref(conn); /* the thread's */
    thread = g_thread_try_new("rdma-connect", connect_thread, conn, &err);
    if (!thread) {
      g_mutex_lock(&conn->lock);
      conn->state = GST_RDMA_CONNECTION_FAILED;
      conn->error =
          g_strdup_printf("cannot start the connect thread: %s", err->message);
      conn->reason = g_strdup(conn->error);
      conn->error_code = -EAGAIN;
      g_mutex_unlock(&conn->lock);
      g_clear_error(&err);
      leave_registry(conn);
      gst_rdma_connection_unref(conn);
    } else {
      g_thread_unref(thread); /* detached: it holds its own reference */
    }
  }
  return conn;
}

void gst_rdma_connection_close(GstRdmaConnection *conn, guint device)
{
  g_mutex_lock(&registry_lock);
  g_mutex_lock(&conn->lock);
  if (conn->devices[device].element) {
    conn->devices[device].element = NULL;
    conn->devices[device].failed = NULL;
    conn->devices[device].key_unit = NULL;
    conn->users--;
    /* The next sink of this device starts uninterrupted. */
    if (conn->sender)
      sbr_sender_interrupt_device(conn->sender, (uint8_t)device, FALSE);
  }
  GST_DEBUG("closed device %u on connection %u, %u user(s) left", device,
            conn->id, conn->users);
  if (conn->users == 0 && conn->in_registry) {
    g_hash_table_remove(registry, conn->key);
    conn->in_registry = FALSE;
  }
  /* A connect or reconnect thread sleeping between attempts stops now. */
  g_cond_broadcast(&conn->cond);
  g_mutex_unlock(&conn->lock);
  g_mutex_unlock(&registry_lock);
  gst_rdma_connection_unref(conn);
}

GstRdmaConnectionState gst_rdma_connection_wait(GstRdmaConnection *conn,
                                                const gint *cancel,
                                                guint *generation,
                                                gchar **error)
{
  GstRdmaConnectionState state;

  g_mutex_lock(&conn->lock);
  while (conn->state == GST_RDMA_CONNECTION_CONNECTING &&
         !g_atomic_int_get(cancel))
    g_cond_wait(&conn->cond, &conn->lock);
  state = conn->state;
  if (generation)
    *generation = conn->generation;
  if (error)
    *error = state == GST_RDMA_CONNECTION_FAILED ? g_strdup(conn->error) : NULL;
  g_mutex_unlock(&conn->lock);
  return state;
}

void gst_rdma_connection_interrupt(GstRdmaConnection *conn, guint device,
                                   gboolean interrupted)
{
  g_mutex_lock(&conn->lock);
  if (interrupted)
    g_cond_broadcast(&conn->cond);
  /* Only this sink's device: the other sinks on the connection go on
   * (sbr_sender_wakeup would wake them all, to retry). */
  if (conn->sender)
    sbr_sender_interrupt_device(conn->sender, (uint8_t)device, interrupted);
  g_mutex_unlock(&conn->lock);
}

GstRdmaConnectionState gst_rdma_connection_get_state(GstRdmaConnection *conn,
                                                     guint *generation)
{
  GstRdmaConnectionState state;

  g_mutex_lock(&conn->lock);
  state = conn->state;
  if (generation)
    *generation = conn->generation;
  g_mutex_unlock(&conn->lock);
  return state;
}

sbr_sender *gst_rdma_connection_get_sender(GstRdmaConnection *conn)
{
  sbr_sender *sender;

  g_mutex_lock(&conn->lock);
  sender = conn->sender;
  g_mutex_unlock(&conn->lock);
  return sender;
}

GstRdmaConnectionState gst_rdma_connection_lost(GstRdmaConnection *conn)
{
  GstRdmaConnectionState state;

  g_mutex_lock(&conn->lock);
  if (conn->state == GST_RDMA_CONNECTION_CONNECTED && conn->users > 0 &&
      !sbr_sender_is_connected(conn->sender)) {
    GThread *thread;

    conn->state = GST_RDMA_CONNECTION_RECONNECTING;
    gst_rdma_connection_ref(conn); /* the thread's */
    thread = g_thread_try_new("rdma-reconnect", reconnect_thread, conn, NULL);
    if (thread) {
      g_thread_unref(thread);
      GST_WARNING("connection %u to %s lost, reconnecting", conn->id,
                  conn->address);
    } else {
      /* Stay RECONNECTING: the next lost() can't retry either, but frames
       * are dropped and counted rather than blocking the pipeline. */
      g_atomic_int_add(&conn->refs, -1);
      GST_ERROR("cannot start the reconnect thread for %s", conn->address);
    }
  }
  state = conn->state;
  g_mutex_unlock(&conn->lock);
  return state;
}

gint gst_rdma_connection_get_error(GstRdmaConnection *conn, gchar **reason,
                                   gchar **error)
{
  gint code;

  g_mutex_lock(&conn->lock);
  code = conn->state == GST_RDMA_CONNECTION_FAILED ? conn->error_code : 0;
  if (reason)
    *reason = code ? g_strdup(conn->reason) : NULL;
  if (error)
    *error = code ? g_strdup(conn->error) : NULL;
  g_mutex_unlock(&conn->lock);
  return code;
}

const gchar *gst_rdma_connection_get_address(GstRdmaConnection *conn)
{
  return conn->address;
}

const gchar *gst_rdma_connection_get_description(GstRdmaConnection *conn)
{
  return conn->description;
}

void gst_rdma_connection_fill_stats(GstRdmaConnection *conn, GstStructure *s)
{
  struct sbr_sender_stats st;
  sbr_sender *sender;
  guint users, id;
  GstRdmaConnectionState state;

  g_mutex_lock(&conn->lock);
  sender = conn->sender;
  users = conn->users;
  id = conn->id;
  state = conn->state;
  g_mutex_unlock(&conn->lock);

  memset(&st, 0, sizeof st);
  if (sender)
    sbr_sender_get_stats(sender, &st);
  gst_structure_set(
      s, "connection-id", G_TYPE_UINT, id, "connection-users", G_TYPE_UINT,
      users, "connected", G_TYPE_BOOLEAN,
      state == GST_RDMA_CONNECTION_CONNECTED, "block-payload-size",
      G_TYPE_UINT64,
      (guint64)(sender ? sbr_sender_block_payload_size(sender) : 0),
      "reconnects", G_TYPE_UINT64, (guint64)st.reconnects, "sync-reads",
      G_TYPE_UINT64, (guint64)st.sync_reads, "sync-read-ns-max", G_TYPE_UINT64,
      (guint64)st.sync_read_ns_max, "held-skipped", G_TYPE_UINT64,
      (guint64)st.held_skipped, "busy-skipped", G_TYPE_UINT64,
      (guint64)st.busy_skipped, "no-free-waits", G_TYPE_UINT64,
      (guint64)st.no_free_waits, "connection-blocks", G_TYPE_UINT64,
      (guint64)st.blocks, "connection-bytes", G_TYPE_UINT64, (guint64)st.bytes,
      "connection-drops", G_TYPE_UINT64, (guint64)st.drops, "wr-posted",
      G_TYPE_UINT64, (guint64)st.wr_posted, "acks", G_TYPE_UINT64,
      (guint64)st.acks, "async-errors", G_TYPE_UINT64, (guint64)st.async_errors,
      "completion-timeouts", G_TYPE_UINT64, (guint64)st.completion_timeouts,
      NULL);
  /* Direct placement (shm): frames written in place, those copied, and
   * kept ones copied out of the lane. */
  gst_structure_set(s, "direct-blocks", G_TYPE_UINT64,
                    (guint64)st.direct_blocks, "direct-fallbacks",
                    G_TYPE_UINT64, (guint64)st.direct_fallbacks, "kept-copies",
                    G_TYPE_UINT64, (guint64)st.kept_copies, NULL);
  /* The hand-offs on the sending side (design.md "Threads"). */
  gst_structure_set(s, "producer-posts", G_TYPE_UINT64,
                    (guint64)st.producer_posts, "kicks", G_TYPE_UINT64,
                    (guint64)st.kicks, "pause-reads", G_TYPE_UINT64,
                    (guint64)st.pause_reads, NULL);
}
