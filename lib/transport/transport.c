/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* transport.c - which back end runs a sender or receiver, and what to say
 * when the one asked for isn't built in. */
#include <errno.h>
#include <stddef.h>

#include "transport/transport.h"

const struct sbr__transport_ops *sbr__transport_get(enum sbr_backend backend)
{
  switch (backend) {
  case SBR_BACKEND_SHM:
    return &sbr__transport_shm;
  case SBR_BACKEND_VERBS:
#ifdef SBR_HAVE_VERBS
    return &sbr__transport_verbs;
#else
    return NULL;
#endif
  }
  return NULL;
}

void sbr__backend_missing_errf(char *buf, size_t len, enum sbr_backend backend)
{
  if (backend == SBR_BACKEND_VERBS)
    sbr__errf(buf, len,
              "the verbs back end is not built in: this libsbr was built "
              "without rdma-core (libibverbs, librdmacm); use the shm back "
              "end on one host, or rebuild with libibverbs-dev and "
              "librdmacm-dev installed");
  else
    sbr__errf(buf, len, "back end %s is not built in",
              sbr_backend_name(backend));
}

int sbr_backend_check(enum sbr_backend backend, char *errbuf, size_t errlen)
{
  const struct sbr__transport_ops *ops = sbr__transport_get(backend);
  if (errbuf && errlen)
    errbuf[0] = '\0';
  if (!ops) {
    sbr__backend_missing_errf(errbuf, errlen, backend);
    return -ENOTSUP;
  }
  return ops->check_host ? ops->check_host(errbuf, errlen) : 0;
}
