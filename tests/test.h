/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test.h - tiny assertion helpers for the core tests (plain C, no framework).
 *
 * A test binary holds several test functions (void name(void)), lists them
 * by name in a struct test_entry table, and hands that to test_main, which
 * runs the ones named on the command line (or all).  Each failing ASSERT
 * prints what broke with file:line and ends the process with exit status 1.
 */
#ifndef SBR_TEST_H
#define SBR_TEST_H

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbr.h"

#define FAIL(...)                                                              \
  do {                                                                         \
    fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                       \
    fprintf(stderr, __VA_ARGS__);                                              \
    fputc('\n', stderr);                                                       \
    exit(1);                                                                   \
  } while (0)

#define ASSERT(cond)                                                           \
  do {                                                                         \
    if (!(cond))                                                               \
      FAIL("assertion failed: %s", #cond);                                     \
  } while (0)

#define ASSERT_MSG(cond, ...)                                                  \
  do {                                                                         \
    if (!(cond))                                                               \
      FAIL(__VA_ARGS__);                                                       \
  } while (0)

#define ASSERT_EQ(a, b)                                                        \
  do {                                                                         \
    long long a_ = (long long)(a), b_ = (long long)(b);                        \
    if (a_ != b_)                                                              \
      FAIL("%s == %s: %lld != %lld", #a, #b, a_, b_);                          \
  } while (0)

/* For calls returning 0 / negative errno. */
#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    int r_ = (expr);                                                           \
    if (r_ < 0)                                                                \
      FAIL("%s returned %d (%s)", #expr, r_, strerror(-r_));                   \
  } while (0)

typedef void (*test_func)(void);
struct test_entry {
  const char *name;
  test_func func;
};

/* Runs the named tests (argv[1..]) or all of them; prints one line per test.
 * Every test runs in-process, one after another. */
static inline int test_main(const struct test_entry *tests, int argc,
                            char **argv)
{
  int ran = 0;
  for (const struct test_entry *t = tests; t->name; t++) {
    int wanted = argc < 2;
    for (int i = 1; i < argc; i++)
      if (strcmp(argv[i], t->name) == 0)
        wanted = 1;
    if (!wanted)
      continue;
    fprintf(stderr, "-- %s\n", t->name);
    t->func();
    fprintf(stderr, "ok %s\n", t->name);
    ran++;
  }
  if (ran == 0) {
    fprintf(stderr, "no test matched\n");
    return 1;
  }
  return 0;
}

/* A log handler for multi-process tests: the library's warnings on
 * stderr, tagged with the process; everything with SBR_TEST_VERBOSE. */
static inline void test_log_to_stderr(void *data, enum sbr_log_level level,
                                      const char *msg)
{
  (void)data;
  if (level <= SBR_LOG_WARNING || getenv("SBR_TEST_VERBOSE"))
    fprintf(stderr, "[%d] sbr: %s\n", (int)getpid(), msg);
}

#endif
