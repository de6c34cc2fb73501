/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz-reassembly.c - libFuzzer target: the receiver's real path from a
 * status byte to a delivered block or frame (lib/engine/receiver.c: scan,
 * validation, ordering, per-device tracking, fragment reassembly zero-copy
 * and by copy, release and hold), driven by a hostile sender.
 *
 * The receiver runs over a back end of this file, with no accept thread
 * (sbr__receiver_new_without_accept_thread: the back end is not
 * thread-safe, so the receive thread reads its events), whose lanes are
 * plain heap memory: the input is a program of steps that
 * connect senders, write forged blocks, garbage and status bytes anywhere in
 * their lanes at any time (even into blocks the application holds, as a
 * peer with the rkey can), and make the application take blocks and frames,
 * keep, hold and release them, pause devices and disconnect senders.
 *
 * Checked on every delivery: a block's payload lies inside its own lane
 * block, or a spanning block's inside its k blocks, which no other block
 * the application holds overlaps; a frame's blocks are contiguous fragments
 * that add up to its size (and to frame_size when fragmented); a copied frame
 * is frame_size bytes. Every payload byte is read, so ASan sees any stale or
 * out-of-bounds pointer.  After the receiver is freed and everything released,
 * every lane the back end handed out must have been closed (no lane leaks a
 * reference).
 */
#include <errno.h>

#include "fuzz-common.h"
#include "engine/receiver-internal.h"

#define MAX_CONNS 4
#define MAX_KEPT 12
#define BLOCK_SIZE 256
/* The receiver's max_frame_size here: frame sizes come as u16. */
#define MAX_FRAME_SIZE 40000u

/* ------------------------------------------------ the in-memory back end */

struct sbr__conn {
  struct sbr__lane_desc desc;
  uint8_t *blocks;
  uint8_t *status;
  size_t status_len;
  bool disconnected;
  uint64_t next_seq; /* the forging sender's sequence counter */
};

struct sbr__listener {
  int connects; /* connect requests to report */
  uint8_t mech; /* mechanism they ask for */
  struct sbr__conn *gone[MAX_CONNS];
  int n_gone; /* disconnects to report */
};

static struct sbr__conn *conns[MAX_CONNS]; /* open, in accept order */
static int n_conns;
static uint32_t next_key = 1;

static int fz_listen(const char *addr, uint16_t port,
                     struct sbr__listener **out, char *errbuf, size_t errlen)
{
  (void)addr;
  (void)port;
  (void)errbuf;
  (void)errlen;
  *out = calloc(1, sizeof **out);
  return *out ? 0 : -ENOMEM;
}

static int fz_get_event(struct sbr__listener *l, int timeout_ms,
                        struct sbr__listen_event *ev)
{
  (void)timeout_ms;
  if (l->n_gone) {
    ev->type = SBR__EV_DISCONNECTED;
    ev->conn = l->gone[--l->n_gone];
  } else if (l->connects) {
    l->connects--;
    ev->type = SBR__EV_CONNECT_REQUEST;
    ev->req.mechanism = l->mech;
    snprintf(ev->req.peer, sizeof ev->req.peer, "fuzz:%d", l->connects);
  }
  return 0;
}

static int fz_accept(struct sbr__listener *l, struct sbr__conn_request *req,
                     const struct sbr__queue_caps *caps,
                     struct sbr__lane_desc *lane, struct sbr__conn **out,
                     struct sbr__lane_mem *mem)
{
  (void)l;
  (void)req;
  (void)caps;
  if (n_conns == MAX_CONNS)
    return -EBUSY;
  struct sbr__conn *c = calloc(1, sizeof *c);
  FUZZ_CHECK(c);
  lane->blocks_rkey = next_key++;
  lane->status_rkey = next_key++;
  c->desc = *lane;
  c->status_len = sbr__lane_status_len(lane);
  c->blocks = calloc(lane->block_count, lane->block_size);
  c->status = calloc(1, c->status_len);
  FUZZ_CHECK(c->blocks && c->status);
  mem->blocks = c->blocks;
  mem->status = c->status;
  conns[n_conns++] = c;
  *out = c;
  return 0;
}

