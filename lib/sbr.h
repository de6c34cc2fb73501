/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sbr.h - status-byte RDMA block transport.
 *
 * Quick start (checks left out: every int call returns 0 or -errno)
 *   Receiver, one thread:
 *     char err[256];
 *     struct sbr_receiver_config rc;
 *     sbr_receiver_config_init(&rc);       // verbs, status-byte, port 7471
 *     sbr_receiver *r;
 *     sbr_block *b;
 *     sbr_receiver_new(&rc, &r, err, sizeof err);
 *     while (sbr_receiver_next(r, -1, &b) == 0) {  // -1: no timeout
 *       const struct sbr_block_info *i = sbr_block_get_info(b);
 *       use(i->device, i->payload, i->payload_len); // or _next_frame
 *       sbr_block_release(b);
 *     }
 *     sbr_receiver_free(r);
 *   Sender, any number of producer threads:
 *     struct sbr_sender_config sc;
 *     sbr_sender_config_init(&sc);
 *     sc.host = "10.0.0.2";                // the receiver's RDMA address
 *     sbr_sender *s;
 *     struct sbr_block_meta m;
 *     sbr_sender_new(&sc, &s, err, sizeof err);   // connects
 *     sbr_block_meta_init(&m, 3);          // device (camera) 3
 *     sbr_sender_send(s, &m, frame, frame_len); // or acquire/submit
 *     sbr_sender_free(s);
 *   Over shm (one host): backend = SBR_BACKEND_SHM on both sides.
 *
 * What it does
 *   Moves blocks (a 64-byte header, a payload, an 8-byte trailer) from many
 *   producers in one sender process to one receiver over a single
 *   reliable-connected queue pair.  The sender RDMA-WRITEs a block into a free
 *   receive block and, chained on the same QP, an inline WRITE of that block's
 *   status byte.  When it knows of no free receive block it RDMA-READs the
 *   receiver's status array.  The receiver posts no receives and sends
 *   nothing: it polls its own status bytes (0 empty, 1 data, 2 held).  Every
 *   block carries a device number (0-255) and a per-device packet number, so
 *   many camera streams share one QP and the receiver delivers each device's
 *   blocks in packet order.  docs/protocol.md is the full specification.
 *
 *   The mechanism is the one described in "Status-Byte-Assisted RDMA
 *   Transmission Mechanism for Optimizing Multi-Task Video Streaming in
 *   Edge Computing" (Applied Sciences 2024, 14, 7437), "the paper" below;
 *   docs/protocol.md says where this library differs from it.
 *
 *   A sliding-window mechanism (WRITE WITH IMMEDIATE into slot seq mod N,
 *   receives pre-posted, ACK by SEND) runs behind the same API as a baseline.
 *
 *   Two back ends: SBR_BACKEND_VERBS (rdma-core: RoCE, InfiniBand, Soft-RoCE)
 *   and SBR_BACKEND_SHM (same host, across processes, through shared memory).
 *
 * Threads
 *   sbr_sender: every fill call (acquire/submit/abandon/send) is thread-safe;
 *   any number of producers may use one sender.  One internal thread posts
 *   work requests and reaps their completions; with status-byte, a submit
 *   that finds that thread idle posts the producer's own blocks on the
 *   producer's thread (over shm it also copies its frame there).
 *   sbr_sender_free must not race with other calls.  The on_key_unit
 *   callback of sbr_sender_config runs on the sender thread, with no
 *   library lock held.
 *
 *   sbr_receiver: sbr_receiver_next / _next_frame are called by one thread
 *   at a time.  sbr_block_release / _hold / sbr_frame_release may be called
 *   from any thread (a GStreamer buffer is freed wherever it is unreffed).
 *   sbr_receiver_wakeup, _pause_device, _device_paused, _refuse_device,
 *   _request_key_unit and _set_device_period may be called from any
 *   thread.  The on_refusal
 *   and on_lane callbacks of sbr_receiver_config run on the thread inside
 *   sbr_receiver_next / _next_frame.  One internal thread per receiver,
 *   from sbr_receiver_new to _free, listens and accepts (allocates,
 *   registers and binds a sender's lane), so a slow accept never delays
 *   the open lanes' frames; the thread inside sbr_receiver_next takes the
 *   new lane in (and calls on_lane, on_refusal) at its next look.
 *
 * Waiting (enum sbr_poll_mode)
 *   The receiver has no completion to wake on: the thread inside
 *   sbr_receiver_next polls the status bytes.  How it waits between polls
 *   is the receiver's poll mode: busy (spin: the lowest latency, a whole
 *   core), adaptive (the default: learns each device's frame period from
 *   the arrivals, sleeps until just before the next frame of any device
 *   is due, in sleeps no longer than the back-off's 1 ms ceiling, and
 *   polls through a short window; back-off for streams that aren't
 *   periodic and while idle; over shm, where the sender's status WRITE
 *   ends a sleep, one lane is slept on without the ceiling, and its
 *   window polled only while it carries one device) or backoff (spin
 *   20 us, then sleeps doubling up to 1 ms).  In adaptive mode a call
 *   that sleeps lowers the calling thread's timer slack to 1 ns
 *   (PR_SET_TIMERSLACK; Linux adds 50 us to every timed sleep by
 *   default) and restores it before it returns.
 *
 * Memory
 *   A send block belongs to the caller between acquire and submit/abandon,
 *   then to the library.  One submitted with sbr_sender_submit_keep stays
 *   the caller's: its payload stays readable and unchanged (the library
 *   only reads it) until the caller gives it back with sbr_sender_release,
 *   which frees it at once if its WRITE completed, else at completion; the
 *   caller may submit it again, or write into it, only once
 *   sbr_sender_wait_block says that WRITE completed.  A received block's
 * payload stays valid and untouched by the sender until it is released; a
 * receiver and its lanes stay allocated until the last block is released, even
 * after sbr_receiver_free.
 *
 * Errors
 *   Functions return 0 or a negative errno.  The library never prints and
 *   never exits: it reports through the log handler.
 *
 * Growing structs (the ABI of libsbr.so.0)
 *   The configs and stats grow as the library does, so they carry their
 *   size: a config's first field, struct_size, is set by
 *   sbr_*_config_init to the sizeof the application was built with, and
 *   the stats getters pass it too (static inline wrappers below, over the
 *   exported *_sized functions that bindings call).  The library reads a
 *   config only as far as struct_size (fields an application predates take
 *   their defaults) and refuses one smaller than the first released layout
 *   or larger than its own; it writes stats only as far as the caller's
 *   struct reaches.  So new fields go at the END of these structs, never
 *   in the middle, and a config must start from sbr_*_config_init (which
 *   also sets the bytes between fields).  Every other struct here, and
 *   every enum value, is fixed: changing one needs a new soname
 *   (docs/design.md, "A stable ABI"; lib/abi/ holds the baseline).  A
 *   function added here is listed in lib/libsbr.map too.
 */
