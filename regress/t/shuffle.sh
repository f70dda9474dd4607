#!/bin/bash
# shuffle.sh: options "shuffle", the order of an in-memory epoch's rows
# (workers/train.c, train_block_rows).  "rows" shuffles them one by one each
# epoch; "blocks" lays a rank's training rows out once in a seeded random
# order and then shuffles blocks of consecutive rows, so an epoch streams
# memory; "auto" (the default) takes blocks for narrow rows in a large job
# over three or more epochs.  Blocks train as well as rows, even on a table
# stored sorted by its label (the blocks are cut from the random layout, not
# from the table's order), are deterministic, hold out the same validation
# rows, and name themselves in the metrics; a job resumed from a checkpoint
# ends where an uninterrupted one ends (t/faults.sh checks it for rows).
#
# Runs against the cluster regress/run.sh started (PGHOST, PGPORT, PGUSER,
# PGDATABASE=dml_regress with dml.test_hooks = on).
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh

q() { pgc_psql -qAt -c "SET client_min_messages = warning" -c "$1" 2>&1; }
# m NAME EXPR: EXPR over the newest model NAME's row of dml.models
m() { q "SELECT $2 FROM dml.models WHERE name = '$1' ORDER BY version DESC LIMIT 1"; }

# a table stored sorted by its label: consecutive rows share a class
q "DROP TABLE IF EXISTS shuf_sorted; SELECT setseed(0.5);
	CREATE TABLE shuf_sorted AS
	SELECT x1, x2, x3, x4, (x1 + 0.5 * x2 - x3 + 0.3 * e > 0) AS label
	FROM (SELECT random() - 0.5 AS x1, random() - 0.5 AS x2, random() - 0.5 AS x3,
				 random() - 0.5 AS x4, random() - 0.5 AS e
		  FROM generate_series(1, 40000)) s
	ORDER BY label, x1" >/dev/null
q "SELECT dml_drop_model(name) FROM (SELECT DISTINCT name FROM dml.models WHERE name LIKE 'shuf\_%') d" >/dev/null

train() { # name shuffle [workers] [epochs] [table] [features]
	q "SELECT model_id IS NOT NULL FROM dml_train('$1', '${5:-shuf_sorted}', 'label',
		features => '${6:-{x1,x2,x3,x4\}}', model => 'logistic', optimizer => 'adam',
		learning_rate => 0.01, batch_size => 128, epochs => ${4:-4}, validation => 0.2,
		workers => ${3:-2}, options => '{\"shuffle\": \"$2\"}')"
}

out=$(train shuf_rows rows)
check "shuffle rows: trains ($out)" '[ "$out" = t ]'
out=$(train shuf_blocks blocks)
check "shuffle blocks: trains ($out)" '[ "$out" = t ]'
out=$(train shuf_blocks2 blocks)
check "shuffle blocks again: trains ($out)" '[ "$out" = t ]'

# which order each took, in the metrics
out=$(m shuf_blocks "metrics->>'shuffle' || ' ' || (metrics->>'shuffle_block')")
# a row is 4 features and a label, 20 bytes: 4096 / 20 -> 205 rows, at most a step's 128
check "blocks: the metrics say shuffle blocks of 128 rows ($out)" '[ "$out" = "blocks 128" ]'
out=$(m shuf_rows "coalesce(metrics->>'shuffle', 'none')")
check "rows: the metrics name no block shuffle ($out)" '[ "$out" = none ]'
out=$(m shuf_rows "spec->'hyperparameters'->>'shuffle'")
check "the stored hyperparameters keep the option ($out)" '[ "$out" = rows ]'

