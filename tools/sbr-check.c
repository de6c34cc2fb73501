/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sbr-check.c - `sbr-perf check [PEER]`, the host check to run before the
 * first stream on real NICs (README, "Before the first run on real NICs").
 *
 * Every finding is one line on stdout, "OK", "WARN" or "FAIL", what was
 * found, and for WARN and FAIL the fix.  What is looked at, in order:
 *
 *   - that there is RDMA at all (else: shm is the way, exit status 3);
 *   - per device: its transport (InfiniBand, RoCE v1/v2, iWARP) and
 *     whether it opens (/dev/infiniband permissions);
 *   - per port: state (ACTIVE), active MTU against the netdev's MTU (RoCE)
 *     or the port's own maximum (IB), the RoCE v2 GIDs that carry an IP
 *     address (rdma_cm over RoCE v2 needs one for the address it uses);
 *   - per device: type-2 memory windows (allocated, not only advertised:
 *     bnxt_re advertises them and can't), and whether an RC QP with the
 *     64 inline bytes the engines ask for can be created;
 *   - per device: its NUMA node and completion vectors (where a
 *     receiver's lanes' memory and interrupts go: sbr.h's numa_node and
 *     comp_vector);
 *   - transparent huge pages: whether the kernel takes the lanes'
 *     madvise(MADV_HUGEPAGE) (huge_pages);
 *   - RLIMIT_MEMLOCK against a lane (blocks x block size), unless the
 *     process has CAP_IPC_LOCK, which lifts the limit for registrations;
 *   - rdma_cm: present, and with PEER, whether the address and route to it
 *     resolve, through which device and from which local address.
 *
 * The device checks use rdma-core directly, not libsbr: they are about
 * the host, and must run where libsbr would refuse to start.  Nothing here
 * connects to the peer or sends a packet beyond rdma_cm's address and
 * route resolution (ARP/ND, or the SA on InfiniBand).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "sbr-check.h"

#ifdef SBR_CHECK_VERBS
#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#endif

/* What the engines ask for today (lib/engine/sender.c, receiver.c). */
#define CHECK_INLINE 64
#define CHECK_DEFAULT_BLOCKS 16
#define CHECK_DEFAULT_BLOCK_SIZE (1u << 20)
#define CHECK_DEFAULT_LANES 8 /* sbr_receiver_config's max_lanes */
/* CAP_IPC_LOCK's bit in /proc/self/status CapEff (linux/capability.h). */
#define CHECK_CAP_IPC_LOCK 14
/* rdma_cm address and route resolution, each. */
#define CHECK_RESOLVE_MS 2000

struct check_opts {
  const char *peer;    /* resolve this with rdma_cm; NULL: don't */
  uint64_t block_size; /* a lane's geometry, for memlock */
  uint32_t blocks;
  uint32_t lanes;
};

enum level { LVL_OK, LVL_WARN, LVL_FAIL };
static unsigned n_fail, n_warn;

static void __attribute__((format(printf, 2, 3)))
report(enum level lvl, const char *fmt, ...)
{
  static const char *const tag[] = {"OK  ", "WARN", "FAIL"};
  va_list ap;
  printf("%s ", tag[lvl]);
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  putchar('\n');
  if (lvl == LVL_FAIL)
    n_fail++;
  else if (lvl == LVL_WARN)
    n_warn++;
}

/* "16 MiB", "8 MiB", "1536 KiB": exact, in the largest unit that is. */
static const char *bytes_str(uint64_t v, char *buf, size_t len)
{
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  unsigned u = 0;
  while (u < 4 && v >= 1024 && v % 1024 == 0) {
    v /= 1024;
    u++;
  }
  snprintf(buf, len, "%" PRIu64 " %s", v, unit[u]);
  return buf;
}

/* ------------------------------------------------------------ memlock */

static bool has_cap_ipc_lock(void)
{
  FILE *f = fopen("/proc/self/status", "r");
  if (!f)
    return false;
  char line[256];
  unsigned long long eff = 0;
  bool found = false;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "CapEff: %llx", &eff) == 1) {
      found = true;
      break;
    }
  fclose(f);
  return found && (eff >> CHECK_CAP_IPC_LOCK) & 1;
}

