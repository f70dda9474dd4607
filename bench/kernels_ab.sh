#!/bin/bash
# kernels_ab.sh: the small models that run on dml's own kernels
# (kernels/simd.h: the skinny layers, the narrow rows, the Hessian's
# tiles), run by this build's dml-worker and by another revision's in turn,
# in one cluster (bench/worker_ab.sh).  For an instruction set's kernels
# against OpenBLAS (a revision without them for this CPU), or a kernel's
# change against the one before.
#
#   bash bench/kernels_ab.sh [REV [REPS]]          REV default main, REPS 5
#   JOBS="softmax_w2 newton_w1" bash bench/kernels_ab.sh ...   only these
#
# Jobs: softmax_w1 (Fashion-MNIST, Adam, batch 256, 1 worker), softmax_w2
# (batch 128, 2 workers), logistic_w1 / logistic_w2 (synth_1m, Adam, batch
# 256, 4 epochs), newton_w1 / newton_w2 (synth_1m, logistic, the default
# Newton solver).  Prints per job and build the median epoch
# (dml.epochs.seconds, restarts = 0: the median over epochs, then over
# runs), the median train_seconds, the ranks' CPU seconds, the final loss
# of each run, and the ratio base / this of the median epochs.  Needs the
# extension installed (make install).
set -euo pipefail

rev=${1:-main}
reps=${2:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
out=$here/bench/out/kernels_ab
source bench/worker_ab.sh
worker_ab_start "$rev" "$out"
PATH=$here/build:$PATH bash bench/load_fashion.sh >/dev/null
pgc_psql -X -q -v ON_ERROR_STOP=1 -v rows=1000000 -f bench/sql/synth.sql >/dev/null

feats="'{c1,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20}'"
job_sql() {	# job name
	case $1 in
		softmax_w1) echo "dml_train('$2', 'fashion_train', 'label', features => '{pixels}', model => 'softmax', optimizer => 'adam', learning_rate => 0.001, batch_size => 256, epochs => 10, validation => 0.1, workers => 1)" ;;
		softmax_w2) echo "dml_train('$2', 'fashion_train', 'label', features => '{pixels}', model => 'softmax', optimizer => 'adam', learning_rate => 0.001, batch_size => 128, epochs => 10, validation => 0.1, workers => 2)" ;;
		logistic_w1) echo "dml_train('$2', 'synth_1m', 'label', features => $feats, model => 'logistic', optimizer => 'adam', learning_rate => 0.01, batch_size => 256, epochs => 4, workers => 1)" ;;
		logistic_w2) echo "dml_train('$2', 'synth_1m', 'label', features => $feats, model => 'logistic', optimizer => 'adam', learning_rate => 0.01, batch_size => 256, epochs => 4, workers => 2)" ;;
		newton_w1) echo "dml_train('$2', 'synth_1m', 'label', features => $feats, model => 'logistic', workers => 1)" ;;
		newton_w2) echo "dml_train('$2', 'synth_1m', 'label', features => $feats, model => 'logistic', workers => 2)" ;;
		*) echo "unknown job $1" >&2; return 1 ;;
	esac
}
run_one() {	# base|this job
	worker_ab_train "$1" "SELECT model_id FROM $(job_sql "$2" "kab_$1_$2")"
	pgc_psql -X -q -t -A -F ' ' -c "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds), $WAB_CPU, (SELECT metrics->>'train_seconds' FROM dml.models WHERE id = $WAB_ID), (array_agg(loss ORDER BY epoch DESC))[1] FROM dml.epochs WHERE model_id = $WAB_ID AND restarts = 0"
}

echo "CPU: $(worker_ab_cpu); vector extensions: $(grep -m1 -o -w -E 'avx512f|avx2|fma' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "baseline: dml-worker of $(git rev-parse --short "$rev"); this: $(git rev-parse --short HEAD) + working tree; $reps runs each, alternating"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for job in ${JOBS:-softmax_w1 softmax_w2 logistic_w1 logistic_w2 newton_w1 newton_w2}; do
	: >"$out/base_$job"
	: >"$out/this_$job"
	for r in $(seq 1 "$reps"); do
		run_one base "$job" >>"$out/base_$job"
		run_one this "$job" >>"$out/this_$job"
	done
	for who in base this; do
		f=$out/${who}_$job
		printf '%-12s %-4s epoch %.4f s  train_seconds %.3f s  worker CPU %.2f s  last losses %s\n' \
			"$job" "$who" "$(cut -d' ' -f1 "$f" | median)" "$(cut -d' ' -f3 "$f" | median)" \
			"$(cut -d' ' -f2 "$f" | median)" "$(cut -d' ' -f4 "$f" | sort -u | tr '\n' ' ')"
	done
	printf '%-12s base / this: %.2fx (median epochs)\n' "$job" \
		"$(awk "BEGIN {print $(cut -d' ' -f1 "$out/base_$job" | median) / $(cut -d' ' -f1 "$out/this_$job" | median)}")"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
