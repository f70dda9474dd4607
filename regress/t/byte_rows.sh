#!/bin/bash
# byte_rows.sh: options "byte_rows" (workers/prepare.c, bytes_begin; train.c,
# rows8_attach).  Softmax regression reads its rows where they lie every
# step; where every input of a worker's rows is a byte k, or a byte over
# 255 (an image's pixels scaled to [0, 1], as dml-load-idx stores them),
# the steps read the bytes and rebuild each standardized float32 input bit
# for bit.  So the model is the same, weight for weight, as with the
# option off; the metrics say "byte_rows": 1 or 255 where it ran.  It does
# not run for a value that is not a byte, for two epochs or fewer, for the
# exact solvers, or with the option off, and moves with the block
# shuffle's layout.  An MLP gathers its minibatches from the bytes (with
# the row shuffle), the same model again.
#
# Runs against the cluster regress/run.sh started (PGHOST, PGPORT, PGUSER,
# PGDATABASE=dml_regress).
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh

# the byte rows run on dml's own kernels (kernels/simd.h: AVX-512, or AVX2
# with FMA); a CPU without them trains on the float32 rows, the same model
b1=1 b255=255
if ! grep -qw avx2 /proc/cpuinfo || ! grep -qw fma /proc/cpuinfo; then b1=none b255=none; fi

q() { pgc_psql -qAt -c "SET client_min_messages = warning" -c "$1" 2>&1; }
# m NAME EXPR: EXPR over the newest model NAME's row of dml.models
m() { q "SELECT $2 FROM dml.models WHERE name = '$1' ORDER BY version DESC LIMIT 1"; }

# 3,000 rows of 70 "pixels" (0..255, most classes' pixels brighter in one
# band), 4 classes; the same values over 255; and one with a half byte
q "DROP TABLE IF EXISTS br_int, br_unit, br_half; SELECT setseed(0.25);
	CREATE TABLE br_int AS
	SELECT i, c AS label,
		   array_agg(least(255, floor(random() * 160
				 + CASE WHEN j / 18 = c THEN 90 ELSE 0 END))::real ORDER BY j) AS px
	FROM (SELECT i, (i % 4) AS c FROM generate_series(1, 3000) i) r,
		 generate_series(0, 69) j
	GROUP BY i, c;
	CREATE TABLE br_unit AS
	SELECT i, label, (SELECT array_agg((v / 255)::real ORDER BY o)
					  FROM unnest(px) WITH ORDINALITY u(v, o)) AS px FROM br_int;
	CREATE TABLE br_half AS SELECT * FROM br_int;
	UPDATE br_half SET px[7] = 3.5 WHERE i = 1234" >/dev/null
q "SELECT dml_drop_model(name) FROM (SELECT DISTINCT name FROM dml.models WHERE name LIKE 'br\_%') d" >/dev/null

# the model's arguments: softmax regression, unless an MLP's are set here
model="model => 'softmax'"
train() { # name table workers epochs options [optimizer]
	q "SELECT model_id IS NOT NULL FROM dml_train('$1', '$2', 'label',
		features => '{px}', $model, optimizer => '${6:-adam}',
		learning_rate => 0.01, batch_size => 64, epochs => $4, validation => 0.2,
		workers => $3, options => '$5')"
}
same() { # the two models' weights and final losses, identical
	q "SELECT a.weights = b.weights AND a.metrics->'final_loss' = b.metrics->'final_loss'
		FROM dml.models a, dml.models b WHERE a.name = '$1' AND b.name = '$2'"
}
# name table workers epochs options what: the same training with "byte_rows"
# false added to the options, as NAME_off; NAME's weights and loss are its
twin() {
	local off="${5%\}}"

	if [ "$off" = "{" ]; then off='{"byte_rows": false}'; else off="$off, \"byte_rows\": false}"; fi
	out=$(train "${1}_off" "$2" "$3" "$4" "$off")
	out=$(same "$1" "${1}_off")
	check "$6: the same weights and loss as float32 rows ($out)" '[ "$out" = t ]'
}

