# tap.sh: TAP output for the process tests under regress/t.  Source it:
#
#   ok "what"            print "ok N - what"
#   notok "what"         print "not ok N - what"
#   check "what" 'cond' [shown]
#                        ok or notok as the shell condition says (evaluated
#                        with pipefail off: wait.sh's eval_cond); a notok
#                        shows the text shown, if given, as "#   " lines
#   wait_until S 'cond'  poll the shell condition every 0.05 s for at most S
#                        seconds; true as soon as it holds, false at the deadline
#   stop_job ...         cancel, terminate or time out a job and check it ended
#
# Scratch files go in $T, one directory per run (regress/run.sh passes its
# own as DML_TEST_TMP), so runs side by side never share a file.
#
# N counts up from 1 in the variable n.
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; }
check() {
	if eval_cond "$2"; then
		ok "$1"
	else
		notok "$1"
		[ -n "${3:-}" ] && sed 's/^/#   /' <<<"$3"
	fi
	return 0
}
T=${DML_TEST_TMP:-$(mktemp -d /tmp/dml-t.XXXXXX)}
chmod 777 "$T"
source "$(dirname "${BASH_SOURCE[0]}")/wait.sh"

# stop_job LABEL HOW MATCH LOG CLIENT TRIES: end a running job and check that
# it ended.  HOW is cancel or terminate (sent to the backend whose query
# contains MATCH) or timeout (the statement's own statement_timeout ends it).
# Polls every 0.05 s, TRIES times at most (10 s at least), until no job
# process of this cluster is left (pgcluster.sh), waits for the client (pid
# CLIENT), then checks that every job process went and that the client's LOG
# holds the error HOW raises.  How long the processes took is reported, not
# checked: a loaded machine must not fail a test (speed is make bench's).
stop_job() {
	local label=$1 how=$2 match=$3 log=$4 client=$5 tries=$6
	local fn t0 t1 elapsed pattern gone=0
	if [ "$how" != timeout ]; then
		fn=pg_cancel_backend; [ "$how" = terminate ] && fn=pg_terminate_backend
		pgc_psql -t -A -c "SELECT $fn(pid) FROM pg_stat_activity
			WHERE query LIKE '%$match%' AND pid <> pg_backend_pid()" >/dev/null
	fi
	t0=$(date +%s.%N)
	[ "$tries" -ge 200 ] || tries=200
	for _ in $(seq 1 "$tries"); do
		if [ "$(pgc_job_procs)" -eq 0 ]; then gone=1; break; fi
		sleep 0.05
	done
	t1=$(date +%s.%N)
	wait "$client"
	elapsed=$(echo "$t1 - $t0" | bc)
	if [ "$how" = timeout ]; then
		check "$label: every job process gone by the deadline (${elapsed}s after check)" '[ $gone = 1 ]'
	else
		check "$label: every job process gone (in ${elapsed}s)" '[ $gone = 1 ]'
	fi
	case $how in
		cancel) pattern='canceling statement due to user request' ;;
		terminate) pattern='terminating connection due to administrator command' ;;
		timeout) pattern='canceling statement due to statement timeout' ;;
	esac
	check "$label: the client saw '$pattern'" "grep -q '$pattern' '$log'"
}
