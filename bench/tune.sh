#!/bin/bash
# tune.sh: model selection (issue 17), one run, on its own private cluster.
#
#   bash bench/tune.sh full      Fashion-MNIST (60,000 rows); writes bench/TUNE.md
#   bash bench/tune.sh quick     its first 3,000 rows; writes bench/out/TUNE-quick.md
#
# An MLP on Fashion-MNIST, 8 configurations (learning rate x hidden size),
# 5 epochs each, 2 ranks, 0.2 of the rows held out:
#   1. dml_tune (grid) against a loop of 8 dml_train calls with the same
#      arguments: wall time and the best validation accuracy
#   2. against scikit-learn: the table exported to numpy, then GridSearchCV
#      over MLPClassifier (adam, 5 epochs) on the same held-out split, n_jobs=2
#   3. halving against grid: wall time and best validation accuracy
# (part of make bench; needs make install, /usr/bin/python3 with numpy,
# psycopg2 and scikit-learn, and the Fashion-MNIST files)
set -euo pipefail
mode=${1:-quick}
case "$mode" in
	quick) report=bench/out/TUNE-quick.md; limit=(--limit 3000) ;;
	full) report=bench/TUNE.md; limit=() ;;
	*) echo "usage: bash bench/tune.sh quick|full" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
mkdir -p bench/out
source regress/pgcluster.sh
trap 'pgc_stop' EXIT
pgc_start
pgc_psql -c 'CREATE EXTENSION dml' >/dev/null
echo "tune.sh: cluster in $PGC_DIR; loading Fashion-MNIST" >&2
bash bench/load_fashion.sh "${limit[@]}" >bench/out/tune-load-$mode.log 2>&1
pgc_psql -c 'VACUUM ANALYZE' >/dev/null
# scikit-learn on the OpenBLAS kernels dml-worker runs (peer_blas.sh)
source bench/peer_blas.sh
/usr/bin/python3 bench/tune.py --mode "$mode" --out "$report" --json "bench/out/tune-$mode.json"
echo "tune.sh: report in $report" >&2
