#!/bin/bash
# cancel.sh: pg_cancel_backend and statement_timeout during training end
# every worker within 2 seconds and leave no model row, no job directory
# and no process behind.  Runs against the cluster regress/run.sh started.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh
job_procs() { pgc_job_procs; }
job_dirs() { pgc_job_dirs; }

pgc_psql -c "DROP TABLE IF EXISTS cancel_data; CREATE TABLE cancel_data AS
	SELECT random() AS x1, random() AS x2, random() AS y FROM generate_series(1, 20000)" >/dev/null

procs=0
for how in cancel terminate timeout; do
	before=$(pgc_psql -t -A -c "SELECT count(*) FROM dml.models WHERE name = 'cancel_$how'")
	if [ "$how" = timeout ]; then
		pgc_psql -c "SET statement_timeout = '15s'; SELECT * FROM dml_train('cancel_$how', 'cancel_data', 'y',
			optimizer => 'sgd', batch_size => 1, epochs => 100000, workers => 2)" >$T/dml-cancel-$how.log 2>&1 &
		client=$!
		wait_until 14 'grep -q "epoch 1:" $T/dml-cancel-$how.log'
		# mpirun and 2 ranks (a count taken while mpirun forks can be off)
		wait_until 30 'running=$(job_procs); [ "$running" -ge 3 ]'
		check "$how: workers are running ($running processes)" '[ "$running" -ge 3 ]'
	else
		pgc_psql -c "SELECT * FROM dml_train('cancel_$how', 'cancel_data', 'y',
			optimizer => 'sgd', batch_size => 1, epochs => 100000, workers => 2)" >$T/dml-cancel-$how.log 2>&1 &
		client=$!
		wait_until 120 'grep -q "epoch 1:" $T/dml-cancel-$how.log'
		# mpirun and 2 ranks (a count taken while mpirun forks can be off)
		wait_until 30 'running=$(job_procs); [ "$running" -ge 3 ]'
		check "$how: workers are running ($running processes)" '[ "$running" -ge 3 ]'
	fi
	# the timeout fires 15 s after the statement began, after the workers started
	stop_job "$how" "$how" "cancel_$how" $T/dml-cancel-$how.log $client 400
	after=$(pgc_psql -t -A -c "SELECT count(*) FROM dml.models WHERE name = 'cancel_$how'")
	check "$how: no model row stored" '[ "$before" = "$after" ]'
	check "$how: no job directory left" '[ "$(job_dirs)" -eq 0 ]'
	rm -f $T/dml-cancel-$how.log
done
check "the server is still up" 'pgc_psql -t -A -c "SELECT 1" | grep -q 1'
