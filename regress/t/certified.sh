#!/bin/bash
# certified.sh: exact least squares to certified accuracy (regress/t/certified.py):
# NIST Longley, Wampler1 and Wampler2 with LRE >= 9 in the server and with
# 1 and 3 workers, statsmodels' OLS on real datasets to 1e-6, collinear
# features, statsmodels' Logit and MNLogit (softmax by Newton) to 1e-6,
# robust HC0/HC1 standard errors against statsmodels' cov_type.  Runs
# against the cluster regress/run.sh started.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
export PGDATABASE=${PGDATABASE:-dml_regress}
/usr/bin/python3 regress/t/certified.py