static void check_memlock(const struct check_opts *o)
{
  /* The status region (N bytes, padding, two bitmaps) is one page. */
  uint64_t lane = (uint64_t)o->blocks * o->block_size + 4096;
  uint64_t all = lane * o->lanes;
  char a[32], b[32], c[32];
  struct rlimit rl;
  if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0) {
    report(LVL_WARN,
           "memlock: getrlimit failed (%s); fix: none needed if "
           "`ulimit -l` says unlimited",
           strerror(errno));
    return;
  }
  if (has_cap_ipc_lock()) {
    report(LVL_OK,
           "memlock: not limited for this process (it has CAP_IPC_LOCK, "
           "e.g. root); without it the limit would be %s",
           rl.rlim_cur == RLIM_INFINITY ? "unlimited"
                                        : bytes_str(rl.rlim_cur, a, sizeof a));
    return;
  }
  if (rl.rlim_cur == RLIM_INFINITY) {
    report(LVL_OK, "memlock: unlimited");
    return;
  }
  static const char fix[] =
      "fix: `ulimit -l unlimited` in the shell that starts it (raise the "
      "hard limit in /etc/security/limits.conf: `USER - memlock "
      "unlimited`), `LimitMEMLOCK=infinity` in a systemd unit, `--ulimit "
      "memlock=-1` or `--cap-add IPC_LOCK` for a container";
  if (rl.rlim_cur < lane) {
    report(LVL_FAIL,
           "memlock: the limit, %s, is below one lane (%u x %s): a "
           "receiver can't register it and refuses every sender, a sender "
           "can't register its send blocks; %s",
           bytes_str(rl.rlim_cur, a, sizeof a), o->blocks,
           bytes_str(o->block_size, b, sizeof b), fix);
  } else if (rl.rlim_cur < all) {
    report(LVL_WARN,
           "memlock: the limit, %s, holds %" PRIu64
           " lane(s) of %u x %s, a receiver takes up to %u (%s); %s",
           bytes_str(rl.rlim_cur, a, sizeof a), (uint64_t)(rl.rlim_cur / lane),
           o->blocks, bytes_str(o->block_size, b, sizeof b), o->lanes,
           bytes_str(all, c, sizeof c), fix);
  } else {
    report(LVL_OK, "memlock: %s, enough for %u lane(s) of %u x %s",
           bytes_str(rl.rlim_cur, a, sizeof a), o->lanes, o->blocks,
           bytes_str(o->block_size, b, sizeof b));
  }
}

/* ------------------------------------------------------------ no RDMA */

static void report_no_rdma(const char *why)
{
  report(LVL_WARN,
         "RDMA: none on this host (%s); fix: for senders and receivers on "
         "this host use shm (rdmasink/rdmasrc transport=shm, sbr-perf "
         "--backend shm); for RDMA between hosts load the NIC's RDMA driver "
         "(mlx5_ib, bnxt_re, irdma, iw_cxgb4) or Soft-RoCE (`rdma link add "
         "rxe0 type rxe netdev IF`)",
         why);
}

#ifdef SBR_CHECK_VERBS
/* ------------------------------------------------------------ verbs */

static unsigned mtu_bytes(enum ibv_mtu m)
{
  return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128u << m : 0;
}

/* The RoCE MTU a netdev MTU allows: the largest IB MTU that fits with the
 * RoCE headers (GRH/IP, UDP, BTH, extended headers, ICRC: 96 bytes in the
 * kernel's iboe_get_mtu). */
static unsigned roce_mtu_for(unsigned netdev_mtu)
{
  for (unsigned m = 4096; m >= 256; m /= 2)
    if (netdev_mtu >= m + 96)
      return m;
  return 0;
}

static int netdev_mtu(const char *ifname)
{
  char path[128];
  snprintf(path, sizeof path, "/sys/class/net/%s/mtu", ifname);
  FILE *f = fopen(path, "r");
  int mtu = -1;
  if (f) {
    if (fscanf(f, "%d", &mtu) != 1)
      mtu = -1;
    fclose(f);
  }
  return mtu;
}

/* A GID's address as text when it carries one (IPv4-mapped, or a global
 * IPv6 address); false for link-local and MAC-derived GIDs. */
