#!/bin/bash
# security.sh: attacks by ordinary login roles, each shown failing, with the
# legitimate use beside it still working.
#   1. search_path: shadows of every function and operator dml's owner-
#      context SQL uses, ahead of pg_catalog; the trap is shown to fire when
#      the shadowed SQL runs under that path, and never as the owner
#   2. code in a view and in a row-level security policy, run in dml's
#      worker sessions (training on 1 and 2 workers, predict_table on its
#      worker, evaluate): the session user is the caller, and RESET ROLE,
#      SET ROLE, COPY TO PROGRAM, pg_read_file, pg_authid and another
#      role's table are all refused
#   3. a grantee cannot drop, deploy, retrain, grant or revoke
#   4. grants planted before another role takes a name do not apply
#   5. grants to role OID 0 and to a dropped role; DROP ROLE of an owner;
#      DROP OWNED and REASSIGN OWNED
#   6. limits: dml.max_workers_total, dml.max_jobs_per_role,
#      dml.max_model_parameters
#   7. details => false hides statistics, metrics and history
#   8. a model one may not use and a name that does not exist fail alike
#   9. a role the server cannot log workers in as, and a NOLOGIN role,
#      fail before any worker starts, with the configuration in the hint
# Runs against the cluster regress/run.sh started.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh

su() { pgc_psql -At -c "SET client_min_messages = warning" -c "$1"; }
# check, and on failure show the last output the condition looked at ($out)
checko() {
	if eval_cond "$2"; then ok "$1"; else notok "$1"; echo "${out:-}" | head -20 | sed 's/^/# /'; fi
}
# as ROLE SQL: run SQL as a role that logged in as itself (peer + map)
as() {
	local r=$1
	shift
	pgc_as_pg psql -X -q -At -U "$r" -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" -c "$1" 2>&1
}

for r in sec_alice sec_bob sec_mallory sec_gone sec_heir sec_nologin sec_nomap; do
	su "DROP OWNED BY $r" >/dev/null 2>&1
	su "DROP ROLE IF EXISTS $r" >/dev/null
done
su "DROP SCHEMA IF EXISTS mallory_s CASCADE" >/dev/null
su "CREATE ROLE sec_alice LOGIN; CREATE ROLE sec_bob LOGIN; CREATE ROLE sec_mallory LOGIN;
	CREATE ROLE sec_nologin; CREATE ROLE sec_nomap LOGIN;
	CREATE ROLE sec_gone LOGIN; CREATE ROLE sec_heir LOGIN;
	CREATE SCHEMA mallory_s AUTHORIZATION sec_mallory;
	GRANT CREATE ON SCHEMA public TO sec_alice, sec_bob" >/dev/null
pgc_allow_role sec_alice sec_bob sec_mallory sec_gone sec_heir
checko "roles log in as themselves" '[ "$(as sec_mallory "SELECT session_user")" = sec_mallory ]'

# data of each role
as sec_alice "CREATE TABLE public.alice_data AS SELECT i, (i % 7)::float8 AS x1, (i % 5)::float8 AS x2,
	(2 * (i % 7) - (i % 5) + 1)::float8 AS y FROM generate_series(1, 400) i;
	CREATE TABLE public.alice_secret AS SELECT 42 AS s" >/dev/null
as sec_mallory "CREATE TABLE mallory_s.m_data AS SELECT i, (i % 7)::float8 AS x1, (i % 5)::float8 AS x2,
	(3 * (i % 7) + (i % 5))::float8 AS y FROM generate_series(1, 400) i" >/dev/null

# ---------------------------------------------------------------------
# 1. search_path shadowing in owner context
# ---------------------------------------------------------------------
# Each shadow logs current_user and tries to make mallory a superuser,
# then does what the original does.
as sec_mallory "
CREATE TABLE mallory_s.log (who text, what text);
GRANT INSERT ON mallory_s.log TO PUBLIC;
GRANT USAGE ON SCHEMA mallory_s TO PUBLIC;
CREATE FUNCTION mallory_s.trap(what text) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
	INSERT INTO mallory_s.log VALUES (current_user, what);
	BEGIN
		EXECUTE 'ALTER ROLE sec_mallory SUPERUSER';
	EXCEPTION WHEN others THEN NULL;
	END;
