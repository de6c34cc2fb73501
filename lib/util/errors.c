/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* errors.c - the error buffer helper (errors.h). */
#include <stdarg.h>
#include <stdio.h>

#include "util/errors.h"

void sbr__errf(char *buf, size_t len, const char *fmt, ...)
{
  if (!buf || len == 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, len, fmt, ap);
  va_end(ap);
}