static bool gid_address(const union ibv_gid *g, char *buf, size_t len)
{
  static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0,    0,
                                       0, 0, 0, 0, 0xff, 0xff};
  if (memcmp(g->raw, v4mapped, 12) == 0)
    return inet_ntop(AF_INET, g->raw + 12, buf, (socklen_t)len) != NULL;
  if (g->raw[0] == 0xfe && (g->raw[1] & 0xc0) == 0x80)
    return false; /* fe80::/10 */
  return inet_ntop(AF_INET6, g->raw, buf, (socklen_t)len) != NULL;
}

struct port_info {
  bool roce_v1, roce_v2;
  char ifname[IF_NAMESIZE];
  char v2_addrs[256]; /* RoCE v2 GIDs' addresses, comma separated */
};

static void port_gids(struct ibv_context *ctx, uint8_t port, int tbl_len,
                      struct port_info *pi)
{
  if (tbl_len <= 0)
    return;
  struct ibv_gid_entry *e = calloc((size_t)tbl_len, sizeof *e);
  if (!e)
    return;
  ssize_t n = ibv_query_gid_table(ctx, e, (size_t)tbl_len, 0);
  for (ssize_t i = 0; i < n; i++) {
    if (e[i].port_num != port)
      continue;
    if (!pi->ifname[0] && e[i].ndev_ifindex)
      if_indextoname(e[i].ndev_ifindex, pi->ifname);
    if (e[i].gid_type == IBV_GID_TYPE_ROCE_V1)
      pi->roce_v1 = true;
    if (e[i].gid_type != IBV_GID_TYPE_ROCE_V2)
      continue;
    pi->roce_v2 = true;
    char a[INET6_ADDRSTRLEN];
    if (!gid_address(&e[i].gid, a, sizeof a))
      continue;
    size_t used = strlen(pi->v2_addrs);
    snprintf(pi->v2_addrs + used, sizeof pi->v2_addrs - used, "%s%s (GID %u)",
             used ? ", " : "", a, e[i].gid_index);
  }
  free(e);
}

