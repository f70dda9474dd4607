#!/bin/bash
# build.sh: build the micro benchmarks with gcc and mpicc directly.
#
#   bench/micro/build.sh [OUTDIR]      (default: build/micro of the checkout)
#
# Then, for example:
#   OUTDIR/stream -n 16777216 1 2                  memory bandwidth, 1 and 2 threads
#   OPENBLAS_NUM_THREADS=1 OUTDIR/sgemm            MLP shapes + 2048^3, 1 thread
#   OUTDIR/sgemm -t 1 256x784x256 4096x4096x4096
#   mpirun --allow-run-as-root --oversubscribe -np 2 OUTDIR/allreduce -b 1K -e 64M
#   mpirun --allow-run-as-root --oversubscribe -np 2 OUTDIR/sync_step [-n FLOATS]
#   OUTDIR/copy_reader -t fashion_train -r 3 [-j 2]   (PG* env or -d CONNINFO)
#   OUTDIR/epoch -r 7 1000000x20x1:bce 60000x784x10:softmax
#                                       an in-memory epoch taken apart, before/after the fused kernel
#   OUTDIR/logit_stats -n 1000000 -d 20        one pass of the float64 Newton polish (CPU time)
#   OUTDIR/mlp_epoch -b 128 IMAGES LABELS       in-memory Fashion-MNIST MLP epochs taken apart (CPU time)
set -euo pipefail

src=$(cd "$(dirname "$0")" && pwd)
out=${1:-$src/../../build/micro}
mkdir -p "$out"
out=$(cd "$out" && pwd)
CC=${CC:-gcc}
MPICC=${MPICC:-mpicc}
PG_INCLUDE=$(pg_config --includedir)
PG_LIBDIR=$(pg_config --libdir)
WARN="-Wall -Wextra -Wno-unused-parameter -Werror"

set -x
$CC -O3 $WARN -fopenmp -o "$out/stream" "$src/stream.c"
$CC -O2 $WARN -o "$out/sgemm" "$src/sgemm.c" -lopenblas
$MPICC -O2 $WARN -o "$out/allreduce" "$src/allreduce.c"
# dml's own all-reduce step (workers/sync.c) against raw MPI_Allreduce
$MPICC -O3 -fno-math-errno $WARN -I"$src/../../workers" -I"$src/../../kernels" -I"$src/../../coordinator" \
    -o "$out/sync_step" "$src/sync_step.c" "$src/../../workers/comm.c" \
    "$src/../../workers/sync.c" "$src/../../workers/half.c" "$src/../../coordinator/jobspec.c" -lm
$CC -O2 $WARN -I"$PG_INCLUDE" -o "$out/copy_reader" "$src/copy_reader.c" \
    -L"$PG_LIBDIR" -lpq
# one epoch of a single-layer net, with the kernels built as the worker builds them
K=$src/../../kernels
$CC -O3 -fno-math-errno -std=gnu11 $WARN -I"$K" -o "$out/epoch" "$src/epoch.c" \
    "$K/common.c" "$K/net.c" "$K/layers.c" "$K/losses.c" "$K/optim.c" \
    -L/usr/lib/x86_64-linux-gnu/openblas-serial -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-serial \
    -l:libopenblas.so.0 -lm
$CC -O3 -fno-math-errno -std=gnu11 $WARN -I"$K" -o "$out/logit_stats" "$src/logit_stats.c" \
    "$K"/*.c \
    -L/usr/lib/x86_64-linux-gnu/openblas-serial -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-serial \
    -l:libopenblas.so.0 -lm
$CC -O3 -fno-math-errno -std=gnu11 $WARN -I"$K" -o "$out/mlp_epoch" "$src/mlp_epoch.c" \
    "$K"/*.c \
    -L/usr/lib/x86_64-linux-gnu/openblas-serial -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-serial \
    -l:libopenblas.so.0 -lm
