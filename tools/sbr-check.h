/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sbr-check.h - `sbr-perf check [PEER]`: is this host ready for rdmasink /
 * rdmasrc over verbs?  One line per finding, OK / WARN / FAIL with the
 * fix, on stdout.  sbr-check.c says what is looked at and why.
 */
#ifndef SBR_CHECK_H
#define SBR_CHECK_H

/* Exit statuses of `sbr-perf check`. */
enum {
  SBR_CHECK_READY = 0,   /* no FAIL (WARN lines may be there) */
  SBR_CHECK_FAILED = 1,  /* at least one FAIL: verbs won't work as is */
  SBR_CHECK_USAGE = 2,   /* bad options, as every sbr-perf mode */
  SBR_CHECK_NO_RDMA = 3, /* no RDMA device here at all: shm only */
};

/* argv[0] is "check"; returns the exit status. */
int sbr_check_main(int argc, char **argv);

#endif
