/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * addrlist.c - the receiver's access list: which senders may connect.
 *
 * A list is a comma-separated set of entries, each an IPv4 or IPv6 address
 * with an optional prefix length ("10.0.0.0/8", "192.168.1.5",
 * "fe80::/10"), or the word "local".  Blanks around entries are ignored.
 * An IPv4-mapped IPv6 peer (::ffff:a.b.c.d, what a dual-stack listener
 * reports) is matched as the IPv4 address it carries.
 *
 * Shared-memory senders have no network address: they are processes on
 * this host, known by pid.  They match "local", and any entry that
 * contains a loopback address (127.0.0.1 or ::1), as if they had come
 * over loopback.  "local" also matches verbs peers on loopback addresses
 * (127.0.0.0/8, ::1).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "util/log.h"
#include "sbr.h"
#include "transport/transport.h"

/* The longest entry text: an IPv6 address with a prefix. */
#define ENTRY_MAX (INET6_ADDRSTRLEN + 4)

enum entry_kind {
  ENTRY_V4,
  ENTRY_V6,
  ENTRY_LOCAL,
};

struct entry {
  enum entry_kind kind;
  uint8_t addr[16]; /* network order; 4 bytes used for V4 */
  uint8_t prefix;   /* bits */
};

struct sbr_addr_list {
  size_t n;
  struct entry entries[];
};

static const uint8_t loop4[4] = {127, 0, 0, 1};
static const uint8_t loop6[16] = {[15] = 1};

/* Do the first bits of a and b agree? */
static bool prefix_match(const uint8_t *a, const uint8_t *b, unsigned bits)
{
  unsigned whole = bits / 8, rest = bits % 8;
  if (memcmp(a, b, whole) != 0)
    return false;
  if (rest == 0)
    return true;
  uint8_t mask = (uint8_t)(0xff << (8 - rest));
  return (a[whole] & mask) == (b[whole] & mask);
}

/* Parses one entry (len bytes at text, trimmed) into e. */
static int parse_entry(const char *text, size_t len, struct entry *e,
                       char *errbuf, size_t errlen)
{
  char buf[ENTRY_MAX + 1];
  if (len == 0) {
    sbr__errf(errbuf, errlen, "an empty entry");
    return -EINVAL;
  }
  if (len > ENTRY_MAX) {
    sbr__errf(errbuf, errlen, "'%.*s...' is not an address", 16, text);
    return -EINVAL;
  }
  memcpy(buf, text, len);
  buf[len] = '\0';
  if (strcasecmp(buf, "local") == 0) {
    e->kind = ENTRY_LOCAL;
    return 0;
  }
  char *slash = strchr(buf, '/');
  long prefix = -1;
  if (slash) {
    *slash = '\0';
    const char *p = slash + 1;
    if (!*p || strlen(p) > 3) {
      sbr__errf(errbuf, errlen, "'%s/%s': the prefix length is not a number",
                buf, p);
      return -EINVAL;
    }
    prefix = 0;
    for (; *p; p++) {
      if (!isdigit((unsigned char)*p)) {
        sbr__errf(errbuf, errlen, "'%s/%s': the prefix length is not a number",
                  buf, slash + 1);
        return -EINVAL;
      }
      prefix = prefix * 10 + (*p - '0');
    }
  }
  memset(e->addr, 0, sizeof e->addr);
  unsigned max;
  if (inet_pton(AF_INET, buf, e->addr) == 1) {
    e->kind = ENTRY_V4;
    max = 32;
  } else if (inet_pton(AF_INET6, buf, e->addr) == 1) {
    e->kind = ENTRY_V6;
    max = 128;
  } else {
    sbr__errf(errbuf, errlen,
              "'%s' is not an IPv4 or IPv6 address (host names are not "
              "resolved; 'local' names this host's senders)",
              buf);
    return -EINVAL;
  }
  if (prefix > (long)max) {
    sbr__errf(errbuf, errlen, "'%s/%ld': the prefix length is beyond %u", buf,
              prefix, max);
    return -EINVAL;
  }
  e->prefix = (uint8_t)(prefix < 0 ? max : prefix);
  /* Bits beyond the prefix don't matter: clear them, so that entries
   * print and compare canonically. */
  for (unsigned bit = e->prefix; bit < max; bit++)
    e->addr[bit / 8] &= (uint8_t) ~(0x80u >> (bit % 8));
  return 0;
}

static bool is_blank(char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int sbr_addr_list_parse(const char *text, sbr_addr_list **out, char *errbuf,
                        size_t errlen)
{
  sbr__errf(errbuf, errlen, "%s", "");
  if (!out)
    return -EINVAL;
  *out = NULL;
  if (!text)
    return 0;
  size_t n = 1;
  bool blank = true;
  for (const char *p = text; *p; p++) {
    if (*p == ',')
      n++;
    else if (!is_blank(*p))
      blank = false;
  }
  if (blank)
    return 0; /* empty: anyone may connect */
  struct sbr_addr_list *l = calloc(1, sizeof *l + n * sizeof(struct entry));
  if (!l)
    return -ENOMEM;
  const char *p = text;
  for (size_t i = 0; i < n; i++) {
    const char *end = strchr(p, ',');
    if (!end)
      end = p + strlen(p);
    const char *b = p, *e = end;
    while (b < e && is_blank(*b))
      b++;
    while (e > b && is_blank(e[-1]))
      e--;
    char why[160];
    int ret = parse_entry(b, (size_t)(e - b), &l->entries[i], why, sizeof why);
    if (ret < 0) {
      sbr__errf(errbuf, errlen, "allowed senders, entry %zu: %s", i + 1, why);
      free(l);
      return ret;
    }
    p = end + 1;
  }
  l->n = n;
  *out = l;
  return 0;
}

void sbr_addr_list_free(sbr_addr_list *l)
{
  free(l);
}

/* Does entry e take the address addr of family (4 or 16 bytes)? */
static bool entry_takes(const struct entry *e, const uint8_t *addr, size_t alen)
{
  switch (e->kind) {
  case ENTRY_LOCAL:
    return alen == 4 ? addr[0] == 127 : memcmp(addr, loop6, 16) == 0;
  case ENTRY_V4:
    return alen == 4 && prefix_match(e->addr, addr, e->prefix);
  case ENTRY_V6:
    return alen == 16 && prefix_match(e->addr, addr, e->prefix);
  }
  return false;
}

bool sbr_addr_list_allows(const sbr_addr_list *l, const struct sockaddr *peer)
{
  if (!l)
    return true;
  const uint8_t *a = NULL;
  size_t alen = 0;
  if (peer && peer->sa_family == AF_INET) {
    a = (const uint8_t *)&((const struct sockaddr_in *)peer)->sin_addr;
    alen = 4;
  } else if (peer && peer->sa_family == AF_INET6) {
    const struct in6_addr *in6 =
        &((const struct sockaddr_in6 *)peer)->sin6_addr;
    a = in6->s6_addr;
    alen = 16;
    if (IN6_IS_ADDR_V4MAPPED(in6)) {
      a += 12;
      alen = 4;
    }
  }
  for (size_t i = 0; i < l->n; i++) {
    const struct entry *e = &l->entries[i];
    if (a) {
      if (entry_takes(e, a, alen))
        return true;
    } else if (e->kind == ENTRY_LOCAL || entry_takes(e, loop4, 4) ||
               entry_takes(e, loop6, 16)) {
      /* No network address (shm): a process on this host. */
      return true;
    }
  }
  return false;
}