static void check_port(struct ibv_context *ctx, const char *dev, bool iwarp,
                       uint8_t port)
{
  struct ibv_port_attr pa;
  if (ibv_query_port(ctx, port, &pa)) {
    report(LVL_FAIL,
           "%s port %u: ibv_query_port failed; fix: check the "
           "driver's messages (dmesg)",
           dev, port);
    return;
  }
  bool eth = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
  struct port_info pi = {0};
  port_gids(ctx, port, pa.gid_tbl_len, &pi);
  const char *kind = iwarp        ? "iWARP"
                     : !eth       ? "InfiniBand"
                     : pi.roce_v2 ? (pi.roce_v1 ? "RoCE v1 and v2" : "RoCE v2")
                     : pi.roce_v1 ? "RoCE v1"
                                  : "RoCE";
  char where[64] = "";
  if (pi.ifname[0])
    snprintf(where, sizeof where, ", netdev %s", pi.ifname);
  report(LVL_OK, "%s port %u: %s%s", dev, port, kind, where);

  if (pa.state == IBV_PORT_ACTIVE)
    report(LVL_OK, "%s port %u: ACTIVE", dev, port);
  else
    report(LVL_FAIL, "%s port %u: %s, not ACTIVE; fix: %s", dev, port,
           ibv_port_state_str(pa.state),
           !eth && pa.state == IBV_PORT_INIT
               ? "no subnet manager has configured it: run opensm on the "
                 "fabric (or enable the switch's SM)"
           : pi.ifname[0] ? "bring the link up (`ip link set IF up`), check "
                            "the cable and the switch port"
                          : "bring the link up, check the cable and the "
                            "switch port");

  unsigned active = mtu_bytes(pa.active_mtu);
  if (iwarp) {
    int m = pi.ifname[0] ? netdev_mtu(pi.ifname) : -1;
    if (m > 0 && m < 9000)
      report(LVL_WARN,
             "%s port %u MTU: iWARP runs over TCP, netdev %s MTU %d; fix: "
             "MTU 9000 on %s and every switch port on the path (`ip link "
             "set %s mtu 9000`) carries large frames in fewer segments",
             dev, port, pi.ifname, m, pi.ifname, pi.ifname);
    else if (m > 0)
      report(LVL_OK, "%s port %u MTU: iWARP runs over TCP, netdev %s MTU %d",
             dev, port, pi.ifname, m);
    else
      report(LVL_OK, "%s port %u MTU: iWARP runs over TCP (netdev unknown)",
             dev, port);
  } else if (eth) {
    int m = pi.ifname[0] ? netdev_mtu(pi.ifname) : -1;
    unsigned allowed = m > 0 ? roce_mtu_for((unsigned)m) : 0;
    if (m <= 0)
      report(LVL_WARN,
             "%s port %u MTU: active %u, the netdev's unknown; "
             "fix: none if `ibv_devinfo` shows active_mtu 4096",
             dev, port, active);
    else if (active < allowed)
      report(LVL_WARN,
             "%s port %u MTU: active %u, but netdev %s's MTU %d allows %u; "
             "fix: set the netdev MTU again (`ip link set %s mtu %d`) or "
             "reload the driver so the port follows it",
             dev, port, active, pi.ifname, m, allowed, pi.ifname, m);
    else if (allowed < 4096)
      report(LVL_WARN,
             "%s port %u MTU: active %u, limited by netdev %s's MTU %d; "
             "fix: MTU 9000 on %s and every switch port on the path (`ip "
             "link set %s mtu 9000`) for 4096-byte RoCE packets",
             dev, port, active, pi.ifname, m, pi.ifname, pi.ifname);
    else
      report(LVL_OK, "%s port %u MTU: active %u, netdev %s MTU %d", dev, port,
             active, pi.ifname, m);
  } else {
    unsigned max = mtu_bytes(pa.max_mtu);
    if (active < max)
      report(LVL_WARN,
             "%s port %u MTU: active %u of the port's %u; fix: raise the "
             "partition's MTU in the subnet manager (opensm partitions.conf "
             "mtu=5 for 4096)",
             dev, port, active, max);
    else
      report(LVL_OK, "%s port %u MTU: active %u", dev, port, active);
  }

  if (eth && !iwarp) {
    if (pi.v2_addrs[0])
      report(LVL_OK, "%s port %u: RoCE v2 GIDs for %s", dev, port, pi.v2_addrs);
    else if (pi.roce_v2 || pi.roce_v1)
      report(LVL_FAIL,
             "%s port %u: no RoCE v2 GID with an IP address (%s); fix: give "
             "%s an IP address (`ip addr add A/N dev %s`): the GID table "
             "follows the netdev's addresses, and rdma_cm needs a GID for "
             "the address it uses",
             dev, port,
             pi.roce_v2 ? "only link-local ones" : "RoCE v1 GIDs only",
             pi.ifname[0] ? pi.ifname : "the netdev",
             pi.ifname[0] ? pi.ifname : "IF");
    else
      report(LVL_FAIL,
             "%s port %u: an empty GID table; fix: give the netdev "
             "an IP address and bring it up",
             dev, port);
  }
}

/* Type-2 windows: advertised, and allocatable.  Binding one needs a
 * connected QP, which a check can't have, so allocation is the test. */
static void check_windows(struct ibv_pd *pd, const char *dev, bool iwarp,
                          uint64_t cap_flags)
{
  bool advertised = cap_flags & (IBV_DEVICE_MEM_WINDOW_TYPE_2A |
                                 IBV_DEVICE_MEM_WINDOW_TYPE_2B);
  if (!advertised) {
    report(LVL_OK,
           "%s: no type-2 memory windows: lanes' keys are memory regions, "
           "one protection domain per lane (docs/protocol.md, Threat model)",
           dev);
    return;
  }
  const char *type = cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B ? "2B" : "2A";
  /* The library's rule (verbs-caps.c, sbr__verbs_windows_usable). */
  if (iwarp) {
    report(LVL_OK,
           "%s: type-%s memory windows, not used on iWARP (a bind needs the "
           "QP in RTS, which it reaches only inside the kernel's accept): "
           "lanes' keys are memory regions",
           dev, type);
    return;
  }
  struct ibv_mw *mw = pd ? ibv_alloc_mw(pd, IBV_MW_TYPE_2) : NULL;
  if (!mw) {
    report(LVL_WARN,
           "%s: advertises type-%s memory windows but ibv_alloc_mw fails "
           "(%s); fix: none needed, a receiver tries two windows when it "
           "starts listening on this device (a wildcard listener at its "
           "first lane here) and uses memory regions when it can't",
           dev, type, strerror(errno));
    return;
  }
  ibv_dealloc_mw(mw);
  report(LVL_OK,
         "%s: type-%s memory windows: lanes' keys are windows bound to "
         "their QP",
         dev, type);
}

