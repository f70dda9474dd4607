#!/bin/bash
# upgrade.sh: ALTER EXTENSION dml UPDATE keeps models and matches a fresh install.
#   1. install 1.0 and put in what a 1.0 build wrote: four models
#      (regress/travel/models-1.0.sql: linear, logistic, softmax, MLP in
#      weights format version 1, with the answers that build gave), one
#      owned by a role, with a second version, a deployment of version 1
#      and a grant to another role, in 1.0's tables.  Update to the newest
#      version: every stored answer, the owner, the deployment and the
#      grant hold, and the owner trains a next version.  (The library is
#      the newest one and needs the newest schema: before the update every
#      call is refused with the versions and ALTER EXTENSION dml UPDATE.)
#   2. at 1.1 too, dml_train and dml_wait are refused until the same
#      session updates; a backend that saw the right version sees the
#      extension re-created at 1.1 and refuses again.
#   3. the objects of an install updated from 1.0 equal those of a fresh
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
		-c "DROP DATABASE IF EXISTS up_v10" -c "DROP DATABASE IF EXISTS up_v11" \
		-c "DROP DATABASE IF EXISTS up_v12" -c "DROP DATABASE IF EXISTS up_v13" \
		-c "DROP ROLE IF EXISTS up_alice" -c "DROP ROLE IF EXISTS up_bob" \
		-c "DROP ROLE IF EXISTS up_carol" >/dev/null 2>&1
}
cleanup
trap cleanup EXIT
pgc_psql -d postgres -c "CREATE DATABASE up_old" -c "CREATE DATABASE up_fresh" \
	-c "CREATE DATABASE up_v10" -c "CREATE DATABASE up_v11" -c "CREATE DATABASE up_v12" -c "CREATE DATABASE up_v13" \
	-c "CREATE ROLE up_alice LOGIN" -c "CREATE ROLE up_bob LOGIN" -c "CREATE ROLE up_carol LOGIN" >/dev/null
pgc_allow_role up_alice
export PGDATABASE=up_old
pgc_psql -c "CREATE EXTENSION dml VERSION '1.0'" \
	-c "CREATE TABLE up AS SELECT i, sin(i * 0.37) AS x1, cos(i * 0.11) AS x2,
		2 * sin(i * 0.37) - cos(i * 0.11) + 0.1 * sin(i) AS r FROM generate_series(1, 600) i" \
	-c "GRANT SELECT ON up TO up_alice" >/dev/null
pgc_psql -f regress/travel/models-1.0.sql >"$T/upgrade-fixture.log" 2>&1
# what 1.0's dml_train, dml_deploy and dml_grant wrote, in 1.0's tables
pgc_psql -c "UPDATE dml.models SET owner = 'up_alice'::regrole WHERE name = 'v10_lin'" \
	-c "INSERT INTO dml.models (name, version, owner, kind, device, spec, weights, metrics)
		SELECT name, 2, owner, kind, device, spec, weights, metrics FROM dml.models WHERE name = 'v10_lin'" \
	-c "INSERT INTO dml.deployments (name, version) VALUES ('v10_lin', 1)" \
	-c "INSERT INTO dml.grants (name, grantee) VALUES ('v10_lin', 'up_bob'::regrole)" \
	>>"$T/upgrade-fixture.log" 2>&1
check "1.0: the 1.0 build's models, a deployment and a grant are in 1.0's tables" \
	'[ "$(pgc_psql -t -A -c "SELECT count(*) FROM dml.models") $(pgc_psql -t -A -c "SELECT count(*) FROM dml.grants")" = "5 1" ]'

# the 1.0 build's answers, stored beside its models: every one must match
fixture_wrong() {
	pgc_psql -t -A -c "SELECT count(*) FROM up_expected e,
		LATERAL (SELECT CASE e.fn WHEN 'predict' THEN ARRAY[dml_predict(e.model, e.features)]
			ELSE dml_predict_proba(e.model, e.features) END AS got) g
		WHERE cardinality(g.got) <> cardinality(e.answer) OR EXISTS (
			SELECT FROM unnest(g.got, e.answer) u(a, b) WHERE abs(a - b) > 1e-6 * (1 + abs(b)))" 2>&1
}
pgc_psql -c "GRANT SELECT ON up_expected TO PUBLIC" >/dev/null
check "the stored answers to check (20 of them)" \
	'[ "$(pgc_psql -t -A -c "SELECT count(*) FROM up_expected")" = 20 ]'

# before the update, the library refuses the old schema with one clear error
out=$(pgc_psql -c "SELECT dml_predict('v10_lin', ARRAY[0.5, -0.25])" 2>&1)
check "at 1.0: dml_predict says to run ALTER EXTENSION dml UPDATE, with both versions" \
	'grep -q "extension \"dml\" is at version 1.0, but its library needs version $newest" <<<"$out" &&
	 grep -q "HINT:  Run ALTER EXTENSION dml UPDATE" <<<"$out"' || echo "# $out"
out=$(pgc_psql -c "SELECT count(*) FROM dml_models" 2>&1)
check "at 1.0: so does the dml_models view (its access check is a dml function)" \
	'grep -q "is at version 1.0, but its library needs version $newest" <<<"$out"' || echo "# $out"
pgc_psql -c "ALTER EXTENSION dml UPDATE" >"$T/upgrade-update.log" 2>&1
check "ALTER EXTENSION dml UPDATE succeeds" '[ $? = 0 ]' || cat "$T/upgrade-update.log"
check "the extension is at $newest" \
	'[ "$(pgc_psql -t -A -c "SELECT extversion FROM pg_extension WHERE extname = '"'dml'"'")" = "$newest" ]'
