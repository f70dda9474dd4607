#!/bin/bash
# upgrade.sh: ALTER EXTENSION dml UPDATE keeps models and matches a fresh install.
#   1. install 1.0, train linear, logistic, softmax and MLP models (one
#      owned by a role and granted to another, one deployed), load the
#      models a 1.0 build wrote (regress/travel/models-1.0.sql, weights
#      format version 1), update to the newest version: every prediction,
#      the deployment and the grant are the same after the update, and
#      the stored 1.0 models give the answers the 1.0 build gave.
#   2. the objects of an install updated from 1.0 equal those of a fresh
#      install of the newest version (regress/travel/shape.sql), while
#      1.0's differ from them (the comparison can fail).  (0.1.0's install
#      script is not installed; its update to 1.0 changes nothing.)
# Runs against the cluster regress/run.sh started, in databases of its own.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh
newest=$(sed -n "s/^default_version = '\(.*\)'/\1/p" dml.control)
cleanup() {
	pgc_psql -d postgres -c "DROP DATABASE IF EXISTS up_old" -c "DROP DATABASE IF EXISTS up_fresh" \
		-c "DROP DATABASE IF EXISTS up_v10" \
		-c "DROP ROLE IF EXISTS up_alice" -c "DROP ROLE IF EXISTS up_bob" >/dev/null 2>&1
}
cleanup
trap cleanup EXIT
pgc_psql -d postgres -c "CREATE DATABASE up_old" -c "CREATE DATABASE up_fresh" \
	-c "CREATE DATABASE up_v10" \
	-c "CREATE ROLE up_alice LOGIN" -c "CREATE ROLE up_bob LOGIN" >/dev/null
export PGDATABASE=up_old
pgc_psql -c "CREATE EXTENSION dml VERSION '1.0'" \
	-c "CREATE TABLE up AS SELECT i, sin(i * 0.37) AS x1, cos(i * 0.11) AS x2,
		2 * sin(i * 0.37) - cos(i * 0.11) + 0.1 * sin(i) AS r,
		sin(i * 0.37) > cos(i * 0.11) AS pos,
		(ARRAY['low','mid','high'])[1 + (i % 3)] AS lab FROM generate_series(1, 600) i" \
	-c "GRANT SELECT ON up TO up_alice" >/dev/null
train() {	# role name target kind extra
	pgc_psql -c "SET ROLE $1" -c "SELECT name FROM dml_train('$2', 'up', '$3', features => '{x1,x2}',
		model => '$4', workers => 1 ${5:-})" >/dev/null 2>>"$T/upgrade-train.log"
}
train up_alice up_lin r linear
train up_alice up_lin r linear ", weight_decay => 5"
train postgres up_log pos logistic
train postgres up_cls lab softmax
train postgres up_mlp r mlp ", hidden => '{6,4}', activation => 'tanh', epochs => 3"
pgc_psql -c "SET ROLE up_alice" -c "SELECT dml_deploy('up_lin', 1)" \
	-c "SELECT dml_grant('up_lin', 'up_bob')" >/dev/null
pgc_psql -f regress/travel/models-1.0.sql >"$T/upgrade-fixture.log" 2>&1
check "1.0: five models trained, the 1.0 build's four loaded" \
	'[ "$(pgc_psql -t -A -c "SELECT count(*) FROM dml.models")" = 9 ]'

answers() {
	pgc_psql -t -A -c "SELECT string_agg(pg_catalog.format('%s %s %s %s %s %s', i,
			dml_predict('up_lin', t), dml_predict_proba('up_log', t), dml_predict_class('up_cls', t),
			dml_predict_proba('up_cls', ARRAY[x1, x2]), dml_predict('up_mlp', ARRAY[x1, x2])),
			E'\n' ORDER BY i) FROM up t WHERE i <= 30" \
		-c "SELECT name, version, owner, deployed, kind FROM dml_models ORDER BY id" \
		-c "SELECT dml_evaluate('up_cls', 'up')" \
		-c "SET ROLE up_bob" -c "SELECT dml_predict('up_lin', ARRAY[0.1, 0.2])" 2>&1
}
# the 1.0 build's answers, stored beside its models: every one must match
fixture_wrong() {
	pgc_psql -t -A -c "SELECT count(*) FROM up_expected e,
		LATERAL (SELECT CASE e.fn WHEN 'predict' THEN ARRAY[dml_predict(e.model, e.features)]
			ELSE dml_predict_proba(e.model, e.features) END AS got) g
		WHERE cardinality(g.got) <> cardinality(e.answer) OR EXISTS (
			SELECT FROM unnest(g.got, e.answer) u(a, b) WHERE abs(a - b) > 1e-6 * (1 + abs(b)))" 2>&1
}
answers >"$T/upgrade-before.txt"
check "1.0: the models answer" '! grep -q ERROR "$T/upgrade-before.txt"'
check "1.0: the 1.0 build's stored models give its answers" '[ "$(fixture_wrong)" = 0 ]'
check "the stored answers are checked (20 of them)" \
	'[ "$(pgc_psql -t -A -c "SELECT count(*) FROM up_expected")" = 20 ]'

pgc_psql -c "ALTER EXTENSION dml UPDATE" >"$T/upgrade-update.log" 2>&1
check "ALTER EXTENSION dml UPDATE succeeds" '[ $? = 0 ]'
check "the extension is at $newest" \
	'[ "$(pgc_psql -t -A -c "SELECT extversion FROM pg_extension WHERE extname = '"'dml'"'")" = "$newest" ]'
answers >"$T/upgrade-after.txt"
check "after the update: every prediction, owner, deployment and grant as before" \
	'cmp -s "$T/upgrade-before.txt" "$T/upgrade-after.txt"'
check "after the update: the 1.0 build's models give its answers" '[ "$(fixture_wrong)" = 0 ]'
train up_alice up_lin r linear
check "after the update: the owner adds version 3" \
	'[ "$(pgc_psql -t -A -c "SELECT max(version) FROM dml.models WHERE name = '"'up_lin'"'")" = 3 ]'

# --- 2. an updated install is a fresh install ------------------------------
pgc_psql -d up_fresh -c "CREATE EXTENSION dml" >/dev/null
pgc_psql -d up_v10 -c "CREATE EXTENSION dml VERSION '1.0'" >/dev/null
for db in up_fresh up_old up_v10; do
	pgc_psql -d $db -t -A -f regress/travel/shape.sql >"$T/upgrade-shape-$db.txt" 2>&1
done
check "the fresh install's objects are described ($(wc -l <"$T/upgrade-shape-up_fresh.txt") lines)" \
	'[ "$(wc -l <"$T/upgrade-shape-up_fresh.txt")" -gt 100 ] && ! grep -q ERROR "$T/upgrade-shape-up_fresh.txt"'
for db in up_old; do
	if diff "$T/upgrade-shape-up_fresh.txt" "$T/upgrade-shape-$db.txt" >"$T/upgrade-shape-$db.diff"; then
		ok "updated install ($db) has the same objects as a fresh $newest"
	else
		notok "updated install ($db) has the same objects as a fresh $newest"
		head -20 "$T/upgrade-shape-$db.diff"
	fi
done
check "1.0 has different objects from $newest (the comparison sees a difference)" \
	'! cmp -s "$T/upgrade-shape-up_fresh.txt" "$T/upgrade-shape-up_v10.txt"'
echo "# $n checks"
