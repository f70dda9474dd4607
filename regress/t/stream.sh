#!/bin/bash
# stream.sh: data larger than memory (issue 18).  A table at least 8 times
# a worker's memory budget trains streamed, with every rank's peak RSS
# within the budget plus 64 MB and the accuracy of the in-memory run (an
# fp16 spill too, with fewer bytes; an int8 spill of integer inputs, a
# quarter of the bytes and the float32 spill's accuracy); the exact solver
# (HC0 standard errors too), Newton's method (logistic, softmax, and
# restarted after a kill), full-batch gradient descent and L-BFGS give the
# in-memory model to 1e-6;
# every sync mode, validation, a restart from a checkpoint, an MLP with
# listed labels, softmax on text labels with a one-hot feature (the COPY
# path), the GPU loop (skipped without a GPU) and a background job
# stream; the job's spill directory is gone after success, error, cancel
# and a killed worker; an unwritable or full spill directory, a spill past
# dml.spill_limit, an fp16 spill of a value past its range and an int8
# spill of a non-integer, and Newton's per-row logits past the budget, are
# clear errors; an ordinary role can neither point the spill anywhere nor
# raise the limit.  A restarted rank reuses its spill when intact, and
# spills afresh from PostgreSQL when it is damaged or missing (the log line
# and metrics say which).  A view 8 times the budget (and a partitioned
# table read through its parent under a policy) is dealt by rank 0 to the
# ranks, each spilling its share: every rank's peak RSS within the budget,
# the in-memory accuracy, exact and L-BFGS equal to in memory, validation,
# a restart from a checkpoint, an error while dealing, cancel and a
# background job, the spill directory gone after each.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh

SPILL=$PGC_DIR/data/base/pgsql_tmp
FULL=$T/stream-full
LOCKED=$T/stream-locked
cleanup() {
	mountpoint -q "$FULL" 2>/dev/null && umount "$FULL"
	rm -rf "$FULL" "$LOCKED"
}
trap cleanup EXIT

q() { pgc_psql -t -A "$@"; }
qa() { pgc_psql -t -A -U st_alice "$@"; }
spill_dirs() { ls -d "$SPILL"/pgsql_tmpdml.* 2>/dev/null | wc -l; }
meta() { q -c "SELECT $2 FROM dml.models WHERE name = '$1' ORDER BY version DESC LIMIT 1"; }

pgc_psql -c "SET client_min_messages = warning" -c "DROP ROLE IF EXISTS st_alice" \
	-c "CREATE ROLE st_alice LOGIN" -c "GRANT USAGE ON SCHEMA dml TO st_alice" >/dev/null
pgc_allow_role st_alice

# ---------------------------------------------------------------------
# The table: 800,000 rows of 20 float8 features and a 0/1 label, 67 MB as
# float32 rows, over 8 times a budget of 8 MB
# ---------------------------------------------------------------------
pgc_psql -c "SELECT setseed(0.18)" -c "DROP TABLE IF EXISTS st_big" \
	-c "CREATE TABLE st_big AS SELECT *, (x1 + 2 * x2 - x3 + 0.5 * x4 - x5 + 0.3 * (random() - 0.5) > 0)::int AS y
		FROM (SELECT $(for i in $(seq 1 20); do printf 'random() - 0.5 AS x%d, ' $i; done) i AS id
			  FROM generate_series(1, 800000) i) s" \
	-c "GRANT SELECT ON st_big TO st_alice" >/dev/null
pgc_psql -c "VACUUM ANALYZE st_big" >/dev/null
FEATS="'{$(seq -s, -f 'x%g' 1 20)}'"
rows=$(q -c "SELECT count(*) FROM st_big")
budget=$((8 * 1024 * 1024))
check "the table is at least 8 times the budget as float32 rows ($rows rows, $((rows * 21 * 4)) bytes)" \
	'[ $((rows * 21 * 4)) -ge $((8 * budget)) ]'

train_big() {	# name memory [more arguments]
	qa -c "SELECT model_id FROM dml_train('$1', 'st_big', 'y', features => $FEATS, model => 'logistic',
		optimizer => 'adam', learning_rate => 0.01, epochs => 2, batch_size => 512, workers => 2, seed => 7,
		options => '{\"memory\": \"$2\", \"window\": 4, \"in_server\": false}'${3:+, $3})" 2>&1
}
out=$(train_big st_mem 1GB)
check "in memory: trains as an ordinary role" 'grep -qE "^[0-9]+$" <<<"$out"'
check "in memory: nothing streamed" '[ "$(meta st_mem "metrics->>'"'"'streamed'"'"'")" = 0 ]'
out=$(train_big st_streamed 8MB)
check "streamed: trains as an ordinary role ($(tail -1 <<<"$out"))" 'grep -qE "^[0-9]+$" <<<"$out"'
check "streamed: both ranks spilled" '[ "$(meta st_streamed "metrics->>'"'"'streamed'"'"'")" = 2 ]'
# within_budget NAME: every one of the 2 ranks' peak RSS is within the budget + 64 MB
within_budget() {
	[ "$(meta $1 "jsonb_array_length(metrics->'peak_rss')")" = 2 ] &&
	[ "$(meta $1 "(SELECT count(*) FROM jsonb_array_elements_text(metrics->'peak_rss') p
		WHERE p::float8 > $budget + 64 * 1024 * 1024)")" = 0 ]
}
check "streamed: every rank's peak RSS is within the budget + 64 MB ($(meta st_streamed "metrics->'peak_rss'"))" 'within_budget st_streamed'
a_mem=$(meta st_mem "metrics->>'accuracy'")
a_str=$(meta st_streamed "metrics->>'accuracy'")
check "streamed: accuracy $a_str within 0.5 points of in memory ($a_mem)" \
	'[ "$(echo "d = ($a_str - $a_mem) * 100; if (d < 0) d = -d; d <= 0.5" | bc -l)" = 1 ]'
check "streamed: the spill directory is gone after success" '[ "$(spill_dirs)" = 0 ]'

# an fp16 spill: half the bytes of the inputs, the same accuracy
qa -c "SELECT model_id FROM dml_train('st_half', 'st_big', 'y', features => $FEATS, model => 'logistic',
	optimizer => 'adam', learning_rate => 0.01, epochs => 2, batch_size => 512, workers => 2, seed => 7,
	options => '{\"memory\": \"8MB\", \"window\": 4, \"spill\": \"fp16\", \"in_server\": false}')" >/dev/null 2>&1