check "after the update: the 1.0 build's models give its answers" '[ "$(fixture_wrong)" = 0 ]'
check "after the update: owners, versions and the deployment as before" \
	'[ "$(pgc_psql -t -A -c "SELECT string_agg(name || version || owner::text || deployed, '"' '"' ORDER BY id) FROM dml_models")" = \
	   "v10_lin1up_alicetrue v10_log1postgrestrue v10_cls1postgrestrue v10_mlp1postgrestrue v10_lin2up_alicefalse" ]'
check "after the update: the grantee still predicts with the model" \
	'[ "$(pgc_psql -t -A -c "SET ROLE up_bob" -c "SELECT dml_predict('"'v10_lin'"', ARRAY[0.5, -0.25]) = answer[1] FROM up_expected WHERE model = '"'v10_lin'"' AND features = '"'{0.5,-0.25}'"'")" = t ]'
out=$(pgc_psql -c "SET ROLE up_carol" -c "SELECT dml_predict('v10_lin', ARRAY[0.5, -0.25])" 2>&1)
check "after the update: a role without a grant does not see it" \
	'echo "$out" | grep -q "model \"v10_lin\" does not exist"'
pgc_psql -c "SET ROLE up_alice" -c "SELECT name FROM dml_train('v10_lin', 'up', 'r', features => '{x1,x2}',
	model => 'linear', workers => 1)" >"$T/upgrade-train.log" 2>&1
check "after the update: the owner trains version 3" \
	'[ "$(pgc_psql -t -A -c "SELECT max(version) FROM dml.models WHERE name = '"'v10_lin'"'")" = 3 ]' ||
	cat "$T/upgrade-train.log"

# --- 2. an updated install is a fresh install ------------------------------
pgc_psql -d up_fresh -c "CREATE EXTENSION dml" >/dev/null
pgc_psql -d up_v10 -c "CREATE EXTENSION dml VERSION '1.0'" >/dev/null
# an install of 1.1 (the second wave's release) updated in one step
pgc_psql -d up_v11 -c "CREATE EXTENSION dml VERSION '1.1'" >/dev/null
pgc_psql -d up_v11 -c "CREATE TABLE t11 AS SELECT i::float8 AS x, 2.0 * i AS y FROM generate_series(1, 50) i" >/dev/null
# one session: refused at 1.1 (dml_train and a job), updated, then it trains
pgc_psql -d up_v11 -v ON_ERROR_STOP=0 \
	-c "SELECT name FROM dml_train('m11', 't11', 'y', model => 'linear', workers => 1)" \
	-c "SELECT dml_wait(1)" \
	-c "ALTER EXTENSION dml UPDATE" \
	-c "SELECT name FROM dml_train('m11', 't11', 'y', model => 'linear', workers => 1)" >"$T/upgrade-v11.log" 2>&1
check "at 1.1: dml_train and dml_wait are refused, naming 1.1, $newest and ALTER EXTENSION dml UPDATE" \
	'[ "$(grep -c "extension \"dml\" is at version 1.1, but its library needs version $newest" "$T/upgrade-v11.log")" = 2 ] &&
	 [ "$(grep -c "HINT:  Run ALTER EXTENSION dml UPDATE" "$T/upgrade-v11.log")" = 2 ]' || cat "$T/upgrade-v11.log"
check "1.1 updates to $newest, and the same session then trains" \
	'[ "$(pgc_psql -d up_v11 -t -A -c "SELECT count(*) FROM dml.models WHERE name = '"'m11'"'")" = 1 ]' ||
	cat "$T/upgrade-v11.log"
# the backend's "right version" is forgotten when the extension is re-created older
pgc_psql -d up_v11 -v ON_ERROR_STOP=0 -c "SELECT dml_predict('m11', ARRAY[1.0])" \
	-c "DROP EXTENSION dml CASCADE" -c "CREATE EXTENSION dml VERSION '1.1'" \
	-c "SELECT dml_predict('m11', ARRAY[1.0])" >"$T/upgrade-recreate.log" 2>&1
check "one session: predicts at $newest, refused once the extension is re-created at 1.1" \
	'grep -q "^(1 row)" "$T/upgrade-recreate.log" &&
	 grep -q "is at version 1.1, but its library needs version $newest" "$T/upgrade-recreate.log"' ||
	cat "$T/upgrade-recreate.log"
pgc_psql -d up_v11 -c "ALTER EXTENSION dml UPDATE" >>"$T/upgrade-v11.log" 2>&1
# an install of 1.2 (the third wave's first release) updated in one step
pgc_psql -d up_v12 -c "CREATE EXTENSION dml VERSION '1.2'" -c "ALTER EXTENSION dml UPDATE" >"$T/upgrade-v12.log" 2>&1
check "1.2 updates to $newest" '[ $? = 0 ]' || cat "$T/upgrade-v12.log"
# an install of 1.3 (the third wave's second release) updated in one step
pgc_psql -d up_v13 -c "CREATE EXTENSION dml VERSION '1.3'" -c "ALTER EXTENSION dml UPDATE" >"$T/upgrade-v13.log" 2>&1
check "1.3 updates to $newest" '[ $? = 0 ]' || cat "$T/upgrade-v13.log"
for db in up_fresh up_old up_v10 up_v11 up_v12 up_v13; do
	pgc_psql -d $db -t -A -f regress/travel/shape.sql >"$T/upgrade-shape-$db.txt" 2>&1
done
check "the fresh install's objects are described ($(wc -l <"$T/upgrade-shape-up_fresh.txt") lines)" \
	'[ "$(wc -l <"$T/upgrade-shape-up_fresh.txt")" -gt 100 ] && ! grep -q ERROR "$T/upgrade-shape-up_fresh.txt"'
for db in up_old up_v11 up_v12 up_v13; do
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
