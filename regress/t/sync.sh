#!/bin/bash
# sync.sh: the sync modes as processes and on real data.
#   1. top-k compression with error feedback at ratio 0.01 reaches within
#      1 point of uncompressed test accuracy on Fashion-MNIST softmax
#      (2 workers, plain SGD) while sending at most 5% of the bytes
#   2. a parameter-server job (2 workers + 2 servers) survives a killed
#      worker: it restarts from the checkpoint and finishes
#   3. cancelling a parameter-server job ends every rank, the servers
#      included, and leaves no job directory
# Runs against the cluster regress/run.sh started.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh
sql1() { pgc_psql -At -c "SET client_min_messages = warning" -c "$1"; }

# ---------------------------------------------------------------------
# 1. top-k on Fashion-MNIST
# ---------------------------------------------------------------------
DML_LOAD_IDX=$PWD/build/dml-load-idx bash bench/load_fashion.sh >$T/dml-sync-load.log 2>&1
check "Fashion-MNIST loaded ($(tail -1 $T/dml-sync-load.log))" \
	'[ "$(sql1 "SELECT count(*) FROM fashion_train")" = 60000 ]'
for c in none topk; do
	sql1 "SELECT dml_drop_model(name) FROM dml.models WHERE name = 'sync_fashion_$c' LIMIT 1" >/dev/null
	sql1 "SELECT name FROM dml_train('sync_fashion_$c', 'fashion_train', 'label', model => 'softmax',
		optimizer => 'sgd', learning_rate => 0.1, batch_size => 128, epochs => 10, workers => 2,
		compression => '$c', topk_ratio => 0.01)" >$T/dml-sync-$c.log 2>&1
done
read -r acc_none bytes_none <<<"$(sql1 "SELECT (dml_evaluate('sync_fashion_none', 'fashion_test')->>'accuracy'),
	(SELECT sum(bytes_sent) FROM dml_epochs WHERE name = 'sync_fashion_none')" | tr '|' ' ')"
read -r acc_topk bytes_topk <<<"$(sql1 "SELECT (dml_evaluate('sync_fashion_topk', 'fashion_test')->>'accuracy'),
	(SELECT sum(bytes_sent) FROM dml_epochs WHERE name = 'sync_fashion_topk')" | tr '|' ' ')"
echo "# test accuracy: uncompressed $acc_none, top-k 0.01 $acc_topk; bytes $bytes_none vs $bytes_topk"
check "top-k 0.01 within 1 point of uncompressed accuracy ($acc_topk vs $acc_none)" \
	'[ -n "$acc_topk" ] && [ -n "$acc_none" ] && awk -v a="$acc_topk" -v b="$acc_none" "BEGIN { exit !(a >= b - 0.01 && b > 0.8) }"'
check "top-k 0.01 sends at most 5% of the bytes ($bytes_topk of $bytes_none)" \
	'[ -n "$bytes_topk" ] && awk -v a="$bytes_topk" -v b="$bytes_none" "BEGIN { exit !(a > 0 && a <= 0.05 * b) }"'
sql1 "DROP TABLE fashion_train, fashion_test" >/dev/null

# ---------------------------------------------------------------------
# 2. a killed worker in a parameter-server job
# ---------------------------------------------------------------------
sql1 "DROP TABLE IF EXISTS sync_data; CREATE TABLE sync_data AS
	SELECT i, sin(i * 0.37)::float8 AS x1, cos(i * 0.91)::float8 AS x2,
		   (sin(i * 0.37) + 2 * cos(i * 0.91) > 0.1) AS y
	FROM generate_series(1, 20000) i" >/dev/null
out=$(sql1 "SELECT epochs FROM dml_train('sync_killed', 'sync_data', 'y', features => '{x1,x2}',
	model => 'logistic', optimizer => 'adam', learning_rate => 0.05, batch_size => 64, epochs => 4,
	workers => 2, sync => 'ps', servers => 2,
	options => '{\"fault\": \"1:3:kill\", \"checkpoint_every\": 1}')" 2>&1)
check "ps job with a killed worker finishes all epochs ($out)" '[ "$out" = 4 ]'
restarts=$(sql1 "SELECT max(restarts) FROM dml_epochs WHERE name = 'sync_killed'")
check "the restart is recorded (restarts $restarts)" '[ "$restarts" = 1 ]'
check "no job process left after the restart" '[ "$(pgc_job_procs)" -eq 0 ]'

# ---------------------------------------------------------------------
# 3. cancel a parameter-server job
# ---------------------------------------------------------------------
pgc_psql -c "SELECT * FROM dml_train('sync_cancel', 'sync_data', 'y', features => '{x1,x2}',
	model => 'logistic', optimizer => 'sgd', batch_size => 1, epochs => 100000, workers => 2,
	sync => 'ssp', staleness => 1, servers => 2)" >$T/dml-sync-cancel.log 2>&1 &
client=$!
wait_until 60 'grep -q "epoch 1:" $T/dml-sync-cancel.log'
wait_until 10 'running=$(pgc_job_procs); [ "$running" -ge 5 ]'
check "ssp job runs 4 ranks and mpirun ($running processes)" '[ "$running" -ge 5 ]'
stop_job "ssp job, cancel" cancel sync_cancel $T/dml-sync-cancel.log $client 100
check "cancel leaves no job directory" '[ "$(pgc_job_dirs)" -eq 0 ]'
check "no model row for the cancelled job" \
	'[ "$(sql1 "SELECT count(*) FROM dml.models WHERE name = '"'"'sync_cancel'"'"'")" = 0 ]'
sql1 "DROP TABLE sync_data" >/dev/null
