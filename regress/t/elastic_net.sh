#!/bin/bash
# elastic_net.sh: dml_train's l1_ratio (lasso and elastic net by OWL-QN)
# against scikit-learn (regress/t/elastic_net.py): the same zero coefficients,
# exactly 0 in the stored weights, the others within 1e-3; refusals; an
# ordinary role.  Runs against the cluster regress/run.sh started.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
export PGDATABASE=${PGDATABASE:-dml_regress}
pgc_allow_role dml_en_user
/usr/bin/python3 regress/t/elastic_net.py