b32=$(meta st_streamed "metrics->>'spill_bytes'")
b16=$(meta st_half "metrics->>'spill_bytes'")
a16=$(meta st_half "metrics->>'accuracy'")
check "fp16 spill: said so, $b16 bytes against $b32 in float32" \
	'[ "$(meta st_half "metrics->>'"'"'spill_format'"'"'")" = fp16 ] && [ -n "$b16" ] && [ $((b16 * 10)) -lt $((b32 * 7)) ]'
check "fp16 spill: accuracy $a16 within 0.5 points of in memory ($a_mem), peak RSS within the budget + 64 MB ($(meta st_half "metrics->'peak_rss'"))" \
	'[ "$(echo "d = (${a16:-0} - $a_mem) * 100; if (d < 0) d = -d; d <= 0.5" | bc -l)" = 1 ] && within_budget st_half'

# an int8 spill: integer-valued inputs (pixels from 0 to 255) kept exactly
# in a quarter of the bytes; floats are refused
pgc_psql -c "SELECT setseed(0.25)" -c "DROP TABLE IF EXISTS st_pix" \
	-c "CREATE TABLE st_pix AS SELECT *, (p1 + 2 * p2 - p3 + p4 - p5 + 40 * (random() - 0.5) > 255)::int AS y
		FROM (SELECT $(for i in $(seq 1 20); do printf 'floor(random() * 256)::int AS p%d, ' $i; done) i AS id
			  FROM generate_series(1, 400000) i) s" \
	-c "GRANT SELECT ON st_pix TO st_alice" >/dev/null
PIX="'{$(seq -s, -f 'p%g' 1 20)}'"
for fmt in float32 int8; do
	qa -c "SELECT model_id FROM dml_train('st_pix_$fmt', 'st_pix', 'y', features => $PIX, model => 'logistic',
		optimizer => 'adam', learning_rate => 0.01, epochs => 2, batch_size => 512, workers => 2, seed => 7,
		options => '{\"memory\": \"8MB\", \"window\": 4, \"spill\": \"$fmt\", \"in_server\": false}')" >/dev/null 2>>$T/st-lin.err
done
b32=$(meta st_pix_float32 "metrics->>'spill_bytes'")
b8=$(meta st_pix_int8 "metrics->>'spill_bytes'")
a32=$(meta st_pix_float32 "metrics->>'accuracy'")
a8=$(meta st_pix_int8 "metrics->>'accuracy'")
# the inputs (20 a row) take a byte each, not four: 60 bytes a row fewer, less each block's header
check "int8 spill: said so, both ranks, $b8 bytes against $b32 in float32" \
	'[ "$(meta st_pix_int8 "metrics->>'"'"'spill_format'"'"'")" = int8 ] && [ "$(meta st_pix_int8 "metrics->>'"'"'streamed'"'"'")" = 2 ] &&
	 [ -n "$b8" ] && [ $((b32 - b8)) -le $((60 * 400000)) ] && [ $((b32 - b8)) -ge $((59 * 400000)) ]'
check "int8 spill: accuracy $a8 within 0.5 points of the float32 spill's ($a32), peak RSS within the budget + 64 MB ($(meta st_pix_int8 "metrics->'peak_rss'"))" \
	'[ "$(echo "d = (${a8:-0} - ${a32:-1}) * 100; if (d < 0) d = -d; d <= 0.5" | bc -l)" = 1 ] && within_budget st_pix_int8'
out=$(pgc_psql -v VERBOSITY=verbose -U st_alice -c "SELECT model_id FROM dml_train('st_int8_float', 'st_big', 'y', features => $FEATS,
	model => 'logistic', optimizer => 'adam', epochs => 1, workers => 2,
	options => '{\"memory\": \"8MB\", \"spill\": \"int8\"}')" 2>&1)
check "int8 spill of non-integer values: a clear error ($(grep ERROR <<<"$out"))" \
	'grep -q "ERROR:  22003: a feature value .* of input [0-9]* is not an integer: it does not fit the int8 spill" <<<"$out"'
out=$(qa -c "SELECT dml_train('st_badspill', 'st_pix', 'y', options => '{\"spill\": \"int4\"}')" 2>&1)
check "an unknown spill format is refused" 'grep -q "option \"spill\" must be \"float32\", \"fp16\" or \"int8\"" <<<"$out"'

# validation rows and early stopping streamed: the same held-out rows as in memory
out=$(train_big st_val_mem 1GB "validation => 0.2, patience => 5")
out2=$(train_big st_val_str 8MB "validation => 0.2, patience => 5")
v1=$(meta st_val_mem "metrics->>'validation_rows'")
v2=$(meta st_val_str "metrics->>'validation_rows'")
check "validation: the same $v1 rows held out streamed ($v2)" '[ -n "$v1" ] && [ "$v1" = "$v2" ]'
check "validation: evaluated on them" '[ "$(meta st_val_str "metrics->>'"'"'evaluated_on'"'"'")" = validation ]'

# ---------------------------------------------------------------------
# Exact least squares streamed equals in memory to 1e-6
# ---------------------------------------------------------------------
pgc_psql -c "SELECT setseed(0.5)" -c "DROP TABLE IF EXISTS st_lin" \
	-c "CREATE TABLE st_lin AS SELECT *, 3 * a - 0.25 * b + 7 * c + d + 0.1 * random() AS y
		FROM (SELECT random() AS a, random() * 10 AS b, random() - 0.5 AS c, random() AS d
			  FROM generate_series(1, 400000)) s" \
	-c "GRANT SELECT ON st_lin TO st_alice" >/dev/null
for mem in 1GB 8MB; do
	qa -c "SELECT model_id FROM dml_train('st_lin_$mem', 'st_lin', 'y', model => 'linear', optimizer => 'exact',
		workers => 2, options => '{\"memory\": \"$mem\", \"in_server\": false, \"cov\": \"HC0\"}')" >/dev/null 2>$T/st-lin.err
