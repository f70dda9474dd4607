#!/bin/bash
# adam_ab.sh: section 4's small-model epochs (logistic and linear
# regression on synth_1m, Adam, batch 256, options "shuffle" at its default:
# blocks), run by this build's dml-worker and by another revision's in
# turn, in one cluster.
#
#   bash bench/adam_ab.sh [REV [REPS [WORKERS [MODEL]]]]
#                    REV default main, REPS 7, WORKERS 1, MODEL logistic
#                    (or linear)
#
# Each run trains 4 epochs (as make bench); its figure is the median epoch's
# training part (training rows / rows_per_second of dml.epochs, the
# validation pass not counted), and the ranks' CPU seconds (user + system,
# /usr/bin/time around the worker).  Prints per build the medians, their
# ratio, every run's figure, the two builds' last models' final training
# loss, and the load average before and after.  Needs the extension
# installed (make install).
set -euo pipefail

rev=${1:-main}
reps=${2:-7}
workers=${3:-1}
model=${4:-logistic}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
out=$here/bench/out/adam_ab
source bench/worker_ab.sh
worker_ab_start "$rev" "$out"
worker_ab_synth
target=label
[ "$model" = linear ] && target=y
# one run: "epoch cpu shuffle" (seconds, seconds, rows a block), the model named aab_$1
run_one() {	# base|this
	worker_ab_train "$1" "SELECT model_id FROM dml_train('aab_$1', 'synth_1m', '$target', features => $WAB_FEATS, model => '$model', optimizer => 'adam', batch_size => 256, epochs => 4, workers => $workers)"
	pgc_psql -X -q -t -A -F ' ' -c "
		SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY (m.metrics->>'train_rows')::float8 / e.rows_per_second),
			$WAB_CPU, coalesce(m.metrics->>'shuffle_block', m.metrics->>'shuffle')
		FROM dml.models m JOIN dml.epochs e ON e.model_id = m.id WHERE m.id = $WAB_ID
		GROUP BY m.metrics"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "CPU: $(worker_ab_cpu)"
echo "baseline: dml-worker of $(git rev-parse --short "$rev"); this: $(git rev-parse --short HEAD) + working tree; $model, $workers worker(s)"
: >"$out/base"
: >"$out/this"
for r in $(seq 1 "$reps"); do
	run_one base >>"$out/base"
	run_one this >>"$out/this"
done
for who in base this; do
	printf '%-5s epoch %.2f ms  worker CPU %.3f s  blocks of %s rows\n' "$who" \
		"$(cut -d' ' -f1 "$out/$who" | median | awk '{print $1 * 1e3}')" \
		"$(cut -d' ' -f2 "$out/$who" | median)" "$(cut -d' ' -f3 "$out/$who" | sort -u | tr '\n' ' ')"
done
worker_ab_ratios "$out" 1:epoch 2:CPU
pgc_psql -X -q -t -A -c "
SELECT format('last epoch''s training loss: baseline %s, this %s', b.loss, t.loss)
FROM (SELECT e.loss FROM dml.epochs e JOIN dml.models m ON m.id = e.model_id
	  WHERE m.name = 'aab_base' ORDER BY m.version DESC, e.epoch DESC LIMIT 1) b,
	 (SELECT e.loss FROM dml.epochs e JOIN dml.models m ON m.id = e.model_id
	  WHERE m.name = 'aab_this' ORDER BY m.version DESC, e.epoch DESC LIMIT 1) t"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
