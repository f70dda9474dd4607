#!/bin/bash
# backup.sh: the catalog is user data that PostgreSQL's own tools keep.
#   1. pg_dump -Fc | pg_restore and pg_dump -Fp | psql into a second
#      database keep every model version (weights byte for byte, spec,
#      metrics, owner), epoch, deployment and grant; predictions are
#      identical; the id sequence and version numbers continue past the
#      restored ones; a grantee still may, and others still may not.
#   2. pg_dumpall into a new cluster does the same there, where the roles
#      have other oids: owners and grantees follow the role names.
#   3. every table and sequence of schema dml is marked for pg_dump.
#   A job's record (dml.job_runs, owner a regrole, relation a regclass) follows
#   its owner's and its table's names
#   into the new cluster too: the owner sees it there, another role not.
# Starts two clusters of its own.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh
source regress/travel/clusters.sh
trap '[ -n "${DML_KEEP:-}" ] || pgc_stop_all OLD NEW' EXIT

pgc_start || { notok "cluster started"; exit 1; }
pgc_save OLD
pgc_psql -c "CREATE DATABASE bk_src" -c "CREATE ROLE bk_alice LOGIN" -c "CREATE ROLE bk_bob LOGIN" \
	-c "CREATE ROLE bk_carol LOGIN" >/dev/null
pgc_allow_role bk_alice
export PGDATABASE=bk_src
pgc_psql -c "CREATE EXTENSION dml" \
	-c "CREATE TABLE bk AS SELECT i, sin(i * 0.37) AS x1, cos(i * 0.11) AS x2,
		2 * sin(i * 0.37) - cos(i * 0.11) + 0.1 * sin(i) AS r,
		(ARRAY['low','mid','high'])[1 + (i % 3)] AS lab FROM generate_series(1, 600) i" \
	-c "GRANT SELECT ON bk TO bk_alice, bk_bob, bk_carol" >/dev/null
train() {	# role name target kind extra
	pgc_psql -c "SET ROLE $1" -c "SELECT name FROM dml_train('$2', 'bk', '$3', features => '{x1,x2}',
		model => '$4', workers => 1 ${5:-})" >/dev/null 2>>"$T/backup-train.log"
}
train bk_alice bk_lin r linear
train bk_alice bk_lin r mlp ", hidden => '{4}', epochs => 2"
train bk_alice bk_cls lab softmax
train postgres bk_mlp r mlp ", hidden => '{8}', epochs => 3"
pgc_psql -c "SET ROLE bk_alice" -c "SELECT dml_deploy('bk_lin', 1)" \
	-c "SELECT dml_grant('bk_lin', 'bk_bob')" >/dev/null
check "four model versions, a deployment and a grant to dump" \
	'[ "$(pgc_psql -t -A -c "SELECT count(*) FROM dml.models")" = 4 ] &&
	 [ "$(pgc_psql -t -A -c "SELECT count(*) FROM dml.deployments") $(pgc_psql -t -A -c "SELECT count(*) FROM dml.grants")" = "1 1" ]'

# a job of bk_alice's, ended, so dumped (its owner must follow the role's name)
job=$(pgc_psql -t -A -c "SET ROLE bk_alice" -c "SELECT dml_train_async('bk_job', 'bk', 'r',
	features => '{x1,x2}', model => 'linear', workers => 1)" 2>>"$T/backup-train.log")
pgc_psql -c "SET ROLE bk_alice" -c "SELECT dml_wait($job, '120 s')" >/dev/null 2>>"$T/backup-train.log"
check "bk_alice's job $job succeeded" \
	'[ "$(pgc_psql -t -A -c "SELECT state, owner FROM dml.job_runs WHERE id = ${job:-0}")" = "succeeded|bk_alice" ]'
# who sees which job, as a role and through dml_wait's row
jobs_seen() {	# database
	for r in bk_alice bk_carol; do
		pgc_psql -d "$1" -t -A -c "SET ROLE $r" \
			-c "SELECT '$r', string_agg(id || ' ' || name || ' ' || owner::text || ' ' || state, ',') FROM dml.jobs"
	done
	pgc_psql -d "$1" -t -A -c "SET ROLE bk_alice" -c "SELECT (w).owner, (w).state FROM dml_wait($job) w" 2>&1
}

# everything a restore must keep, and what the models answer
snapshot() {	# database
	pgc_psql -d "$1" -t -A \
		-c "SELECT id, name, version, owner::text, kind, device, created, md5(weights), spec, metrics
			FROM dml.models ORDER BY id" \
		-c "SELECT * FROM dml.epochs ORDER BY model_id, restarts, epoch" \
		-c "SELECT name, version FROM dml.deployments ORDER BY name" \
		-c "SELECT name, grantee::text FROM dml.grants ORDER BY name, grantee::text" \
		-c "SELECT name, version, owner::text, deployed FROM dml_models ORDER BY id" \
		-c "SELECT id, name, owner::text, relation::regclass::text, state, model_id, args FROM dml.job_runs ORDER BY id" \
		-c "SELECT string_agg(pg_catalog.format('%s %s %s %s %s', i, dml_predict('bk_lin', t),
				dml_predict_class('bk_cls', t), dml_predict_proba('bk_cls', ARRAY[x1, x2]),
				dml_predict('bk_mlp', ARRAY[x1, x2])), E'\n' ORDER BY i) FROM bk t WHERE i <= 30" \
		-c "SELECT dml_evaluate('bk_lin', 'bk')" \
		-c "SET ROLE bk_bob" -c "SELECT dml_predict('bk_lin', ARRAY[0.1, 0.2])" 2>&1
}
# roles: bk_carol has no grant, so to bk_carol the model does not exist
refused() {
	pgc_psql -d "$1" -c "SET ROLE bk_carol" -c "SELECT dml_predict('bk_lin', ARRAY[0.1, 0.2])" \
		>"$T/backup-refused.log" 2>&1
	grep -q 'model "bk_lin" does not exist' "$T/backup-refused.log"
}
snapshot bk_src >"$T/backup-src.txt"
check "the source answers (no errors in its snapshot)" \
	'! grep -q ERROR "$T/backup-src.txt" && [ "$(wc -l <"$T/backup-src.txt")" -gt 40 ]'