done
check "exact: the 8MB run streamed" '[ "$(meta st_lin_8MB "metrics->>'"'"'streamed'"'"'")" -ge 1 ]'
diff=$(q -c "SELECT max(abs(dml_predict('st_lin_1GB', l) - dml_predict('st_lin_8MB', l)) / (1 + abs(dml_predict('st_lin_1GB', l))))
	FROM (SELECT * FROM st_lin LIMIT 2000) l")
close=$(q -c "SELECT $diff < 1e-6")
check "exact: streamed predictions equal in-memory ones to 1e-6 (largest difference $diff)" '[ "$close" = t ]'
se=$(q -c "SELECT max(abs(a::float8 - b::float8) / abs(a::float8))
	FROM jsonb_array_elements_text((SELECT metrics->'statistics'->'std_errors' FROM dml.models WHERE name = 'st_lin_1GB')) WITH ORDINALITY x(a, i)
	JOIN jsonb_array_elements_text((SELECT metrics->'statistics'->'std_errors' FROM dml.models WHERE name = 'st_lin_8MB')) WITH ORDINALITY y(b, i) USING (i)")
check "exact: streamed HC0 standard errors equal in-memory ones to 1e-6 ($se relative)" '[ -n "$se" ] && [ "$(q -c "SELECT $se < 1e-6")" = t ]'

# full-batch gradient descent: the gradient summed in stored order, in the
# same chunks streamed or not (train.c full_gradient)
for mem in 1GB 8MB; do
	qa -c "SELECT model_id FROM dml_train('st_fb_$mem', 'st_lin', 'y', model => 'linear', optimizer => 'sgd',
		learning_rate => 0.1, batch_size => 1000000, epochs => 10, workers => 2,
		options => '{\"memory\": \"$mem\", \"in_server\": false}')" >/dev/null 2>>$T/st-lin.err
done
diff=$(q -c "SELECT max(abs(dml_predict('st_fb_1GB', l) - dml_predict('st_fb_8MB', l)) / (1 + abs(dml_predict('st_fb_1GB', l))))
	FROM (SELECT * FROM st_lin LIMIT 2000) l")
close=$(q -c "SELECT $diff < 1e-6")
check "full batch: streamed ($(meta st_fb_8MB "metrics->>'streamed'") ranks) equals in memory to 1e-6 (largest difference $diff)" \
	'[ "$(meta st_fb_8MB "metrics->>'"'"'streamed'"'"'")" -ge 1 ] && [ "$close" = t ]'

# L-BFGS reads the blocks at each evaluation, in the in-memory chunks
for mem in 1GB 8MB; do
	qa -c "SELECT model_id FROM dml_train('st_lb_$mem', 'st_big', 'y', features => $FEATS, model => 'logistic',
		optimizer => 'lbfgs', epochs => 15, workers => 2, validation => 0.1,
		options => '{\"memory\": \"$mem\", \"in_server\": false}')" >/dev/null 2>>$T/st-lin.err
done
diff=$(q -c "SELECT max(abs(dml_predict('st_lb_1GB', b) - dml_predict('st_lb_8MB', b)))
	FROM (SELECT * FROM st_big LIMIT 2000) b")
close=$(q -c "SELECT $diff < 1e-6")
check "L-BFGS: streamed ($(meta st_lb_8MB "metrics->>'streamed'") ranks) equals in memory to 1e-6 (largest difference $diff)" \
	'[ "$(meta st_lb_8MB "metrics->>'"'"'streamed'"'"'")" = 2 ] && [ "$close" = t ]'

# ---------------------------------------------------------------------
# Every sync mode, an MLP with listed labels, a background job
# ---------------------------------------------------------------------
pgc_psql -c "DROP TABLE IF EXISTS st_mid" \
	-c "CREATE TABLE st_mid AS SELECT * FROM st_big WHERE id <= 200000" \
	-c "GRANT SELECT ON st_mid TO st_alice" >/dev/null
for s in "ps servers => 1" "ssp servers => 1, staleness => 1" "async servers => 1" "gossip" "average average_every => 2"; do
	mode=${s%% *}
	args=${s#"$mode"}
	out=$(qa -c "SELECT model_id FROM dml_train('st_sync_$mode', 'st_mid', 'y', features => $FEATS, model => 'logistic',
		optimizer => 'sgd', learning_rate => 0.1, epochs => 2, batch_size => 256, workers => 2, sync => '$mode'
		${args:+, ${args# }}, options => '{\"memory\": \"8MB\"}')" 2>&1)
	acc=$(meta "st_sync_$mode" "metrics->>'accuracy'")
	check "sync $mode: streamed ($(meta "st_sync_$mode" "metrics->>'streamed'") ranks), accuracy $acc" \
		'[ "$(meta "st_sync_$mode" "metrics->>'"'"'streamed'"'"'")" -ge 1 ] && [ "$(echo "${acc:-0} > 0.8" | bc -l)" = 1 ]'
done
out=$(qa -c "SELECT model_id FROM dml_train('st_mlp', 'st_mid', 'y', features => $FEATS, model => 'mlp', hidden => '{16}',
	optimizer => 'adam', epochs => 2, batch_size => 256, workers => 2, options => '{\"memory\": \"8MB\"}')" 2>&1)
check "mlp with labels listed while loading: streamed, accuracy $(meta st_mlp "metrics->>'accuracy'")" \
	'[ "$(meta st_mlp "metrics->>'"'"'streamed'"'"'")" -ge 1 ] && [ "$(echo "$(meta st_mlp "metrics->>'"'"'accuracy'"'"'") > 0.8" | bc -l)" = 1 ]'
# text labels and a one-hot feature: the COPY path spills too
pgc_psql -c "DROP TABLE IF EXISTS st_text" \
	-c "CREATE TABLE st_text AS SELECT $(seq -s, -f 'x%g' 1 20),
		CASE WHEN x1 + x2 > 0.3 THEN 'high' WHEN x1 + x2 < -0.3 THEN 'low' ELSE 'mid' END AS band,
		(ARRAY['red', 'green', 'blue'])[1 + id % 3] AS colour FROM st_mid" \
	-c "GRANT SELECT ON st_text TO st_alice" >/dev/null
for mem in 1GB 8MB; do
	qa -c "SELECT model_id FROM dml_train('st_text_$mem', 'st_text', 'band', features => '{$(seq -s, -f 'x%g' 1 20),colour}',
		model => 'softmax', optimizer => 'adam', learning_rate => 0.01, epochs => 2, batch_size => 256, workers => 2,
		options => '{\"memory\": \"$mem\"}')" >/dev/null 2>>$T/st-lin.err
done
t1=$(meta st_text_1GB "metrics->>'accuracy'")
t2=$(meta st_text_8MB "metrics->>'accuracy'")
check "softmax on text labels with a one-hot feature: streamed ($(meta st_text_8MB "metrics->>'streamed'") ranks, load $(meta st_text_8MB "metrics->>'load'")), accuracy $t2 against $t1 in memory" \
	'[ "$(meta st_text_8MB "metrics->>'"'"'streamed'"'"'")" = 2 ] && [ "$(echo "d = (${t2:-0} - ${t1:-1}) * 100; if (d < 0) d = -d; d <= 1" | bc -l)" = 1 ]'

# Newton's method streamed (the statistics pass, the direction's logits and
# the float64 polish read the blocks each iteration; the robust covariance
# one more pass) gives the in-memory model: logistic with HC0 standard
# errors, softmax on text labels with a one-hot feature
for mem in 1GB 8MB; do
	qa -c "SELECT model_id FROM dml_train('st_nt_$mem', 'st_mid', 'y', features => $FEATS, model => 'logistic',
		optimizer => 'newton', weight_decay => 0, workers => 2,
		options => '{\"memory\": \"$mem\", \"in_server\": false, \"cov\": \"HC0\"}')" >/dev/null 2>>$T/st-lin.err
	qa -c "SELECT model_id FROM dml_train('st_ntmn_$mem', 'st_text', 'band', features => '{$(seq -s, -f 'x%g' 1 20),colour}',
		model => 'softmax', optimizer => 'newton', workers => 2, validation => 0.1,
		options => '{\"memory\": \"$mem\", \"in_server\": false}')" >/dev/null 2>>$T/st-lin.err
done
diff=$(q -c "SELECT max(abs(dml_predict('st_nt_1GB', b) - dml_predict('st_nt_8MB', b))) FROM (SELECT * FROM st_mid LIMIT 2000) b")
se=$(q -c "SELECT max(abs(a::float8 - b::float8) / abs(a::float8))
	FROM jsonb_array_elements_text((SELECT metrics->'statistics'->'std_errors' FROM dml.models WHERE name = 'st_nt_1GB')) WITH ORDINALITY x(a, i)
	JOIN jsonb_array_elements_text((SELECT metrics->'statistics'->'std_errors' FROM dml.models WHERE name = 'st_nt_8MB')) WITH ORDINALITY y(b, i) USING (i)")
check "newton, logistic: streamed ($(meta st_nt_8MB "metrics->>'streamed'") ranks) equals in memory to 1e-6 (probabilities $diff, HC0 standard errors $se relative)" \
	'[ "$(meta st_nt_8MB "metrics->>'"'"'streamed'"'"'")" = 2 ] && [ -n "$se" ] && [ "$(q -c "SELECT $diff < 1e-6 AND $se < 1e-6")" = t ]'
diff=$(q -c "SELECT max(abs(a - b)) FROM (SELECT unnest(dml_predict_proba('st_ntmn_1GB', x)) a,
	unnest(dml_predict_proba('st_ntmn_8MB', x)) b FROM (SELECT * FROM st_text LIMIT 2000) x) s")
check "newton, softmax with a one-hot feature: streamed ($(meta st_ntmn_8MB "metrics->>'streamed'") ranks) equals in memory to 1e-6 ($diff)" \
	'[ "$(meta st_ntmn_8MB "metrics->>'"'"'streamed'"'"'")" = 2 ] && [ "$(q -c "SELECT $diff < 1e-6")" = t ]'
# a worker killed in Newton's second iteration: both ranks reuse their
# spills and the restarted fit is the in-memory one
out=$(pgc_psql -t -A -c "SELECT model_id FROM dml_train('st_nt_kill', 'st_mid', 'y', features => $FEATS, model => 'logistic',
	optimizer => 'newton', weight_decay => 0, workers => 2,
	options => '{\"memory\": \"8MB\", \"in_server\": false, \"cov\": \"HC0\", \"fault\": \"1:2:kill\", \"max_restarts\": 1}')" 2>&1)
diff=$(q -c "SELECT max(abs(dml_predict('st_nt_1GB', b) - dml_predict('st_nt_kill', b))) FROM (SELECT * FROM st_mid LIMIT 2000) b")
check "newton, a worker killed: the spills reused ($(meta st_nt_kill "metrics->>'spill_reused'") ranks), the in-memory model to 1e-6 ($diff)" \
	'grep -q "worker 0 reused its spill; worker 1 reused its spill" <<<"$out" && [ "$(meta st_nt_kill "metrics->>'"'"'spill_reused'"'"'")" = 2 ] &&
	 [ -n "$diff" ] && [ "$(q -c "SELECT $diff < 1e-6")" = t ]'

# Newton keeps 36 bytes a training row of 3-class softmax in memory:
# 400,000 a rank do not fit what 8MB leaves for rows
pgc_psql -c "DROP TABLE IF EXISTS st_band" -c "CREATE TABLE st_band AS SELECT x1, x2, x3, x4, x5,
	CASE WHEN x1 + x2 > 0.3 THEN 'high' WHEN x1 + x2 < -0.3 THEN 'low' ELSE 'mid' END AS band FROM st_big" \
	-c "GRANT SELECT ON st_band TO st_alice" >/dev/null
out=$(pgc_psql -v VERBOSITY=verbose -U st_alice -c "SELECT model_id FROM dml_train('st_nt_big', 'st_band', 'band',
	model => 'softmax', optimizer => 'newton', workers => 2, options => '{\"memory\": \"8MB\", \"in_server\": false}')" 2>&1)
check "newton whose per-row logits pass the budget: a clear error ($(grep ERROR <<<"$out"))" \
	'grep -q "ERROR:  53200: Newton.s method keeps 36 bytes a training row in memory, and a worker.s rows need [0-9.]* MB, more than the [0-9.]* MB its memory of 8 MB leaves for rows" <<<"$out"'
check "the spill directories are gone" '[ "$(spill_dirs)" = 0 ]'

# the GPU loop streams too: each step's rows from the stream to the device
if { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; } ||
	[ -e /dev/nvidia0 ]; then
	for mem in 1GB 8MB; do
		out=$(qa -c "SELECT model_id FROM dml_train('st_gpu_$mem', 'st_mid', 'y', features => $FEATS, model => 'logistic',
			optimizer => 'adam', learning_rate => 0.01, epochs => 2, batch_size => 512, workers => 1, seed => 7,
			device => 'gpu', options => '{\"memory\": \"$mem\", \"window\": 4}')" 2>&1)
	done
	g1=$(meta st_gpu_1GB "metrics->>'accuracy'")
	g2=$(meta st_gpu_8MB "metrics->>'accuracy'")
	check "gpu: streamed ($(meta st_gpu_8MB "metrics->>'streamed'") ranks) on the GPU, accuracy $g2 within 0.5 points of in memory ($g1)" \
		'grep -q "training logistic on gpu" <<<"$out" && [ "$(meta st_gpu_8MB "metrics->>'"'"'streamed'"'"'")" = 1 ] &&
		 [ "$(echo "d = (${g2:-0} - ${g1:-1}) * 100; if (d < 0) d = -d; d <= 0.5" | bc -l)" = 1 ]'
else
	ok "# SKIP gpu: the GPU loop streamed (no GPU visible here)"
fi

id=$(qa -c "SELECT dml_train_async('st_async', 'st_mid', 'y', features => $FEATS, model => 'logistic',
	optimizer => 'adam', epochs => 2, batch_size => 256, workers => 2, options => '{\"memory\": \"8MB\"}')")
wait_until 300 '[ "$(q -c "SELECT state FROM dml.jobs WHERE id = $id")" = succeeded ]'
check "background job: succeeded streamed" \
	'[ "$(q -c "SELECT state FROM dml.jobs WHERE id = $id")" = succeeded ] && [ "$(meta st_async "metrics->>'"'"'streamed'"'"'")" -ge 1 ]'
check "background job: its spill directory is gone" '[ "$(spill_dirs)" = 0 ]'

# ---------------------------------------------------------------------
# A killed worker: restarted from its checkpoint, both ranks reusing their
# spills; a damaged or removed spill recreated; and killed for good
# ---------------------------------------------------------------------
out=$(pgc_psql -t -A -c "SELECT model_id FROM dml_train('st_kill', 'st_mid', 'y', features => $FEATS, model => 'logistic',
	optimizer => 'adam', epochs => 4, batch_size => 256, workers => 2,
	options => '{\"memory\": \"8MB\", \"fault\": \"1:3:kill\", \"max_restarts\": 2}')" 2>&1)
check "killed worker: the job restarts and succeeds streamed" \
	'grep -qi "restart" <<<"$out" && [ "$(meta st_kill "metrics->>'"'"'streamed'"'"'")" -ge 1 ] && [ "$(meta st_kill "metrics->>'"'"'epochs'"'"'")" = 4 ]'
check "killed worker: both restarted ranks reused their spills ($(grep -o 'worker 0 [^;]*; worker 1 .*' <<<"$out"))" \
	'grep -q "worker 0 reused its spill; worker 1 reused its spill" <<<"$out" &&
	 [ "$(meta st_kill "metrics->>'"'"'spill_reused'"'"'")" = 2 ] && [ "$(meta st_kill "metrics->>'"'"'spill_recreated'"'"'")" = 0 ]'
check "killed worker: the spill directory is gone" '[ "$(spill_dirs)" = 0 ]'
# a spill damaged (a byte flipped) or removed before its rank is killed:
# that rank spills afresh from PostgreSQL, the other reuses its own
for how in spoil unspill; do
	out=$(pgc_psql -t -A -c "SELECT model_id FROM dml_train('st_$how', 'st_mid', 'y', features => $FEATS, model => 'logistic',
		optimizer => 'adam', epochs => 4, batch_size => 256, workers => 2,
		options => '{\"memory\": \"8MB\", \"fault\": \"1:3:$how\", \"max_restarts\": 2}')" 2>&1)
	[ $how = spoil ] && what=damaged || what=missing
	check "$how: worker 1 spilled afresh ($(grep -o 'worker 0 [^;]*; worker 1 .*' <<<"$out")), worker 0 reused, the job succeeded" \
		'grep -q "worker 0 reused its spill; worker 1 spilled afresh from PostgreSQL: its spill is $what" <<<"$out" &&
		 [ "$(meta st_$how "metrics->>'"'"'spill_reused'"'"'")" = 1 ] && [ "$(meta st_$how "metrics->>'"'"'spill_recreated'"'"'")" = 1 ] &&
		 [ "$(meta st_$how "metrics->>'"'"'epochs'"'"'")" = 4 ]'
done
a_kill=$(meta st_kill "metrics->>'accuracy'")
a_spoil=$(meta st_spoil "metrics->>'accuracy'")
check "a recreated spill trains as a reused one (accuracy $a_spoil against $a_kill)" \
	'[ "$(echo "d = (${a_spoil:-0} - ${a_kill:-1}) * 100; if (d < 0) d = -d; d <= 0.5" | bc -l)" = 1 ]'
check "damaged and removed spills: the spill directories are gone" '[ "$(spill_dirs)" = 0 ]'
out=$(pgc_psql -t -A -c "SELECT model_id FROM dml_train('st_kill2', 'st_mid', 'y', features => $FEATS, model => 'logistic',
	optimizer => 'adam', epochs => 4, batch_size => 256, workers => 2,
	options => '{\"memory\": \"8MB\", \"fault\": \"1:2:kill\", \"max_restarts\": 0}')" 2>&1)
check "killed worker, no restarts: the job fails" 'grep -q ERROR <<<"$out"'
check "killed worker, no restarts: the spill directory is gone" '[ "$(spill_dirs)" = 0 ]'

# ---------------------------------------------------------------------
# Cancel: the spill directory exists while the job runs, and goes
# ---------------------------------------------------------------------
qa -c "SELECT dml_train('st_cancel', 'st_mid', 'y', features => $FEATS, model => 'logistic', optimizer => 'sgd',
	epochs => 100000, batch_size => 64, workers => 2, options => '{\"memory\": \"8MB\"}')" >$T/st-cancel.log 2>&1 &
client=$!
wait_until 120 '[ "$(spill_dirs)" = 1 ] && grep -q "epoch 1:" $T/st-cancel.log'
check "cancel: the job's spill directory exists while it trains" '[ "$(spill_dirs)" = 1 ]'
q -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%st_cancel%' AND pid <> pg_backend_pid()" >/dev/null
wait "$client"
check "cancel: the client saw the cancel" 'grep -q "canceling statement due to user request" $T/st-cancel.log'
check "cancel: the spill directory is gone" '[ "$(spill_dirs)" = 0 ]'

# ---------------------------------------------------------------------
# A view has no blocks: rank 0 reads it with one COPY and deals its rows
# out to the ranks as they come (load.c), each rank spilling its own share
# under the same budget.  The deals do not depend on the budget, so every
# rank gets the rows it gets in memory.
# ---------------------------------------------------------------------
pgc_psql -c "DROP VIEW IF EXISTS st_bigv" -c "CREATE VIEW st_bigv AS SELECT * FROM st_big WHERE id > 0" \
	-c "GRANT SELECT ON st_bigv TO st_alice" >/dev/null
vrows=$(q -c "SELECT count(*) FROM st_bigv")
train_view() {	# name memory [more arguments]
	qa -c "SELECT model_id FROM dml_train('$1', 'st_bigv', 'y', features => $FEATS, model => 'logistic',
		optimizer => 'adam', learning_rate => 0.01, epochs => 2, batch_size => 512, workers => 2, seed => 7,
		options => '{\"memory\": \"$2\", \"window\": 4, \"in_server\": false}'${3:+, $3})" 2>&1
}
out=$(train_view st_v_mem 1GB)
check "view in memory: trains as an ordinary role, nothing streamed" \
	'grep -qE "^[0-9]+$" <<<"$out" && [ "$(meta st_v_mem "metrics->>'"'"'streamed'"'"'")" = 0 ]'
out=$(train_view st_v_str 8MB)
check "view of $vrows rows ($((vrows * 21 * 4)) bytes as float32, over 8 times the budget) streamed: both ranks spilled their deals ($(meta st_v_str "metrics->>'streamed'") ranks)" \
	'[ $((vrows * 21 * 4)) -ge $((8 * budget)) ] && [ "$(meta st_v_str "metrics->>'"'"'streamed'"'"'")" = 2 ]'
check "view streamed: every rank's peak RSS is within the budget + 64 MB, rank 0 included ($(meta st_v_str "metrics->'peak_rss'"))" 'within_budget st_v_str'
a_vmem=$(meta st_v_mem "metrics->>'accuracy'")
a_vstr=$(meta st_v_str "metrics->>'accuracy'")
check "view streamed: accuracy $a_vstr within 0.5 points of in memory ($a_vmem)" \
	'[ "$(echo "d = (${a_vstr:-0} - ${a_vmem:-1}) * 100; if (d < 0) d = -d; d <= 0.5" | bc -l)" = 1 ]'
check "view streamed: the spill directory is gone after success" '[ "$(spill_dirs)" = 0 ]'

# exact least squares, full-batch gradient descent and L-BFGS (their full
# gradients summed in stored order, in the same chunks) over a view, with
# validation rows held out: the in-memory model to 1e-6; the deals give
# each rank the same rows in the same order
pgc_psql -c "DROP VIEW IF EXISTS st_linv" -c "CREATE VIEW st_linv AS SELECT * FROM st_lin WHERE b >= 0" \
	-c "GRANT SELECT ON st_linv TO st_alice" >/dev/null
for mem in 1GB 8MB; do
	qa -c "SELECT model_id FROM dml_train('st_vlin_$mem', 'st_linv', 'y', model => 'linear', optimizer => 'exact',
		workers => 2, options => '{\"memory\": \"$mem\", \"in_server\": false}')" >/dev/null 2>>$T/st-lin.err
	qa -c "SELECT model_id FROM dml_train('st_vfb_$mem', 'st_linv', 'y', model => 'linear', optimizer => 'sgd',
		learning_rate => 0.1, batch_size => 1000000, epochs => 10, workers => 2,
		options => '{\"memory\": \"$mem\", \"in_server\": false}')" >/dev/null 2>>$T/st-lin.err
	qa -c "SELECT model_id FROM dml_train('st_vlb_$mem', 'st_bigv', 'y', features => $FEATS, model => 'logistic',
		optimizer => 'lbfgs', epochs => 15, workers => 2, validation => 0.1,
		options => '{\"memory\": \"$mem\", \"in_server\": false}')" >/dev/null 2>>$T/st-lin.err
