#!/bin/bash
# jobs.sh: a background job's overhead against the same dml_train, alone
# (make bench-jobs; bench/harness.py runs the same pairs inside make bench).
#
#   bash bench/jobs.sh [PAIRS [EPOCHS [OPTIONS]]]   default 5 pairs of 5 epochs
#
# Starts a private cluster (regress/pgcluster.sh), loads Fashion-MNIST
# (bench/load_fashion.sh: 60,000 rows), runs bench/job_overhead.py and
# writes its lines to bench/out/jobs.txt with the machine's load.  Needs dml
# installed (make install).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
mkdir -p bench/out
export DML_TEST_TMP=$(mktemp -d /tmp/dml-bench-jobs.XXXXXX)
chmod 777 "$DML_TEST_TMP"
source regress/pgcluster.sh
trap pgc_stop EXIT
pgc_start
pgc_psql -c 'CREATE EXTENSION dml' >/dev/null
bash bench/load_fashion.sh >"$DML_TEST_TMP/load.log" 2>&1
pgc_psql -c 'VACUUM ANALYZE' >/dev/null
{
	echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $(git rev-parse --short HEAD)"
	/usr/bin/python3 bench/job_overhead.py "${1:-5}" "${2:-5}" ${3:+"$3"}
} | tee bench/out/jobs.txt