# every table and sequence of schema dml is dumped with its rows
unmarked=$(pgc_psql -t -A -c "SELECT string_agg(c.oid::regclass::text, ', ') FROM pg_class c
	WHERE c.relnamespace = 'dml'::regnamespace AND c.relkind IN ('r', 'p', 'S')
	  AND c.oid <> ALL ((SELECT extconfig FROM pg_extension WHERE extname = 'dml')::oid[])")
check "every table and sequence of schema dml is marked for pg_dump (unmarked: ${unmarked:-none})" \
	'[ -z "$unmarked" ]'

# --- 1. pg_dump into a second database, custom and plain ------------------
pgc_as_pg pg_dump -Fc -f "$T/backup.dump" bk_src 2>"$T/backup-dump.log"
pgc_as_pg pg_dump -Fp -f "$T/backup.sql" bk_src 2>>"$T/backup-dump.log"
pgc_psql -d postgres -c "CREATE DATABASE bk_custom" -c "CREATE DATABASE bk_plain" >/dev/null
pgc_as_pg pg_restore --exit-on-error -d bk_custom "$T/backup.dump" >"$T/backup-restore.log" 2>&1
check "pg_restore of the custom dump succeeds" '[ $? = 0 ]'
pgc_psql -d bk_plain -f "$T/backup.sql" >"$T/backup-plain.log" 2>&1
check "psql of the plain dump succeeds" '[ $? = 0 ]'
for db in bk_custom bk_plain; do
	snapshot $db >"$T/backup-$db.txt"
	check "$db: models, epochs, deployments, grants and every prediction equal the source's" \
		'cmp -s "$T/backup-src.txt" "$T/backup-$db.txt"'
	check "$db: a role with no grant is still refused" 'refused $db'
done
maxid=$(pgc_psql -t -A -c "SELECT max(id) FROM dml.models")
pgc_psql -d bk_custom -c "SET ROLE bk_alice" -c "SELECT name FROM dml_train('bk_lin', 'bk', 'r',
	features => '{x1,x2}', model => 'linear', workers => 1)" >/dev/null 2>>"$T/backup-train.log"
row=$(pgc_psql -d bk_custom -t -A -c "SELECT id, version FROM dml.models WHERE name = 'bk_lin' ORDER BY id DESC LIMIT 1")
check "training after the restore: the id continues past $maxid, the version past 2 ($row)" \
	'[ "${row%|*}" -gt "$maxid" ] && [ "${row#*|}" = 3 ]'

# --- 2. pg_dumpall into a new cluster --------------------------------------
pgc_as_pg pg_dumpall -f "$T/backup-all.sql" 2>>"$T/backup-dump.log"
old_oid=$(pgc_psql -t -A -c "SELECT 'bk_alice'::regrole::oid")
pgc_start || { notok "second cluster started"; exit 1; }
pgc_save NEW
export PGDATABASE=bk_src
# roles made here first, so the dump's roles get other oids than before
pgc_psql -d postgres -c "CREATE ROLE bk_pad1" -c "CREATE ROLE bk_pad2" >/dev/null
pgc_as_pg psql -X -d postgres -f "$T/backup-all.sql" >"$T/backup-all.log" 2>&1
errors=$(grep ERROR "$T/backup-all.log" | grep -v 'role "postgres" already exists')
pgc_allow_role bk_alice
check "pg_dumpall restores with no error (beyond the existing postgres role)" '[ -z "$errors" ]'
new_oid=$(pgc_psql -t -A -c "SELECT 'bk_alice'::regrole::oid")
snapshot bk_src >"$T/backup-new.txt"
check "new cluster: every model, epoch, deployment, grant and prediction equal (bk_alice oid $old_oid there, $new_oid here)" \
	'[ "$old_oid" != "$new_oid" ] && cmp -s "$T/backup-src.txt" "$T/backup-new.txt"'
check "new cluster: a role with no grant is still refused" 'refused bk_src'
jobs_seen bk_src >"$T/backup-jobs-new.txt"
check "new cluster: the job's owner is bk_alice still: she sees it (also through dml_wait), bk_carol does not" \
	'[ "$(cat "$T/backup-jobs-new.txt")" = "$(printf "bk_alice|$job bk_job bk_alice succeeded\nbk_carol|\nbk_alice|succeeded")" ]' ||
	cat "$T/backup-jobs-new.txt"
pgc_psql -c "SET ROLE bk_alice" -c "SELECT name FROM dml_train('bk_cls', 'bk', 'lab',
	features => '{x1,x2}', model => 'softmax', workers => 1)" >/dev/null 2>>"$T/backup-train.log"
check "new cluster: the owner adds a version (2), the sequence continues past $maxid" \
	'[ "$(pgc_psql -t -A -c "SELECT version, id > $maxid FROM dml.models ORDER BY id DESC LIMIT 1")" = "2|t" ]'
echo "# $n checks"
