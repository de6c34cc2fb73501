/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-access.c - who may connect: the access list (allowed_senders) and
 * the bound on connection attempts a second (max_connects_per_s).  Sender
 * and receiver in one process over a real back end: shm on the host, verbs
 * in the Soft-RoCE VM.  Usage: test-access shm|verbs [test-name...].
 * The parser tests need no back end (rows marked shm-only).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include "engine-fixture.h"

static enum sbr_backend backend = SBR_BACKEND_SHM;
static const char *addr = "127.0.0.1";

static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------- the parser */

static sbr_addr_list *parse_ok(const char *text)
{
  sbr_addr_list *l = (sbr_addr_list *)1;
  char err[256];
  int ret = sbr_addr_list_parse(text, &l, err, sizeof err);
  ASSERT_MSG(ret == 0, "'%s' was refused: %d %s", text, ret, err);
  return l;
}

static void parse_bad(const char *text, const char *says)
{
  sbr_addr_list *l = (sbr_addr_list *)1;
  char err[256];
  int ret = sbr_addr_list_parse(text, &l, err, sizeof err);
  ASSERT_MSG(ret == -EINVAL, "'%s' gave %d, not -EINVAL", text, ret);
  ASSERT(l == NULL);
  ASSERT_MSG(strstr(err, says), "'%s': the error '%s' does not say '%s'", text,
             err, says);
}

static bool allows(const sbr_addr_list *l, const char *ip)
{
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
  if (inet_pton(AF_INET, ip, &v4->sin_addr) == 1)
    v4->sin_family = AF_INET;
  else if (inet_pton(AF_INET6, ip, &v6->sin6_addr) == 1)
    v6->sin6_family = AF_INET6;
  else
    FAIL("bad test address %s", ip);
  return sbr_addr_list_allows(l, (struct sockaddr *)&ss);
}

static void parser_takes_good_lists(void)
{
  /* Empty means anyone: no list at all. */
  ASSERT(parse_ok(NULL) == NULL);
  ASSERT(parse_ok("") == NULL);
  ASSERT(parse_ok("  \t ") == NULL);
  ASSERT(sbr_addr_list_allows(NULL, NULL));
  const char *good[] = {
      "10.0.0.0/8,192.168.1.5,fe80::/10",
      " 10.0.0.1 , ::1 ",
      "0.0.0.0/0",
      "::/0",
      "local",
      "LOCAL,10.1.2.3/32",
      "::ffff:10.0.0.1/128",
      "2001:db8::/32,172.16.0.0/12",
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    sbr_addr_list *l = parse_ok(good[i]);
    ASSERT_MSG(l != NULL, "'%s' parsed to the empty list", good[i]);
    sbr_addr_list_free(l);
  }
}

static void parser_names_the_bad_entry(void)
{
  parse_bad("10.0.0.1,camera-3", "entry 2: 'camera-3' is not an IPv4 or IPv6");
  parse_bad("10.0.0.0/33", "'10.0.0.0/33': the prefix length is beyond 32");
  parse_bad("fe80::/129", "beyond 128");
  parse_bad("10.0.0.0/", "the prefix length is not a number");
  parse_bad("10.0.0.0/8x", "the prefix length is not a number");
  parse_bad("10.0.0.0/-1", "the prefix length is not a number");
  parse_bad("10.0.0.1,,10.0.0.2", "entry 2: an empty entry");
  parse_bad("10.0.0.1,", "entry 2: an empty entry");
  parse_bad("256.1.1.1", "is not an IPv4 or IPv6");
  parse_bad("10.0.0", "is not an IPv4 or IPv6");
  parse_bad("10.0.0.1 10.0.0.2", "is not an IPv4 or IPv6");
  parse_bad("0123456789abcdef0123456789abcdef0123456789abcdef0123456789",
            "is not an address");
  char err[8];
  sbr_addr_list *l;
  /* A short errbuf is cut, never overrun. */
  ASSERT_EQ(sbr_addr_list_parse("nope", &l, err, sizeof err), -EINVAL);
  ASSERT_EQ(strlen(err), sizeof err - 1);
}