done
diff=$(q -c "SELECT max(abs(dml_predict('st_vlin_1GB', l) - dml_predict('st_vlin_8MB', l)) / (1 + abs(dml_predict('st_vlin_1GB', l))))
	FROM (SELECT * FROM st_lin LIMIT 2000) l")
check "view, exact: streamed ($(meta st_vlin_8MB "metrics->>'streamed'") ranks) equals in memory to 1e-6 (largest difference $diff)" \
	'[ "$(meta st_vlin_8MB "metrics->>'"'"'streamed'"'"'")" = 2 ] && [ -n "$diff" ] && [ "$(q -c "SELECT $diff < 1e-6")" = t ]'
diff=$(q -c "SELECT max(abs(dml_predict('st_vfb_1GB', l) - dml_predict('st_vfb_8MB', l)) / (1 + abs(dml_predict('st_vfb_1GB', l))))
	FROM (SELECT * FROM st_lin LIMIT 2000) l")
check "view, full batch: streamed ($(meta st_vfb_8MB "metrics->>'streamed'") ranks) equals in memory to 1e-6 (largest difference $diff)" \
	'[ "$(meta st_vfb_8MB "metrics->>'"'"'streamed'"'"'")" = 2 ] && [ -n "$diff" ] && [ "$(q -c "SELECT $diff < 1e-6")" = t ]'
diff=$(q -c "SELECT max(abs(dml_predict('st_vlb_1GB', b) - dml_predict('st_vlb_8MB', b))) FROM (SELECT * FROM st_big LIMIT 2000) b")
v1=$(meta st_vlb_1GB "metrics->>'validation_rows'")
v2=$(meta st_vlb_8MB "metrics->>'validation_rows'")
check "view, L-BFGS with validation: streamed ($(meta st_vlb_8MB "metrics->>'streamed'") ranks) equals in memory to 1e-6 (largest difference $diff), the same $v1 rows held out ($v2)" \
	'[ "$(meta st_vlb_8MB "metrics->>'"'"'streamed'"'"'")" = 2 ] && [ -n "$diff" ] && [ "$(q -c "SELECT $diff < 1e-6")" = t ] &&
	 [ -n "$v1" ] && [ "$v1" = "$v2" ] && [ "$(meta st_vlb_8MB "metrics->>'"'"'evaluated_on'"'"'")" = validation ]'

# a foreign table (postgres_fdw back into this server: st_lin as a remote
# table) has no blocks either: dealt as a view is, streamed within the
# budget, the exact model of the view in memory to 1e-6 (skipped where the
# server lacks the contrib module: PyPI's pgserver 16 ships none)
if ! pgc_available postgres_fdw; then
	ok "foreign table, exact: streamed within the budget, equals the view in memory # SKIP postgres_fdw is not installed"
	ok "foreign table streamed: the spill directory is gone # SKIP postgres_fdw is not installed"
else
	pgc_psql -c "SET client_min_messages = warning" -c "CREATE EXTENSION IF NOT EXISTS postgres_fdw" \
		-c "DROP SCHEMA IF EXISTS st_fdw CASCADE" -c "DROP SERVER IF EXISTS st_loop CASCADE" \
		-c "CREATE SERVER st_loop FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$PGHOST', port '$PGPORT', dbname '$PGDATABASE')" \
		-c "CREATE USER MAPPING FOR postgres SERVER st_loop OPTIONS (user 'postgres')" \
		-c "CREATE SCHEMA st_fdw" -c "IMPORT FOREIGN SCHEMA public LIMIT TO (st_lin) FROM SERVER st_loop INTO st_fdw" >/dev/null
	for mem in 1GB 8MB; do
		q -c "SELECT model_id FROM dml_train('st_flin_$mem', 'st_fdw.st_lin', 'y', model => 'linear', optimizer => 'exact',
			workers => 2, options => '{\"memory\": \"$mem\", \"in_server\": false}')" >/dev/null 2>>$T/st-lin.err
	done
	diff=$(q -c "SELECT max(abs(dml_predict('st_vlin_1GB', l) - dml_predict('st_flin_8MB', l)) / (1 + abs(dml_predict('st_vlin_1GB', l))))
		FROM (SELECT * FROM st_lin LIMIT 2000) l")
	check "foreign table, exact: in memory ($(meta st_flin_1GB "metrics->>'streamed'") ranks streamed) and streamed ($(meta st_flin_8MB "metrics->>'streamed'") ranks, peak RSS $(meta st_flin_8MB "metrics->'peak_rss'")) within the budget + 64 MB; equals the view in memory to 1e-6 (largest difference $diff)" \
		'[ "$(meta st_flin_1GB "metrics->>'"'"'streamed'"'"'")" = 0 ] && [ "$(meta st_flin_8MB "metrics->>'"'"'streamed'"'"'")" = 2 ] &&
		 within_budget st_flin_8MB && [ -n "$diff" ] && [ "$(q -c "SELECT $diff < 1e-6")" = t ]' || tail -5 $T/st-lin.err
	check "foreign table streamed: the spill directory is gone" '[ "$(spill_dirs)" = 0 ]'
	pgc_psql -c "SET client_min_messages = warning" -c "DROP SCHEMA st_fdw CASCADE" -c "DROP SERVER st_loop CASCADE" >/dev/null
fi

# a killed worker: restarted from its checkpoint; a view's spills are not
# reused (rank 0 reads the view again to deal every rank its rows)
out=$(pgc_psql -t -A -c "SELECT model_id FROM dml_train('st_vkill', 'st_bigv', 'y', features => $FEATS, model => 'logistic',
	optimizer => 'adam', epochs => 3, batch_size => 512, workers => 2,
	options => '{\"memory\": \"8MB\", \"fault\": \"1:2:kill\", \"max_restarts\": 1, \"checkpoint_every\": 1}')" 2>&1)
check "view, killed worker: restarted from its checkpoint, spilled afresh (no spill of a view is reused), succeeded streamed" \
	'grep -q "restarting from the checkpoint of epoch 1" <<<"$out" && [ "$(meta st_vkill "metrics->>'"'"'streamed'"'"'")" = 2 ] &&
	 [ "$(meta st_vkill "metrics->>'"'"'epochs'"'"'")" = 3 ] && [ "$(meta st_vkill "metrics->>'"'"'spill_reused'"'"'")" = 0 ]' \
	"the statement said: $out
streamed, epochs, spill_reused, spill_recreated: $(meta st_vkill "concat_ws(' ', metrics->>'streamed', metrics->>'epochs', metrics->>'spill_reused', metrics->>'spill_recreated')")"
check "view, killed worker: the spill directory is gone" '[ "$(spill_dirs)" = 0 ]'
# an error in the view's last rows, after both ranks began to spill
pgc_psql -c "DROP VIEW IF EXISTS st_badv" \
	-c "CREATE VIEW st_badv AS SELECT y, $(seq -s, -f 'x%g' 2 20), CASE WHEN id < 790000 THEN x1 ELSE x1 / (id - id) END AS x1 FROM st_big" \
	-c "GRANT SELECT ON st_badv TO st_alice" >/dev/null
out=$(qa -c "SELECT model_id FROM dml_train('st_vbad', 'st_badv', 'y', features => $FEATS, model => 'logistic',
	optimizer => 'adam', epochs => 1, workers => 2, options => '{\"memory\": \"8MB\"}')" 2>&1)
check "view failing while dealt: a clear error ($(grep ERROR <<<"$out"))" 'grep -q "ERROR:.*division by zero" <<<"$out"'
check "view failing while dealt: the spill directory is gone" '[ "$(spill_dirs)" = 0 ]'
# cancel while a streamed view trains
qa -c "SELECT dml_train('st_vcancel', 'st_bigv', 'y', features => $FEATS, model => 'logistic', optimizer => 'sgd',
	epochs => 100000, batch_size => 64, workers => 2, options => '{\"memory\": \"8MB\"}')" >$T/st-vcancel.log 2>&1 &
client=$!
wait_until 180 '[ "$(spill_dirs)" = 1 ] && grep -q "epoch 1:" $T/st-vcancel.log'
check "view, cancel: the job's spill directory exists while it trains" '[ "$(spill_dirs)" = 1 ]'
q -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%st_vcancel%' AND pid <> pg_backend_pid()" >/dev/null
wait "$client"
check "view, cancel: the client saw the cancel" 'grep -q "canceling statement due to user request" $T/st-vcancel.log'
check "view, cancel: the spill directory is gone" '[ "$(spill_dirs)" = 0 ]'
# a partitioned table under row-level security is read through its parent,
# as a view is: dealt, spilled, the policy's rows only
pgc_psql -c "DROP TABLE IF EXISTS st_part" -c "CREATE TABLE st_part (LIKE st_mid) PARTITION BY RANGE (id)" \
	-c "CREATE TABLE st_part_a PARTITION OF st_part FOR VALUES FROM (MINVALUE) TO (100001)" \
	-c "CREATE TABLE st_part_b PARTITION OF st_part FOR VALUES FROM (100001) TO (MAXVALUE)" \
	-c "INSERT INTO st_part SELECT * FROM st_mid" -c "ALTER TABLE st_part ENABLE ROW LEVEL SECURITY" \
	-c "CREATE POLICY st_part_p ON st_part FOR SELECT TO st_alice USING (id % 10 <> 0)" \
	-c "GRANT SELECT ON st_part, st_part_a, st_part_b TO st_alice" >/dev/null
out=$(qa -c "SELECT model_id FROM dml_train('st_vpart', 'st_part', 'y', features => $FEATS, model => 'logistic',
	optimizer => 'adam', epochs => 1, batch_size => 256, workers => 2, options => '{\"memory\": \"8MB\"}')" 2>&1)
check "partitioned table under a policy: dealt through its parent and streamed ($(meta st_vpart "metrics->>'streamed'") ranks), the policy's $(meta st_vpart "metrics->>'train_rows'") rows" \
	'[ "$(meta st_vpart "metrics->>'"'"'streamed'"'"'")" = 2 ] && [ "$(meta st_vpart "metrics->>'"'"'train_rows'"'"'")" = 180000 ] && within_budget st_vpart'
# a background job over a view streams too
id=$(qa -c "SELECT dml_train_async('st_vasync', 'st_bigv', 'y', features => $FEATS, model => 'logistic',
	optimizer => 'adam', epochs => 1, batch_size => 256, workers => 2, options => '{\"memory\": \"8MB\"}')")
wait_until 300 '[ "$(q -c "SELECT state FROM dml.jobs WHERE id = $id")" = succeeded ]'
check "view, background job: succeeded streamed within the budget" \
	'[ "$(q -c "SELECT state FROM dml.jobs WHERE id = $id")" = succeeded ] && [ "$(meta st_vasync "metrics->>'"'"'streamed'"'"'")" = 2 ] && within_budget st_vasync'
check "view, background job: its spill directory is gone" '[ "$(spill_dirs)" = 0 ]'

# ---------------------------------------------------------------------
# Where the spill may go: superuser only; unwritable, full, limited
# ---------------------------------------------------------------------
err=$(qa -c "SET dml.spill_dir = '/tmp'" 2>&1)
check "an ordinary role cannot set dml.spill_dir ($err)" 'grep -q "permission denied" <<<"$err"'
err=$(qa -c "SET dml.spill_limit = -1" 2>&1)
check "an ordinary role cannot set dml.spill_limit" 'grep -q "permission denied" <<<"$err"'

mkdir -p "$LOCKED" && chmod 700 "$LOCKED"	# root's, closed to the server's OS user
out=$(pgc_psql -c "SET dml.spill_dir = '$LOCKED'" -c "SELECT model_id FROM dml_train('st_locked', 'st_mid', 'y',
	features => $FEATS, model => 'logistic', optimizer => 'adam', epochs => 1, workers => 2,
	options => '{\"memory\": \"8MB\"}')" 2>&1)
check "an unwritable spill directory is a clear error ($(grep ERROR <<<"$out"))" \
	'grep -q "could not create the job.s spill directory under dml.spill_dir: Permission denied" <<<"$out"'

mkdir -p "$FULL"
if mount -t tmpfs -o size=1m tmpfs "$FULL" 2>/dev/null; then
	chown postgres "$FULL"
	out=$(pgc_psql -v VERBOSITY=verbose -c "SET dml.spill_dir = '$FULL'" -c "SELECT model_id FROM dml_train('st_full', 'st_mid', 'y',
		features => $FEATS, model => 'logistic', optimizer => 'adam', epochs => 1, workers => 2,
		options => '{\"memory\": \"8MB\"}')" 2>&1)
	check "a full spill disk is a clear error ($(grep ERROR <<<"$out"))" \
		'grep -q "ERROR:  53100: could not write spill file.*No space left on device" <<<"$out"'
	check "a full spill disk: the job's directory is gone" '[ -z "$(ls -A "$FULL")" ]'
	umount "$FULL"
else
	ok "# SKIP a full spill disk: cannot mount a tmpfs here"
	ok "# SKIP a full spill disk: the job's directory is gone"
fi
out=$(pgc_psql -v VERBOSITY=verbose -c "SET dml.spill_limit = '2MB'" -c "SELECT model_id FROM dml_train('st_limit', 'st_mid', 'y',
	features => $FEATS, model => 'logistic', optimizer => 'adam', epochs => 1, workers => 2,
	options => '{\"memory\": \"8MB\"}')" 2>&1)
check "a spill past dml.spill_limit is a clear error ($(grep ERROR <<<"$out"))" \
	'grep -q "ERROR:  53400: spill of this job passes dml.spill_limit" <<<"$out"'
check "after the errors no spill directory is left" '[ "$(spill_dirs)" = 0 ]'
pgc_psql -c "DROP TABLE IF EXISTS st_range" -c "CREATE TABLE st_range AS SELECT x1 * 1e6 AS x1, $(seq -s, -f 'x%g' 2 20), y FROM st_mid" \
	-c "GRANT SELECT ON st_range TO st_alice" >/dev/null
out=$(pgc_psql -v VERBOSITY=verbose -U st_alice -c "SELECT model_id FROM dml_train('st_range', 'st_range', 'y', features => $FEATS,
	model => 'logistic', optimizer => 'adam', epochs => 1, workers => 2,
	options => '{\"memory\": \"8MB\", \"spill\": \"fp16\"}')" 2>&1)
check "fp16 spill of a value past its range: a clear error ($(grep ERROR <<<"$out"))" \
	'grep -q "ERROR:  22003: a feature value .* does not fit the fp16 spill" <<<"$out"'
err=$(qa -c "SELECT dml_train('st_badmem', 'st_mid', 'y', options => '{\"memory\": \"1kB\"}')" 2>&1)
check "a memory option below 8MB is refused" 'grep -q "option \"memory\" must be an amount of memory" <<<"$err"'

check "the server is still up" 'q -c "SELECT 1" | grep -q 1'
