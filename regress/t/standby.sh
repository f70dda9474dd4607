#!/bin/bash
# standby.sh: models on a streaming hot standby (pg_basebackup -R).
#   1. dml_predict (array and row forms), dml_predict_class,
#      dml_predict_proba and dml_evaluate give on the standby exactly what
#      they give on the primary; a version trained later on the primary
#      reaches the standby and is used there.
#   2. dml_train and dml_import there are an error (SQLSTATE 25006) that
#      says to train on the primary (dml_export works); dml_predict_table into a table there is PostgreSQL's
#      read-only error (a standby cannot create tables, temporary ones
#      included), and nothing is left behind; dml_predict_rows gives the
#      rows dml_predict_table gave on the primary, there and on the standby,
#      and an ordinary role gets only its grants and its policy's rows.
#      Tables dml_predict_table writes on the primary reach the standby
#      through the WAL, row for row at the same places.
#   3. a background job ended on the primary: dml.jobs and dml_job_epochs
#      give the same on the standby; dml.progress answers there;
#      dml_train_async there is dml_train's error.
# Starts a primary and a standby of its own.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh
source regress/travel/clusters.sh
trap 'pgc_stop_all STANDBY PRIMARY' EXIT

pgc_start || { notok "primary started"; exit 1; }
pgc_save PRIMARY
export PGDATABASE=postgres
pgc_psql -c "CREATE EXTENSION dml" \
	-c "CREATE TABLE sb AS SELECT i, sin(i * 0.37) AS x1, cos(i * 0.11) AS x2,
		2 * sin(i * 0.37) - cos(i * 0.11) + 0.1 * sin(i) AS r,
		(ARRAY['low','mid','high'])[1 + (i % 3)] AS lab FROM generate_series(1, 600) i" >/dev/null
for spec in "sb_lin|r|linear|" "sb_cls|lab|softmax|" "sb_mlp|r|mlp|, hidden => '{8}', epochs => 3"; do
	IFS='|' read -r name target kind extra <<<"$spec"
	pgc_psql -c "SELECT name FROM dml_train('$name', 'sb', '$target', features => '{x1,x2}',
		model => '$kind', workers => 1 $extra)" >/dev/null 2>>"$T/standby-train.log"
done
check "three models on the primary" \
	'[ "$(pgc_psql -t -A -c "SELECT count(*) FROM dml.models")" = 3 ]'

answers() {
	pgc_psql -t -A -c "SELECT string_agg(pg_catalog.format('%s %s %s %s %s %s', i,
			dml_predict('sb_lin', t), dml_predict('sb_lin', ARRAY[x1, x2]),
			dml_predict_class('sb_cls', t), dml_predict_proba('sb_cls', ARRAY[x1, x2]),
			dml_predict('sb_mlp', t)), E'\n' ORDER BY i) FROM sb t WHERE i <= 40" \
		-c "SELECT dml_evaluate('sb_cls', 'sb'), dml_evaluate('sb_lin', 'sb')"
}
answers >"$T/standby-primary.txt"
# a background job, ended on the primary: its record and epochs reach the standby
job=$(pgc_psql -t -A -c "SELECT dml_train_async('sb_job', 'sb', 'r', features => '{x1,x2}',
	model => 'mlp', hidden => '{4}', epochs => 3, workers => 1)" 2>>"$T/standby-train.log")
pgc_psql -t -A -c "SELECT state FROM dml_wait(${job:-0}, interval '120 s')" >/dev/null 2>>"$T/standby-train.log"
jobrows() { pgc_psql -t -A -c "SELECT state, owner FROM dml.jobs WHERE id = ${job:-0}" \
	-c "SELECT * FROM dml_job_epochs(${job:-0})" 2>&1; }
jobrows >"$T/standby-job-primary.txt"

# dml_predict_table on the primary: what dml_predict_rows gives there and on
# the standby (regression and classification by id column, an MLP by row number)
pgc_psql -c "CALL dml_predict_table('sb_lin', 'sb', 'sb_t_lin', 'i')" \
	-c "CALL dml_predict_table('sb_cls', 'sb', 'sb_t_cls', 'i')" \
	-c "CALL dml_predict_table('sb_mlp', 'sb', 'sb_t_mlp')" >/dev/null 2>>"$T/standby-train.log"
