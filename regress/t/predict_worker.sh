#!/bin/bash
# predict_worker.sh: dml_predict_table in a dml-worker, at the process level.
#   1. device => 'gpu' where no GPU is visible fails cleanly: SQLSTATE 55000,
#      a message naming the cause, no crash, nothing left behind (skipped
#      where a GPU is visible: there it must succeed, see regress/gpu/).
#   2. cancel, pg_terminate_backend and statement_timeout during a worker's
#      predict end every job process within 2 seconds and leave no table,
#      no job directory and no process behind.
# Runs against the cluster regress/run.sh started (dml.test_hooks is on in
# its database, for device => 'worker-cpu').
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh
job_procs() { pgc_job_procs; }
job_dirs() { pgc_job_dirs; }
table_exists() { [ "$(pgc_psql -t -A -c "SELECT to_regclass('$1') IS NOT NULL")" = t ]; }

# a model too wide to finish quickly on a CPU, and rows to keep it busy
pgc_psql -c "DROP TABLE IF EXISTS pw_train, pw_data;
	CREATE TABLE pw_data AS SELECT i, sin(i * 0.1) AS x1, cos(i * 0.3) AS x2, sin(i * 0.7) AS x3,
		cos(i * 1.1) AS x4, sin(i * 0.01) AS y FROM generate_series(1, 400000) i;
	CREATE TABLE pw_train AS SELECT * FROM pw_data WHERE i <= 2000" >/dev/null
pgc_psql -c "SELECT name FROM dml_train('pw_wide', 'pw_train', 'y', features => '{x1,x2,x3,x4}',
	model => 'mlp', hidden => '{1024,1024}', epochs => 1, workers => 1)" >/dev/null 2>&1
check "a wide model to predict with" \
	'[ "$(pgc_psql -t -A -c "SELECT count(*) FROM dml.models WHERE name = '"'pw_wide'"'")" -ge 1 ]'

# --- 1. 'gpu' with no GPU visible -------------------------------------------
if { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; } ||
	[ -e /dev/nvidia0 ]; then
	echo "skip - device 'gpu' without a GPU: a GPU is visible here # SKIP"
else
	pgc_psql -v VERBOSITY=verbose \
		-c "CALL dml_predict_table('pw_wide', 'pw_data', 'pw_gpu', 'i', device => 'gpu')" \
		>$T/dml-pw-gpu.log 2>&1
	rc=$?
	check "gpu without a GPU: the CALL fails" '[ $rc -ne 0 ]'
	check "gpu without a GPU: SQLSTATE 55000 and the cause in the message" \
		"grep -qE 'ERROR:  55000: device .gpu. was asked for, but (no CUDA device is visible to the worker|this build of dml(-worker)? has no CUDA support)' $T/dml-pw-gpu.log"
	check "gpu without a GPU: the hint says what to do" "grep -q \"HINT:  Use device => 'cpu'\" $T/dml-pw-gpu.log"
	check "gpu without a GPU: no worker crash reported" \
		"! grep -qiE 'signal|core dumped|job failed' $T/dml-pw-gpu.log"
	check "gpu without a GPU: no table left" '! table_exists pw_gpu'
	check "gpu without a GPU: no process left" '[ "$(job_procs)" -eq 0 ]'
	check "gpu without a GPU: no job directory left" '[ "$(job_dirs)" -eq 0 ]'
	sed 's/^/# /' $T/dml-pw-gpu.log
	rm -f $T/dml-pw-gpu.log
fi

# --- 2. cancel, terminate, timeout during a worker's predict -----------------
for how in cancel terminate timeout; do
	out=pw_out_$how
	if [ "$how" = timeout ]; then
		pgc_psql -c "SET statement_timeout = '4s'" -c "CALL dml_predict_table('pw_wide', 'pw_data', '$out', 'i',
			device => 'worker-cpu')" >$T/dml-pw-$how.log 2>&1 &
	else
		pgc_psql -c "CALL dml_predict_table('pw_wide', 'pw_data', '$out', 'i',
			device => 'worker-cpu')" >$T/dml-pw-$how.log 2>&1 &
	fi
	client=$!
	# wait for the worker to be up and reading its rows
	wait_until 60 'running=$(job_procs); [ "$running" -ge 1 ] && [ "$(pgc_psql -t -A -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = '"'"'dml-worker'"'"'")" -ge 1 ]'
	check "$how: the worker is running ($running processes)" '[ "$running" -ge 1 ]'
	stop_job "$how" "$how" "$out" $T/dml-pw-$how.log $client 100
	check "$how: no target table left" "! table_exists $out"
	check "$how: no job directory left" '[ "$(job_dirs)" -eq 0 ]'
	rm -f $T/dml-pw-$how.log
done

# the same job, left alone, completes
pgc_psql -c "CALL dml_predict_table('pw_wide', 'pw_train', 'pw_small', 'i', device => 'worker-cpu')" >/dev/null 2>&1
check "uncancelled, the worker's predict completes" \
	'[ "$(pgc_psql -t -A -c "SELECT count(*) FROM pw_small")" = 2000 ]'
check "nothing of any job is left" '[ "$(job_procs)" -eq 0 ] && [ "$(job_dirs)" -eq 0 ]'
pgc_psql -c "DROP TABLE IF EXISTS pw_small, pw_train, pw_data" >/dev/null
check "the server is still up" 'pgc_psql -t -A -c "SELECT 1" | grep -q 1'