#ifndef SBR_H
#define SBR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every function declared here is exported: the library is built with
 * hidden visibility, and lib/libsbr.map names what libsbr.so exports. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define SBR_VERSION_STRING "0.1.0"
#define SBR_DEFAULT_PORT 7471
#define SBR_MAX_DEVICES 256
#define SBR_TIME_NONE UINT64_MAX
/* sbr_receiver_refuse_device: every open lane. */
#define SBR_LANE_ALL UINT32_MAX

enum sbr_backend {
  SBR_BACKEND_VERBS = 0,
  SBR_BACKEND_SHM = 1,
};

enum sbr_mechanism {
  SBR_MECH_STATUS_BYTE = 0,
  SBR_MECH_SLIDING_WINDOW = 1,
};

/* Block kinds (wire values). */
enum sbr_kind {
  SBR_KIND_DATA = 1, /* a frame or a fragment of one */
  SBR_KIND_CAPS = 2, /* payload: the device's caps string, NUL excluded */
  SBR_KIND_EOS = 3,  /* the device's stream ended; no payload */
  /* An event of the device's stream, in its place among the frames: the
   * payload is the application's (rdmasink: a serialized GstStructure),
   * one block at most.  Only to a receiver that takes them (every receiver
   * of this version): sbr_sender_send says -ENOTSUP to an older one, which
   * would reject the block.  A receiver application ignores what it
   * doesn't know. */
  SBR_KIND_EVENT = 4,
};

/* Block flags (wire values). */
enum sbr_flags {
  SBR_FLAG_FIRST = 1 << 0,   /* first fragment of a frame */
  SBR_FLAG_LAST = 1 << 1,    /* last fragment of a frame */
  SBR_FLAG_DISCONT = 1 << 2, /* discontinuity before this frame */
  SBR_FLAG_DELTA = 1 << 3,   /* not a key frame */
  /* On a CAPS block: the stream's source is not live (a file, a
   * transcode, a replay): a receiver should hold it back rather than drop
   * its frames.  Absent: live, or a sender that doesn't say. */
  SBR_FLAG_NOT_LIVE = 1 << 4,
  /* (1 << 5 is the engine's own, docs/protocol.md.)  On a DATA block: the
   * frame is a stream header (codec setup a decoder needs before any
   * frame: SPS/PPS, Vorbis headers), not a frame of the picture.  A
   * receiver that doesn't know the bit ignores it. */
  SBR_FLAG_HEADER = 1 << 6,
  /* On a DATA block: GStreamer's GST_BUFFER_FLAG_MARKER, the end of a
   * unit (a video encoder's every frame, RTP's marker): in the header
   * because nearly every encoded frame has it.  Ignored where unknown. */
  SBR_FLAG_MARKER = 1 << 7,
};

/* What to do when no send block is free. */
enum sbr_backpressure {
  SBR_BACKPRESSURE_WAIT = 0, /* wait up to the timeout, then count a drop */
  SBR_BACKPRESSURE_DROP = 1, /* drop at once and count it */
};

enum sbr_log_level {
  SBR_LOG_ERROR = 0,
  SBR_LOG_WARNING = 1,
  SBR_LOG_INFO = 2,
  SBR_LOG_DEBUG = 3,
};

typedef void (*sbr_log_func)(void *user_data, enum sbr_log_level level,
                             const char *message);

/* Process-wide log handler; NULL silences the library (the default). */
void sbr_set_log_handler(sbr_log_func func, void *user_data);

const char *sbr_backend_name(enum sbr_backend backend);
const char *sbr_mechanism_name(enum sbr_mechanism mechanism);
/* Parse "verbs"/"shm", "status-byte"/"sliding-window"; -EINVAL otherwise. */
int sbr_backend_from_name(const char *name, enum sbr_backend *out);
/* Checks, without connecting to anyone, what a connect or listen on this
 * host would fail at once for: the back end is built in, and for verbs
 * the RDMA connection manager opens (an RDMA device, rdma_ucm loaded).
 * 0, or -ENOTSUP (not built in) / -ENODEV (no RDMA here) with errbuf
 * saying what is missing and what to do.  For applications that connect
 * in the background and want a wrong setup to fail at start. */
int sbr_backend_check(enum sbr_backend backend, char *errbuf, size_t errlen);
int sbr_mechanism_from_name(const char *name, enum sbr_mechanism *out);

/* Why a receiver refused a connection.  The values travel in the reject's
 * private data (docs/protocol.md, "Refusals"); each refusal carries two
 * numbers, what the receiver has and what the sender asked for, that the
 * sentence of sbr_refusal_describe names. */
enum sbr_refusal {
  SBR_REFUSAL_NONE = 0,
  /* Another sbr protocol version: receiver's, sender's. */
  SBR_REFUSAL_VERSION = 1,
  /* Another mechanism (enum sbr_mechanism): receiver's, sender's. */
  SBR_REFUSAL_MECHANISM = 2,
  /* The receiver's lanes can't work with this sender: a sliding-window
   * sender acknowledges at most as many slots as it posts ACK receives for
   * (its block count hint, or 1020 without one).  Receiver's block count,
   * the sender's limit. */
  SBR_REFUSAL_GEOMETRY = 3,
  /* The connect request is not one this receiver understands (not sbr, cut
   * short): 0, the bytes received. */
  SBR_REFUSAL_MALFORMED = 4,
  /* This sender is not on the receiver's access list (allowed_senders):
   * 0, 0. */
  SBR_REFUSAL_NOT_ALLOWED = 5,
  /* Every lane is in use (max_lanes, 0); retrying later may work. */
  SBR_REFUSAL_LANES_FULL = 6,
  /* The receiver could not set the lane up (the errno, 0); retryable. */
  SBR_REFUSAL_RESOURCES = 7,
  /* Too many connection attempts this second (max_connects_per_s, 0);
   * retrying later may work. */
  SBR_REFUSAL_BUSY = 8,
  /* The receiver may not lock (pin) the memory a lane needs: its
   * RLIMIT_MEMLOCK in KiB, the lane's need in KiB.  Not retryable: only
   * raising the receiver's limit helps. */
  SBR_REFUSAL_MEMLOCK = 9,
  /* The receiver's RDMA device can't run the requested mechanism: an
   * iWARP device has no RDMA WRITE with immediate, which sliding-window
   * needs.  The mechanism (enum sbr_mechanism), 0. */
  SBR_REFUSAL_DEVICE = 10,
};
/* Room for every reason's count in sbr_receiver_stats. */
#define SBR_REFUSAL_SLOTS 16