/* The engines ask for CHECK_INLINE bytes of inline data; a device that
 * takes less refuses such a QP (the engines then step down, as the tries
 * below do), so find its maximum. */
static void check_inline(struct ibv_context *ctx, struct ibv_pd *pd,
                         const char *dev)
{
  struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 8, NULL, NULL, 0) : NULL;
  if (!cq) {
    report(LVL_FAIL,
           "%s: cannot create a completion queue (%s); fix: check "
           "the driver's messages (dmesg) and the memlock limit",
           dev, strerror(errno));
    return;
  }
  /* 48: X722's maximum (docs/hardware.md). */
  static const uint32_t tries[] = {CHECK_INLINE, 48, 32, 16, 0};
  uint32_t got = 0;
  int best = -1;
  for (size_t t = 0; t < sizeof tries / sizeof tries[0]; t++) {
    uint32_t want = tries[t];
    struct ibv_qp_init_attr a = {
        .send_cq = cq,
        .recv_cq = cq,
        .qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = 4,
                .max_recv_wr = 1,
                .max_send_sge = 1,
                .max_recv_sge = 1,
                .max_inline_data = want},
    };
    struct ibv_qp *qp = ibv_create_qp(pd, &a);
    if (qp) {
      best = (int)want;
      got = a.cap.max_inline_data;
      ibv_destroy_qp(qp);
      break;
    }
  }
  ibv_destroy_cq(cq);
  if (best == CHECK_INLINE)
    report(LVL_OK, "%s: inline data: %u bytes (the engines ask for %d)", dev,
           got, CHECK_INLINE);
  else if (best >= 0)
    report(LVL_OK,
           "%s: inline data: at most %d bytes, the engines ask for %d: their "
           "QPs take what the device has and copy longer inline WRITEs into "
           "registered memory at post time",
           dev, best, CHECK_INLINE);
  else
    report(LVL_FAIL,
           "%s: cannot create an RC queue pair at all (%s); fix: check the "
           "memlock limit and the driver's messages (dmesg)",
           dev, strerror(errno));
}

/* Where lanes on this device go (informational: nothing to fix). */
static void check_placement(struct ibv_context *ctx, const char *dev)
{
  char path[256];
  int node = -1;
  snprintf(path, sizeof path, "/sys/class/infiniband/%s/device/numa_node", dev);
  FILE *f = fopen(path, "re");
  if (f) {
    if (fscanf(f, "%d", &node) != 1)
      node = -1;
    fclose(f);
  }
  if (node >= 0)
    report(LVL_OK,
           "%s: NUMA node %d (a receiver's lanes' memory goes there), "
           "%d completion vector(s) (lanes spread over them)",
           dev, node, ctx->num_comp_vectors);
  else
    report(LVL_OK,
           "%s: no NUMA node (lanes' memory is not bound), %d completion "
           "vector(s) (lanes spread over them)",
           dev, ctx->num_comp_vectors);
}

