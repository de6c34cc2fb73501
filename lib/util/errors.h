/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* errors.h - how every layer fills the caller's error buffer. */
#ifndef SBR_ERRORS_H
#define SBR_ERRORS_H

#include <stddef.h>

/* Fixed-size printf into an error buffer; never fails.  buf may be NULL or
 * len 0 (the caller wants no text). */
void sbr__errf(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