/* "mechanism", "lanes-full", ...; "unknown" for a value this version does
 * not know (a newer receiver's). */
const char *sbr_refusal_name(enum sbr_refusal reason);
/* Whether waiting and connecting again may succeed (lanes full, out of
 * resources).  A receiver says so on the wire too, so a sender knows it
 * even for a reason it does not know. */
bool sbr_refusal_retryable(enum sbr_refusal reason);
/* One sentence naming the mismatch, without a capital or a full stop:
 * "the receiver runs the status-byte mechanism, the sender sliding-window".
 * receiver_value and sender_value as documented per reason.  Always
 * NUL-terminates buf (len > 0). */
void sbr_refusal_describe(enum sbr_refusal reason, uint32_t receiver_value,
                          uint32_t sender_value, char *buf, size_t len);

/* Access lists (sbr_receiver_config.allowed_senders).  A list is
 * comma-separated entries, each an IPv4 or IPv6 address with an optional
 * prefix length ("10.0.0.0/8,192.168.1.5,fe80::/10"), or "local".  NULL or
 * blank text is the empty list: anyone may connect (*out = NULL).  An
 * IPv4-mapped IPv6 peer is matched as its IPv4 address.  Shared-memory
 * senders are processes on this host with no network address: they match
 * "local" and any entry that contains 127.0.0.1 or ::1; "local" also
 * matches verbs peers on a loopback address.  -EINVAL with the bad entry
 * named in errbuf ("allowed senders, entry 2: 'foo' is not an IPv4 or IPv6
 * address ..."), -ENOMEM. */
struct sockaddr;
typedef struct sbr_addr_list sbr_addr_list;
int sbr_addr_list_parse(const char *text, sbr_addr_list **out, char *errbuf,
                        size_t errlen);
/* May peer connect?  A NULL list allows anyone; a NULL peer (or one of
 * another family) is a shared-memory sender on this host. */
bool sbr_addr_list_allows(const sbr_addr_list *list,
                          const struct sockaddr *peer);
void sbr_addr_list_free(sbr_addr_list *list);

/* Polling back-off: spin for spin_us, then sleep starting at min_sleep_us and
 * doubling up to max_sleep_us.  An idle waiter costs one wake-up per
 * max_sleep_us; a busy one adds at most max_sleep_us of delay. */
struct sbr_backoff_config {
  uint32_t spin_us;      /* default 20 */
  uint32_t min_sleep_us; /* default 10 */
  uint32_t max_sleep_us; /* default 1000 */
};

/* How sbr_receiver_next waits between polls of the status bytes (see
 * "Waiting" above and docs/design.md, "Waiting for a frame"). */
enum sbr_poll_mode {
  SBR_POLL_ADAPTIVE = 0, /* sleep until the next frame is due (default) */
  SBR_POLL_BUSY = 1,     /* spin: lowest latency, costs a core */
  SBR_POLL_BACKOFF = 2,  /* spin, then sleep doubling to max_sleep_us */
};

const char *sbr_poll_mode_name(enum sbr_poll_mode mode);
/* Parse "adaptive"/"busy"/"backoff"; -EINVAL otherwise. */
int sbr_poll_mode_from_name(const char *name, enum sbr_poll_mode *out);

/* ---------------------------------------------------------------- sender */

typedef struct sbr_sender sbr_sender;
typedef struct sbr_send_block sbr_send_block;

enum sbr_send_order {
  /* Submit order (default): a device's whole frame before the next
   * device's.  With cameras that all send frames of one size this is what
   * finishes frames soonest on average.  The sliding-window mechanism
   * always posts so (docs/design.md, "Ordering"). */
  SBR_SEND_ORDER_FIFO = 0,
  /* One block of each device with blocks queued, in turn: a small frame,
   * or a big one's first fragment, doesn't wait behind whole big frames of
   * devices queued before it (a rig of mixed resolutions), but frames of
   * one size all finish near the end of the burst. */
  SBR_SEND_ORDER_ROUND_ROBIN = 1,
};

struct sbr_sender_config {
  uint32_t struct_size; /* set by sbr_sender_config_init; see above */
  enum sbr_backend backend;
  enum sbr_mechanism mechanism;
  const char *host; /* receiver address; shm: any name */
  uint16_t port;    /* default SBR_DEFAULT_PORT */
  /* Local address to connect from, which picks the RDMA device and port
   * on a host with several; NULL = the one routing to host picks.
   * verbs only (shm ignores it). */
  const char *source;
  uint32_t send_blocks;      /* local send blocks, default 16 */
  uint32_t block_size_hint;  /* asked of the receiver, 0 = its choice */
  uint32_t block_count_hint; /* asked of the receiver, 0 = its choice */
  int connect_timeout_ms;    /* default 5000 */
  /* Status-byte: issue the status READ as soon as this many or fewer
   * receive blocks are known free, overlapped with writes.  0 = only when
   * none is (the paper's sync-when-empty). */
  uint32_t read_ahead;
  /* Status-byte: blocks posted together to consecutive free receive blocks
   * share one status WRITE (k data WRITEs, then one inline WRITE of k status
   * bytes) while their data adds up to at most this many bytes; at most 64
   * blocks.  0 = default (128 KiB); 1 = one status WRITE per block, the
   * paper's two-WR chain. */
  uint32_t status_batch_bytes;
  /* Status-byte: while blocks are being posted, force a status READ when
   * the last one is this old, so a device paused by the receiver
   * (sbr_receiver_pause_device) is seen within about this time plus a
   * round trip even by a sender that never runs out of free blocks; also
   * READ this often while a producer waits for a paused device, so it
   * resumes when the bit clears, and while producers of a refused device
   * (sbr_receiver_refuse_device) keep trying, so they learn when the bit
   * clears.  An idle sender never READs.  Default 1000 (config_init); 0 =
   * no forced READs, pause and refused bits are then seen only at the
   * paper's sync-when-empty READs. */
  uint32_t pause_poll_us;
  /* Status-byte: the order in which queued blocks of different devices are
   * posted.  Each device's own blocks keep their order either way. */
  enum sbr_send_order send_order;
  /* Also for a paused device's producers: WAIT until it resumes, DROP at
   * once (counted in paused_drops). */
  enum sbr_backpressure backpressure;
  int wait_timeout_ms; /* WAIT: give up after this, default 1000 */
  struct sbr_backoff_config backoff;
  /* Fabric settings (verbs; shm ignores them).  docs/hardware.md,
   * "Fabric settings", says how they map onto PFC/ECN classes and how
   * fast a dead peer is found.
   * The connection's IP TOS byte (RoCE v2, iWARP: DSCP in its top six
   * bits, which the switches' PFC/ECN classes match; InfiniBand takes
   * its service level from the path and ignores it), 0-255; -1 (the
   * default) = rdma_cm's own (0, or the rdma_cm default_roce_tos of
   * configfs). */
  int tos;
  /* The QP's ACK timeout exponent: a try waits 4.096 us x 2^ack_timeout
   * before the NIC resends.  1-31; default 15 (134 ms); 0 = rdma_cm's
   * own (on RoCE from the path's packet lifetime: seconds a try). */
  uint8_t ack_timeout;
  /* Transport retries before a work request fails and the connection is
   * lost, 0-6; default 6.  7 (retry forever on InfiniBand and Soft-RoCE)
   * is refused with -EINVAL: a dead receiver would never be found.  The
   * receiver's QP takes this value too.  A dead peer is found about
   * 4.096 us x 2^ack_timeout x (retry_count + 1) into a silence. */
  uint8_t retry_count;
  /* Completion vector of the connection's CQs (its interrupts' core):
   * -1 (default) = spread this process's connections over the device's
   * vectors; N = vector N modulo the device's count. */
  int comp_vector;
  /* Status-byte: the receiver asked for a key unit of device
   * (sbr_receiver_request_key_unit), with all headers (SPS/PPS, codec
   * data) if all_headers: ask that device's producer (its encoder) for
   * one.  Seen with a status READ, so within about pause_poll_us plus a
   * round trip while the sender sends; an idle sender reads nothing and
   * sees it when it sends again.  Called once per request seen; several
   * requests of a device made between two READs are one call (a key unit
   * answers them all).  On the sender thread, with no library lock held:
   * it must return soon (every device's posting waits meanwhile) and must
   * not wait for a send block (acquire/send with WAIT would wait for
   * this very thread).  Only from receivers that offer key units (see
   * docs/protocol.md, "Key units"); from older ones never.  NULL: the
   * requests are only counted (key_units_seen). */
  void (*on_key_unit)(void *user_data, uint8_t device, bool all_headers);
  void *key_unit_user_data;
};