static void list_matches_prefixes(void)
{
  sbr_addr_list *l = parse_ok("10.0.0.0/8,192.168.1.5,fe80::/10,"
                              "172.16.0.0/12,10.255.255.255/31");
  ASSERT(allows(l, "10.0.0.0"));
  ASSERT(allows(l, "10.255.255.255"));
  ASSERT(!allows(l, "11.0.0.0"));
  ASSERT(!allows(l, "9.255.255.255"));
  ASSERT(allows(l, "192.168.1.5"));
  ASSERT(!allows(l, "192.168.1.4"));
  ASSERT(!allows(l, "192.168.1.6"));
  ASSERT(allows(l, "172.31.255.1")); /* /12: 172.16-172.31 */
  ASSERT(!allows(l, "172.32.0.1"));
  ASSERT(allows(l, "fe80::1"));
  ASSERT(allows(l, "febf:ffff::1")); /* /10: fe80-febf */
  ASSERT(!allows(l, "fec0::1"));
  ASSERT(!allows(l, "::1"));
  /* A dual-stack listener reports IPv4 peers mapped. */
  ASSERT(allows(l, "::ffff:10.1.2.3"));
  ASSERT(!allows(l, "::ffff:11.1.2.3"));
  /* No address (shm): a local process, and nothing here is loopback. */
  ASSERT(!sbr_addr_list_allows(l, NULL));
  sbr_addr_list_free(l);

  /* Host bits beyond the prefix don't matter. */
  l = parse_ok("10.1.2.3/8");
  ASSERT(allows(l, "10.200.0.1"));
  sbr_addr_list_free(l);

  l = parse_ok("0.0.0.0/0");
  ASSERT(allows(l, "1.2.3.4"));
  ASSERT(!allows(l, "2001:db8::1")); /* an IPv4 entry takes no IPv6 peer */
  sbr_addr_list_free(l);

  /* local: loopback peers and shm peers. */
  l = parse_ok("local");
  ASSERT(allows(l, "127.0.0.1"));
  ASSERT(allows(l, "127.9.9.9"));
  ASSERT(allows(l, "::1"));
  ASSERT(!allows(l, "10.0.0.1"));
  ASSERT(sbr_addr_list_allows(l, NULL));
  sbr_addr_list_free(l);
  /* An entry taking loopback takes shm peers as well. */
  l = parse_ok("127.0.0.0/8");
  ASSERT(sbr_addr_list_allows(l, NULL));
  sbr_addr_list_free(l);
  l = parse_ok("::1");
  ASSERT(sbr_addr_list_allows(l, NULL));
  sbr_addr_list_free(l);
}

static void receiver_refuses_a_bad_list(void)
{
  struct sbr_receiver_config rc;
  fixture_receiver_config(&rc, fixture_port(), 4, 4096);
  rc.allowed_senders = "10.0.0.0/8,cameras";
  sbr_receiver *r = NULL;
  char err[256];
  ASSERT_EQ(sbr_receiver_new(&rc, &r, err, sizeof err), -EINVAL);
  ASSERT(r == NULL);
  ASSERT_MSG(strstr(err, "allowed senders, entry 2: 'cameras'"), "%s", err);
  sbr_receiver_config_init(&rc);
  ASSERT_EQ(rc.max_connects_per_s, 50);
  ASSERT(rc.allowed_senders == NULL);
}

/* -------------------------------------------------- over the back end */

struct refusals_seen {
  unsigned count;
  enum sbr_refusal reason;
  char peer[64];
  char text[256];
};

static void on_refusal(void *data, const char *peer, enum sbr_refusal reason,
                       const char *text)
{
  struct refusals_seen *seen = data;
  seen->count++;
  seen->reason = reason;
  snprintf(seen->peer, sizeof seen->peer, "%s", peer);
  snprintf(seen->text, sizeof seen->text, "%s", text);
}