table_rows() {
	pgc_psql -t -A -c "SELECT count(*), string_agg(i || ' ' || prediction, ',' ORDER BY i) FROM sb_t_lin" \
		-c "SELECT count(*), string_agg(i || ' ' || prediction || ' ' || probability, ',' ORDER BY i) FROM sb_t_cls" \
		-c "SELECT count(*), string_agg(row_number || ' ' || prediction, ',' ORDER BY row_number) FROM sb_t_mlp"
}
predict_rows() {
	pgc_psql -t -A -c "SELECT count(*), string_agg(id || ' ' || value, ',' ORDER BY id::int)
			FROM dml_predict_rows('sb_lin', 'sb', 'i') WHERE label IS NULL AND probability IS NULL" \
		-c "SELECT count(*), string_agg(id || ' ' || label || ' ' || probability, ',' ORDER BY id::int)
			FROM dml_predict_rows('sb_cls', 'sb', id_column => 'i') WHERE value IS NULL" \
		-c "SELECT count(*), string_agg(id || ' ' || value, ',' ORDER BY id::int)
			FROM dml_predict_rows('sb_mlp', 'sb')" 2>&1
}
table_rows >"$T/standby-tables.txt"
predict_rows >"$T/standby-rows-primary.txt"
check "primary: dml_predict_rows gives dml_predict_table's 600 rows (regression, classes, row numbers)" \
	'[ "$(cut -d"|" -f1 "$T/standby-tables.txt" | sort -u)" = 600 ] &&
	 cmp -s "$T/standby-tables.txt" "$T/standby-rows-primary.txt"' ||
	diff "$T/standby-tables.txt" "$T/standby-rows-primary.txt" | head -5
# an ordinary role: no grant, no model; with one, row-level security applies
pgc_psql -c "CREATE ROLE sb_eve" -c "GRANT SELECT ON sb TO sb_eve" \
	-c "ALTER TABLE sb ENABLE ROW LEVEL SECURITY" \
	-c "CREATE POLICY sb_eve_low ON sb TO sb_eve USING (i <= 100)" >/dev/null
pgc_psql -c "SET ROLE sb_eve" -c "SELECT count(*) FROM dml_predict_rows('sb_lin', 'sb')" \
	>"$T/standby-eve.log" 2>&1
check "primary: a role without a grant cannot score with dml_predict_rows" \
	"grep -q 'model \"sb_lin\" does not exist' '$T/standby-eve.log'" || cat "$T/standby-eve.log"
pgc_psql -c "SELECT dml_grant('sb_lin', 'sb_eve')" >/dev/null
check "primary: with a grant, dml_predict_rows reads only the rows its policy shows (100 of 600)" \
	'[ "$(pgc_psql -t -A -c "SET ROLE sb_eve" -c "SELECT count(*), max(id::int) FROM dml_predict_rows('"'sb_lin'"', '"'sb'"', '"'i'"')")" = "100|100" ]'

models=$(pgc_psql -t -A -c "SELECT count(*) FROM dml.models")
pgc_start_standby || { notok "standby started"; exit 1; }
pgc_save STANDBY
check "the standby is in recovery" \
	'[ "$(pgc_psql -t -A -c "SELECT pg_is_in_recovery()")" = t ]'
# the primary's models, the background job's included
wait_until 60 '[ "$(pgc_psql -t -A -c "SELECT count(*) FROM dml.models" 2>/dev/null)" = "$models" ]'
answers >"$T/standby-standby.txt" 2>&1
check "predict, predict_class, predict_proba and evaluate on the standby equal the primary's" \
	'[ -s "$T/standby-primary.txt" ] && cmp -s "$T/standby-primary.txt" "$T/standby-standby.txt"'
predict_rows >"$T/standby-rows-standby.txt"
check "standby: dml_predict_rows gives the primary's dml_predict_table rows" \
	'cmp -s "$T/standby-tables.txt" "$T/standby-rows-standby.txt"' ||
	diff "$T/standby-tables.txt" "$T/standby-rows-standby.txt" | head -5
check "standby: and sb_eve still sees 100 rows through her policy" \
	'[ "$(pgc_psql -t -A -c "SET ROLE sb_eve" -c "SELECT count(*) FROM dml_predict_rows('"'sb_lin'"', '"'sb'"')")" = 100 ]'
check "the standby's answers are numbers, not errors" \
	'! grep -q ERROR "$T/standby-standby.txt" && [ "$(wc -l <"$T/standby-standby.txt")" -ge 40 ]'

check "the job's record and dml_job_epochs (3 epochs) on the standby equal the primary's" \
	'[ "$(head -1 "$T/standby-job-primary.txt")" = "succeeded|postgres" ] &&
	 [ "$(wc -l <"$T/standby-job-primary.txt")" = 4 ] &&
	 [ "$(jobrows)" = "$(cat "$T/standby-job-primary.txt")" ]'
check "dml.progress answers on the standby (nothing runs there)" \
	'[ "$(pgc_psql -t -A -c "SELECT count(*) FROM dml.progress")" = 0 ]'