/* Fills cfg, size bytes long, with the defaults above and struct_size. */
void sbr_sender_config_init_sized(struct sbr_sender_config *cfg, size_t size);
static inline void sbr_sender_config_init(struct sbr_sender_config *cfg)
{
  sbr_sender_config_init_sized(cfg, sizeof *cfg);
}

/* Connects and starts the sender thread.  On failure *errbuf says what the
 * connection manager or the receiver said (may be NULL).  Errors a retry
 * cannot fix, as they are returned:
 *   -EPROTONOSUPPORT  the receiver refused: another protocol version,
 *                     mechanism or a geometry this sender can't use
 *   -EACCES           the receiver refused: this sender is not allowed
 *   -EPROTO           the receiver did not understand the request, or
 *                     answered with a lane this sender can't use
 *   -ENOMEM           (also) the receiver refused: its RLIMIT_MEMLOCK is
 *                     below what a lane needs
 *   -ENODEV           no RDMA device (rdma_cm not there, or none can reach
 *                     that address)
 *   -ENETUNREACH      no route to that address
 *   -EINVAL, -ENOTSUP, -ENOMEM  bad configuration, back end not built in
 * and ones that may heal:
 *   -EBUSY            the receiver refused: every lane is in use, or it
 *                     had more connection attempts this second than it
 *                     takes (max_connects_per_s)
 *   -ECONNREFUSED     the receiver refused for a passing reason (out of
 *                     resources), or nobody listens on that port
 *   -ETIMEDOUT, -EHOSTUNREACH, -ECONNRESET, -ECONNABORTED
 * A refusal's errbuf names the receiver and the mismatch ("... refused the
 * connection: the receiver runs the status-byte mechanism, the sender
 * sliding-window"). */
int sbr_sender_new(const struct sbr_sender_config *cfg, sbr_sender **out,
                   char *errbuf, size_t errlen);
/* Drains what was submitted (up to 1 s), disconnects and frees. */
void sbr_sender_free(sbr_sender *s);

/* Lost connection: returns -ENOTCONN from every fill call.  reconnect makes a
 * new connection (new lane, new epoch, status re-read, rule 7); blocks that
 * were submitted but not delivered are counted as dropped. */
bool sbr_sender_is_connected(sbr_sender *s);
int sbr_sender_reconnect(sbr_sender *s, char *errbuf, size_t errlen);

/* Payload bytes one block carries (block size - header - trailer). */
size_t sbr_sender_block_payload_size(const sbr_sender *s);

/* Per-block metadata given at submit; times in ns, SBR_TIME_NONE if unset. */
struct sbr_block_meta {
  uint8_t device;
  uint8_t kind;  /* enum sbr_kind */
  uint8_t flags; /* enum sbr_flags; FIRST|LAST set for unfragmented */
  uint64_t pts, dts, duration, capture_time;
  uint32_t frame_offset; /* this fragment's offset in the frame */
  uint32_t frame_size;   /* whole frame's size */
};
void sbr_block_meta_init(struct sbr_block_meta *meta, uint8_t device);

/* Zero-copy fill: take an empty send block for device (backpressure as
 * configured; -EAGAIN when none came, counted as a drop for device; also
 * while the receiver pauses device, and while device holds its fair share
 * of the send blocks and other devices' producers wait for one), write
 * up to *capacity bytes at the returned payload pointer, then submit it.
 * The block memory is registered: a producer may render straight into it.
 * Over shm with status-byte it is a receive block of the lane (direct
 * placement): acquire may then also wait, as backpressure
 * says, for the sender thread to reserve one, and falls back to copying
 * when none comes.  Either way the pointer stays valid until submit or
 * abandon, even across a reconnect.
 * -EADDRINUSE, at once and whatever the backpressure, while the receiver
 * refuses device from this sender (another sender owns it, see
 * sbr_receiver_refuse_device): counted as a drop and in refused_drops;
 * try again with the next frame, it goes through once the bit clears.
 * A block acquired before the sender saw the bit is still submitted. */
int sbr_sender_acquire(sbr_sender *s, uint8_t device, sbr_send_block **out);
void *sbr_send_block_payload(sbr_send_block *b, size_t *capacity);
/* Queues the block for posting; assigns the device's next packet number.
 * On 0 and on -ENOTCONN (the block is taken back, the frame counted as
 * dropped) the block belongs to the library; on -EINVAL (bad length, kind
 * or fragment fields, or a block not acquired) it is still the caller's. */
