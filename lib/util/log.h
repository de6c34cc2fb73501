/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* log.h - the library's only way to say something: the user's log handler. */
#ifndef SBR_LOG_H
#define SBR_LOG_H

#include "sbr.h"

void sbr__log(enum sbr_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define SBR_ERROR(...) sbr__log(SBR_LOG_ERROR, __VA_ARGS__)
#define SBR_WARN(...) sbr__log(SBR_LOG_WARNING, __VA_ARGS__)
#define SBR_INFO(...) sbr__log(SBR_LOG_INFO, __VA_ARGS__)
#define SBR_DEBUG(...) sbr__log(SBR_LOG_DEBUG, __VA_ARGS__)

#endif
