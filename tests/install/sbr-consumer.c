/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sbr-consumer.c - an application of libsbr as a user builds it: compiled
 * against the installed sbr.h with `pkg-config --cflags --libs sbr`, never
 * against the source tree (tests/install/check-install.sh).
 *
 * One process, shm back end: a receiver thread takes frames while the main
 * thread sends FRAMES frames of one device with known bytes; the program
 * exits 0 only if every frame arrived whole, in order, with its bytes.
 *
 *   sbr-consumer PORT
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbr.h>

#define FRAMES 50
#define FRAME_SIZE 300000 /* one block of the receiver's default 1 MiB */

static sbr_receiver *receiver;
static int received;
static int bad;

static unsigned char pattern(int frame, size_t i)
{
  return (unsigned char)(frame * 31 + i * 7);
}

static void *receive_main(void *arg)
{
  (void)arg;
  while (received < FRAMES) {
    struct sbr_frame f;
    int rc = sbr_receiver_next_frame(receiver, 10000, &f);
    if (rc == -ETIMEDOUT) {
      fprintf(stderr, "sbr-consumer: no frame for 10 s after %d\n", received);
      bad++;
      return NULL;
    }
    if (rc < 0)
      continue;
    const unsigned char *p = f.n_blocks ? f.info.payload : f.copy;
    if (f.size != FRAME_SIZE || f.n_blocks > 1 || f.info.packet != received) {
      fprintf(stderr, "sbr-consumer: frame %d: size %u, %u blocks, packet %u\n",
              received, f.size, f.n_blocks, f.info.packet);
      bad++;
    } else {
      for (size_t i = 0; i < f.size; i++)
        if (p[i] != pattern(received, i)) {
          fprintf(stderr, "sbr-consumer: frame %d: byte %zu differs\n",
                  received, i);
          bad++;
          break;
        }
    }
    received++;
    sbr_frame_release(&f);
  }
  return NULL;
}

int main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: sbr-consumer PORT\n");
    return 2;
  }
  char err[256] = "";
  struct sbr_receiver_config rc;
  sbr_receiver_config_init(&rc);
  rc.backend = SBR_BACKEND_SHM;
  rc.port = (uint16_t)atoi(argv[1]);
  if (sbr_receiver_new(&rc, &receiver, err, sizeof err) < 0) {
    fprintf(stderr, "sbr-consumer: receiver: %s\n", err);
    return 1;
  }
  pthread_t t;
  pthread_create(&t, NULL, receive_main, NULL);

  struct sbr_sender_config sc;
  sbr_sender_config_init(&sc);
  sc.backend = SBR_BACKEND_SHM;
  sc.host = "localhost";
  sc.port = rc.port;
  sbr_sender *sender;
  if (sbr_sender_new(&sc, &sender, err, sizeof err) < 0) {
    fprintf(stderr, "sbr-consumer: sender: %s\n", err);
    return 1;
  }
  static unsigned char frame[FRAME_SIZE];
  for (int n = 0; n < FRAMES; n++) {
    for (size_t i = 0; i < FRAME_SIZE; i++)
      frame[i] = pattern(n, i);
    struct sbr_block_meta meta;
    sbr_block_meta_init(&meta, 3);
    if (sbr_sender_send(sender, &meta, frame, sizeof frame) < 0) {
      fprintf(stderr, "sbr-consumer: send %d failed\n", n);
      return 1;
    }
  }
  sbr_sender_flush(sender, 5000);
  pthread_join(t, NULL);
  sbr_sender_free(sender);
  sbr_receiver_free(receiver);
  printf("sbr-consumer: %d of %d frames received, %d bad (libsbr %s)\n",
         received, FRAMES, bad, SBR_VERSION_STRING);
  return received == FRAMES && bad == 0 ? 0 : 1;
}