int sbr_sender_submit(sbr_sender *s, sbr_send_block *b,
                      const struct sbr_block_meta *meta, size_t payload_len);
void sbr_sender_abandon(sbr_sender *s, sbr_send_block *b);

/* Submits b as sbr_sender_submit does, but b stays the caller's: a buffer
 * an application keeps and reads after sending it, or sends twice (a
 * GStreamer memory, docs/design.md "The memory contract").  When its WRITE
 * completes the block is done, not free: it still counts in its device's
 * share of the send blocks until sbr_sender_release.  A reconnect that
 * loses it (counted dropped, as any block) leaves it done too.
 * b: acquired (sbr_sender_acquire), or kept and done.  A separate call
 * rather than a flag, because who owns the block on return differs: the
 * name says so where it is called.
 * Over shm with direct placement the acquired payload lies in the
 * receiver's lane, which the receiver owns once the block is posted and
 * hands back to this sender for other frames: the payload is copied into
 * the block's own registered memory first (counted in kept_copies) and
 * sent from there; sbr_send_block_payload points there from then on.  The
 * receive block it lay in stays reserved and unwritten until release, so
 * a pointer taken before the submit still reads the frame.
 * 0, or -ENOTCONN (dropped and counted, b done and the caller's); -EBUSY:
 * its previous WRITE hasn't completed (sbr_sender_wait_block); -EINVAL:
 * as sbr_sender_submit, or a block released or not the caller's. */
int sbr_sender_submit_keep(sbr_sender *s, sbr_send_block *b,
                           const struct sbr_block_meta *meta,
                           size_t payload_len);
/* Waits until the WRITE of a kept block completed (or its connection
 * went), after which the caller may write into it or submit it again.
 * timeout_ms -1 waits for good.  0 (also for a block not in flight), or
 * -ETIMEDOUT. */
int sbr_sender_wait_block(sbr_sender *s, sbr_send_block *b, int timeout_ms);
/* Gives a kept block back: free at once when done, at its completion when
 * still in flight (the caller must not touch it after this call either
 * way).  An acquired block never submitted is abandoned.  Every kept block
 * must be released before sbr_sender_free. */
void sbr_sender_release(sbr_sender *s, sbr_send_block *b);

/* Copying send of a whole frame: fragments over as many blocks as needed
 * (FIRST/LAST flags, frame_offset/frame_size set).  A frame is sent whole or
 * not at all (-EAGAIN, counted once as a drop; -EADDRINUSE as acquire). */
int sbr_sender_send(sbr_sender *s, const struct sbr_block_meta *meta,
                    const void *payload, size_t len);

/* Makes every acquire/send now waiting for a free block return -EINTR
 * (a GStreamer sink's unlock).  Calls that start later wait as usual. */
void sbr_sender_wakeup(sbr_sender *s);

/* While device is interrupted, its acquire/send calls that would wait for
 * a free block (or, over shm, for a receive block to place a frame in)
 * return -EINTR instead: those waiting when it is set and those that start
 * later, until it is cleared.  Other devices' calls wait as usual.  What a
 * GStreamer sink's unlock .. unlock_stop needs: sbr_sender_wakeup alone
 * misses a call that starts just after it, which a producer that checked
 * its own "stop" flag just before can't tell from one that started in
 * time, and which then waits (up to wait_timeout_ms) through the stop. */
void sbr_sender_interrupt_device(sbr_sender *s, uint8_t device,
                                 bool interrupted);

/* Blocks until nothing is queued or in flight (including what other
 * producers submit meanwhile), or timeout_ms. */
int sbr_sender_flush(sbr_sender *s, int timeout_ms);

struct sbr_device_stats {
  uint64_t blocks;   /* blocks sent / delivered */
  uint64_t frames;   /* whole frames (LAST fragments) */
  uint64_t bytes;    /* payload bytes */
  uint64_t drops;    /* sender: frames dropped by backpressure or loss;
                        receiver: frames dropped (gap, bad fragment) */
  uint64_t gaps;     /* receiver: packet numbers skipped */
  uint64_t rejected; /* receiver: blocks that failed validation */
  /* Sender: frames dropped because the receiver paused the device (also
   * counted in drops), total time the device was seen paused, and whether
   * the newest status READ found it paused. */
  uint64_t paused_drops;
  uint64_t paused_ns;
  bool paused;
  /* Sender: frames refused with -EADDRINUSE because the receiver gives
   * the device to another sender (sbr_receiver_refuse_device; also
   * counted in drops), and whether the newest status READ found it so. */
  uint64_t refused_drops;
  bool refused;
  /* Receiver, adaptive poll mode: the device's learned frame period, 0
   * while it is not stable (learning, jittery, or another mode). */
  uint64_t period_ns;
  /* Key units: receiver, requests made for the device
   * (sbr_receiver_request_key_unit that reached a lane); sender, requests
   * seen (on_key_unit calls for it). */
  uint64_t key_units;
};

struct sbr_sender_stats {
  uint64_t blocks, bytes;
  uint64_t sync_reads; /* status-array READs for free blocks (status-byte;
                          forced ones are in pause_reads) */
  uint64_t sync_read_ns_total; /* READ post to completion */
  uint64_t sync_read_ns_max;
  uint64_t held_skipped;  /* held (2) blocks a status READ found: the
                             sender skips them until the next READ */
  uint64_t busy_skipped;  /* not-yet-consumed (1) blocks a READ found */
  uint64_t no_free_waits; /* syncs that found no free block */
  uint64_t drops;         /* all devices */
  uint64_t reconnects;
  uint64_t acks;             /* sliding-window: ACKs received */
  uint64_t wr_posted;        /* work requests posted */
  uint64_t status_writes;    /* status-byte: status WRITEs (one per run of
                                blocks posted together) */
  uint64_t pause_reads;      /* status READs forced by pause_poll_us; not in
                                sync_reads and the other sync figures */
  uint64_t kicks;            /* status-byte: a queued block woke the sender
                                thread from its wait for a completion */
  uint64_t producer_posts;   /* status-byte: submits that posted blocks on
                                the producer's own thread */
  uint64_t direct_blocks;    /* shm: blocks posted with no copy, written in
                                place by their producer */
  uint64_t direct_fallbacks; /* shm: acquired blocks copied into the lane
                                after all: no reserved receive block in
                                time, or reserved in a lane that closed
                                before the submit */
  uint64_t kept_copies;      /* shm: blocks placed directly and then
                                submitted to be kept (submit_keep), whose
                                payload was copied out of the lane into
                                their own memory first */
  uint64_t async_errors;     /* verbs: connections that ended because the
                                device reported their QP or CQ in error,
                                or itself failed (an async event read
                                before the connection closed; the sender
                                reconnects as after any failure) */
  uint64_t key_units_seen;   /* status-byte: key-unit requests a status READ
                                showed (on_key_unit calls), all devices */
  uint64_t span_frames;      /* status-byte: frames larger than a block
                                sent as one spanning block (the receiver
                                gets them contiguous) */
  uint64_t span_fallbacks;   /* ... sent as fragments although the
                                receiver takes spans: no run of free
                                receive blocks long enough was known */
  /* verbs, status-byte: connections ended because work stayed outstanding
   * with no completion for twice the NIC's retry budget (ack_timeout,
   * retry_count), 5 s at least: a receiver gone unheard, or a NIC that
   * dropped a work request (the sender reconnects as after any failure) */
  uint64_t completion_timeouts;
};