static void fz_reject(struct sbr__listener *l, struct sbr__conn_request *req,
                      const struct sbr__refusal *why)
{
  (void)l;
  (void)req;
  FUZZ_CHECK(why && why->reason != 0);
}

static void fz_close_listener(struct sbr__listener *l)
{
  free(l);
}

static int fz_poll_cq(struct sbr__conn *c, struct sbr__wc *wc, int max)
{
  (void)c;
  (void)wc;
  (void)max;
  return 0;
}

static void fz_disconnect(struct sbr__conn *c)
{
  c->disconnected = true;
}

static void fz_close(struct sbr__conn *c)
{
  int i = 0;
  while (i < n_conns && conns[i] != c)
    i++;
  FUZZ_CHECK(i < n_conns); /* closed once, and only what was accepted */
  conns[i] = conns[--n_conns];
  free(c->blocks);
  free(c->status);
  free(c);
}

static uint64_t fz_posted_recv_count(struct sbr__conn *c)
{
  (void)c;
  return 0;
}

static const struct sbr__transport_ops fz_ops = {
    .name = "fuzz",
    .listen = fz_listen,
    .get_event = fz_get_event,
    .accept = fz_accept,
    .reject = fz_reject,
    .close_listener = fz_close_listener,
    .poll_cq = fz_poll_cq,
    .disconnect = fz_disconnect,
    .close = fz_close,
    .posted_recv_count = fz_posted_recv_count,
};

/* ------------------------------------------------------- the application */

struct kept {
  bool is_frame;
  struct sbr_frame frame; /* is_frame */
  sbr_block *block;       /* else */
};

static struct kept kept[MAX_KEPT];
static int n_kept;
static volatile uint8_t sink;

static struct sbr__conn *conn_of(const uint8_t *payload)
{
  for (int i = 0; i < n_conns; i++) {
    struct sbr__conn *c = conns[i];
    if (payload >= c->blocks &&
        payload < c->blocks + (size_t)c->desc.block_count * c->desc.block_size)
      return c;
  }
  return NULL;
}

static void touch(const uint8_t *p, size_t n)
{
  uint8_t x = 0;
  for (size_t i = 0; i < n; i++)
    x ^= p[i];
  sink = x;
}

/* The lane blocks [*first, *first + *n) block b holds, in lane *c. */
static void block_range(const sbr_block *b, struct sbr__conn **c,
                        uint32_t *first, uint32_t *n)
{
  const struct sbr_block_info *bi = sbr_block_get_info(b);
  *c = conn_of(bi->payload);
  *first = bi->index;
  *n = sbr_block_lane_blocks(b);
}

/* Does any block the application keeps overlap b's lane blocks?  (A
 * span's continuation blocks are its own until it is released.) */
static bool overlaps_kept(const sbr_block *b)
{
  struct sbr__conn *c, *kc;
  uint32_t first, n, kf, kn;
  block_range(b, &c, &first, &n);
  for (int i = 0; i < n_kept; i++) {
    const struct kept *k = &kept[i];
    uint32_t nb = k->is_frame ? k->frame.n_blocks : 1;
    for (uint32_t j = 0; j < nb; j++) {
      const sbr_block *o = k->is_frame ? k->frame.blocks[j] : k->block;
      if (o == b)
        continue;
      block_range(o, &kc, &kf, &kn);
      if (kc == c && kf < first + n && first < kf + kn)
        return true;
    }
  }
  return false;
}

/* A delivered block's payload lies inside its lane block (a spanning
 * block's inside its k blocks, within the lane), after the header. */