# --- a new version on the primary is used on the standby ------------------
before=$(pgc_psql -t -A -c "SELECT dml_predict('sb_lin', ARRAY[0.3, 0.4])")
pgc_use PRIMARY
pgc_psql -c "UPDATE sb SET r = r + 5" \
	-c "SELECT name FROM dml_train('sb_lin', 'sb', 'r', features => '{x1,x2}', model => 'linear', workers => 1)" \
	>/dev/null 2>>"$T/standby-train.log"
want=$(pgc_psql -t -A -c "SELECT dml_predict('sb_lin', ARRAY[0.3, 0.4])")
pgc_use STANDBY
wait_until 60 '[ "$(pgc_psql -t -A -c "SELECT max(version) FROM dml.models WHERE name = '"'sb_lin'"'")" = 2 ]'
got=$(pgc_psql -t -A -c "SELECT dml_predict('sb_lin', ARRAY[0.3, 0.4])")
check "version 2 trained on the primary predicts on the standby ($before -> $got, primary $want)" \
	'[ "$got" = "$want" ] && [ "$got" != "$before" ]'

# --- tables written on the primary reach the standby through the WAL -----
# (with int ids or row numbers dml_predict_table writes the pages itself,
# heap_pages.c, and logs them whole: the standby replays them as written)
pgc_use PRIMARY
pgc_psql -c "CALL dml_predict_table('sb_cls', 'sb', 'sb_t_cls2', 'i')" \
	-c "CALL dml_predict_table('sb_mlp', 'sb', 'sb_t_mlp2')" >/dev/null 2>>"$T/standby-train.log"
digest() {
	pgc_psql -t -A -c "SELECT count(*) || ' ' || md5(string_agg(ctid::text || ' ' || t::text, ','
		ORDER BY ctid)) FROM $1 t" 2>/dev/null
}
tables=$(echo $(digest sb_t_cls2) $(digest sb_t_mlp2))
pgc_use STANDBY
wait_until 60 '[ "$(echo $(digest sb_t_cls2) $(digest sb_t_mlp2))" = "$tables" ]'
check "tables dml_predict_table wrote on the primary since read the same on the standby, each row at its place" \
	'[ "$(echo $(digest sb_t_cls2) $(digest sb_t_mlp2))" = "$tables" ] && [ "${tables%% *}" = 600 ]'

# --- writes are refused, clearly -------------------------------------------
pgc_psql -v VERBOSITY=verbose -c "SELECT dml_train('sb_new', 'sb', 'r', features => '{x1,x2}', workers => 1)" \
	>"$T/standby-trainerr.log" 2>&1
check "dml_train on the standby: SQLSTATE 25006, says it is a hot standby" \
	"grep -q 'ERROR:  25006: cannot train a model on a hot standby' '$T/standby-trainerr.log'"
check "dml_train on the standby: the hint says to train on the primary" \
	"grep -q 'HINT:  Train on the primary' '$T/standby-trainerr.log'"
check "dml_train on the standby started no job" '[ "$(pgc_job_procs)" = 0 ] && [ "$(pgc_job_dirs)" = 0 ]'
pgc_psql -c "SELECT dml_train_async('sb_new', 'sb', 'r', features => '{x1,x2}', workers => 1)" \
	>"$T/standby-async.log" 2>&1
check "dml_train_async on the standby: dml_train's error, nothing queued" \
	"grep -q 'cannot train a model on a hot standby' '$T/standby-async.log'"

pgc_psql -c "SELECT dml_import('sb_copy', dml_export('sb_lin', 'dml'), 'dml')" >"$T/standby-import.log" 2>&1
check "dml_import on the standby: SQLSTATE 25006, import on the primary" \
	"grep -q 'cannot import a model on a hot standby' '$T/standby-import.log'"
check "dml_export works on the standby" \
	'[ "$(pgc_psql -t -A -c "SELECT length(dml_export('"'sb_mlp'"')) > 100 AND length(dml_export('"'sb_cls'"', '"'dml'"')) > 100")" = t ]'
pgc_psql -c "CALL dml_predict_table('sb_lin', 'sb', 'pg_temp.sb_scores', 'i')" >"$T/standby-table.log" 2>&1
check "dml_predict_table into a temporary table on the standby: the read-only error" \
	"grep -q 'read-only transaction' '$T/standby-table.log'"
pgc_psql -c "SELECT dml_deploy('sb_lin', 1)" >"$T/standby-deploy.log" 2>&1
check "dml_deploy on the standby: the read-only error" \
	"grep -q 'read-only transaction' '$T/standby-deploy.log'"
check "the standby still serves predictions after the errors" \
	'[ "$(pgc_psql -t -A -c "SELECT dml_predict('"'sb_lin'"', ARRAY[0.3, 0.4])")" = "$want" ]'
echo "# $n checks"