static void check_device(struct ibv_device *d)
{
  const char *dev = ibv_get_device_name(d);
  bool iwarp = d->transport_type == IBV_TRANSPORT_IWARP;
  struct ibv_context *ctx = ibv_open_device(d);
  if (!ctx) {
    report(LVL_FAIL, "%s: cannot open it (%s); fix: %s", dev, strerror(errno),
           errno == EACCES || errno == EPERM
               ? "give the user access to /dev/infiniband/uverbs* (group "
                 "rdma, or the udev rules of rdma-core)"
               : "load ib_uverbs (`modprobe ib_uverbs`)");
    return;
  }
  struct ibv_device_attr da;
  if (ibv_query_device(ctx, &da)) {
    report(LVL_FAIL,
           "%s: ibv_query_device failed; fix: check the driver's "
           "messages (dmesg)",
           dev);
    ibv_close_device(ctx);
    return;
  }
  for (uint8_t p = 1; p <= da.phys_port_cnt; p++)
    check_port(ctx, dev, iwarp, p);
  check_placement(ctx, dev);
  struct ibv_pd *pd = ibv_alloc_pd(ctx);
  check_windows(pd, dev, iwarp, da.device_cap_flags);
  check_inline(ctx, pd, dev);
  if (pd)
    ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

static const char *sa_str(const struct sockaddr *sa, char *buf, size_t len)
{
  const void *a =
      sa->sa_family == AF_INET
          ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
          : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
  if (!inet_ntop(sa->sa_family, a, buf, (socklen_t)len))
    snprintf(buf, len, "?");
  return buf;
}

/* Waits for the id's next event; its type, or -1 on timeout or error. */
static int next_event(struct rdma_event_channel *ch, int timeout_ms)
{
  struct pollfd p = {.fd = ch->fd, .events = POLLIN};
  if (poll(&p, 1, timeout_ms) <= 0)
    return -1;
  struct rdma_cm_event *e;
  if (rdma_get_cm_event(ch, &e))
    return -1;
  int type = e->event;
  rdma_ack_cm_event(e);
  return type;
}

static void check_rdma_cm(const char *peer)
{
  struct rdma_event_channel *ch = rdma_create_event_channel();
  if (!ch) {
    report(LVL_FAIL,
           "rdma_cm: unavailable (%s); fix: `modprobe rdma_ucm` and check "
           "/dev/infiniband/rdma_cm is there and readable",
           strerror(errno));
    return;
  }
  if (!peer) {
    report(LVL_OK, "rdma_cm: available (give PEER to check the path to it)");
    rdma_destroy_event_channel(ch);
    return;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *res = NULL;
  int gai = getaddrinfo(peer, NULL, &hints, &res);
  if (gai) {
    report(LVL_FAIL,
           "rdma_cm: cannot resolve the name %s (%s); fix: give "
           "an IP address, or fix the name's DNS entry",
           peer, gai_strerror(gai));
    rdma_destroy_event_channel(ch);
    return;
  }
  struct rdma_cm_id *id = NULL;
  if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
    report(LVL_FAIL,
           "rdma_cm: rdma_create_id failed (%s); fix: `modprobe "
           "rdma_ucm`",
           strerror(errno));
    goto out;
  }
  char a[INET6_ADDRSTRLEN], l[INET6_ADDRSTRLEN];
  const char *step = "address";
  const char *why = "no answer";
  int ev = -1;
  if (rdma_resolve_addr(id, NULL, res->ai_addr, CHECK_RESOLVE_MS) == 0)
    ev = next_event(ch, CHECK_RESOLVE_MS + 1000);
  else
    why = strerror(errno);
  if (ev == RDMA_CM_EVENT_ADDR_RESOLVED) {
    step = "route";
    ev = -1;
    if (rdma_resolve_route(id, CHECK_RESOLVE_MS) == 0)
      ev = next_event(ch, CHECK_RESOLVE_MS + 1000);
    else
      why = strerror(errno);
  }
  if (ev >= 0)
    why = rdma_event_str((enum rdma_cm_event_type)ev);
  sa_str(res->ai_addr, a, sizeof a);
  if (ev == RDMA_CM_EVENT_ROUTE_RESOLVED && id->verbs) {
    report(LVL_OK, "rdma_cm: %s resolves through %s port %u, from %s", a,
           ibv_get_device_name(id->verbs->device), id->port_num,
           sa_str(rdma_get_local_addr(id), l, sizeof l));
  } else {
    report(LVL_FAIL,
           "rdma_cm: no %s to %s (%s); fix: the route to it (`ip route get "
           "%s`) must leave through an RDMA device's netdev with an IP "
           "address and a RoCE v2 GID (see the lines above); on InfiniBand "
           "the subnet manager must answer path queries",
           step, a, why, a);
  }
  rdma_destroy_id(id);
out:
  freeaddrinfo(res);
  rdma_destroy_event_channel(ch);
}

/* Returns false when there is no RDMA device at all. */
static bool check_rdma(const struct check_opts *o)
{
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    report_no_rdma(!list && errno == ENOSYS
                       ? "the kernel has no RDMA support loaded"
                       : "no device in /sys/class/infiniband");
    if (list)
      ibv_free_device_list(list);
    return false;
  }
  for (int i = 0; i < n; i++)
    check_device(list[i]);
  ibv_free_device_list(list);
  check_rdma_cm(o->peer);
  return true;
}
#else
static bool check_rdma(const struct check_opts *o)
{
  (void)o;
  report_no_rdma("this sbr-perf was built without rdma-core: meson found "
                 "no libibverbs/librdmacm");
  return false;
}
#endif