static void check_block(const sbr_block *b)
{
  const struct sbr_block_info *bi = sbr_block_get_info(b);
  struct sbr__conn *c = conn_of(bi->payload);
  FUZZ_CHECK(c);
  uint32_t k = sbr_block_lane_blocks(b);
  FUZZ_CHECK(k >= 1);
  FUZZ_CHECK(bi->index < c->desc.block_count);
  FUZZ_CHECK(k <= c->desc.block_count - bi->index);
  const uint8_t *start = c->blocks + (size_t)bi->index * c->desc.block_size;
  FUZZ_CHECK(bi->payload == start + SBR__HEADER_SIZE);
  FUZZ_CHECK((size_t)bi->payload_len + SBR__BLOCK_OVERHEAD <=
             (size_t)k * c->desc.block_size);
  if (k > 1)
    FUZZ_CHECK(bi->kind == SBR_KIND_DATA && bi->frame_offset == 0 &&
               bi->frame_size == bi->payload_len);
  FUZZ_CHECK(bi->kind >= SBR_KIND_DATA && bi->kind <= SBR_KIND_EVENT);
  FUZZ_CHECK(!overlaps_kept(b));
  touch(bi->payload, bi->payload_len);
}

static void check_frame(const struct sbr_frame *f)
{
  /* Nothing larger than max_frame_size gets through, copied or not. */
  FUZZ_CHECK(f->info.kind != SBR_KIND_DATA ||
             f->info.frame_size <= MAX_FRAME_SIZE);
  if (f->copy) {
    FUZZ_CHECK(f->n_blocks == 0);
    FUZZ_CHECK(f->info.payload == f->copy);
    FUZZ_CHECK(f->info.payload_len == f->size);
    FUZZ_CHECK(f->size == f->info.frame_size);
    FUZZ_CHECK(f->info.flags & SBR_FLAG_LAST);
    touch(f->copy, f->size);
    return;
  }
  FUZZ_CHECK(f->n_blocks >= 1 && f->n_blocks <= SBR_FRAME_MAX_BLOCKS);
  uint64_t total = 0;
  for (uint32_t i = 0; i < f->n_blocks; i++) {
    const struct sbr_block_info *bi = sbr_block_get_info(f->blocks[i]);
    check_block(f->blocks[i]);
    FUZZ_CHECK(bi->device == f->info.device);
    if (f->n_blocks > 1) {
      FUZZ_CHECK(bi->kind == SBR_KIND_DATA);
      FUZZ_CHECK(bi->frame_offset == total);
      FUZZ_CHECK(bi->frame_size == f->info.frame_size);
    }
    total += bi->payload_len;
  }
  FUZZ_CHECK(total == f->size);
  if (f->n_blocks > 1)
    FUZZ_CHECK(f->size == f->info.frame_size);
}

static void keep_or_release(struct kept *k, bool keep)
{
  if (keep && n_kept < MAX_KEPT) {
    kept[n_kept++] = *k;
    return;
  }
  if (k->is_frame)
    sbr_frame_release(&k->frame);
  else
    sbr_block_release(k->block);
}

static void release_kept(int i)
{
  struct kept k = kept[i];
  kept[i] = kept[--n_kept];
  keep_or_release(&k, false);
}

/* ----------------------------------------------------------- the program */

enum op {
  OP_CONNECT,
  OP_FORGE,  /* a well-formed block, fields from the input */
  OP_RAW,    /* bytes anywhere in the lane's blocks */
  OP_STATUS, /* any value into a status byte */
  OP_NEXT_FRAME,
  OP_NEXT_BLOCK,
  OP_RELEASE,
  OP_HOLD,
  OP_DISCONNECT,
  OP_PAUSE,
  OP_COUNT,
};

static struct sbr__conn *pick_conn(struct fuzz_in *in)
{
  uint8_t i = fuzz_u8(in);
  return n_conns ? conns[i % n_conns] : NULL;
}

