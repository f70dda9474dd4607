#!/bin/bash
# fused_epoch.sh: section 4's logistic Adam epoch (synth_1m, batch 256) and
# section 2's softmax epoch (Fashion-MNIST, batch 256), run by this build's
# dml-worker and by another revision's in turn, in one cluster.
#
#   bash bench/fused_epoch.sh [REV [REPS [KINDS]]]
#                      REV default main, REPS 5, KINDS "logit softmax"
#
# Builds REV's dml-worker (git archive, CPU only) and runs the same SQL with
# SET dml.worker_path pointing at it, then at this build's, REPS times,
# alternating; prints each run's median epoch seconds (dml.epochs.seconds,
# as bench/harness.py's section 4), the medians, the ratio, and the load
# average before and after.  Needs the extension installed (make install)
# and bench/micro built (bench/micro/build.sh) for the STREAM floor.
set -euo pipefail

rev=${1:-main}
reps=${2:-5}
kinds=${3:-logit softmax}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
out=$here/bench/out/fused_epoch
source bench/worker_ab.sh
worker_ab_start "$rev" "$out"
psql -X -q -v ON_ERROR_STOP=1 -v rows=1000000 -f bench/sql/synth.sql >/dev/null
case " $kinds " in *" softmax "*) bash bench/load_fashion.sh >/dev/null 2>&1 ;; esac
pgc_psql -q -c 'VACUUM ANALYZE' >/dev/null

feats="'{c1,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20}'"
# name workers -> the SQL of one run
sql_for() {
	case $1 in
		logit) echo "SELECT model_id FROM dml_train('fe_logit_w$2', 'synth_1m', 'label', features => $feats, model => 'logistic', optimizer => 'adam', batch_size => 256, epochs => 2, workers => $2)" ;;
		softmax) echo "SELECT model_id FROM dml_train('fe_softmax_w$2', 'fashion_train', 'label', features => '{pixels}', model => 'softmax', optimizer => 'adam', learning_rate => 0.001, batch_size => 256, epochs => 3, validation => 0.1, workers => $2)" ;;
	esac
}
# one run: the median of its epochs' seconds
run_one() {	# worker-path kind workers
	local id
	id=$(pgc_psql -X -q -t -A -v ON_ERROR_STOP=1 -c "SET dml.worker_path = '$1'" -c "$(sql_for "$2" "$3")" | tail -n 1)
	pgc_psql -X -q -t -A -c "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY seconds) FROM dml.epochs WHERE model_id = $id AND restarts = 0"
	# the model each build trained: its last epoch's training loss
	pgc_psql -X -q -t -A -c "SELECT loss FROM dml.epochs WHERE model_id = $id AND restarts = 0 ORDER BY epoch DESC LIMIT 1" >"$out/last-loss"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "baseline: dml-worker of $(git rev-parse --short "$rev"); this: $(git rev-parse --short HEAD) + working tree"
for kind in $kinds; do
	for w in 1 2; do
		: >"$out/$kind-$w-base"
		: >"$out/$kind-$w-this"
		for r in $(seq 1 "$reps"); do
			run_one "$PGC_DIR/base-dml-worker" $kind $w >>"$out/$kind-$w-base"
			lb=$(cat "$out/last-loss")
			run_one "" $kind $w >>"$out/$kind-$w-this"
			lt=$(cat "$out/last-loss")
		done
		b=$(median <"$out/$kind-$w-base")
		t=$(median <"$out/$kind-$w-this")
		printf '%-8s w%d  baseline %s s  this %s s  baseline/this %.2fx   last training loss %s | %s   (runs: %s | %s)\n' \
			"$kind" "$w" "$b" "$t" "$(awk "BEGIN {print $b / $t}")" "$lb" "$lt" \
			"$(tr '\n' ' ' <"$out/$kind-$w-base")" "$(tr '\n' ' ' <"$out/$kind-$w-this")"
	done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -x build/micro/stream ]; then
	build/micro/stream -n 16777216 -r 10 1 2 | grep -v '^{'
fi
