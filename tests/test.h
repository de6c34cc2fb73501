/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test.h - tiny assertion helpers and the runner for the core tests (plain
 * C, no framework).
 *
 * A test binary holds several test functions, one behaviour each, and one
 * table of them: every row names the test, its function and the back ends
 * it runs on (ANY_BACKEND, SHM_ONLY or VERBS_ONLY: an explicit column, read
 * by tests/list-tests.py too, which registers each row as a meson test).
 * main() hands the table to test_main() or, for binaries that run over a
 * back end named first on the command line ("shm" or "verbs"), to
 * test_main_over_backend().  Either runs the tests named on the command line
 * (or all) in-process, one after another.  Each failing ASSERT prints what
 * broke with file:line and ends the process with exit status 1.
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

/* The back ends a test runs on: every table row says which. */
enum test_backends {
  ANY_BACKEND, /* any, or none: the binary takes no back end */
  SHM_ONLY,    /* needs what only shm has (fault injection, one host) */
  VERBS_ONLY,  /* needs real verbs devices (the VM) */
};

struct test_entry {
  const char *name;
  test_func func;
  enum test_backends backends;
};

static inline int test_runs_over(const struct test_entry *t,
                                 enum sbr_backend backend)
{
  return t->backends == ANY_BACKEND ||
         (t->backends == SHM_ONLY && backend == SBR_BACKEND_SHM) ||
         (t->backends == VERBS_ONLY && backend == SBR_BACKEND_VERBS);
}

/* Runs the tests of the table (ended by a NULL name) that `backend` allows
 * (-1: any) and that are named in argv[1..argc-1], or all of them; prints
 * one line per test. */
static inline int test_run(const struct test_entry *tests, int backend,
                           int argc, char **argv)
{
  int ran = 0;
  for (const struct test_entry *t = tests; t->name; t++) {
    int wanted = argc < 2;
    if (backend >= 0 && !test_runs_over(t, (enum sbr_backend)backend))
      continue;
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

/*   test-foo [test-name...] */
static inline int test_main(const struct test_entry *tests, int argc,
                            char **argv)
{
  return test_run(tests, -1, argc, argv);
}

/* For binaries over a back end:
 *   test-foo shm|verbs [test-name...]
 * Reads the back end (and, over verbs, the receiver's address from
 * SBR_RDMA_ADDR into *addr when that is set); returns 0, or prints the
 * usage and returns -1.  Then main() does its own setup and calls
 * test_main_over_backend(). */
static inline int test_parse_backend(int argc, char **argv,
                                     enum sbr_backend *backend,
                                     const char **addr)
{
  if (argc >= 2 && strcmp(argv[1], "shm") == 0) {
    *backend = SBR_BACKEND_SHM;
  } else if (argc >= 2 && strcmp(argv[1], "verbs") == 0) {
    *backend = SBR_BACKEND_VERBS;
  } else {
    fprintf(stderr, "usage: %s shm|verbs [test-name...]\n", argv[0]);
    return -1;
  }
  if (addr && *backend == SBR_BACKEND_VERBS && getenv("SBR_RDMA_ADDR"))
    *addr = getenv("SBR_RDMA_ADDR");
  return 0;
}

/* Runs the tests named after the back end in argv (or all) that run over
 * it. */
static inline int test_main_over_backend(const struct test_entry *tests,
                                         enum sbr_backend backend, int argc,
                                         char **argv)
{
  return test_run(tests, (int)backend, argc - 1, argv + 1);
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