for w in 1 2; do
	out=$(train br_int_w$w br_int $w 4 '{}')
	check "bytes, $w worker(s): trains ($out)" '[ "$out" = t ]'
	out=$(m br_int_w$w "coalesce(metrics->>'byte_rows', 'none')")
	check "bytes, $w worker(s): the metrics say byte_rows $b1 ($out)" '[ "$out" = $b1 ]'
	twin br_int_w$w br_int $w 4 '{}' "bytes, $w worker(s)"
	out=$(m br_int_w${w}_off "coalesce(metrics->>'byte_rows', 'none')")
	check "bytes off, $w worker(s): float32 rows ($out)" '[ "$out" = none ]'
done

# over255 NAME WHAT: the model NAME trained on br_unit's pixels over 255 (2 workers,
# 4 epochs) read them as bytes, is its float32 twin's, and learned
over255() {
	out=$(train "$1" br_unit 2 4 '{}')
	out=$(m "$1" "coalesce(metrics->>'byte_rows', 'none')")
	check "$2: byte_rows $b255 ($out)" '[ "$out" = $b255 ]'
	twin "$1" br_unit 2 4 '{}' "$2"
	out=$(m "$1" "(metrics->>'accuracy')::float > 0.6")
	check "$2: the model learned ($(m "$1" "metrics->>'accuracy'"))" '[ "$out" = t ]'
}
over255 br_unit "pixels over 255"

# the block shuffle lays the rows out afresh: the bytes move with them
out=$(train br_blocks br_unit 2 4 '{"shuffle": "blocks"}')
out=$(m br_blocks "coalesce(metrics->>'byte_rows', 'none') || ' ' || (metrics->>'shuffle')")
check "blocks: byte rows laid out with the rows ($out)" '[ "$out" = "$b255 blocks" ]'
twin br_blocks br_unit 2 4 '{"shuffle": "blocks"}' "blocks"

# an MLP gathers each minibatch from the bytes (dml_rows8_gather), rebuilt
# into the float32 rows bit for bit: the same model as float32 rows, on 1
# and 2 workers, bytes and pixels over 255; its block shuffle gathers
# float32 blocks, so no byte rows there
model="model => 'mlp', hidden => '{24,12}'"
for w in 1 2; do
	out=$(train br_mlp_w$w br_int $w 4 '{}')
	out=$(m br_mlp_w$w "coalesce(metrics->>'byte_rows', 'none')")
	check "MLP, bytes, $w worker(s): byte_rows $b1 ($out)" '[ "$out" = $b1 ]'
	twin br_mlp_w$w br_int $w 4 '{}' "MLP, bytes, $w worker(s)"
done
over255 br_mlp_unit "MLP, pixels over 255"
out=$(train br_mlp_blocks br_unit 2 4 '{"shuffle": "blocks"}')
out=$(m br_mlp_blocks "coalesce(metrics->>'byte_rows', 'none') || ' ' || (metrics->>'shuffle')")
check "MLP, blocks: float32 blocks gathered ($out)" '[ "$out" = "none blocks" ]'
model="model => 'softmax'"

# a worker's byte rows from 2 MB up are a mapping of their own in 2 MB pages
# (prepare.c, dml_big_realloc): 32,000 rows of 70 bytes on one worker, the
# same model as float32 rows; and where a value is not a byte, that mapping
# goes again (dml_big_free) and the float32 rows train
q "DROP TABLE IF EXISTS br_big, br_big_half;
	CREATE TABLE br_big AS
	SELECT i, label, px FROM br_int, generate_series(0, 10) k(k)
	WHERE i + 3000 * k <= 32000;
	CREATE TABLE br_big_half AS SELECT * FROM br_big;
	UPDATE br_big_half SET px[70] = 3.5 WHERE i = 2999" >/dev/null
