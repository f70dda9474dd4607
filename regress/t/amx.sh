#!/bin/bash
# amx.sh: options "amx" (workers/worker.c; kernels/layers.c, amx_applies).
# On a CPU with AMX an MLP's wider products (each side 32 and up, K 64 and
# up) run on AMX's tiles, float32's accuracy from three bfloat16 parts
# (kernels/gemm_amx.h), and the model's metrics say "amx": true; "amx":
# false keeps them on the AVX-512 kernel.  So where AMX runs the two
# trainings end near the same loss in other bits, and where it does not
# (no AMX, a layer narrower than 32, softmax regression, the option off)
# the weights are the same bit for bit with the option on or off.
#
# Runs against the cluster regress/run.sh started (PGHOST, PGPORT, PGUSER,
# PGDATABASE=dml_regress).
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh

# AMX runs where the CPU lists AMX-BF16, AMX-TILE and AVX512BW and Linux
# grants the process the tiles' state (arch_prctl ARCH_REQ_XCOMP_PERM, as
# kernels/gemm_amx.h asks; the unit tests hold the kernel to the same rule)
amx=none
if grep -qw amx_bf16 /proc/cpuinfo && grep -qw amx_tile /proc/cpuinfo &&
	grep -qw avx512bw /proc/cpuinfo &&
	/usr/bin/python3 -c 'import ctypes, sys
sys.exit(ctypes.CDLL(None, use_errno=True).syscall(158, 0x1023, 18) != 0)' 2>/dev/null; then
	amx=true
fi
echo "# AMX expected to run here: $amx"

q() { pgc_psql -qAt -c "SET client_min_messages = warning" -c "$1" 2>&1; }
# m NAME EXPR: EXPR over the newest model NAME's row of dml.models
m() { q "SELECT $2 FROM dml.models WHERE name = '$1' ORDER BY version DESC LIMIT 1"; }

# 3,000 rows of 70 features, 4 classes (each brighter in one band of 18)
q "DROP TABLE IF EXISTS amx_t; SELECT setseed(0.5);
	CREATE TABLE amx_t AS
	SELECT i, c AS label,
		   array_agg((random() + CASE WHEN j / 18 = c THEN 0.15 ELSE 0 END)::real ORDER BY j) AS x
	FROM (SELECT i, (i % 4) AS c FROM generate_series(1, 3000) i) r,
		 generate_series(0, 69) j
	GROUP BY i, c" >/dev/null
q "SELECT dml_drop_model(name) FROM (SELECT DISTINCT name FROM dml.models WHERE name LIKE 'amx\_%') d" >/dev/null

train() { # name workers hidden options [model]
	q "SELECT model_id IS NOT NULL FROM dml_train('$1', 'amx_t', 'label', features => '{x}',
		model => '${5:-mlp}', $([ "${5:-mlp}" = mlp ] && echo "hidden => '$3',")
		optimizer => 'adam', learning_rate => 0.003, batch_size => 64, epochs => 3,
		validation => 0.2, workers => $2, options => '$4')"
}
same() { # the two models' weights and final losses, identical
	q "SELECT a.weights = b.weights AND a.metrics->'final_loss' = b.metrics->'final_loss'
		FROM dml.models a, dml.models b WHERE a.name = '$1' AND b.name = '$2'"
}
amx_of() { m "$1" "coalesce(metrics->>'amx', 'none')"; }

