/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* log.c - route messages to the handler installed by the application. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "util/log.h"

/* The handler and its data are set together under a lock-free pair swap;
 * both are read once per message.  Setting the handler while messages are
 * being logged from other threads is allowed but not ordered. */
static _Atomic(sbr_log_func) log_func;
static _Atomic(void *) log_data;

void sbr_set_log_handler(sbr_log_func func, void *user_data)
{
  atomic_store(&log_data, user_data);
  atomic_store(&log_func, func);
}

void sbr__log(enum sbr_log_level level, const char *fmt, ...)
{
  sbr_log_func func = atomic_load(&log_func);
  if (!func)
    return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  func(atomic_load(&log_data), level, msg);
}
