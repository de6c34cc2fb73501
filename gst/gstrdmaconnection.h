/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gstrdmaconnection.h - the process-wide registry of shared senders.
 *
 * Every rdmasink in a process that names the same transport, mechanism, host
 * and port uses ONE GstRdmaConnection: one sbr_sender, so one connection,
 * one queue pair and one sender thread, whether the sinks sit in one pipeline
 * or in twelve.  The registry is a GMutex-protected hash table keyed by
 * "transport:mechanism:host:port".
 *
 * Two counts:
 *   users  sinks between open (start) and close (stop); each owns one device
 *          number on the connection.  The first open creates the connection
 *          and starts connecting; when users drops to 0 the connection leaves
 *          the registry (a later open makes a fresh one).
 *   refs   the object's lifetime: users, the connect/reconnect thread and
 *          every GstMemory over a send block hold one, so the sbr_sender and
 *          its registered blocks outlive the last sink while upstream still
 *          holds buffers allocated from them.  The last unref frees the
 *          sender (drain, disconnect).
 *
 * Connecting happens on a thread of the connection, not in the sink's
 * start(): the receiver may be an rdmasrc in the same pipeline that only
 * accepts once it is PLAYING, after every sink has started.  Sinks wait for
 * the outcome where they need the sender (allocation query, caps, render,
 * EOS) with gst_rdma_connection_wait, which their unlock() interrupts.
 *
 * Threads: every function may be called from any thread.
 */
#ifndef __GST_RDMA_CONNECTION_H__
#define __GST_RDMA_CONNECTION_H__

#include <gst/gst.h>
#include <sbr.h>

#include "gstrdmaenums.h"

G_BEGIN_DECLS

typedef struct _GstRdmaConnection GstRdmaConnection;

/* What a connection is made with.  transport, mechanism, host and port form
 * the registry key; the rest comes from the sink that opens it first. */
typedef struct {
  GstRdmaTransport transport;
  GstRdmaMechanism mechanism;
  const gchar *host;
  guint port;
  guint send_blocks;
  guint block_size;
  gint connect_timeout_ms;
  GstRdmaBackpressure backpressure;
  gint wait_timeout_ms;
  guint read_ahead;
  gint tos;          /* -1: rdma_cm's default */
  guint ack_timeout; /* exponent; 0: rdma_cm's default */
  guint retry_count; /* 0-6 */
  gint comp_vector;  /* -1: spread */
} GstRdmaConnectionConfig;

typedef enum {
  GST_RDMA_CONNECTION_CONNECTING,   /* first connect in progress */
  GST_RDMA_CONNECTION_CONNECTED,    /* the sender is usable */
  GST_RDMA_CONNECTION_RECONNECTING, /* lost; a thread is reconnecting */
  GST_RDMA_CONNECTION_FAILED,       /* gave up connecting; see the error */
} GstRdmaConnectionState;

/* Told (on the connect thread, no lock held) that connecting failed, so a
 * sink can post its error even while no data reaches it. */
typedef void (*GstRdmaConnectionFailedFunc)(GstElement *user,
                                            const gchar *error);

/* Told (on libsbr's sender thread, no lock held; the element referenced
 * for the call) that the receiver asked for a key unit of the sink's
 * device.  It must return soon: every device of the connection waits. */
typedef void (*GstRdmaConnectionKeyUnitFunc)(GstElement *user,
                                             gboolean all_headers);

/* Registers device on the shared connection for cfg, creating it (and
 * starting to connect) if this is the first user.  NULL with error set
 * (GST_RESOURCE_ERROR_BUSY) when another sink already sends that device on
 * it.  *differs is set when the connection already existed with settings
 * other than cfg's (they stay the first sink's). */
GstRdmaConnection *gst_rdma_connection_open(const GstRdmaConnectionConfig *cfg,
                                            guint device, GstElement *user,
                                            GstRdmaConnectionFailedFunc failed,
                                            gboolean *differs, GError **error);
/* After open: who is told of the receiver's key-unit requests for device
 * (until close). */
void gst_rdma_connection_set_key_unit_func(GstRdmaConnection *conn,
                                           guint device,
                                           GstRdmaConnectionKeyUnitFunc func);

/* Unregisters device; the last user takes the connection out of the
 * registry.  Drops the reference open returned. */
void gst_rdma_connection_close(GstRdmaConnection *conn, guint device);

GstRdmaConnection *gst_rdma_connection_ref(GstRdmaConnection *conn);
void gst_rdma_connection_unref(GstRdmaConnection *conn);

/* Waits while the first connect is in progress, until *cancel becomes
 * non-zero (read atomically) or the outcome is known.  Returns the state;
 * *generation counts successful (re)connects.  *error (FAILED only) is the
 * failure text, to be freed. */
GstRdmaConnectionState gst_rdma_connection_wait(GstRdmaConnection *conn,
                                                const gint *cancel,
                                                guint *generation,
                                                gchar **error);
/* A sink's unlock (interrupted) and unlock_stop: wakes every waiter of
 * gst_rdma_connection_wait so it re-reads its cancel flag, and while
 * interrupted, device's waits for a send block end with -EINTR, also
 * those that start later (sbr_sender_interrupt_device).  A sink that set
 * its cancel flag first and reads it again once it has the sender never
 * waits through an unlock: either it sees the flag, or this call comes
 * after it got the sender and interrupts it. */
void gst_rdma_connection_interrupt(GstRdmaConnection *conn, guint device,
                                   gboolean interrupted);

/* Current state without waiting. */
GstRdmaConnectionState gst_rdma_connection_get_state(GstRdmaConnection *conn,
                                                     guint *generation);

/* The sender: NULL until the first connect succeeded, then the same object
 * until the connection is freed (reconnects keep it). */
sbr_sender *gst_rdma_connection_get_sender(GstRdmaConnection *conn);

/* A fill call said -ENOTCONN: start reconnecting in the background (once;
 * later calls while it runs do nothing).  Returns the state after. */
GstRdmaConnectionState gst_rdma_connection_lost(GstRdmaConnection *conn);

/* FAILED: libsbr's negative errno, with *reason what it said (for a
 * refusal "... refused the connection: <the mismatch>") and *error that
 * with the attempts made (both to be freed); 0 and NULLs otherwise. */
gint gst_rdma_connection_get_error(GstRdmaConnection *conn, gchar **reason,
                                   gchar **error);
/* Whether a libsbr connect error is one no retry fixes: connecting stops
 * at once (a refusal for another version or mechanism, no RDMA device). */
gboolean gst_rdma_connection_error_is_fatal(gint err);

/* "host:port" and "transport, mechanism" for messages. */
const gchar *gst_rdma_connection_get_address(GstRdmaConnection *conn);
const gchar *gst_rdma_connection_get_description(GstRdmaConnection *conn);

/* Adds the connection-wide fields to a stats structure: connection-id,
 * connection-users, connected, reconnects, sync-reads, held-skipped, ... */
void gst_rdma_connection_fill_stats(GstRdmaConnection *conn, GstStructure *s);

G_END_DECLS

#endif /* __GST_RDMA_CONNECTION_H__ */