/* The stats, written as far as size (the caller's sizeof) reaches. */
int sbr_sender_get_stats_sized(sbr_sender *s, struct sbr_sender_stats *out,
                               size_t size);
int sbr_sender_get_device_stats_sized(sbr_sender *s, uint8_t device,
                                      struct sbr_device_stats *out,
                                      size_t size);
static inline int sbr_sender_get_stats(sbr_sender *s,
                                       struct sbr_sender_stats *out)
{
  return sbr_sender_get_stats_sized(s, out, sizeof *out);
}
static inline int sbr_sender_get_device_stats(sbr_sender *s, uint8_t device,
                                              struct sbr_device_stats *out)
{
  return sbr_sender_get_device_stats_sized(s, device, out, sizeof *out);
}

/* -------------------------------------------------------------- receiver */

typedef struct sbr_receiver sbr_receiver;
typedef struct sbr_block sbr_block;

struct sbr_receiver_config {
  uint32_t struct_size; /* set by sbr_receiver_config_init; see above */
  enum sbr_backend backend;
  enum sbr_mechanism mechanism;
  const char *address;  /* bind address, default "0.0.0.0" */
  uint16_t port;        /* default SBR_DEFAULT_PORT */
  uint32_t block_count; /* per lane, default 16 */
  uint32_t block_size;  /* bytes incl. header+trailer, default 1 MiB */
  uint32_t max_lanes;   /* concurrent senders, default 8 */
  /* Devices accepted; a block for another device is rejected.  Default: all
   * bits set. */
  uint8_t device_mask[SBR_MAX_DEVICES / 8];
  /* Waiting between polls; default SBR_POLL_ADAPTIVE. */
  enum sbr_poll_mode poll_mode;
  /* The back-off schedule (backoff mode; adaptive mode's fallback). */
  struct sbr_backoff_config backoff;
  /* Called for every connection the receiver refuses (after it refused
   * and counted it), on the thread inside sbr_receiver_next / _next_frame,
   * with no library lock held; it must not call sbr_receiver_next,
   * _next_frame or _free.  peer is "ip:port" or "shm:pid=N"; text is
   * sbr_refusal_describe's sentence.  The strings are valid during the
   * call only.  NULL: refusals are only logged and counted. */
  void (*on_refusal)(void *user_data, const char *peer, enum sbr_refusal reason,
                     const char *text);
  void *refusal_user_data;
  /* Called when a sender's lane opens (opened true: it connected and was
   * accepted) and when it closes (false: it disconnected or its
   * connection failed), on the thread inside sbr_receiver_next /
   * _next_frame, with no library lock held, under the same rules as
   * on_refusal.  Not called for the lanes sbr_receiver_free closes: their
   * owner is going away.  lane_id is the lane_id of the sender's frames;
   * peer as for on_refusal.  NULL: lanes are only logged and counted. */
  void (*on_lane)(void *user_data, uint32_t lane_id, const char *peer,
                  bool opened);
  void *lane_user_data;
  /* Who may connect (see sbr_addr_list_parse); NULL or "" = anyone.
   * Checked first, before anything is allocated for the request; a
   * sender not on it is refused with SBR_REFUSAL_NOT_ALLOWED (its
   * sbr_sender_new fails with -EACCES).  Parsed by sbr_receiver_new
   * (-EINVAL naming the bad entry); the string need not outlive it. */
  const char *allowed_senders;
  /* Connection attempts accepted for consideration per second, a token
   * bucket holding one second's worth; the attempts beyond it are refused
   * with SBR_REFUSAL_BUSY (retryable) before anything is allocated.
   * Senders refused by the access list don't use it up.  Default 50;
   * 0 = no bound. */
  uint32_t max_connects_per_s;
  /* The largest frame (bytes, a block's frame_size) this receiver takes.
   * Every block of a larger frame is rejected and counted (rejected, and
   * the device's rejected) when it arrives, so it bounds what one device
   * of one lane can make the receiver allocate to reassemble a frame
   * (sbr_receiver_next_frame copies frames of more than
   * SBR_FRAME_MAX_BLOCKS blocks into one buffer of the announced size):
   * at most max_frame_size per device per lane.  Default 64 MiB (every
   * 4K format up to 8 bytes a pixel); 0 = the default. */
  uint32_t max_frame_size;
  /* Liveness of a quiet lane (verbs, status-byte: a sender may die
   * without a word -- power loss, a cable cut -- and this receiver posts
   * nothing that would notice).  A lane nothing landed in for this long
   * is probed with a zero-length RDMA WRITE; when the NIC gives up
   * retrying it, the lane closes as if the sender had left (over iWARP,
   * where a WRITE completes once TCP has it: a READ of a few bytes the
   * sender offers, unanswered for the retry budget ack_timeout gives on
   * RoCE, at least 2 s).  A new lane
   * from the same peer address also closes at once a lane of that
   * address whose probe has gone unanswered for 250 ms (a rebooted sender
   * takes its devices back; an idle sender on the same host answers its
   * probe and keeps its lane).  Default 1000;
   * 0 = never probe. */
  uint32_t probe_after_ms;
  /* The QP's local ACK timeout exponent (verbs): each try waits 4.096 us
   * x 2^ack_timeout, and the NIC tries retry count + 1 times (the
   * sender's retry_count, 6 by default) before it gives up.  Default 15: 134 ms
   * a try, so a dead sender's lane closes about probe_after_ms + 0.9 s after
   * its last block. 0 = rdma_cm's own (on RoCE, from the path's packet
   * lifetime: seconds a try). */
  uint8_t ack_timeout;
  /* Fabric settings of the lanes (verbs; as sbr_sender_config's).  The
   * IP TOS byte, 0-255, -1 (default) = rdma_cm's own.  On RoCE the
   * lane's QP takes the traffic class of the sender's connect request,
   * so the sender's tos is the one that counts there. */
  int tos;
  /* Completion vector of each lane's CQs: -1 (default) = lane id modulo
   * the device's vectors; N = vector N modulo their count. */
  int comp_vector;
  /* NUMA node of the lane memory (blocks and status), chosen before
   * anything touches it (a preference: a full node falls back to
   * another).  -1 (default) = the RDMA device's node (none on a host
   * without NUMA: then no binding); -2 = no binding (pages land where
   * they are first touched, the registering thread's node); N = node N
   * (shm lanes too). */
  int numa_node;
  /* Transparent huge pages for lanes of 2 MiB or more
   * (madvise(MADV_HUGEPAGE); both back ends): fewer translations for the
   * NIC and the CPU.  Taken where the host's THP setting allows it on
   * request (enabled: madvise or always; shm lanes: shmem_enabled
   * advise).  Default true. */
  bool huge_pages;
};
/* Fills cfg, size bytes long, with the defaults above and struct_size. */
void sbr_receiver_config_init_sized(struct sbr_receiver_config *cfg,
                                    size_t size);