for w in 1 2; do
	out=$(train amx_w$w $w '{64,32}' '{}')
	check "MLP {64,32}, $w worker(s): trains ($out)" '[ "$out" = t ]'
	out=$(amx_of amx_w$w)
	check "MLP {64,32}, $w worker(s): the metrics say amx $amx ($out)" '[ "$out" = $amx ]'
	out=$(train amx_w${w}_off $w '{64,32}' '{"amx": false}')
	check "MLP {64,32}, $w worker(s), amx false: trains ($out)" '[ "$out" = t ]'
	out=$(amx_of amx_w${w}_off)
	check "MLP {64,32}, $w worker(s), amx false: no amx in the metrics ($out)" '[ "$out" = none ]'
	out=$(same amx_w$w amx_w${w}_off)
	if [ $amx = true ]; then
		check "MLP {64,32}, $w worker(s): AMX's weights are not the AVX-512 kernel's bits ($out)" \
			'[ "$out" = f ]'
	else
		check "MLP {64,32}, $w worker(s): no AMX here, the same weights as amx false ($out)" \
			'[ "$out" = t ]'
	fi
	# the same training to float32's accuracy: the final losses within 1%, and
	# the validation accuracies within 0.02
	out=$(q "SELECT abs((a.metrics->>'final_loss')::float8 / (b.metrics->>'final_loss')::float8 - 1) < 0.01
			AND abs((a.metrics->>'accuracy')::float8 - (b.metrics->>'accuracy')::float8) <= 0.02
			AND (b.metrics->>'accuracy')::float8 > 0.6
		FROM dml.models a, dml.models b WHERE a.name = 'amx_w$w' AND b.name = 'amx_w${w}_off'")
	check "MLP {64,32}, $w worker(s): loss and accuracy as with amx false ($out; $(m amx_w$w \
		"metrics->>'final_loss'") / $(m amx_w${w}_off "metrics->>'final_loss'"))" '[ "$out" = t ]'
done

# where no product is 32 wide no product runs on AMX, whatever the CPU: the
# option changes no bit
train amx_narrow 2 '{16}' '{}' >/dev/null
train amx_narrow_off 2 '{16}' '{"amx": false}' >/dev/null
out=$(amx_of amx_narrow)
check "MLP {16}: no product on AMX ($out)" '[ "$out" = none ]'
out=$(same amx_narrow amx_narrow_off)
check "MLP {16}: the same weights and loss with amx false ($out)" '[ "$out" = t ]'
train amx_softmax 2 '' '{}' softmax >/dev/null
out=$(amx_of amx_softmax)
check "softmax regression: no product on AMX ($out)" '[ "$out" = none ]'

out=$(q "SELECT dml_train('amx_bad', 'amx_t', 'label', features => '{x}', model => 'mlp',
	options => '{\"amx\": \"off\"}')")
check "amx must be a boolean" 'echo "$out" | grep -q "option \"amx\" must be a boolean"'

# an ordinary role sets it on its own training; the model predicts in the
# backend as any other
q "DROP OWNED BY amx_user; DROP ROLE IF EXISTS amx_user" >/dev/null 2>&1
q "CREATE ROLE amx_user LOGIN; GRANT SELECT ON amx_t TO amx_user" >/dev/null
pgc_allow_role amx_user
as_user() { pgc_as_pg psql -X -q -At -U amx_user -c "SET client_min_messages = warning" -c "$1" 2>&1; }
for o in '{}' '{"amx": false}'; do
	out=$(as_user "SELECT model_id IS NOT NULL FROM dml_train('amx_role', 'amx_t', 'label',
		features => '{x}', model => 'mlp', hidden => '{64,32}', optimizer => 'adam',
		learning_rate => 0.003, batch_size => 64, epochs => 3, validation => 0.2,
		workers => 2, options => '$o')")
	check "an ordinary role trains with options $o ($out)" '[ "$out" = t ]'
done
out=$(as_user "SELECT count(*) FILTER (WHERE dml_predict('amx_role', x)::int = label) > 2000
	FROM amx_t")
check "the role's model predicts in the backend ($out)" '[ "$out" = t ]'
out=$(m amx_role "coalesce(metrics->>'amx', 'none') || ' ' || owner")
check "the role's last model: amx false, its own ($out)" '[ "$out" = "none amx_user" ]'

q "SELECT dml_drop_model(name) FROM (SELECT DISTINCT name FROM dml.models WHERE name LIKE 'amx\_%') d;
	DROP TABLE amx_t; DROP OWNED BY amx_user; DROP ROLE amx_user" >/dev/null
echo "1..$n"
