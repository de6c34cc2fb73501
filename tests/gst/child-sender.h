/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * child-sender.h - cameras in another process: a second sender, so a lane
 * (connection) of its own.  The child is this test binary again (so a
 * sanitized build runs a sanitized sender), told what to send by an
 * environment variable; child_sender_run, a constructor, turns it into
 * the cameras before main and streams until killed.
 */
#ifndef CHILD_SENDER_H
#define CHILD_SENDER_H

#include <gst/check/gstcheck.h>

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pipeline-check.h"

#define CHILD_SENDER_ENV "RDMA_TEST_CHILD_SENDER"

/* This test binary again, in a new process, with name=value in its
 * environment (what its constructor turns into a sender); value is
 * freed. */
G_GNUC_UNUSED static GPid child_spawn_self(const gchar *name, gchar *value)
{
  gchar **envp = g_environ_setenv(g_get_environ(), name, value, TRUE);
  gchar *argv[] = {"/proc/self/exe", NULL};
  GError *err = NULL;
  GPid pid = 0;

  fail_unless(
      g_spawn_async(NULL, argv, envp,
                    G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL,
                    NULL, NULL, &pid, &err),
      "spawn: %s", err ? err->message : "?");
  g_strfreev(envp);
  g_free(value);
  return pid;
}

/* Live cameras first..first+n-1, width pixels wide (camera_rig_desc), in
 * a new process. */
G_GNUC_UNUSED static GPid child_sender_spawn(const gchar *transport,
                                             const gchar *host, guint port,
                                             guint first, guint n, guint width)
{
  return child_spawn_self(CHILD_SENDER_ENV,
                          g_strdup_printf("%s %s %u %u %u %u", transport, host,
                                          port, first, n, width));
}

/* In the child: the cameras stream until killed (no gst-check here). */
__attribute__((constructor)) static void child_sender_run(void)
{
  const gchar *spec = g_getenv(CHILD_SENDER_ENV);
  gchar tr[16], host[64];
  guint port, first, n, width;
  GstElement *pipeline;
  gchar *desc;

  if (!spec || sscanf(spec, "%15s %63s %u %u %u %u", tr, host, &port, &first,
                      &n, &width) != 6)
    return;
  gst_init(NULL, NULL);
  desc = camera_rig_desc(tr, host, port, first, n, 0, width, "");
  pipeline = gst_parse_launch(desc, NULL);
  g_free(desc);
  if (!pipeline)
    _exit(2);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  for (;;)
    g_usleep(G_USEC_PER_SEC);
}

G_GNUC_UNUSED static void child_sender_kill(GPid pid)
{
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

#endif /* CHILD_SENDER_H */