out=$(q "SELECT count(*) * 70 >= 2 * 1024 * 1024 FROM br_big")
check "the big table's byte rows take 2 MB or more ($out)" '[ "$out" = t ]'
out=$(train br_big br_big 1 3 '{}')
out=$(m br_big "coalesce(metrics->>'byte_rows', 'none')")
check "2 MB of bytes: byte_rows $b1 ($out)" '[ "$out" = $b1 ]'
twin br_big br_big 1 3 '{}' "2 MB of bytes"
out=$(train br_big_half br_big_half 1 3 '{}')
out=$(m br_big_half "coalesce(metrics->>'byte_rows', 'none') || ' ' || ((metrics->>'train_rows')::float
	+ (metrics->>'validation_rows')::float)")
check "2 MB of bytes but one value of 3.5: float32 rows, every row ($out)" '[ "$out" = "none 32000" ]'

# where it does not run
out=$(train br_half br_half 2 4 '{}')
out=$(m br_half "coalesce(metrics->>'byte_rows', 'none')")
check "one value of 3.5: float32 rows ($out)" '[ "$out" = none ]'
out=$(train br_short br_int 1 2 '{}')
out=$(m br_short "coalesce(metrics->>'byte_rows', 'none')")
check "two epochs: float32 rows ($out)" '[ "$out" = none ]'
out=$(train br_newton br_int 1 4 '{}' newton)
out=$(m br_newton "coalesce(metrics->>'byte_rows', 'none')")
check "newton: float32 rows ($out)" '[ "$out" = none ]'
out=$(q "SELECT dml_train('br_bad', 'br_int', 'label', features => '{px}', model => 'softmax',
	options => '{\"byte_rows\": 1}')")
check "byte_rows must be a boolean" 'echo "$out" | grep -q "option \"byte_rows\" must be a boolean"'

# an ordinary role that row-level security lets see two classes of four:
# its byte rows are those rows only
q "DROP OWNED BY br_user; DROP ROLE IF EXISTS br_user" >/dev/null 2>&1
# the table's lock before its GRANT: the other way round, the GRANT's update of
# br_unit's catalog row and autovacuum's ANALYZE of the fresh table deadlocked
# once (the server chose this transaction, and br_user was never created)
q "CREATE ROLE br_user LOGIN; ALTER TABLE br_unit ENABLE ROW LEVEL SECURITY;
	GRANT SELECT ON br_unit TO br_user;
	CREATE POLICY br_two ON br_unit FOR SELECT TO br_user USING (label < 2)" >/dev/null
pgc_allow_role br_user
as_user() { pgc_as_pg psql -X -q -At -U br_user -c "SET client_min_messages = warning" -c "$1" 2>&1; }
out=$(as_user "SELECT model_id IS NOT NULL FROM dml_train('br_role', 'br_unit', 'label',
	features => '{px}', model => 'softmax', optimizer => 'adam', learning_rate => 0.01,
	batch_size => 64, epochs => 4, validation => 0.2, workers => 2)")
check "an ordinary role under row-level security trains ($out)" '[ "$out" = t ]'
out=$(m br_role "coalesce(metrics->>'byte_rows', 'none') || ' ' || ((metrics->>'train_rows')::float
	+ (metrics->>'validation_rows')::float) || ' ' || jsonb_array_length(spec->'classes') || ' ' || owner")
check "the role's model: byte rows of the 1,500 rows it may see, 2 classes, its own ($out)" \
	'[ "$out" = "$b255 1500 2 br_user" ]'

q "SELECT dml_drop_model(name) FROM (SELECT DISTINCT name FROM dml.models WHERE name LIKE 'br\_%') d;
	DROP TABLE br_int, br_unit, br_half, br_big, br_big_half; DROP OWNED BY br_user; DROP ROLE br_user" >/dev/null
echo "1..$n"
