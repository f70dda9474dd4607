#!/bin/bash
# newton_ab.sh: section 10's dml side (logistic regression on synth_1m with
# the defaults: Newton, 1 worker), run by this build's dml-worker and by
# another revision's in turn, in one cluster.
#
#   bash bench/newton_ab.sh [REV [REPS [WORKERS]]]
#                      REV default main, REPS 7, WORKERS 1
#
# Builds REV's dml-worker (git archive, CPU only), then runs the same
# dml_train with SET dml.worker_path pointing at it, then at this build's
# (the installed one), REPS times, alternating.  Prints per build the
# medians of the statement's wall time and of the worker's parts
# (dml.models.metrics: load_seconds, train_seconds, total_seconds) and of
# the ranks' CPU seconds (user + system, by /usr/bin/time around the
# worker), the load average before and after, and how far apart the two builds' models
# are: the largest relative difference of the coefficients and of the
# log-likelihood (dml_summary's statistics), which for the same model is
# float64 rounding.  Needs the extension installed (make install).
set -euo pipefail

rev=${1:-main}
reps=${2:-7}
workers=${3:-1}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
out=$here/bench/out/newton_ab
source bench/worker_ab.sh
worker_ab_start "$rev" "$out"
worker_ab_synth
# one run: "wall load train total iterations cpu" (seconds), the model named nab_$1
run_one() {	# base|this
	worker_ab_train "$1" "SELECT model_id FROM dml_train('nab_$1', 'synth_1m', 'label', features => $WAB_FEATS, model => 'logistic', workers => $workers)"
	pgc_psql -X -q -t -A -F ' ' -c "SELECT $WAB_T1 - $WAB_T0, metrics->>'load_seconds', metrics->>'train_seconds', metrics->>'total_seconds', metrics->>'epochs', $WAB_CPU FROM dml.models WHERE id = $WAB_ID"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "baseline: dml-worker of $(git rev-parse --short "$rev"); this: $(git rev-parse --short HEAD) + working tree; $workers worker(s)"
: >"$out/base"
: >"$out/this"
for r in $(seq 1 "$reps"); do
	run_one base >>"$out/base"
	run_one this >>"$out/this"
done
for who in base this; do
	printf '%-5s wall %.3f s  load %.3f s  train %.3f s  worker total %.3f s  worker CPU %.3f s  iterations %s\n' "$who" \
		"$(cut -d' ' -f1 "$out/$who" | median)" "$(cut -d' ' -f2 "$out/$who" | median)" \
		"$(cut -d' ' -f3 "$out/$who" | median)" "$(cut -d' ' -f4 "$out/$who" | median)" \
		"$(cut -d' ' -f6 "$out/$who" | median)" "$(cut -d' ' -f5 "$out/$who" | sort -u | tr '\n' ' ')"
done
worker_ab_ratios "$out" 1:wall 6:CPU
# the two builds' last models: coefficients and log-likelihood
pgc_psql -X -q -t -A -c "
WITH b AS (SELECT metrics->'statistics' s FROM dml.models WHERE name = 'nab_base' ORDER BY version DESC LIMIT 1),
     t AS (SELECT metrics->'statistics' s FROM dml.models WHERE name = 'nab_this' ORDER BY version DESC LIMIT 1)
SELECT format('same model: coefficients differ by at most %s (relative), log-likelihood %s vs %s',
	(SELECT max(abs((b.s->'coefficients'->>i)::float8 - (t.s->'coefficients'->>i)::float8)
	            / greatest(abs((b.s->'coefficients'->>i)::float8), 1e-300))
	   FROM generate_series(0, jsonb_array_length(b.s->'coefficients') - 1) i),
	b.s->>'log_likelihood', t.s->>'log_likelihood') FROM b, t"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
