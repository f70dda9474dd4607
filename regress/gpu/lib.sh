# lib.sh: what the server-side GPU checks (predict_table.sh, e2e.sh) share.
# Source it from the repository root:
#
#   ok / notok / skip "what"    "ok - what", "not ok - what", "skip - what # SKIP"
#   check "what" 'cond'         ok or notok as the shell condition says
#   finish                      "N passed, N failed, N skipped"; exit 1 on a failure
#   wait_until S 'cond'         regress/wait.sh
#   gpu_cluster NAME            install dml if pg_config's PostgreSQL lacks it,
#                               start a private cluster (regress/pgcluster.sh,
#                               stopped on exit) and define q (psql -t -A);
#                               a failure is reported and ends the script
#
# gpu_check.sh folds each script's summary line into its own.

passed=0
failed=0
skipped=0
ok() { echo "ok - $1"; passed=$((passed + 1)); }
notok() { echo "not ok - $1"; failed=$((failed + 1)); }
skip() { echo "skip - $1 # SKIP"; skipped=$((skipped + 1)); }
check() { if eval_cond "$2"; then ok "$1"; else notok "$1"; fi; }
finish() {
	echo "$passed passed, $failed failed, $skipped skipped"
	[ "$failed" -eq 0 ]
	exit $?
}
source regress/wait.sh

gpu_cluster() {
	local log=/tmp/dml-gpu-$1.log sudo=

	[ "$(id -u)" = 0 ] || sudo=sudo
	if [ ! -f "$(pg_config --sharedir)/extension/dml.control" ] || [ ! -x "$(pg_config --bindir)/dml-worker" ]; then
		if ! { make -s >"$log" 2>&1 && $sudo make -s install >>"$log" 2>&1; }; then
			sed 's/^/#   /' "$log"
			notok "build and install dml"
			finish
		fi
	fi
	source regress/pgcluster.sh
	if ! pgc_start >"$log" 2>&1; then
		sed 's/^/#   /' "$log"
		notok "start a PostgreSQL cluster"
		finish
	fi
	trap 'pgc_stop' EXIT
	q() { pgc_psql -t -A "$@"; }
}
