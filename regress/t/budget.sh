#!/bin/bash
# budget.sh: max_seconds, a time budget for training.  Rank 0 decides when
# it is spent and every rank stops at the same step (a rank that stopped
# elsewhere would hang the job's collectives); the job then ends normally,
# stores the model it has, says so in a NOTICE and in the metrics
# ("stopped": "max time"), and an unspent budget changes nothing.
#
# Runs against the cluster regress/run.sh started (PGHOST, PGPORT, PGUSER,
# PGDATABASE=dml_regress with dml.test_hooks = on).
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh

q() { pgc_psql -qAt -c "SET client_min_messages = warning" -c "$1" 2>&1; }

q "DROP TABLE IF EXISTS budget; CREATE TABLE budget (x1 float8, x2 float8, x3 float8, y float8)" >/dev/null
q "SELECT setseed(0.5); INSERT INTO budget SELECT a, b, c, sin(3 * a) + b * c
	FROM (SELECT random() a, random() b, random() c FROM generate_series(1, 20000)) s" >/dev/null

# train NAME SQL-ARGS: the NOTICEs and the result in $T/NAME.log
train() {
	pgc_psql -qAt -c "SELECT model_id FROM dml_train('$1', 'budget', 'y', model => 'mlp',
		hidden => '{32}', $2)" >"$T/budget-$1.log" 2>&1
}
meta() { q "SELECT $2 FROM dml.models WHERE name = '$1' ORDER BY version DESC LIMIT 1"; }

for sync in allreduce average gossip ps async; do
	extra=
	[ $sync = ps ] || [ $sync = async ] && extra=", servers => 1"
	train "b_$sync" "batch_size => 16, epochs => 100000, workers => 2, sync => '$sync'$extra, max_seconds => 1"
	epochs=$(meta "b_$sync" "(metrics->>'epochs')::int")
	check "$sync: the job ends with a model before its 100000 epochs ($epochs)" \
		'[ -n "$epochs" ] && [ "$epochs" -lt 100000 ]'
	check "$sync: the metrics say it stopped for time" \
		'[ "$(meta "b_$sync" "metrics->>'"'"'stopped'"'"'")" = "max time" ]'
	check "$sync: a NOTICE says where it stopped" \
		'grep -qE "training stopped at epoch [0-9]+, step [0-9]+: max_seconds \(1 s\) spent" "$T/budget-b_$sync.log"'
	check "$sync: dml.epochs has a row per epoch run" \
		'[ -n "$epochs" ] && [ "$(meta "b_$sync" "(SELECT count(*) FROM dml.epochs e WHERE e.model_id = id)")" = "$epochs" ]'
done

# the last epoch has no check at its end, so a job of one long epoch
# (200000 rows, one a step) that runs out of time stops at a step inside it
q "CREATE TABLE budget_long AS SELECT * FROM budget, generate_series(1, 10) g" >/dev/null
pgc_psql -qAt -c "SELECT model_id FROM dml_train('b_step', 'budget_long', 'y', features => '{x1,x2,x3}',
	model => 'mlp', hidden => '{32}', epochs => 1, batch_size => 1, workers => 2,
	max_seconds => 0.05)" >"$T/budget-b_step.log" 2>&1
grep -E "training stopped at epoch" "$T/budget-b_step.log" | head -1 >"$T/budget-stop.txt"
check "allreduce stops at a step inside its epoch ($(cat "$T/budget-stop.txt"))" \
	'grep -qE "stopped at epoch 1, step [0-9]+:" "$T/budget-stop.txt" &&
	 [ "$(meta b_step "metrics->>'"'"'stopped'"'"'")" = "max time" ]'
check "the stored spec keeps max_seconds" \
	'[ "$(meta b_allreduce "spec->'"'"'hyperparameters'"'"'->>'"'"'max_seconds'"'"'")" = 1 ]'

# a budget that is not spent changes nothing, bit for bit
train b_none "batch_size => 16, epochs => 3, workers => 2"
train b_large "batch_size => 16, epochs => 3, workers => 2, max_seconds => 100000"
check "an unspent budget gives the same weights as none" \
	'[ "$(meta b_none "md5(weights)")" = "$(meta b_large "md5(weights)")" ]'
check "without a budget the metrics say the epochs ran out, not the time" \
	'[ "$(meta b_none "metrics->>'"'"'stopped'"'"'")" = "max epochs" ]'

out=$(q "SELECT model_id FROM dml_train('b_bad', 'budget', 'y', max_seconds => 0)")
check "max_seconds => 0 is out of range ($out)" 'echo "$out" | grep -q "max_seconds is out of range"'
check "every job process is gone" 'wait_until 10 "[ \$(pgc_job_procs) -eq 0 ]"'

echo "$n tests"
