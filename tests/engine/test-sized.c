/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-sized.c - configs and stats that grow (sbr.h, "Growing structs"):
 * an application built against an older sbr.h passes shorter structs; the
 * library reads its config only as far as struct_size, giving the fields
 * it predates their defaults, and writes its stats only as far as its
 * struct reaches.  The "older layout" is the current one cut short at a
 * field, with the bytes past the cut poisoned, as an older application's
 * memory would hold anything there.
 */
#include <stdlib.h>
#include <string.h>

#include "engine-fixture.h"
#include "util/sized.h"

#define POISON 0xa5

static void assert_poisoned(const void *p, size_t from, size_t to)
{
  for (size_t i = from; i < to; i++)
    ASSERT_MSG(((const uint8_t *)p)[i] == POISON,
               "byte %zu (of %zu..%zu) written past the caller's size", i, from,
               to);
}

/* config_init of an older layout writes that much and no more: an older
 * application's struct ends there. */
static void config_init_writes_only_the_callers_size(void)
{
  size_t cut = offsetof(struct sbr_sender_config, send_order);
  struct sbr_sender_config *cfg = malloc(sizeof *cfg);
  ASSERT(cfg);
  memset(cfg, POISON, sizeof *cfg);
  sbr_sender_config_init_sized(cfg, cut);
  ASSERT_EQ(cfg->struct_size, cut);
  ASSERT_EQ(cfg->port, SBR_DEFAULT_PORT);
  ASSERT_EQ(cfg->pause_poll_us, 1000);
  assert_poisoned(cfg, cut, sizeof *cfg);
  free(cfg);

  cut = offsetof(struct sbr_receiver_config, probe_after_ms);
  struct sbr_receiver_config *rc = malloc(sizeof *rc);
  ASSERT(rc);
  memset(rc, POISON, sizeof *rc);
  sbr_receiver_config_init_sized(rc, cut);
  ASSERT_EQ(rc->struct_size, cut);
  ASSERT_EQ(rc->max_frame_size, 64u << 20);
  assert_poisoned(rc, cut, sizeof *rc);
  free(rc);
}

/* A sender config cut before send_order: what the application set before
 * the cut is read, and every field after it (poisoned in its memory)
 * takes its default. */
static void older_sender_config_gets_defaults_for_newer_fields(void)
{
  size_t cut = offsetof(struct sbr_sender_config, send_order);
  struct sbr_sender_config app;
  sbr_sender_config_init_sized(&app, cut);
  /* Past the cut is not the application's struct: anything may lie there,
   * whatever config_init wrote. */
  memset((uint8_t *)&app + cut, POISON, sizeof app - cut);
  app.backend = SBR_BACKEND_SHM;
  app.port = 4242;
  app.send_blocks = 5;
  app.pause_poll_us = 77; /* the last field before the cut */

  struct sbr_sender_config out, def;
  sbr_sender_config_init(&def);
  char err[256] = "";
  ASSERT_OK(sbr__sender_config_read(&app, cut, &out, err, sizeof err));
  ASSERT_EQ(out.struct_size, sizeof out);
  ASSERT_EQ(out.backend, SBR_BACKEND_SHM);
  ASSERT_EQ(out.port, 4242);
  ASSERT_EQ(out.send_blocks, 5);
  ASSERT_EQ(out.pause_poll_us, 77);
  ASSERT_EQ(out.send_order, def.send_order);
  ASSERT_EQ(out.backpressure, def.backpressure);
  ASSERT_EQ(out.wait_timeout_ms, def.wait_timeout_ms);
  ASSERT_EQ(out.backoff.spin_us, def.backoff.spin_us);
  ASSERT_EQ(out.backoff.min_sleep_us, def.backoff.min_sleep_us);
  ASSERT_EQ(out.backoff.max_sleep_us, def.backoff.max_sleep_us);
}