END \$\$;
CREATE FUNCTION mallory_s.eq_text(a text, b text) RETURNS boolean LANGUAGE plpgsql AS
	\$\$ BEGIN PERFORM mallory_s.trap('=text'); RETURN a OPERATOR(pg_catalog.=) b; END \$\$;
CREATE OPERATOR mallory_s.= (LEFTARG = text, RIGHTARG = text, FUNCTION = mallory_s.eq_text);
CREATE FUNCTION mallory_s.eq_oid(a oid, b oid) RETURNS boolean LANGUAGE plpgsql AS
	\$\$ BEGIN PERFORM mallory_s.trap('=oid'); RETURN a OPERATOR(pg_catalog.=) b; END \$\$;
CREATE OPERATOR mallory_s.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = mallory_s.eq_oid);
CREATE FUNCTION mallory_s.eq_int(a integer, b integer) RETURNS boolean LANGUAGE plpgsql AS
	\$\$ BEGIN PERFORM mallory_s.trap('=int'); RETURN a OPERATOR(pg_catalog.=) b; END \$\$;
CREATE OPERATOR mallory_s.= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = mallory_s.eq_int);
CREATE FUNCTION mallory_s.eq_big(a bigint, b bigint) RETURNS boolean LANGUAGE plpgsql AS
	\$\$ BEGIN PERFORM mallory_s.trap('=bigint'); RETURN a OPERATOR(pg_catalog.=) b; END \$\$;
CREATE OPERATOR mallory_s.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = mallory_s.eq_big);
CREATE FUNCTION mallory_s.lt_int(a integer, b integer) RETURNS boolean LANGUAGE plpgsql AS
	\$\$ BEGIN PERFORM mallory_s.trap('<int'); RETURN a OPERATOR(pg_catalog.<) b; END \$\$;
CREATE OPERATOR mallory_s.< (LEFTARG = integer, RIGHTARG = integer, FUNCTION = mallory_s.lt_int);
CREATE FUNCTION mallory_s.gt_int(a integer, b integer) RETURNS boolean LANGUAGE plpgsql AS
	\$\$ BEGIN PERFORM mallory_s.trap('>int'); RETURN a OPERATOR(pg_catalog.>) b; END \$\$;
CREATE OPERATOR mallory_s.> (LEFTARG = integer, RIGHTARG = integer, FUNCTION = mallory_s.gt_int);
CREATE FUNCTION mallory_s.plus_int(a integer, b integer) RETURNS integer LANGUAGE plpgsql AS
	\$\$ BEGIN PERFORM mallory_s.trap('+int'); RETURN a OPERATOR(pg_catalog.+) b; END \$\$;
CREATE OPERATOR mallory_s.+ (LEFTARG = integer, RIGHTARG = integer, FUNCTION = mallory_s.plus_int);
CREATE FUNCTION mallory_s.arrow(a jsonb, b text) RETURNS jsonb LANGUAGE plpgsql AS
	\$\$ BEGIN PERFORM mallory_s.trap('->'); RETURN a OPERATOR(pg_catalog.->) b; END \$\$;
CREATE OPERATOR mallory_s.-> (LEFTARG = jsonb, RIGHTARG = text, FUNCTION = mallory_s.arrow);
CREATE FUNCTION mallory_s.arrow2(a jsonb, b text) RETURNS text LANGUAGE plpgsql AS
	\$\$ BEGIN PERFORM mallory_s.trap('->>'); RETURN a OPERATOR(pg_catalog.->>) b; END \$\$;
CREATE OPERATOR mallory_s.->> (LEFTARG = jsonb, RIGHTARG = text, FUNCTION = mallory_s.arrow2);
CREATE FUNCTION mallory_s.nextval(r regclass) RETURNS bigint LANGUAGE plpgsql AS
	\$\$ BEGIN PERFORM mallory_s.trap('nextval'); RETURN pg_catalog.nextval(r); END \$\$;
CREATE FUNCTION mallory_s.nextval(r text) RETURNS bigint LANGUAGE plpgsql AS
	\$\$ BEGIN PERFORM mallory_s.trap('nextval'); RETURN pg_catalog.nextval(r::regclass); END \$\$;
CREATE FUNCTION mallory_s.hashtext(t text) RETURNS integer LANGUAGE plpgsql AS
	\$\$ BEGIN PERFORM mallory_s.trap('hashtext'); RETURN pg_catalog.hashtext(t); END \$\$;
