#!/bin/bash
# datasets.sh: the dataset battery (bench/datasets.py): every dataset
# scikit-learn ships that fits a dml model kind (iris, wine, breast cancer,
# digits, diabetes; digits also as an MLP), loaded as tables and trained
# with defaults only (name, relation, target), against scikit-learn's
# defaults on the same split in the same run: accuracy within 1 point, R2
# within 0.02.  The times (dml against scikit-learn's fit plus the export
# of the table to Python) are printed as comments, not checked: speed is
# make bench's (section 9).  Runs against the cluster regress/run.sh started.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh
if ! /usr/bin/python3 -c 'import sklearn, psycopg2, numpy' 2>/dev/null; then
	notok "python3-sklearn, python3-psycopg2 and python3-numpy are installed (.ci/setup.sh)"
	exit 0
fi
/usr/bin/python3 bench/datasets.py --json "$T/datasets.json" 2>"$T/datasets.log"
rc=$?
check "the battery ran to its end" '[ $rc -eq 0 ]'
[ $rc -eq 0 ] || tail -20 "$T/datasets.log"
sed 's/^/# /' "$T/datasets.log"
pgc_psql -At -c "SET client_min_messages = warning" \
	-c "SELECT dml_drop_model(name) FROM (SELECT DISTINCT name FROM dml.models WHERE name LIKE 'ds\_%') m" >/dev/null
for t in $(pgc_psql -At -c "SELECT tablename FROM pg_tables WHERE tablename LIKE 'ds\_%'"); do
	pgc_psql -c "DROP TABLE $t" >/dev/null
done