static inline void sbr_receiver_config_init(struct sbr_receiver_config *cfg)
{
  sbr_receiver_config_init_sized(cfg, sizeof *cfg);
}

/* Starts listening, and the accept thread that accepts senders from now
 * until sbr_receiver_free, whether or not a thread is inside
 * sbr_receiver_next / _next_frame: that thread takes a new lane in (and
 * notices a departure) at its next look.  A sender connecting to a
 * receiver nobody reads is accepted and fills its lane, then waits for
 * free blocks as backpressure says. */
int sbr_receiver_new(const struct sbr_receiver_config *cfg, sbr_receiver **out,
                     char *errbuf, size_t errlen);
/* Stops listening and disconnects senders.  Blocks still held by the caller
 * stay valid until released. */
void sbr_receiver_free(sbr_receiver *r);

/* What a delivered block carries. */
struct sbr_block_info {
  uint32_t lane_id; /* which sender connection */
  uint16_t epoch;
  uint8_t device, kind, flags;
  uint16_t packet; /* per-device packet number, wraps at 65536 */
  uint64_t seq;    /* per-connection block sequence number */
  uint64_t pts, dts, duration, capture_time;
  uint32_t frame_offset, frame_size;
  const uint8_t *payload;
  uint32_t payload_len;
  uint32_t index; /* receive block index within the lane */
};

/* Waits up to timeout_ms (-1 forever, 0 poll) for the next block of any
 * device, in per-device packet order.  0 and *out on success; -ETIMEDOUT;
 * -EINTR after sbr_receiver_wakeup.  The block's status stays 1 until it is
 * released (0) or held (2). */
int sbr_receiver_next(sbr_receiver *r, int timeout_ms, sbr_block **out);
const struct sbr_block_info *sbr_block_get_info(const sbr_block *b);
/* Marks the block held (status 2): the sender skips it until release. */
void sbr_block_hold(sbr_block *b);
/* Gives the block back (status 0, release store). */
void sbr_block_release(sbr_block *b);
/* How many of its lane's receive blocks the block occupies until it is
 * released: 1, or k for a spanning block (a frame larger than one block
 * laid over k consecutive blocks, its payload contiguous: a receiver and
 * a status-byte sender of this library agree on them at connect;
 * docs/protocol.md, "Spanning blocks").  For budgets that count the
 * lane's blocks.  Any thread while the block is the caller's. */
uint32_t sbr_block_lane_blocks(const sbr_block *b);

/* A whole frame: all fragments of one device's frame, in order.  When the
 * frame needs more blocks than max_frame_blocks (or the lane could starve),
 * the fragments are copied into one heap buffer and released at once. */
#define SBR_FRAME_MAX_BLOCKS 32
struct sbr_frame {
  struct sbr_block_info info; /* of the first fragment; payload/len = whole
                                 frame when copied, else first fragment */
  uint32_t size;              /* total payload bytes */
  uint32_t n_blocks;          /* 0 when copied */
  sbr_block *blocks[SBR_FRAME_MAX_BLOCKS];
  uint8_t *copy; /* heap copy (free with sbr_frame_release) */
};
int sbr_receiver_next_frame(sbr_receiver *r, int timeout_ms,
                            struct sbr_frame *out);
void sbr_frame_release(struct sbr_frame *f);

/* Wakes a thread blocked in next/next_frame with -EINTR (once; a wakeup
 * with nobody waiting makes the next call return -EINTR at once). */
void sbr_receiver_wakeup(sbr_receiver *r);

/* Per-device backpressure, carried one-sidedly: sets (or clears) device's
 * bit in the pause bitmap of every open lane and of lanes opened later.
 * Senders see it with their next status READ (within pause_poll_us while
 * they send, see sbr_sender_config) and then refuse that device's
 * acquire/send per their backpressure policy; blocks already queued in a
 * sender still arrive, as may what it posts until that READ.  Nothing is
 * sent: the bitmap sits after the status bytes the sender READs.  Any
 * thread, any time before sbr_receiver_free.  0, or -ENOTSUP for the
 * sliding-window mechanism (it has no region the sender reads). */
int sbr_receiver_pause_device(sbr_receiver *r, uint8_t device, bool paused);
/* Is device paused by sbr_receiver_pause_device?  Any thread. */
bool sbr_receiver_device_paused(sbr_receiver *r, uint8_t device);

/* Device ownership, carried one-sidedly like pauses: sets (or clears)
 * device's bit in the refused bitmap of one lane (lane_id from a block's
 * info), or of every open lane with SBR_LANE_ALL.  That sender sees it
 * with its next status READ (within pause_poll_us while it sends or its
 * producers are being refused, see sbr_sender_config) and then fails the
 * device's acquire/send with -EADDRINUSE, at once, until a READ shows the
 * bit clear; other devices are not affected.  For an application that
 * gives each device to one sender at a time: refuse the others' lanes
 * while the owner lives, clear when it is gone.  Unlike pauses the bit
 * belongs to the lane: lanes opened later start clear.  Senders older
 * than the bitmap don't see it (their frames keep coming).  Any thread.
 * 0; -ENOENT when the lane is not open (SBR_LANE_ALL: never); -ENOTSUP
 * for the sliding-window mechanism. */
int sbr_receiver_refuse_device(sbr_receiver *r, uint32_t lane_id,
                               uint8_t device, bool refused);