CREATE FUNCTION mallory_s.pg_advisory_xact_lock(a integer, b integer) RETURNS void LANGUAGE plpgsql AS
	\$\$ BEGIN PERFORM mallory_s.trap('lock'); PERFORM pg_catalog.pg_advisory_xact_lock(a, b); END \$\$;
CREATE FUNCTION mallory_s.jsonb_array_elements(j jsonb) RETURNS SETOF jsonb LANGUAGE plpgsql AS
	\$\$ BEGIN PERFORM mallory_s.trap('jsonb_array_elements'); RETURN QUERY SELECT pg_catalog.jsonb_array_elements(j); END \$\$;
CREATE FUNCTION mallory_s.jsonb_array_elements_text(j jsonb) RETURNS SETOF text LANGUAGE plpgsql AS
	\$\$ BEGIN PERFORM mallory_s.trap('jsonb_array_elements_text'); RETURN QUERY SELECT pg_catalog.jsonb_array_elements_text(j); END \$\$;
CREATE FUNCTION mallory_s.max_sf(s integer, v integer) RETURNS integer LANGUAGE plpgsql AS
	\$\$ BEGIN PERFORM mallory_s.trap('max'); RETURN greatest(s, v); END \$\$;
CREATE AGGREGATE mallory_s.max(integer) (SFUNC = mallory_s.max_sf, STYPE = integer);
CREATE FUNCTION mallory_s.count_sf(s bigint) RETURNS bigint LANGUAGE plpgsql AS
	\$\$ BEGIN PERFORM mallory_s.trap('count'); RETURN s + 1; END \$\$;
CREATE AGGREGATE mallory_s.count(*) (SFUNC = mallory_s.count_sf, STYPE = bigint, INITCOND = 0);
" >/dev/null
n_shadows=$(su "SELECT count(*) FROM pg_proc WHERE pronamespace = 'mallory_s'::regnamespace")
checko "mallory has her shadows ($n_shadows functions)" '[ "$n_shadows" -ge 20 ]'

# the trap fires when SQL runs under the shadowing path: run as a superuser
su "SET search_path = mallory_s, pg_catalog; SELECT 'a'::text = 'a'::text, 1 < 2, max(x) FROM (VALUES (1)) v(x)" >/dev/null
fired=$(su "SELECT count(*) FROM mallory_s.log WHERE who = 'postgres'")
checko "the trap fires for a superuser under mallory's path ($fired shadows ran as postgres)" '[ "$fired" -ge 3 ]'
su "ALTER ROLE sec_mallory NOSUPERUSER; TRUNCATE mallory_s.log" >/dev/null

