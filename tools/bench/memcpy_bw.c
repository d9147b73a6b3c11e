/* memcpy bandwidth of this machine: the physical limit for same-host collectives.
 *
 * Each of --threads threads copies its own buffer of B bytes with memcpy,
 * again and again, for every size from --min_bytes to --max_bytes (x4);
 * small sizes stay in cache, the large ones come from DRAM. Prints, per
 * size, the aggregate bandwidth (bytes copied by all threads / wall time):
 *
 *   RESULT impl=memcpy threads=1 bytes=1048576 time_us=40.1 copy_gbps=26.1
 *
 * time_us is one copy's time on one thread. A copy reads and writes B bytes;
 * copy_gbps counts B once, as bus bandwidth does for a transfer.
 *
 *   cc -O2 -pthread -o /tmp/memcpy_bw tools/bench/memcpy_bw.c && /tmp/memcpy_bw --threads=2
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long flag_value(int argc, char** argv, const char* name, long fallback) {
  size_t len = strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], name, len) == 0 && argv[i][len] == '=') {
      return strtol(argv[i] + len + 1, NULL, 10);
    }
  }
  return fallback;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct job {
  char* src;
  char* dst;
  long bytes;
  long iters;
  pthread_barrier_t* start;
  double t0, t1;
};

static void* copy_loop(void* arg) {
  struct job* j = arg;
  pthread_barrier_wait(j->start);
  /* Each thread times itself: on 2 cores the main thread may not run again
   * until the copies are nearly done, so its clock would start late. */
  j->t0 = now();
  for (long i = 0; i < j->iters; ++i) {
    memcpy(j->dst, j->src, j->bytes);
    /* Keeps the compiler from dropping copies whose result is never read. */
    __asm__ __volatile__("" : : "r"(j->dst) : "memory");
  }
  j->t1 = now();
  return NULL;
}

int main(int argc, char** argv) {
  long threads = flag_value(argc, argv, "--threads", 1);
  long min_bytes = flag_value(argc, argv, "--min_bytes", 4096);
  long max_bytes = flag_value(argc, argv, "--max_bytes", 64L << 20);
  long budget = flag_value(argc, argv, "--budget_bytes", 4L << 30);
  if (threads < 1 || threads > 64 || min_bytes < 1 || max_bytes < min_bytes || budget < 1) {
    fprintf(stderr, "memcpy_bw: bad flags (need 1 <= --threads <= 64, 1 <= min <= max bytes)\n");
    return 2;
  }
  struct job jobs[64];
  pthread_t tids[64];
  for (long t = 0; t < threads; ++t) {
    jobs[t].src = malloc(max_bytes);
    jobs[t].dst = malloc(max_bytes);
    if (jobs[t].src == NULL || jobs[t].dst == NULL) {
      fprintf(stderr, "memcpy_bw: cannot allocate 2 x %ld bytes\n", max_bytes);
      return 1;
    }
    memset(jobs[t].src, 1, max_bytes); /* touch every page before timing */
    memset(jobs[t].dst, 0, max_bytes);
  }
  for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    long iters = budget / bytes;
    if (iters < 5) iters = 5;
    if (iters > 200000) iters = 200000;
    for (int pass = 0; pass < 2; ++pass) { /* pass 0 warms up */
      pthread_barrier_t start;
      pthread_barrier_init(&start, NULL, threads);
      for (long t = 0; t < threads; ++t) {
        jobs[t].bytes = bytes;
        jobs[t].iters = pass == 0 ? iters / 10 + 1 : iters;
        jobs[t].start = &start;
        pthread_create(&tids[t], NULL, copy_loop, &jobs[t]);
      }
      double t0 = 1e300, t1 = 0;
      for (long t = 0; t < threads; ++t) {
        pthread_join(tids[t], NULL);
        if (jobs[t].t0 < t0) t0 = jobs[t].t0;
        if (jobs[t].t1 > t1) t1 = jobs[t].t1;
      }
      double dt = t1 - t0;
      pthread_barrier_destroy(&start);
      if (pass == 1) {
        printf("RESULT impl=memcpy threads=%ld bytes=%ld time_us=%.3f copy_gbps=%.2f\n", threads,
               bytes, dt / iters * 1e6, (double)bytes * iters * threads / dt / 1e9);
        fflush(stdout);
      }
    }
  }
  for (long t = 0; t < threads; ++t) {
    free(jobs[t].src);
    free(jobs[t].dst);
  }
  return 0;
}
