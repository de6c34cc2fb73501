/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * refusal.h - why a receiver refused a sender, host-endian, and what the
 * sender makes of it: the errno sbr_sender_new returns and its message.
 * The public names and sentences are sbr_refusal_name and
 * sbr_refusal_describe (sbr.h); the 16 bytes that carry a refusal on the
 * wire are in wire/private-data.h.
 */
#ifndef SBR_REFUSAL_H
#define SBR_REFUSAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbr.h"

/* A refusal, host-endian. */
struct sbr__refusal {
  uint8_t reason;          /* enum sbr_refusal; 0 = none */
  bool retryable;          /* waiting and retrying may help */
  uint32_t receiver_value; /* per reason (sbr.h) */
  uint32_t sender_value;   /* per reason (sbr.h) */
};

/* Fills r (retryable from the reason). */
void sbr__refusal_set(struct sbr__refusal *r, enum sbr_refusal reason,
                      uint32_t receiver_value, uint32_t sender_value);
/* Sender side: the errno a refusal is reported as (sbr_sender_new's list),
 * and the message: "<where> refused the connection: <sentence>". */
int sbr__refusal_errno(const struct sbr__refusal *r);
void sbr__refusal_errf(char *buf, size_t len, const char *where,
                       const struct sbr__refusal *r);

#endif