static void op_forge(struct fuzz_in *in)
{
  struct sbr__conn *c = pick_conn(in);
  uint32_t index = fuzz_u16(in);
  uint8_t how = fuzz_u8(in);
  struct sbr__header h = {
      .kind = (uint8_t)(fuzz_u8(in) % 4),
      .device = (uint8_t)(fuzz_u8(in) % 4),
      .flags = (uint8_t)(fuzz_u8(in) & 0xf),
      .packet = fuzz_u16(in),
      .payload_len = fuzz_u8(in),
      .pts = fuzz_u64(in),
      .frame_offset = fuzz_u16(in),
      .frame_size = fuzz_u16(in),
  };
  if (!c)
    return;
  index %= c->desc.block_count;
  /* Mostly what an honest sender would number; sometimes anything. */
  h.epoch = how & 1 ? fuzz_u16(in) : c->desc.epoch;
  h.seq = how & 2 ? fuzz_u64(in) : c->next_seq + (int8_t)fuzz_u8(in);
  if (!(how & 2))
    c->next_seq = h.seq + 1;
  if (how & 4)
    h.device = fuzz_u8(in);
  uint8_t *block = c->blocks + (size_t)index * c->desc.block_size;
  uint32_t k = 1;
  if (how & 16) {
    /* A spanning block: a whole frame over up to the lane's end and a
     * block further (refused), its continuation bytes SPAN as a sender
     * writes them, or (how & 32) left as they are: forged or torn. */
    h.kind = SBR_KIND_DATA;
    h.flags |= SBR_FLAG_FIRST | SBR_FLAG_LAST | SBR__FLAG_SPAN;
    h.payload_len =
        fuzz_u16(in) % ((c->desc.block_count - index + 1) * c->desc.block_size);
    h.frame_offset = 0;
    h.frame_size = h.payload_len;
    k = sbr__span_blocks(c->desc.block_size, h.payload_len);
    if (sbr__block_encode_span(block, c->desc.block_size,
                               c->desc.block_count - index, &h) == 0)
      return;
    if (!(how & 32))
      memset(c->status + index + 1, SBR__STATUS_SPAN, k - 1);
  } else if (sbr__block_encode(block, c->desc.block_size, &h) == 0) {
    return;
  }
  fuzz_bytes(in, block + SBR__HEADER_SIZE, h.payload_len);
  /* Status 1 after the block, as the chained status WRITE does; or not,
   * and the block waits for a later status step. */
  if (!(how & 8))
    c->status[index] = SBR__STATUS_DATA;
}

static void op_raw(struct fuzz_in *in)
{
  struct sbr__conn *c = pick_conn(in);
  uint32_t off = fuzz_u16(in);
  uint8_t len = fuzz_u8(in);
  if (!c)
    return;
  size_t total = (size_t)c->desc.block_count * c->desc.block_size;
  off %= total;
  if (len > total - off)
    len = (uint8_t)(total - off);
  fuzz_bytes(in, c->blocks + off, len);
}

static void op_status(struct fuzz_in *in)
{
  struct sbr__conn *c = pick_conn(in);
  uint16_t index = fuzz_u16(in);
  uint8_t value = fuzz_u8(in);
  if (!c)
    return;
  /* The sender may WRITE the status bytes, never the pause bitmap. */
  c->status[index % c->desc.block_count] = value;
}

static void op_next(sbr_receiver *r, struct fuzz_in *in, bool frame)
{
  bool keep = fuzz_u8(in) & 1;
  /* Listener events now rather than when 10 ms have passed: a run must
   * not depend on the clock. */
  r->last_event_check_ns = 0;
  struct kept k = {.is_frame = frame};
  int ret = frame ? sbr_receiver_next_frame(r, 0, &k.frame)
                  : sbr_receiver_next(r, 0, &k.block);
  FUZZ_CHECK(ret == 0 || ret == -ETIMEDOUT || ret == -EINTR);
  if (ret < 0)
    return;
  if (frame)
    check_frame(&k.frame);
  else
    check_block(k.block);
  keep_or_release(&k, keep);
}

