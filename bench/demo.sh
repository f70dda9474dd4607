#!/bin/bash
# demo.sh: the main job, from a fresh machine.
#
#   bash bench/demo.sh
#
# Installs what is missing, builds and installs dml, starts a private
# PostgreSQL cluster (as the non-root 'postgres' user, private port and
# socket), and then, in SQL only:
#   1. a demo table: train a linear model with 2 workers, predict per row
#   2. Fashion-MNIST (Debian's dataset-fashion-mnist) loaded into
#      fashion_train / fashion_test; softmax regression and an MLP
#      784-256-128-10 trained with 2 workers; test accuracy computed in SQL
# The cluster is stopped at the end; DML_KEEP=1 leaves it running.
set -euo pipefail
cd "$(dirname "$0")/.."

bash .ci/setup.sh
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
echo "== build and install"
make -s >/tmp/dml-build.log 2>&1 && $SUDO make -s install >>/tmp/dml-build.log 2>&1 || {
	cat /tmp/dml-build.log; exit 1; }

source regress/pgcluster.sh
pgc_start
[ "${DML_KEEP:-0}" = 1 ] || trap pgc_stop EXIT
echo "== PostgreSQL on port $PGC_PORT, socket $PGC_SOCK"

run() { pgc_psql -v ON_ERROR_STOP=1 "$@"; }

echo "== 1. a demo table: customers' yearly spend from their activity"
run <<'SQL'
CREATE EXTENSION dml;
CREATE TABLE customers AS
SELECT i AS id,
	   (random() * 60)::float8 AS tenure_months,
	   (random() * 40)::float8 AS visits,
	   (random() < 0.3) AS premium,
	   0::float8 AS spend
FROM generate_series(1, 100000) i;
UPDATE customers SET spend = 120 + 3.5 * tenure_months + 12 * visits
	+ 250 * premium::int + 20 * (random() - 0.5);
SELECT model_id, name, version, epochs, round(final_loss::numeric, 3) AS mse,
	   round(seconds::numeric, 2) AS seconds, workers, device
FROM dml_train('spend', 'customers', 'spend',
			   features => '{tenure_months,visits,premium}', workers => 2,
			   -- the exact solver runs inside the server by default; here on 2 MPI workers
			   options => '{"in_server": false}');
SELECT id, round(spend::numeric, 1) AS spend,
	   round(dml_predict('spend', c)::numeric, 1) AS predicted
FROM customers c ORDER BY id LIMIT 5;
SQL

echo "== 2. Fashion-MNIST: 60,000 training and 10,000 test images"
PATH=$PWD/build:$PATH bash bench/load_fashion.sh
run <<'SQL'
\echo softmax regression, 2 workers
SELECT name, epochs, round(final_loss::numeric, 4) AS loss, round(seconds::numeric, 1) AS seconds,
	   round(rows_per_second) AS rows_per_s, workers, device
FROM dml_train('fashion_softmax', 'fashion_train', 'label', features => '{pixels}',
			   model => 'softmax', optimizer => 'adam', learning_rate => 0.001,
			   batch_size => 128, epochs => 10, workers => 2);
SELECT round(avg((dml_predict('fashion_softmax', t) = label)::int), 4) AS softmax_test_accuracy
FROM fashion_test t;

\echo MLP 784-256-128-10, 2 workers
SELECT name, epochs, round(final_loss::numeric, 4) AS loss, round(seconds::numeric, 1) AS seconds,
	   round(rows_per_second) AS rows_per_s, workers, device
FROM dml_train('fashion_mlp', 'fashion_train', 'label', features => '{pixels}',
			   model => 'mlp', hidden => '{256,128}', optimizer => 'adam',
			   learning_rate => 0.001, batch_size => 64, epochs => 15, workers => 2);
SELECT round(avg((dml_predict('fashion_mlp', t) = label)::int), 4) AS mlp_test_accuracy
FROM fashion_test t;

\echo per-class probabilities of three test images
SELECT id, label, dml_predict_class('fashion_mlp', t) AS predicted,
	   (SELECT round(max(p)::numeric, 3) FROM unnest(dml_predict_proba('fashion_mlp', t)) p) AS confidence
FROM fashion_test t ORDER BY id LIMIT 3;

\echo the same metrics from dml_evaluate
SELECT (dml_evaluate('fashion_mlp', 'fashion_test') - 'confusion') AS evaluation;

SELECT name, version, kind, classes, metrics->>'evaluated_on' AS metrics_on, (metrics->>'accuracy')::float8 AS accuracy, (metrics->>'r2')::float8 AS r2
FROM dml_models ORDER BY name;
SQL
echo "== done"