/* The receiver's newest fields (the quiet-lane probe, the ACK timeout),
 * for an application built before them: their defaults, not the poison. */
static void older_receiver_config_gets_defaults_for_newer_fields(void)
{
  size_t cut = offsetof(struct sbr_receiver_config, probe_after_ms);
  struct sbr_receiver_config app;
  sbr_receiver_config_init_sized(&app, cut);
  memset((uint8_t *)&app + cut, POISON, sizeof app - cut);
  app.backend = SBR_BACKEND_SHM;
  app.block_count = 9;
  app.max_frame_size = 12345;

  struct sbr_receiver_config out, def;
  sbr_receiver_config_init(&def);
  char err[256] = "";
  ASSERT_OK(sbr__receiver_config_read(&app, cut, &out, err, sizeof err));
  ASSERT_EQ(out.struct_size, sizeof out);
  ASSERT_EQ(out.block_count, 9);
  ASSERT_EQ(out.max_frame_size, 12345);
  ASSERT_EQ(out.probe_after_ms, def.probe_after_ms);
  ASSERT_EQ(out.ack_timeout, def.ack_timeout);
  ASSERT(out.probe_after_ms != 0 && out.ack_timeout != 0);
}

/* Below the first released layout, or beyond this library's: refused at
 * new, saying why, before anything is set up. */
static void config_of_an_unknown_size_is_refused(void)
{
  char err[256];
  sbr_sender *s = NULL;
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, fixture_port());
  sc.struct_size = (uint32_t)SBR__SENDER_CONFIG_MIN_SIZE - 1;
  ASSERT_EQ(sbr_sender_new(&sc, &s, err, sizeof err), -EINVAL);
  ASSERT_MSG(strstr(err, "sbr_sender_config of") != NULL, "errbuf: %s", err);
  sc.struct_size = (uint32_t)sizeof sc + 8;
  ASSERT_EQ(sbr_sender_new(&sc, &s, err, sizeof err), -EINVAL);
  ASSERT_MSG(strstr(err, "newer sbr.h") != NULL, "errbuf: %s", err);
  ASSERT(s == NULL);

  sbr_receiver *r = NULL;
  struct sbr_receiver_config rc;
  fixture_receiver_config(&rc, fixture_port(), 4, 4096);
  rc.struct_size = 0; /* a config never set up with config_init */
  ASSERT_EQ(sbr_receiver_new(&rc, &r, err, sizeof err), -EINVAL);
  ASSERT_MSG(strstr(err, "sbr_receiver_config of 0 bytes") != NULL,
             "errbuf: %s", err);
  rc.struct_size = (uint32_t)sizeof rc + 8;
  ASSERT_EQ(sbr_receiver_new(&rc, &r, err, sizeof err), -EINVAL);
  ASSERT(r == NULL);
}

/* The first released layout itself works end to end: a sender and a
 * receiver whose configs are that long connect and move a frame. */
static void first_released_layout_connects(void)
{
  uint16_t port = fixture_port();
  struct sbr_receiver_config rc;
  fixture_receiver_config(&rc, port, 4, 4096);
  rc.struct_size = (uint32_t)SBR__RECEIVER_CONFIG_MIN_SIZE;
  sbr_receiver *r = fixture_receiver_new(&rc);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sc.struct_size = (uint32_t)SBR__SENDER_CONFIG_MIN_SIZE;
  sbr_sender *s = fixture_sender(r, &sc);
  ASSERT_OK(fixture_send(s, 3, 0, 1000));
  struct sbr_frame f;
  ASSERT_OK(sbr_receiver_next_frame(r, 5000, &f));
  ASSERT_EQ(fixture_check_frame(&f), 0);
  sbr_frame_release(&f);
  sbr_sender_free(s);
  sbr_receiver_free(r);
}

/* Stats of an older layout: the counters before the cut are written, the
 * caller's memory after it is not; a newer layout's counters this library
 * predates read 0. */