static void op_hold(struct fuzz_in *in)
{
  uint8_t i = fuzz_u8(in);
  if (!n_kept)
    return;
  struct kept *k = &kept[i % n_kept];
  if (k->is_frame) {
    for (uint32_t b = 0; b < k->frame.n_blocks; b++)
      sbr_block_hold(k->frame.blocks[b]);
  } else {
    sbr_block_hold(k->block);
  }
}

static void op_disconnect(struct sbr__listener *l, struct fuzz_in *in)
{
  struct sbr__conn *c = pick_conn(in);
  if (!c || c->disconnected || l->n_gone == MAX_CONNS)
    return;
  for (int i = 0; i < l->n_gone; i++)
    if (l->gone[i] == c)
      return;
  l->gone[l->n_gone++] = c;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc;
  (void)argv;
  fuzz_log_init();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct fuzz_in in = {data, size};
  struct sbr_receiver_config cfg;
  sbr_receiver_config_init(&cfg);
  uint8_t setup = fuzz_u8(&in);
  cfg.block_count = 2 + setup % 8;
  cfg.block_size = BLOCK_SIZE;
  cfg.max_lanes = 1 + (setup >> 3) % 3;
  if (setup & 0x80)
    cfg.device_mask[0] = (uint8_t)~0x02; /* device 1 not accepted */
  /* Within the u16 frame sizes the input gives, so both sides of the
   * bound are reached; check_frame holds every frame to it. */
  cfg.max_frame_size = MAX_FRAME_SIZE;
  sbr_receiver *r;
  char err[128];
  FUZZ_CHECK(sbr__receiver_new_without_accept_thread(&cfg, &fz_ops, &r, err,
                                                     sizeof err) == 0);
  struct sbr__listener *l = r->listener;

  for (int steps = 0; in.left && steps < 400; steps++) {
    switch (fuzz_u8(&in) % OP_COUNT) {
    case OP_CONNECT: {
      uint8_t m = fuzz_u8(&in);
      l->connects++;
      l->mech = m == 0xff ? SBR_MECH_SLIDING_WINDOW : SBR_MECH_STATUS_BYTE;
      break;
    }
    case OP_FORGE:
      op_forge(&in);
      break;
    case OP_RAW:
      op_raw(&in);
      break;
    case OP_STATUS:
      op_status(&in);
      break;
    case OP_NEXT_FRAME:
      op_next(r, &in, true);
      break;
    case OP_NEXT_BLOCK:
      op_next(r, &in, false);
      break;
    case OP_RELEASE: {
      uint8_t i = fuzz_u8(&in);
      if (n_kept)
        release_kept(i % n_kept);
      break;
    }
    case OP_HOLD:
      op_hold(&in);
      break;
    case OP_DISCONNECT:
      op_disconnect(l, &in);
      break;
    case OP_PAUSE: {
      uint8_t d = fuzz_u8(&in);
      FUZZ_CHECK(sbr_receiver_pause_device(r, d % 4, d & 0x80) == 0);
      break;
    }
    }
  }

  struct sbr_receiver_stats st;
  sbr_receiver_get_stats(r, &st);
  uint64_t held = 0;
  for (int i = 0; i < n_kept; i++)
    held += kept[i].is_frame ? kept[i].frame.n_blocks : 1;
  FUZZ_CHECK(st.blocks_held >= held);
  FUZZ_CHECK(st.lanes_active <= (uint32_t)n_conns);

  /* Free the receiver with blocks still out, then release them: the lanes
   * must outlive it and go with the last release. */
  sbr_receiver_free(r);
  while (n_kept)
    release_kept(n_kept - 1);
  FUZZ_CHECK(n_conns == 0);
  return 0;
}
