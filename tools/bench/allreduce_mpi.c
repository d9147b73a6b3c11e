/* Open MPI peer of Strata's cross-process collective benchmarks.
 *
 * --collective=allreduce (the default): MPI_Allreduce; reduce_scatter:
 * MPI_Reduce_scatter_block; allgather: MPI_Allgather. Float32 SUM,
 * separate send and receive buffers, over every
 * size from --min_bytes to --max_bytes (x4 each step). Per size: warm-up
 * iterations, a barrier, then timed iterations; the time of an operation is
 * the slowest rank's mean (MPI_MAX over ranks). Rank 0 prints one line per
 * size in the format every peer and Strata's cross_process_bench share:
 *
 *   RESULT impl=mpi-shm ranks=2 bytes=4096 time_us=2.1 busbw_gbps=3.9
 *
 * A size is the whole tensor (nccl-tests' convention): all-reduce's input,
 * reduce-scatter's input (each rank gets size / n), all-gather's output
 * (each rank gives size / n). busbw = algbw x 2(n-1)/n for all-reduce and
 * x (n-1)/n for the others (the bytes each rank must move in a ring, as
 * nccl-tests counts them); non-default collectives print collective=NAME. Iterations per size: budget_bytes / bytes clamped
 * to [min_iters, max_iters]; warm-up: a tenth of that, at least 2. The
 * transport is chosen by mpirun's --mca flags; --impl only labels the output.
 * tools/bench/allreduce_peers.py compiles it with mpicc and runs it.
 *
 *   mpicc -O2 -o /tmp/allreduce_mpi tools/bench/allreduce_mpi.c
 *   mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1 \
 *       --mca btl self,vader /tmp/allreduce_mpi --impl=mpi-shm
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long flag_value(int argc, char** argv, const char* name, long fallback) {
  size_t len = strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], name, len) == 0 && argv[i][len] == '=') {
      return strtol(argv[i] + len + 1, NULL, 10);
    }
  }
  return fallback;
}

static const char* flag_string(int argc, char** argv, const char* name, const char* fallback) {
  size_t len = strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], name, len) == 0 && argv[i][len] == '=') return argv[i] + len + 1;
  }
  return fallback;
}

/* One collective; `count`: the whole tensor's elements, `block`: a rank's. */
static void run_collective(int kind, const float* send, float* recv, int count, int block) {
  if (kind == 0) {
    MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else if (kind == 1) {
    MPI_Reduce_scatter_block(send, recv, block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else {
    MPI_Allgather(send, block, MPI_FLOAT, recv, block, MPI_FLOAT, MPI_COMM_WORLD);
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  const char* impl = flag_string(argc, argv, "--impl", "mpi");
  const char* collective = flag_string(argc, argv, "--collective", "allreduce");
  const int kind = strcmp(collective, "allreduce") == 0        ? 0
                   : strcmp(collective, "reduce_scatter") == 0 ? 1
                   : strcmp(collective, "allgather") == 0      ? 2
                                                               : -1;
  if (kind < 0) {
    if (rank == 0) fprintf(stderr, "allreduce_mpi: --collective=%s is not allreduce, "
                                   "reduce_scatter or allgather\n", collective);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long min_bytes = flag_value(argc, argv, "--min_bytes", 4096);
  long max_bytes = flag_value(argc, argv, "--max_bytes", 64L << 20);
  long budget = flag_value(argc, argv, "--budget_bytes", 1L << 30);
  long min_iters = flag_value(argc, argv, "--min_iters", 10);
  long max_iters = flag_value(argc, argv, "--max_iters", 2000);
  if (min_bytes < 4 || max_bytes < min_bytes || min_iters < 1 || max_iters < min_iters) {
    if (rank == 0) fprintf(stderr, "allreduce_mpi: bad size or iteration flags\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  size_t max_count = (size_t)max_bytes / sizeof(float);
  float* send = malloc(max_count * sizeof(float));
  float* recv = malloc(max_count * sizeof(float));
  if (send == NULL || recv == NULL) {
    fprintf(stderr, "allreduce_mpi: rank %d cannot allocate %ld bytes\n", rank, max_bytes);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  for (size_t i = 0; i < max_count; ++i) send[i] = (float)(rank + 1);
  memset(recv, 0, max_count * sizeof(float));

  const float expected = (float)size * (size + 1) / 2;
  for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    int count = (int)(bytes / sizeof(float));
    /* One rank's block of reduce-scatter's output or all-gather's input. */
    int block = count / size;
    if (kind != 0) count = block * size;
    long iters = budget / bytes;
    if (iters < min_iters) iters = min_iters;
    if (iters > max_iters) iters = max_iters;
    long warmup = iters / 10 < 2 ? 2 : iters / 10;

    for (long i = 0; i < warmup; ++i) {
      run_collective(kind, send, recv, count, block);
    }
    /* A wrong result would make every figure meaningless: check the ends. */
    int last = kind == 1 ? block - 1 : count - 1;
    float want_first = kind == 2 ? 1.0f : expected, want_last = kind == 2 ? (float)size : expected;
    if (last >= 0 && (recv[0] != want_first || recv[last] != want_last)) {
      fprintf(stderr, "allreduce_mpi: rank %d got %g and %g, want %g and %g at %ld bytes\n", rank,
              recv[0], recv[last], want_first, want_last, bytes);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; ++i) {
      run_collective(kind, send, recv, count, block);
    }
    double mean = (MPI_Wtime() - t0) / iters, slowest = 0;
    MPI_Reduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      double busbw = bytes / slowest * (kind == 0 ? 2.0 : 1.0) * (size - 1) / size / 1e9;
      if (kind != 0) printf("RESULT impl=%s collective=%s", impl, collective);
      else printf("RESULT impl=%s", impl);
      printf(" ranks=%d bytes=%ld time_us=%.2f busbw_gbps=%.3f\n", size, bytes, slowest * 1e6, busbw);
      fflush(stdout);
    }
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