# alice shares a model with mallory; mallory uses dml under her path
as sec_alice "SELECT version FROM dml_train('sec_shared', 'public.alice_data', 'y', features => '{x1,x2}', workers => 1)" >/dev/null
as sec_alice "SELECT dml_grant('sec_shared', 'sec_mallory')" >/dev/null
SP="SET search_path = mallory_s, pg_catalog, public;"
out=$(as sec_mallory "$SP
	SELECT version FROM dml_train('sec_m1', 'mallory_s.m_data', 'y', features => '{x1,x2}', workers => 1);
	SELECT version FROM dml_train('sec_m1', 'mallory_s.m_data', 'y', features => '{x1,x2}', workers => 2,
		optimizer => 'adam', epochs => 2);
	SELECT version FROM dml_train('sec_m2', 'mallory_s.m_data', 'y', features => '{x1,x2}');
	SELECT round(dml_predict('sec_m1', ARRAY[1, 2]::float8[])::numeric, 3) IS NOT NULL;
	SELECT count(*) FROM dml_models; SELECT count(*) FROM dml_epochs;
	SELECT round(dml_predict('sec_shared', ARRAY[1, 2]::float8[])::numeric, 3);
	SELECT dml_evaluate('sec_shared', 'mallory_s.m_data') IS NOT NULL;
	CALL dml_predict_table('sec_m1', 'mallory_s.m_data', 'm_scores', 'i');
	SELECT dml_deploy('sec_m1', 1); SELECT dml_deploy('sec_m1', NULL);
	SELECT dml_grant('sec_m1', 'sec_bob'); SELECT dml_revoke('sec_m1', 'sec_bob');
	SELECT dml_drop_model('sec_m1', 1); SELECT dml_drop_model('sec_m1'); SELECT dml_drop_model('sec_m2')")
checko "mallory trains, predicts, shares and drops under her path" \
	'grep <<<"$out" -qx "1.000" && ! grep <<<"$out" -q ERROR'
[ -n "$(echo "$out" | grep ERROR)" ] && echo "$out" | sed 's/^/# /'
owner_runs=$(su "SELECT count(*) FROM mallory_s.log WHERE who <> 'sec_mallory'")
checko "no shadow ever ran as anyone but mallory ($owner_runs did)" '[ "$owner_runs" = 0 ]'
checko "mallory is no superuser" '[ "$(su "SELECT rolsuper FROM pg_roles WHERE rolname = '"'"'sec_mallory'"'"'")" = f ]'
su "TRUNCATE mallory_s.log" >/dev/null

# ---------------------------------------------------------------------
# 2. user code in worker sessions
# ---------------------------------------------------------------------
as sec_mallory "
CREATE FUNCTION mallory_s.probe() RETURNS boolean LANGUAGE plpgsql AS \$\$
DECLARE r text := 'session_user=' || session_user; v text;
BEGIN
	BEGIN RESET ROLE; r := r || ' reset_role=' || current_user;
	EXCEPTION WHEN others THEN r := r || ' reset_role=denied'; END;
	BEGIN SET ROLE postgres; r := r || ' set_role=ALLOWED';
	EXCEPTION WHEN others THEN r := r || ' set_role=denied'; END;
	BEGIN COPY (SELECT 1) TO PROGRAM 'true'; r := r || ' copy_program=ALLOWED';
	EXCEPTION WHEN others THEN r := r || ' copy_program=denied'; END;
	BEGIN v := pg_read_file('postgresql.conf'); r := r || ' read_file=ALLOWED';
	EXCEPTION WHEN others THEN r := r || ' read_file=denied'; END;
	BEGIN PERFORM count(*) FROM pg_authid; r := r || ' authid=ALLOWED';
	EXCEPTION WHEN others THEN r := r || ' authid=denied'; END;
	BEGIN PERFORM count(*) FROM public.alice_secret; r := r || ' other_table=ALLOWED';
	EXCEPTION WHEN others THEN r := r || ' other_table=denied'; END;
	RAISE EXCEPTION 'probe: % end', r;
END \$\$;
CREATE VIEW mallory_s.m_view AS SELECT i, x1, x2, y FROM mallory_s.m_data WHERE mallory_s.probe();
CREATE TABLE mallory_s.m_rls AS SELECT * FROM mallory_s.m_data;
ALTER TABLE mallory_s.m_rls ENABLE ROW LEVEL SECURITY;
ALTER TABLE mallory_s.m_rls FORCE ROW LEVEL SECURITY;
CREATE POLICY p ON mallory_s.m_rls USING (mallory_s.probe());
" >/dev/null
# a probe's report: every attempt refused, the session user mallory
probe_ok() {
	# a here-string, not a pipe: under pipefail grep -q's exit at the first
	# line (the ERROR) made echo's write of the next (CONTEXT) die of
	# SIGPIPE now and then, and the check failed on a report it had matched
	grep -q "probe: session_user=sec_mallory reset_role=sec_mallory set_role=denied copy_program=denied read_file=denied authid=denied other_table=denied end" <<<"$1"
}
for w in 1 2; do
	out=$(as sec_mallory "SELECT * FROM dml_train('sec_probe', 'mallory_s.m_view', 'y', features => '{x1,x2}',
		optimizer => 'adam', epochs => 1, workers => $w)")
	checko "view code in a $w-worker training runs as mallory and is refused everything" 'probe_ok "$out"'
	probe_ok "$out" || echo "$out" | sed 's/^/# /'
	out=$(as sec_mallory "SELECT * FROM dml_train('sec_probe', 'mallory_s.m_rls', 'y', features => '{x1,x2}',
		optimizer => 'adam', epochs => 1, workers => $w)")
	checko "policy code in a $w-worker training runs as mallory and is refused everything" 'probe_ok "$out"'
	probe_ok "$out" || echo "$out" | sed 's/^/# /'
done
as sec_mallory "SELECT version FROM dml_train('sec_m3', 'mallory_s.m_data', 'y', features => '{x1,x2}')" >/dev/null
out=$(as sec_mallory "SET search_path = mallory_s, public;
	CALL dml_predict_table('sec_m3', 'mallory_s.m_view', 'm_out', 'i', device => 'worker-cpu')")
checko "view code in dml_predict_table's worker runs as mallory and is refused everything" 'probe_ok "$out"'
probe_ok "$out" || echo "$out" | sed 's/^/# /'
out=$(as sec_mallory "SELECT dml_evaluate('sec_m3', 'mallory_s.m_rls')")
checko "policy code in dml_evaluate runs as mallory and is refused everything" 'probe_ok "$out"'
checko "no job process left" '[ "$(pgc_job_procs)" -eq 0 ]'

# ---------------------------------------------------------------------
# 3. a grantee manages nothing
# ---------------------------------------------------------------------
as sec_alice "SELECT version FROM dml_train('sec_pay', 'public.alice_data', 'y', features => '{x1,x2}')" >/dev/null
as sec_alice "SELECT dml_grant('sec_pay', 'sec_bob')" >/dev/null
as sec_bob "CREATE TABLE public.bob_data AS SELECT * FROM generate_series(1, 50) i, LATERAL (SELECT i::float8 AS x1, 1::float8 AS x2, 0::float8 AS y) s" >/dev/null
checko "bob may use alice's model" '[ -n "$(as sec_bob "SELECT dml_predict('"'"'sec_pay'"'"', ARRAY[1, 2]::float8[])" | grep -v ERROR)" ]'
for call in "SELECT dml_drop_model('sec_pay')" "SELECT dml_drop_model('sec_pay', 1)" "SELECT dml_deploy('sec_pay', 1)" \
	"SELECT dml_grant('sec_pay', 'sec_mallory')" "SELECT dml_revoke('sec_pay', 'sec_bob')" \
	"SELECT version FROM dml_train('sec_pay', 'public.bob_data', 'y', features => '{x1,x2}')"; do
	out=$(as sec_bob "$call")
	checko "a grantee is refused: $call" 'grep <<<"$out" -q "must be owner of model \"sec_pay\""'
done
checko "alice still has her one version" '[ "$(su "SELECT count(*) FROM dml.models WHERE name = '"'"'sec_pay'"'"'")" = 1 ]'
checko "alice manages her model" '[ "$(as sec_alice "SELECT dml_deploy('"'"'sec_pay'"'"', 1); SELECT dml_revoke('"'"'sec_pay'"'"', '"'"'sec_bob'"'"'); SELECT 1" | tail -1)" = 1 ]'
out=$(as sec_bob "SELECT dml_predict('sec_pay', ARRAY[1, 2]::float8[])")
checko "a revoked grantee cannot use it" 'grep <<<"$out" -q "model \"sec_pay\" does not exist"'

# ---------------------------------------------------------------------
# 4. planted grants
# ---------------------------------------------------------------------
as sec_mallory "SELECT version FROM dml_train('sec_payroll', 'mallory_s.m_data', 'y', features => '{x1,x2}');
	SELECT dml_grant('sec_payroll', 'sec_mallory'); SELECT dml_grant('sec_payroll', 'sec_bob');
	SELECT dml_drop_model('sec_payroll', 1)" >/dev/null
checko "the grants went with the last version" '[ "$(su "SELECT count(*) FROM dml.grants WHERE name = '"'"'sec_payroll'"'"'")" = 0 ]'
as sec_alice "SELECT version FROM dml_train('sec_payroll', 'public.alice_data', 'y', features => '{x1,x2}')" >/dev/null
out=$(as sec_mallory "SELECT dml_predict('sec_payroll', ARRAY[1, 2]::float8[])")
checko "mallory cannot use alice's later model of the name" 'grep <<<"$out" -q "does not exist"'
checko "nor see it" '[ "$(as sec_mallory "SELECT count(*) FROM dml_models WHERE name = '"'"'sec_payroll'"'"'")" = 0 ]'
out=$(as sec_mallory "SELECT version FROM dml_train('sec_payroll', 'mallory_s.m_data', 'y', features => '{x1,x2}')")
checko "nor take the name back" 'grep <<<"$out" -q "model name \"sec_payroll\" is not available"'

# ---------------------------------------------------------------------
# 5. roles
# ---------------------------------------------------------------------
out=$(as sec_alice "SELECT dml_grant('sec_pay', 0::oid::regrole)")
checko "a grant to role OID 0 is refused" 'grep <<<"$out" -q "role with OID 0 does not exist"'
gone_oid=$(su "CREATE ROLE sec_dangling; SELECT 'sec_dangling'::regrole::oid; DROP ROLE sec_dangling" | sed -n 1p)
out=$(as sec_alice "SELECT dml_grant('sec_pay', $gone_oid::oid::regrole)")
checko "a grant to a dropped role's OID is refused" 'grep <<<"$out" -q "does not exist"'
su "GRANT SELECT ON public.alice_data TO sec_gone" >/dev/null
as sec_gone "SELECT version FROM dml_train('sec_gone_m', 'public.alice_data', 'y', features => '{x1,x2}');
	SELECT dml_grant('sec_gone_m', 'sec_bob')" >/dev/null
out=$(su "DROP ROLE sec_gone" 2>&1)
checko "DROP ROLE of a model owner is refused" 'grep <<<"$out" -q "cannot be dropped because some dml models depend on it"'
su "REASSIGN OWNED BY sec_gone TO sec_heir" >/dev/null
checko "REASSIGN OWNED gives the models to the heir" \
	'[ "$(su "SELECT owner::regrole FROM dml.models WHERE name = '"'"'sec_gone_m'"'"'")" = sec_heir ]'
checko "the heir manages them" '[ "$(as sec_heir "SELECT dml_revoke('"'"'sec_gone_m'"'"', '"'"'sec_bob'"'"'); SELECT 1" | tail -1)" = 1 ]'
su "DROP OWNED BY sec_heir; DROP OWNED BY sec_gone" >/dev/null
checko "DROP OWNED drops them" '[ "$(su "SELECT count(*) FROM dml.models WHERE name = '"'"'sec_gone_m'"'"'")" = 0 ]'
checko "then DROP ROLE goes through" 'su "DROP ROLE sec_gone; DROP ROLE sec_heir" >/dev/null'

# ---------------------------------------------------------------------
# 6. limits
# ---------------------------------------------------------------------
out=$(as sec_mallory "SELECT * FROM dml_train('sec_big', 'mallory_s.m_data', 'y', features => '{x1,x2}',
	model => 'mlp', hidden => '{16384,16384,16384}')")
checko "a model over dml.max_model_parameters is refused before it starts" \
	'grep <<<"$out" -q "more than dml.max_model_parameters"'
out=$(as sec_mallory "SET dml.max_workers_total = 1000")
checko "a role cannot raise dml.max_workers_total" 'grep <<<"$out" -q "permission denied"'
su "ALTER ROLE sec_mallory SET dml.max_workers_total = 3; ALTER ROLE sec_mallory SET dml.max_jobs_per_role = 1" >/dev/null
out=$(as sec_mallory "SELECT * FROM dml_train('sec_wide', 'mallory_s.m_data', 'y', features => '{x1,x2}',
	optimizer => 'adam', epochs => 1, workers => 4)")
checko "a job of more ranks than dml.max_workers_total is refused" \
	'grep <<<"$out" -q "more than dml.max_workers_total allows"'
pgc_as_pg psql -X -q -U sec_mallory -c "SELECT * FROM dml_train('sec_long', 'mallory_s.m_data', 'y',
	features => '{x1,x2}', optimizer => 'sgd', batch_size => 1, epochs => 100000, workers => 2)" \
	>"$T/sec-long.log" 2>&1 &
client=$!
wait_until 60 'grep -q "epoch 1:" "$T/sec-long.log"'
wait_until 10 'running=$(pgc_job_procs); [ "$running" -ge 3 ]'
checko "a long job of mallory runs ($running processes)" '[ "$running" -ge 3 ]'
out=$(as sec_mallory "SELECT * FROM dml_train('sec_second', 'mallory_s.m_data', 'y', features => '{x1,x2}',
	optimizer => 'adam', epochs => 1, workers => 1)")
checko "a second job of the role is refused (dml.max_jobs_per_role)" 'grep <<<"$out" -q "already runs 1 jobs"'
su "ALTER ROLE sec_mallory SET dml.max_jobs_per_role = 4" >/dev/null
out=$(as sec_mallory "SELECT * FROM dml_train('sec_second', 'mallory_s.m_data', 'y', features => '{x1,x2}',
	optimizer => 'adam', epochs => 1, workers => 2)")
checko "ranks beyond dml.max_workers_total in the cluster are refused" \
	'grep <<<"$out" -q "too many worker ranks running: this job needs 2, 1 of dml.max_workers_total = 3 are free"'
stop_job "long job" cancel sec_long "$T/sec-long.log" $client 200
out=$(as sec_mallory "SELECT version FROM dml_train('sec_second', 'mallory_s.m_data', 'y', features => '{x1,x2}',
	optimizer => 'adam', epochs => 1, workers => 2)")
checko "once it ended, the slots are free again ($out)" '[ "$out" = 1 ]'
su "ALTER ROLE sec_mallory RESET ALL" >/dev/null

# ---------------------------------------------------------------------
# 7. details
# ---------------------------------------------------------------------
as sec_alice "SELECT dml_grant('sec_pay', 'sec_bob', details => false)" >/dev/null
row=$(as sec_bob "SELECT features::text, metrics IS NULL FROM dml_models WHERE name = 'sec_pay'")
checko "details => false: names and kinds of features only ($row)" \
	'[ "$row" = "[{\"kind\": \"num\", \"name\": \"x1\"}, {\"kind\": \"num\", \"name\": \"x2\"}]|t" ]'
checko "details => false: no training history" \
	'[ "$(as sec_bob "SELECT count(*) FROM dml_epochs WHERE name = '"'"'sec_pay'"'"'")" = 0 ]'
checko "details => false: predicting still works" \
	'as sec_bob "SELECT dml_predict('"'"'sec_pay'"'"', ARRAY[1, 2]::float8[])" | grep -qE "^-?[0-9.]+$"'
as sec_alice "SELECT dml_grant('sec_pay', 'sec_bob')" >/dev/null
checko "details => true (the default): the statistics and metrics" \
	'[ "$(as sec_bob "SELECT features->0 ? '"'"'mean'"'"' AND metrics IS NOT NULL FROM dml_models WHERE name = '"'"'sec_pay'"'"'")" = t ]'

# ---------------------------------------------------------------------
# 8. names one may not use do not exist
# ---------------------------------------------------------------------
for call in "SELECT dml_predict('NAME', ARRAY[1, 2]::float8[])" "SELECT dml_drop_model('NAME')" \
	"SELECT dml_deploy('NAME', 1)" "SELECT dml_grant('NAME', 'sec_mallory')" \
	"SELECT dml_evaluate('NAME', 'mallory_s.m_data')" "SELECT dml_predict_class('NAME', ARRAY[1, 2]::float8[])"; do
	a=$(as sec_mallory "${call//NAME/sec_pay}" | sed 's/sec_pay/X/g')
	b=$(as sec_mallory "${call//NAME/sec_no_such_model}" | sed 's/sec_no_such_model/X/g')
	checko "alike for a hidden and a missing model: ${call//NAME/m}" '[ "$a" = "$b" ] && grep <<<"$a" -q "does not exist"'
done

# ---------------------------------------------------------------------
# 9. the workers' login
# ---------------------------------------------------------------------
su "GRANT SELECT ON mallory_s.m_data TO sec_nomap, sec_nologin; GRANT USAGE ON SCHEMA mallory_s TO sec_nomap, sec_nologin" >/dev/null
out=$(su "SET ROLE sec_nomap; SELECT * FROM dml_train('sec_nomap_m', 'mallory_s.m_data', 'y', features => '{x1,x2}',
	optimizer => 'adam', epochs => 1, workers => 1)" 2>&1)
checko "a role the server cannot log in as: a clear error" \
	'grep <<<"$out" -q "dml'"'"'s workers cannot log in as role \"sec_nomap\""'
checko "its hint names the pg_hba.conf and pg_ident.conf lines" \
	'grep <<<"$out" -q "local all all peer map=dml" && grep <<<"$out" -q "dml postgres sec_nomap"'
out=$(su "SET ROLE sec_nologin; SELECT * FROM dml_train('sec_nologin_m', 'mallory_s.m_data', 'y', features => '{x1,x2}',
	optimizer => 'adam', epochs => 1, workers => 1)" 2>&1)
checko "a NOLOGIN role: a clear error" 'grep <<<"$out" -q "role \"sec_nologin\" cannot log in"'
checko "no job process left" '[ "$(pgc_job_procs)" -eq 0 ]'

# clean up
for r in sec_alice sec_bob sec_mallory sec_nologin sec_nomap; do
	su "DROP OWNED BY $r" >/dev/null 2>&1
done
su "DROP SCHEMA IF EXISTS mallory_s CASCADE; DROP ROLE sec_alice, sec_bob, sec_mallory, sec_nologin, sec_nomap" >/dev/null