static void stats_are_written_only_as_far_as_the_callers_size(void)
{
  uint16_t port = fixture_port();
  sbr_receiver *r = fixture_receiver(port, 4, 4096);
  struct sbr_sender_config sc;
  fixture_sender_config(&sc, port);
  sbr_sender *s = fixture_sender(r, &sc);
  ASSERT_OK(fixture_send(s, 3, 0, 1000));
  struct sbr_frame f;
  ASSERT_OK(sbr_receiver_next_frame(r, 5000, &f));
  sbr_frame_release(&f);
  ASSERT_OK(sbr_sender_flush(s, 5000));

  struct sbr_sender_stats full, cut_st;
  ASSERT_OK(sbr_sender_get_stats(s, &full));
  ASSERT(full.blocks >= 1 && full.wr_posted >= 2);
  size_t cut = offsetof(struct sbr_sender_stats, sync_reads);
  memset(&cut_st, POISON, sizeof cut_st);
  ASSERT_OK(sbr_sender_get_stats_sized(s, &cut_st, cut));
  ASSERT_EQ(cut_st.blocks, full.blocks);
  ASSERT_EQ(cut_st.bytes, full.bytes);
  assert_poisoned(&cut_st, cut, sizeof cut_st);

  struct sbr_receiver_stats rfull, rcut;
  ASSERT_OK(sbr_receiver_get_stats(r, &rfull));
  ASSERT(rfull.blocks >= 1);
  cut = offsetof(struct sbr_receiver_stats, rejected);
  memset(&rcut, POISON, sizeof rcut);
  ASSERT_OK(sbr_receiver_get_stats_sized(r, &rcut, cut));
  ASSERT_EQ(rcut.blocks, rfull.blocks);
  assert_poisoned(&rcut, cut, sizeof rcut);

  /* A newer application's device stats: 16 bytes this library doesn't
   * know, zeroed. */
  uint8_t newer[sizeof(struct sbr_device_stats) + 16];
  memset(newer, POISON, sizeof newer);
  ASSERT_OK(sbr_receiver_get_device_stats_sized(
      r, 3, (struct sbr_device_stats *)(void *)newer, sizeof newer));
  struct sbr_device_stats dev;
  memcpy(&dev, newer, sizeof dev);
  ASSERT_EQ(dev.frames, 1);
  for (size_t i = sizeof dev; i < sizeof newer; i++)
    ASSERT_EQ(newer[i], 0);
  memset(newer, POISON, sizeof newer);
  cut = offsetof(struct sbr_device_stats, frames);
  ASSERT_OK(sbr_sender_get_device_stats_sized(
      s, 3, (struct sbr_device_stats *)(void *)newer, cut));
  memcpy(&dev, newer, sizeof dev);
  ASSERT_EQ(dev.blocks, 1);
  assert_poisoned(newer, cut, sizeof newer);

  sbr_sender_free(s);
  sbr_receiver_free(r);
}

int main(int argc, char **argv)
{
  static const struct test_entry tests[] = {
      {"config_init_writes_only_the_callers_size",
       config_init_writes_only_the_callers_size, ANY_BACKEND},
      {"older_sender_config_gets_defaults_for_newer_fields",
       older_sender_config_gets_defaults_for_newer_fields, ANY_BACKEND},
      {"older_receiver_config_gets_defaults_for_newer_fields",
       older_receiver_config_gets_defaults_for_newer_fields, ANY_BACKEND},
      {"config_of_an_unknown_size_is_refused",
       config_of_an_unknown_size_is_refused, ANY_BACKEND},
      {"first_released_layout_connects", first_released_layout_connects,
       ANY_BACKEND},
      {"stats_are_written_only_as_far_as_the_callers_size",
       stats_are_written_only_as_far_as_the_callers_size, ANY_BACKEND},
      {NULL, NULL, ANY_BACKEND},
  };
  return test_main(tests, argc, argv);
}