/* Transparent huge pages: the kernel's setting decides whether lanes'
 * madvise(MADV_HUGEPAGE) is taken. */
static void check_huge_pages(void)
{
  char buf[128] = "";
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
  if (!f) {
    report(LVL_WARN, "huge pages: this kernel has no transparent huge pages: "
                     "lanes use 4 KiB pages; fix: none needed, a kernel with "
                     "CONFIG_TRANSPARENT_HUGEPAGE translates MiB-sized lanes "
                     "with fewer pages");
    return;
  }
  if (!fgets(buf, sizeof buf, f))
    buf[0] = '\0';
  fclose(f);
  if (strstr(buf, "[never]"))
    report(LVL_WARN,
           "huge pages: transparent huge pages are off (never): lanes use "
           "4 KiB pages; fix: `echo madvise > "
           "/sys/kernel/mm/transparent_hugepage/enabled`");
  else
    report(LVL_OK,
           "huge pages: lanes of 2 MiB or more ask for them and get "
           "them (transparent huge pages: %s)",
           strstr(buf, "[always]") ? "always" : "madvise");
}

/* ------------------------------------------------------------ main */

static void check_usage(FILE *f)
{
  fprintf(f,
          "Usage: sbr-perf check [PEER] [--blocks N] [--block-size BYTES] "
          "[--lanes N]\n"
          "\n"
          "Checks this host for rdmasink/rdmasrc over RDMA; one line per "
          "finding:\n"
          "OK, WARN or FAIL, and the fix.  With PEER, also whether rdma_cm "
          "resolves\n"
          "the address and route to it.  --blocks, --block-size and --lanes "
          "give\n"
          "the lane geometry the memlock limit is held against [%u, %u, %u].\n"
          "\n"
          "Exit status: 0 no FAIL, 1 a FAIL, 2 bad options, 3 no RDMA here "
          "(use shm).\n",
          CHECK_DEFAULT_BLOCKS, CHECK_DEFAULT_BLOCK_SIZE, CHECK_DEFAULT_LANES);
}

static bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *s == '-')
    return false;
  switch (*end) {
  case 'k':
    v <<= 10, end++;
    break;
  case 'M':
    v <<= 20, end++;
    break;
  case 'G':
    v <<= 30, end++;
    break;
  default:
    break;
  }
  if (*end || v < min || v > max)
    return false;
  *out = v;
  return true;
}

int sbr_check_main(int argc, char **argv)
{
  struct check_opts o = {.block_size = CHECK_DEFAULT_BLOCK_SIZE,
                         .blocks = CHECK_DEFAULT_BLOCKS,
                         .lanes = CHECK_DEFAULT_LANES};
  static const struct option opts[] = {
      {"blocks", required_argument, NULL, 'n'},
      {"block-size", required_argument, NULL, 'b'},
      {"lanes", required_argument, NULL, 'l'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int c;
  uint64_t v;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'n':
    case 'l':
      if (!parse_u64(optarg, c == 'n' ? 2 : 1, 65536, &v)) {
        fprintf(stderr, "sbr-perf check: --%s: '%s' is not in 1..65536\n",
                c == 'n' ? "blocks" : "lanes", optarg);
        return SBR_CHECK_USAGE;
      }
      if (c == 'n')
        o.blocks = (uint32_t)v;
      else
        o.lanes = (uint32_t)v;
      break;
    case 'b':
      if (!parse_u64(optarg, 128, 64u << 20, &v)) {
        fprintf(stderr, "sbr-perf check: --block-size: '%s' is not 128..64M\n",
                optarg);
        return SBR_CHECK_USAGE;
      }
      o.block_size = v;
      break;
    case 'h':
      check_usage(stdout);
      return 0;
    default:
      check_usage(stderr);
      return SBR_CHECK_USAGE;
    }
  }
  if (argc - optind > 1) {
    fprintf(stderr, "sbr-perf check: one PEER at most ('%s' too)\n",
            argv[optind + 1]);
    return SBR_CHECK_USAGE;
  }
  o.peer = optind < argc ? argv[optind] : NULL;

  bool rdma = check_rdma(&o);
  check_huge_pages();
  check_memlock(&o);
  fflush(stdout);
  if (!rdma)
    return SBR_CHECK_NO_RDMA;
  return n_fail ? SBR_CHECK_FAILED : SBR_CHECK_READY;
}
