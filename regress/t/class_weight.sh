#!/bin/bash
# class_weight.sh: dml_train's class_weight ('balanced', or a map of label to
# weight) against scikit-learn (regress/t/class_weight.py): balanced accuracy
# on an imbalanced real table, the weighted objective's coefficients, the
# refusals, an ordinary role.  Runs against the cluster regress/run.sh started.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
export PGDATABASE=${PGDATABASE:-dml_regress}
pgc_allow_role dml_cw_user
/usr/bin/python3 regress/t/class_weight.py