static sbr_receiver *new_receiver(uint16_t port, const char *allowed,
                                  uint32_t max_connects,
                                  struct refusals_seen *seen)
{
  struct sbr_receiver_config rc;
  fixture_receiver_config(&rc, port, 4, 4096);
  rc.backend = backend;
  rc.address = addr;
  rc.max_lanes = 32;
  rc.allowed_senders = allowed;
  rc.max_connects_per_s = max_connects;
  rc.on_refusal = on_refusal;
  rc.refusal_user_data = seen;
  sbr_receiver *r;
  char err[256];
  int ret = sbr_receiver_new(&rc, &r, err, sizeof err);
  ASSERT_MSG(ret == 0, "receiver on port %u: %d %s", port, ret, err);
  return r;
}

static void sender_config(struct sbr_sender_config *sc, uint16_t port)
{
  fixture_sender_config(sc, port);
  sc->backend = backend;
  sc->host = addr;
  sc->connect_timeout_ms = 10000;
}

/* The list this process's senders are on: shm senders are local; a verbs
 * sender in the VM connects from the address it connects to. */
static const char *own_entry(void)
{
  return backend == SBR_BACKEND_SHM ? "local" : addr;
}

static void sender_not_on_the_list_is_refused_at_once(void)
{
  uint16_t port = fixture_port();
  struct refusals_seen seen = {0};
  sbr_receiver *r = new_receiver(port, "10.9.9.9", 50, &seen);
  struct sbr_sender_config sc;
  sender_config(&sc, port);
  sbr_sender *s = NULL;
  char err[256] = "";
  uint64_t t0 = now_ns();
  int ret = fixture_connect(r, &sc, &s, err, sizeof err);
  uint64_t ms = (now_ns() - t0) / 1000000u;
  ASSERT_MSG(ret == -EACCES, "refused with %d (%s)", ret, err);
  ASSERT(s == NULL);
  ASSERT_MSG(ms < 3000, "the refusal took %llu ms of a 10 s timeout",
             (unsigned long long)ms);
  ASSERT_MSG(strstr(err, "refused the connection: the sender is not on the "
                         "receiver's list of allowed senders"),
             "%s", err);
  struct sbr_receiver_stats st;
  sbr_receiver_get_stats(r, &st);
  ASSERT_EQ(st.refused, 1);
  ASSERT_EQ(st.refused_by_reason[SBR_REFUSAL_NOT_ALLOWED], 1);
  ASSERT_EQ(st.lanes_opened, 0);
  ASSERT_EQ(seen.count, 1);
  ASSERT_EQ(seen.reason, SBR_REFUSAL_NOT_ALLOWED);
  ASSERT_MSG(seen.peer[0], "on_refusal named no peer");
  sbr_receiver_free(r);
}

