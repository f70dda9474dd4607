#!/bin/bash
# mlp_ab.sh: the Fashion-MNIST MLP of section "MLP 784-256-128-10 epoch vs
# the sgemm floor" (784-256-128-10, Adam 0.001, validation 0.1), run by this
# build's dml-worker and by another revision's in turn, in one cluster, with
# the single-core sgemm floor measured in the same run.
#
#   bash bench/mlp_ab.sh [REV [REPS [EPOCHS]]]     REV default main, REPS 3, EPOCHS 3
#   CONFIGS="1:128 2:128" bash bench/mlp_ab.sh ...  only these WORKERS:BATCH
#
# For each of w1 b256, w1 b128, w2 b128, w2 b256 (workers, batch per
# worker), REPS runs of each build alternating; prints the median epoch
# (dml.epochs.seconds, restarts = 0, the median over epochs, then over runs),
# the ranks' CPU seconds (user + system by /usr/bin/time around the worker),
# the final training loss, the two builds' epochs pair by pair (a run of
# each, one after the other: the median of their ratios), and each build's
# epoch against the floor: the
# epoch's FLOPs (1,007,104 per training row) at bench/micro/sgemm's
# FLOP-weighted rate over the MLP's batch-256 shapes, times the workers,
# measured with OpenBLAS's own choice of kernels and with the core type
# dml-worker forces on a CPU OpenBLAS does not know (dml_blas_core_override).
# Needs the extension installed (make install).
set -euo pipefail

rev=${1:-main}
reps=${2:-3}
epochs=${3:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
out=$here/bench/out/mlp_ab
source bench/worker_ab.sh
worker_ab_start "$rev" "$out"
bash bench/micro/build.sh "$out/micro" >"$out/micro.log" 2>&1 || {
	cat "$out/micro.log" >&2; exit 1; }
PATH=$here/build:$PATH bash bench/load_fashion.sh >/dev/null

# the FLOP-weighted sgemm rate at the MLP's batch-256 shapes, 1 thread
shapes="256x256x784 256x784x256 256x128x256 128x256x256 256x256x128 256x10x128"
rate() {
	"$out/micro/sgemm" -t 1 -s 0.5 $shapes | /usr/bin/python3 -c '
import json, sys
r = [json.loads(l) for l in sys.stdin if l.startswith("{")]
f = sum(2 * x["m"] * x["n"] * x["k"] for x in r)
t = sum(2 * x["m"] * x["n"] * x["k"] / (x["median_gflops"] * 1e9) for x in r)
print(f"{f / t / 1e9:.1f}")'
}
core=$( { OPENBLAS_VERBOSE=2 OPENBLAS_NUM_THREADS=1 "$out/micro/mlp_epoch" 2>&1 || true; } | sed -n 's/^Core: //p' | head -1)
forced=$(grep -q -w avx512bw /proc/cpuinfo && grep -q -w avx512vl /proc/cpuinfo && grep -q -w avx512dq /proc/cpuinfo && echo SkylakeX || echo Haswell)
case ${core,,} in haswell|zen|skylakex|cooperlake|sapphirerapids) forced=$core ;; esac

run_one() {	# base|this workers batch
	worker_ab_train "$1" "SELECT model_id FROM dml_train('mab_$1_w$2_b$3', 'fashion_train', 'label', features => '{pixels}', model => 'mlp', hidden => '{256,128}', optimizer => 'adam', learning_rate => 0.001, batch_size => $3, epochs => $epochs, validation => 0.1, workers => $2)"
	pgc_psql -X -q -t -A -F ' ' -c "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds), $WAB_CPU, (SELECT metrics->>'train_rows' FROM dml.models WHERE id = $WAB_ID), (array_agg(loss ORDER BY epoch DESC))[1] FROM dml.epochs WHERE model_id = $WAB_ID AND restarts = 0"
}

echo "CPU: $(worker_ab_cpu); OpenBLAS's own core: $core; forced: $forced"
echo "baseline: dml-worker of $(git rev-parse --short "$rev"); this: $(git rev-parse --short HEAD) + working tree; $epochs epochs, $reps runs each"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
r_own=$(OPENBLAS_NUM_THREADS=1 rate)
r_forced=$(OPENBLAS_CORETYPE=$forced OPENBLAS_NUM_THREADS=1 rate)
echo "sgemm rate at the MLP's shapes, 1 thread: $r_own GFLOP/s ($core), $r_forced GFLOP/s ($forced)"
for cfg in ${CONFIGS:-1:256 1:128 2:128 2:256}; do
	w=${cfg%:*}
	b=${cfg#*:}
	: >"$out/base_${w}_$b"
	: >"$out/this_${w}_$b"
	for r in $(seq 1 "$reps"); do
		run_one base "$w" "$b" >>"$out/base_${w}_$b"
		run_one this "$w" "$b" >>"$out/this_${w}_$b"
	done
	for who in base this; do
		f=$out/${who}_${w}_$b
		ep=$(cut -d' ' -f1 "$f" | median)
		rows=$(cut -d' ' -f3 "$f" | median)
		printf 'w%s b%-3s %-4s epoch %.3f s  worker CPU %.2f s  last loss %s  floor %.3f s (%s) / %.3f s (%s): epoch/floor %.2fx / %.2fx  runs: %s\n' \
			"$w" "$b" "$who" "$ep" "$(cut -d' ' -f2 "$f" | median)" "$(cut -d' ' -f4 "$f" | tr '\n' ' ')" \
			"$(awk "BEGIN {print $rows * 1007104 / ($r_own * 1e9 * $w)}")" "$core" \
			"$(awk "BEGIN {print $rows * 1007104 / ($r_forced * 1e9 * $w)}")" "$forced" \
			"$(awk "BEGIN {print $ep / ($rows * 1007104 / ($r_own * 1e9 * $w))}")" \
			"$(awk "BEGIN {print $ep / ($rows * 1007104 / ($r_forced * 1e9 * $w))}")" \
			"$(cut -d' ' -f1 "$f" | tr '\n' ' ')"
	done
	# run i of this build against run i of the base (they ran one after the
	# other): the ratio of a pair is not moved by the host's speed drifting
	# between pairs, which on a shared host is a few percent over minutes
	paste -d' ' <(cut -d' ' -f1 "$out/this_${w}_$b") <(cut -d' ' -f1 "$out/base_${w}_$b") |
		/usr/bin/python3 -c '
import statistics, sys
r = [float(a) / float(b) for a, b in (l.split() for l in sys.stdin)]
print(f"  this / base epoch, pair by pair: median {statistics.median(r):.3f} "
      f"(range {min(r):.3f}-{max(r):.3f}, {len(r)} pairs, this faster in {sum(x < 1 for x in r)})")'
	echo "  load average: $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "sgemm rate again: $(OPENBLAS_NUM_THREADS=1 rate) GFLOP/s ($core), $(OPENBLAS_CORETYPE=$forced OPENBLAS_NUM_THREADS=1 rate) GFLOP/s ($forced)"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