# the same validation rows (a hash of the values), and as good a model
out=$(q "SELECT a.metrics->>'validation_rows' = b.metrics->>'validation_rows'
	AND a.metrics->>'train_rows' = b.metrics->>'train_rows'
	FROM dml.models a, dml.models b WHERE a.name = 'shuf_rows' AND b.name = 'shuf_blocks'")
check "blocks hold out the same validation rows as rows ($out)" '[ "$out" = t ]'
acc_r=$(m shuf_rows "metrics->>'accuracy'")
acc_b=$(m shuf_blocks "metrics->>'accuracy'")
out=$(q "SELECT $acc_b >= 0.9 AND abs($acc_b - $acc_r) <= 0.01")
check "a table sorted by its label: blocks reach rows' validation accuracy (rows $acc_r, blocks $acc_b)" \
	'[ "$out" = t ]'
loss_r=$(m shuf_rows "metrics->>'final_loss'")
loss_b=$(m shuf_blocks "metrics->>'final_loss'")
out=$(q "SELECT abs($loss_b - $loss_r) <= 0.05 * $loss_r")
check "blocks end with rows' training loss within 5% (rows $loss_r, blocks $loss_b)" '[ "$out" = t ]'

# deterministic: the same seed gives the same model, byte for byte
out=$(q "SELECT a.weights = b.weights FROM dml.models a, dml.models b
	WHERE a.name = 'shuf_blocks' AND b.name = 'shuf_blocks2'")
check "blocks are deterministic: two runs store the same model" '[ "$out" = t ]'
out=$(q "SELECT a.weights <> b.weights FROM dml.models a, dml.models b
	WHERE a.name = 'shuf_blocks' AND b.name = 'shuf_rows'")
check "blocks and rows are different orders: their models differ" '[ "$out" = t ]'

# one worker, and the row shuffle's exact path stays the default on small data
out=$(train shuf_blocks_w1 blocks 1)
check "blocks with one worker: trains ($out)" '[ "$out" = t ]'
out=$(train shuf_auto_small auto 2 6)
blk=$(m shuf_auto_small "coalesce(metrics->>'shuffle', 'none')")
check "auto on a small table (0.8 MB): rows, not blocks ($out, $blk)" '[ "$out" = t ] && [ "$blk" = none ]'

# auto on a job over 16 MB of narrow rows: blocks from three epochs on
# (720,000 training rows of 6 features and a label, 28 bytes: 20 MB)
q "DROP TABLE IF EXISTS shuf_big; SELECT setseed(0.25);
	CREATE TABLE shuf_big AS SELECT x1, x2, x3, x4, x5, x6, (x1 - x2 + 0.2 * x3 > 0) AS label
	FROM (SELECT random() - 0.5 AS x1, random() - 0.5 AS x2, random() - 0.5 AS x3,
				 random() - 0.5 AS x4, random() - 0.5 AS x5, random() - 0.5 AS x6
		  FROM generate_series(1, 900000)) s" >/dev/null
big='{x1,x2,x3,x4,x5,x6}'
out=$(train shuf_auto3 auto 2 3 shuf_big "$big")
blk=$(m shuf_auto3 "coalesce(metrics->>'shuffle', 'none')")
check "auto, 720,000 training rows of 28 bytes over 3 epochs: blocks ($out, $blk)" '[ "$out" = t ] && [ "$blk" = blocks ]'
out=$(train shuf_auto2 auto 2 2 shuf_big "$big")
blk=$(m shuf_auto2 "coalesce(metrics->>'shuffle', 'none')")
check "auto, the same over 2 epochs: rows ($out, $blk)" '[ "$out" = t ] && [ "$blk" = none ]'
acc=$(m shuf_auto3 "metrics->>'accuracy'")
out=$(q "SELECT $acc >= 0.95")
check "auto's blocks on 900,000 rows: validation accuracy $acc >= 0.95" '[ "$out" = t ]'

# an ordinary role picks the order of its own job; a bad value is refused
q "DROP ROLE IF EXISTS shuf_user; CREATE ROLE shuf_user LOGIN;
	GRANT USAGE ON SCHEMA public TO shuf_user; GRANT SELECT ON shuf_sorted TO shuf_user" >/dev/null
pgc_allow_role shuf_user
out=$(pgc_as_pg psql -X -qAt -U shuf_user -c "SET client_min_messages = warning" -c "SELECT model_id IS NOT NULL FROM
	dml_train('shuf_user_m', 'shuf_sorted', 'label', features => '{x1,x2,x3,x4}', model => 'logistic',
	optimizer => 'adam', epochs => 2, workers => 1, options => '{\"shuffle\": \"blocks\"}')" 2>&1)
check "an ordinary role trains with shuffle blocks ($out)" '[ "$out" = t ]'
out=$(pgc_as_pg psql -X -qAt -U shuf_user -c "SELECT dml_train('shuf_user_bad', 'shuf_sorted', 'label',
	features => '{x1}', options => '{\"shuffle\": \"sorted\"}')" 2>&1)
check "shuffle \"sorted\" is refused, naming the choices" \
	'grep -q "option \"shuffle\" must be \"auto\", \"rows\" or \"blocks\"" <<<"$out"'

q "SELECT dml_drop_model(name) FROM (SELECT DISTINCT name FROM dml.models WHERE name LIKE 'shuf\_%') d;
	DROP TABLE shuf_sorted, shuf_big; DROP OWNED BY shuf_user; DROP ROLE shuf_user" >/dev/null
echo "$n tests"