/* Asks the sender of one lane (lane_id from a block's info), or of every
 * open lane with SBR_LANE_ALL, for a key unit of device, one-sidedly:
 * bumps device's request counter in the lane's key-unit area, which the
 * sender's next status READ brings (within pause_poll_us plus a round
 * trip while it sends); it then calls its on_key_unit once (see
 * sbr_sender_config).  A counter, not a flag: nothing is cleared, so a
 * request is neither lost nor repeated; requests made before the sender's
 * next READ are answered by one key unit.  all_headers: the key unit
 * should come with the stream's headers (kept for every request of the
 * device within a second after one that asked).  No reply comes: the key
 * frame itself is the answer, and a sender older than the feature never
 * sees the request (ask again after a while if none comes).  Any thread.
 * 0; -ENOENT when no such lane is open (SBR_LANE_ALL: none at all);
 * -ENOTSUP for the sliding-window mechanism (its sender reads nothing). */
int sbr_receiver_request_key_unit(sbr_receiver *r, uint32_t lane_id,
                                  uint8_t device, bool all_headers);

/* Adaptive poll mode: device's frame period is about period_ns (e.g. from
 * its caps' framerate); 0 withdraws the hint.  The hint stands for the
 * first intervals, so the receiver predicts from the second frame on;
 * arrivals keep refining it and overrule it when they disagree.  Ignored
 * by the other modes.  Any thread.  0, or -EINVAL. */
int sbr_receiver_set_device_period(sbr_receiver *r, uint8_t device,
                                   uint64_t period_ns);

/* Is the lane (a block's lane_id) still open, and who sent it?  0 and the
 * sender's address ("ip:port", "shm:pid") in peer; -ENOENT once the lane
 * closed (its sender left or died, and what it had landed was delivered
 * first).  Any thread. */
int sbr_receiver_lane_peer(sbr_receiver *r, uint32_t lane_id, char *peer,
                           size_t len);

struct sbr_receiver_stats {
  uint64_t blocks, bytes;
  uint64_t rejected; /* failed validation, dropped, counted */
  uint64_t lanes_opened, lanes_closed;
  uint32_t lanes_active;
  /* Lanes opened whose rkeys are type-2 memory windows bound to the
   * lane's QP (verbs, a device that has them); the others' are memory
   * regions (docs/protocol.md, "Threat model"). */
  uint64_t lanes_windowed;
  /* Lanes closed because their sender stopped answering (a probe of a
   * quiet lane failed, probe_after_ms) or a new lane from the same
   * address replaced a quiet one. */
  uint64_t lanes_silent_closed;
  uint64_t blocks_held;    /* currently held by the application */
  uint64_t recv_wr_posted; /* all lanes; 0 for status-byte (the point) */
  uint64_t frames_copied;  /* frames reassembled by copying */
  uint64_t acks_sent;      /* sliding-window */
  /* Waiting, every poll mode: timed sleeps (each a wake-up), the time
   * spent in them, and the time sbr_receiver_next spent awake (scanning,
   * spinning, delivering; roughly the receiver's CPU in the library). */
  uint64_t poll_sleeps;
  uint64_t poll_sleep_ns;
  uint64_t poll_busy_ns;
  /* Adaptive mode, one per frame (first fragment) found: inside its
   * device's predicted window while polling; outside it (early, late, or
   * already waiting when a sleep ended) although the device's period was
   * stable; from a device without a stable period (learning, jittery). */
  uint64_t frames_predicted;
  uint64_t frames_missed;
  uint64_t frames_unpredicted;
  uint32_t periodic_devices; /* devices whose period is stable now */
  uint64_t refused;          /* connections refused, any reason */
  /* The same, by reason (enum sbr_refusal as index): e.g.
   * refused_by_reason[SBR_REFUSAL_NOT_ALLOWED], [SBR_REFUSAL_BUSY]. */
  uint64_t refused_by_reason[SBR_REFUSAL_SLOTS];
  /* The NIC's count of remote access errors (a peer's WRITE or READ with
   * a bad rkey, address or right, refused by the NIC before the receiver
   * saw anything), summed over the RDMA ports this receiver's lanes have
   * used: the ports' own counters, all processes together, since the
   * driver loaded.  SBR_COUNTER_ABSENT when no such port has that counter
   * (Soft-RoCE has none; shm has no NIC) or no lane opened yet. */
  uint64_t nic_remote_access_errors;
  /* The placement-order backstop (docs/protocol.md, "Placement order"):
   * blocks whose status said "data" while the block still held an earlier
   * block of the lane (sequence number behind), left alone and looked at
   * again; and those still behind after the bound (1 s), dropped (also in
   * rejected).  Nonzero means status bytes were placed before their data:
   * iWARP, relaxed ordering or adaptive routing, or a peer replaying. */
  uint64_t stale_seen;
  uint64_t stale_dropped;
  /* The waits between scans (poll_sleeps, less those in the listener's
   * poll while no sender is connected), by how they ended: a status byte
   * written by a sender on this host ended the sleep (shm, status-byte:
   * the sender wakes a receiver that announced its sleep), or the sleep
   * ran to its end (always so over verbs, where nothing can wake a
   * passive receiver). */
  uint64_t poll_sleeps_woken;
  uint64_t poll_sleeps_timed_out;
  /* Lanes closed because their RDMA device reported their QP or CQ in
   * error, or itself failed (an async event: QP_FATAL, QP_REQ_ERR,
   * QP_ACCESS_ERR, CQ_ERR, DEVICE_FATAL; docs/hardware.md).  Also in
   * lanes_closed.  0 over shm. */
  uint64_t async_errors;
  /* sbr_receiver_request_key_unit calls that reached a lane. */
  uint64_t key_units_requested;
};
/* A counter the platform doesn't have. */
#define SBR_COUNTER_ABSENT UINT64_MAX
/* The stats, written as far as size (the caller's sizeof) reaches. */
int sbr_receiver_get_stats_sized(sbr_receiver *r,
                                 struct sbr_receiver_stats *out, size_t size);
int sbr_receiver_get_device_stats_sized(sbr_receiver *r, uint8_t device,
                                        struct sbr_device_stats *out,
                                        size_t size);
static inline int sbr_receiver_get_stats(sbr_receiver *r,
                                         struct sbr_receiver_stats *out)
{
  return sbr_receiver_get_stats_sized(r, out, sizeof *out);
}
static inline int sbr_receiver_get_device_stats(sbr_receiver *r, uint8_t device,
                                                struct sbr_device_stats *out)
{
  return sbr_receiver_get_device_stats_sized(r, device, out, sizeof *out);
}

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* SBR_H */