static void sender_on_the_list_connects(void)
{
  uint16_t port = fixture_port();
  struct refusals_seen seen = {0};
  char list[128];
  snprintf(list, sizeof list, "10.9.9.9, %s", own_entry());
  sbr_receiver *r = new_receiver(port, list, 50, &seen);
  struct sbr_sender_config sc;
  sender_config(&sc, port);
  sbr_sender *s = fixture_sender(r, &sc);
  ASSERT_OK(fixture_send(s, 3, 0, 1000));
  struct sbr_frame f;
  int ret = -ETIMEDOUT;
  for (int i = 0; i < 500 && ret == -ETIMEDOUT; i++)
    ret = sbr_receiver_next_frame(r, 10, &f);
  ASSERT_OK(ret);
  ASSERT_EQ(f.info.device, 3);
  ASSERT_EQ(fixture_check_frame(&f), 0);
  sbr_frame_release(&f);
  ASSERT_EQ(seen.count, 0);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

#define FLOOD 10

/* A burst of attempts over max_connects_per_s: the ones beyond the bucket
 * are refused as busy (-EBUSY, retryable) and counted; once the bucket
 * refills, a sender connects. */
static void connection_burst_over_the_rate_is_refused(void)
{
  uint16_t port = fixture_port();
  struct refusals_seen seen = {0};
  sbr_receiver *r = new_receiver(port, own_entry(), 2, &seen);
  struct sbr_sender_config sc;
  sender_config(&sc, port);
  struct connect_job jobs[FLOOD];
  pthread_t t[FLOOD];
  for (int i = 0; i < FLOOD; i++) {
    jobs[i] = (struct connect_job){.cfg = &sc};
    ASSERT(pthread_create(&t[i], NULL, connect_thread, &jobs[i]) == 0);
  }
  for (int done = 0; done < FLOOD;) {
    sbr_block *b;
    if (sbr_receiver_next(r, 5, &b) == 0)
      FAIL("a block arrived before any sender sent");
    done = 0;
    for (int i = 0; i < FLOOD; i++)
      done += __atomic_load_n(&jobs[i].done, __ATOMIC_ACQUIRE);
  }
  int ok = 0, busy = 0;
  for (int i = 0; i < FLOOD; i++) {
    pthread_join(t[i], NULL);
    if (jobs[i].ret == 0) {
      ok++;
      sbr_sender_free(jobs[i].sender);
    } else {
      ASSERT_MSG(jobs[i].ret == -EBUSY, "attempt %d: %d (%s)", i, jobs[i].ret,
                 jobs[i].err);
      ASSERT_MSG(strstr(jobs[i].err, "at most 2 connection attempts a second"),
                 "%s", jobs[i].err);
      busy++;
    }
  }
  struct sbr_receiver_stats st;
  sbr_receiver_get_stats(r, &st);
  printf("  %d connected, %d refused as busy\n", ok, busy);
  ASSERT_MSG(ok >= 2, "only %d of the burst connected", ok);
  ASSERT_MSG(busy >= 1, "no attempt of %d was refused", FLOOD);
  ASSERT_EQ(st.refused_by_reason[SBR_REFUSAL_BUSY], (uint64_t)busy);
  ASSERT_EQ(st.refused, (uint64_t)busy);
  ASSERT_EQ(seen.reason, SBR_REFUSAL_BUSY);

  /* A second later the bucket has refilled: the next sender gets in. */
  uint64_t until = now_ns() + 1100000000ull;
  while (now_ns() < until) {
    sbr_block *b;
    ASSERT(sbr_receiver_next(r, 10, &b) == -ETIMEDOUT);
  }
  sbr_sender *s = fixture_sender(r, &sc);
  sbr_sender_free(s);
  sbr_receiver_get_stats(r, &st);
  ASSERT_EQ(st.refused, (uint64_t)busy);
  sbr_receiver_free(r);
}

/* SHM_ONLY rows need no back end: they run once, with the shm tests. */
static const struct test_entry all_tests[] = {
    {"parser_takes_good_lists", parser_takes_good_lists, SHM_ONLY},
    {"parser_names_the_bad_entry", parser_names_the_bad_entry, SHM_ONLY},
    {"list_matches_prefixes", list_matches_prefixes, SHM_ONLY},
    {"receiver_refuses_a_bad_list", receiver_refuses_a_bad_list, SHM_ONLY},
    {"sender_not_on_the_list_is_refused_at_once",
     sender_not_on_the_list_is_refused_at_once, ANY_BACKEND},
    {"sender_on_the_list_connects", sender_on_the_list_connects, ANY_BACKEND},
    {"connection_burst_over_the_rate_is_refused",
     connection_burst_over_the_rate_is_refused, ANY_BACKEND},
    {NULL, NULL, ANY_BACKEND},
};

int main(int argc, char **argv)
{
  if (test_parse_backend(argc, argv, &backend, &addr) < 0)
    return 2;
  return test_main_over_backend(all_tests, backend, argc, argv);
}
