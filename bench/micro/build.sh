#!/bin/bash
# build.sh: build the micro benchmarks with gcc and mpicc directly.
#
#   bench/micro/build.sh [OUTDIR]      (default: build/micro of the checkout)
#
# Then, for example:
#   OUTDIR/stream -n 16777216 1 2                  memory bandwidth, 1 and 2 threads
#   OPENBLAS_NUM_THREADS=1 OUTDIR/sgemm            MLP shapes + 2048^3, 1 thread
#   OUTDIR/sgemm -t 1 256x784x256 4096x4096x4096
#   OUTDIR/sgemm_dml -k dml 256x784x256              dml's own product (kernels/gemm.h)
#   mpirun --allow-run-as-root --oversubscribe -np 2 OUTDIR/allreduce -b 1K -e 64M
#   mpirun --allow-run-as-root --oversubscribe -np 2 OUTDIR/sync_step [-n FLOATS]
#   OUTDIR/copy_reader -t fashion_train -r 3 [-j 2]   (PG* env or -d CONNINFO)
#   OUTDIR/epoch -r 7 1000000x20x1:bce 60000x784x10:softmax
#                                       an in-memory epoch taken apart, before/after the fused kernel
#   OUTDIR/logit_stats -n 1000000 -d 20        one pass of the float64 Newton polish (CPU time)
#   OUTDIR/newton_pass [-c 16384]              the float32 Newton statistics pass taken apart (wall)
#   OUTDIR/mlp_epoch -b 128 IMAGES LABELS       in-memory Fashion-MNIST MLP epochs taken apart (CPU time)
#   OUTDIR/predict_rows [20-64-64-1]            a model's forward pass at inference, own kernel vs sgemm (wall)
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

# the kernels compiled once, as the worker builds them, for the three
# programs that link them; every compile runs beside the others, nproc at
# a time (layers.c, the longest, first): about a minute in all on 2 cores,
# where one after another took two
K=$src/../../kernels
KO=$out/kernels
# a build of the same sources, compilers and libraries is kept: the test
# suite makes it beside its tests (regress/run.sh), make bench-quick reuses it
stamp=$( { cat "$src"/*.c "$src"/*.sh "$K"/*.c "$K"/*.h "$src"/../../workers/*.[ch] \
    "$src"/../../coordinator/jobspec.[ch]; $CC --version; $MPICC --showme; echo "$PG_INCLUDE $PG_LIBDIR"; } |
    sha1sum | cut -d' ' -f1)
if [ "$(cat "$out/.built" 2>/dev/null)" = "$stamp" ]; then
    echo "build.sh: $out already holds a build of these sources"
    exit 0
fi
rm -f "$out/.built"
mkdir -p "$KO"
rm -f "$out/.failed"
# run CMD...: in the background, at most nproc at once; a failure leaves
# $out/.failed, which settle (every command done) looks for
run() {
    { "$@" || touch "$out/.failed"; } &
    while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
}
settle() {
    wait
    [ ! -e "$out/.failed" ] || { echo "build.sh: a compile failed" >&2; exit 1; }
}
KOBJS=()
# the checkout's own build of the kernels (the worker's objects, make's
# build/kernels) where it is up to date: the same code, and two minutes of
# CPU not spent again; else compiled here with the worker's flags
ROOT=$(cd "$src/../.." && pwd)
if kobjs=$(make -s -C "$ROOT" built-kernels 2>/dev/null); then
    for o in $kobjs; do KOBJS+=("$ROOT/$o"); done
    echo "build.sh: the kernels' objects of $ROOT/build/kernels"
fi
set -x
if [ ${#KOBJS[@]} = 0 ]; then
    for f in "$K/layers.c" $(ls "$K"/*.c | grep -v '/layers\.c$'); do
        o=$KO/$(basename "$f" .c).o
        KOBJS+=("$o")
        run $CC -O3 -fno-math-errno -std=gnu11 $WARN -I"$K" -c "$f" -o "$o"
    done
fi
run $CC -O3 $WARN -fopenmp -o "$out/stream" "$src/stream.c"
run $CC -O2 $WARN -o "$out/sgemm" "$src/sgemm.c" -lopenblas
run $MPICC -O2 $WARN -o "$out/allreduce" "$src/allreduce.c"
# dml's own all-reduce step (workers/sync.c) against raw MPI_Allreduce
run $MPICC -O3 -fno-math-errno $WARN -I"$src/../../workers" -I"$src/../../kernels" -I"$src/../../coordinator" \
    -o "$out/sync_step" "$src/sync_step.c" "$src/../../workers/comm.c" \
    "$src/../../workers/sync.c" "$src/../../workers/half.c" "$src/../../coordinator/jobspec.c" -lm
run $CC -O2 $WARN -I"$PG_INCLUDE" -o "$out/copy_reader" "$src/copy_reader.c" \
    -L"$PG_LIBDIR" -lpq
settle
# one epoch of a single-layer net; one pass of the float64 Newton polish;
# the MLP's epoch taken apart: with the kernels built as the worker builds them
for prog in epoch logit_stats newton_pass mlp_epoch predict_rows; do
    run $CC -O3 -fno-math-errno -std=gnu11 $WARN -I"$K" -o "$out/$prog" "$src/$prog.c" \
        "${KOBJS[@]}" \
        -L/usr/lib/x86_64-linux-gnu/openblas-serial -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-serial \
        -l:libopenblas.so.0 -lm
done
run $CC -O2 -std=gnu11 $WARN -DSGEMM_DML -I"$K" -o "$out/sgemm_dml" "$src/sgemm.c" "${KOBJS[@]}" \
    -L/usr/lib/x86_64-linux-gnu/openblas-serial -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-serial \
    -l:libopenblas.so.0 -lm
settle
echo "$stamp" >"$out/.built"
