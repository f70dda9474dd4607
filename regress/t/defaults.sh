#!/bin/bash
# defaults.sh: what dml_train does when the user names only the table and the
# target (issue 15).
#   1. patience stops a training early on a plateau, keeps the best epoch's
#      weights and records which epoch that was; explicit epochs run exactly
#   2. without epochs, minibatch training runs until the loss stops improving
#      and says why it stopped (result, metrics, the last dml.epochs row);
#      it cuts its learning rate on a plateau (schedule plateau), which
#      cuts by gamma exactly when the loss has stalled for step_size epochs;
#      an MLP has one hidden layer of 100 units, and weight_decay 5e-4 when
#      minibatches train it to convergence
#   3. L-BFGS: 1 and 2 workers, and the in-server fit, give the same model
#   4. a nearly separable problem converges to a finite model
#   5. data as it comes: a constant feature (NOTICE, metrics), integer and
#      boolean features, a text or boolean target
#   6. a read-only transaction or a standby says why no model can be stored
#   7. the rows the defaults count (logistic regression's weight_decay is
#      0.1 / rows): those the statement sees, without deleted ones, and
#      under row-level security only the caller's; past what the plan
#      counts, the workers count them, with the same result
# Runs against the cluster regress/run.sh started.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh
sql1() { pgc_psql -At -c "SET client_min_messages = warning" -c "$1"; }
num_le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && b != "" && a + 0 <= b + 0) }'; }

sql1 "DROP TABLE IF EXISTS def_noise, def_sep, def_mixed, def_logit;
CREATE TABLE def_noise AS
	SELECT i, sin(i * 1.7) AS x1, cos(i * 2.3) AS x2, (hashint4(i) % 1000) / 1000.0 AS y
	FROM generate_series(1, 3000) i;
CREATE TABLE def_sep AS
	SELECT i, x, x * 0.5 + sin(i) AS z, x > 0 AS label
	FROM (SELECT i, (CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END) * (1 + (i % 97) / 10.0) AS x
		  FROM generate_series(1, 400) i) s;
CREATE TABLE def_mixed AS
	SELECT i, (i % 7)::int4 AS small_int, (i % 3 = 0) AS flag, 5::int4 AS always_five,
		   sin(i)::float8 AS wave,
		   CASE WHEN sin(i) + (i % 7) / 7.0 > 0.9 THEN 'high' WHEN (i % 3 = 0) THEN 'mid' ELSE 'low' END AS grade
	FROM generate_series(1, 600) i;
CREATE TABLE def_logit AS
	SELECT i, sin(i * 0.37) AS x1, cos(i * 0.91) AS x2, sin(i * 0.13) * 2 AS x3,
		   (sin(i * 0.37) + cos(i * 0.91) * 0.5 + sin(i * 7.1) * 0.8 > 0) AS label
	FROM generate_series(1, 4000) i;" >/dev/null

# ---------------------------------------------------------------------
# 1. patience on a plateau (noise: nothing to learn past the mean)
# ---------------------------------------------------------------------
r=$(sql1 "SELECT epochs || ' ' || stopped FROM dml_train('def_plateau', 'def_noise', 'y',
	features => '{x1,x2}', optimizer => 'sgd', learning_rate => 0.5, batch_size => 16,
	epochs => 200, validation => 0.3, patience => 3, workers => 2, options => '{\"tolerance\": 0}')")
read -r ep why <<<"$r"
check "patience stops a plateau early ($ep of 200 epochs, stopped: $why)" \
	'[ -n "$ep" ] && [ "$ep" -lt 200 ] && [ "$why" = patience ]'
read -r best best_loss min_loss last_loss final_mse <<<"$(sql1 "
	WITH m AS (SELECT (metrics->>'best_epoch')::int AS best, (metrics->>'mse')::float8 AS mse
			   FROM dml.models WHERE name = 'def_plateau')
	SELECT m.best, e.val_loss,
		   (SELECT min(val_loss) FROM dml_epochs WHERE name = 'def_plateau'),
		   (SELECT val_loss FROM dml_epochs WHERE name = 'def_plateau' ORDER BY epoch DESC LIMIT 1),
		   m.mse
	FROM m JOIN dml_epochs e ON e.name = 'def_plateau' AND e.epoch = m.best" | tr '|' ' ')"
check "the best epoch is recorded ($best, 3 before the last) and has the lowest validation loss ($best_loss = $min_loss)" \
	'[ -n "$best" ] && [ "$best" -eq $((ep - 3)) ] && [ "$best_loss" = "$min_loss" ]'
check "the stored model is the best epoch's: its validation MSE $final_mse is epoch $best's $best_loss, not the last epoch's $last_loss" \
	'awk -v a="$final_mse" -v b="$best_loss" -v c="$last_loss" "BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != \"\" && d <= 1e-6 * b && c > b) }"'
r=$(sql1 "SELECT epochs || ' ' || stopped FROM dml_train('def_exact7', 'def_noise', 'y',
	features => '{x1,x2}', optimizer => 'sgd', epochs => 7, workers => 2)")
r="$r $(sql1 "SELECT count(*) FROM dml_epochs WHERE name = 'def_exact7'")"
check "explicit epochs run exactly that many ($r)" '[ "$r" = "7 max epochs 7" ]'

# ---------------------------------------------------------------------
# 2. no epochs: minibatch training runs to convergence and says so
# ---------------------------------------------------------------------
r=$(sql1 "SELECT epochs || ' ' || stopped FROM dml_train('def_auto', 'def_logit', 'label',
	optimizer => 'adam', learning_rate => 0.05, workers => 2, validation => 0)")
read -r ep why <<<"$r"
check "without epochs or validation, adam stops when the training loss stops improving ($ep epochs, $why)" \
	'[ -n "$ep" ] && [ "$ep" -gt 10 ] && [ "$ep" -lt 200 ] && [ "$why" = converged ]'
r=$(sql1 "SELECT (SELECT stopped FROM dml_epochs WHERE name = 'def_auto' ORDER BY epoch DESC LIMIT 1)
	|| ' ' || (SELECT count(*) FROM dml_epochs WHERE name = 'def_auto' AND stopped IS NOT NULL)
	|| ' ' || (metrics->>'stopped') FROM dml.models WHERE name = 'def_auto'")
check "the last dml.epochs row and the metrics say why ($r)" '[ "$r" = "converged 1 converged" ]'
r=$(sql1 "SELECT epochs || ' ' || stopped FROM dml_train('def_auto_val', 'def_logit', 'label',
	optimizer => 'adam', learning_rate => 0.05, workers => 2)")
read -r ep why <<<"$r"
read -r held best <<<"$(sql1 "SELECT metrics->>'validation_rows', metrics->>'best_epoch'
	FROM dml.models WHERE name = 'def_auto_val'" | tr '|' ' ')"
check "without epochs, adam holds out 10% ($held of 4000 rows) and stops on their loss ($ep epochs, $why, best epoch $best)" \
	'[ -n "$held" ] && [ "$held" -gt 300 ] && [ "$held" -lt 500 ] && [ "$why" = patience ] && [ "$best" -ge 1 ] && [ "$best" -lt "$ep" ]'

r=$(sql1 "SELECT spec->'hyperparameters'->>'schedule' FROM dml.models WHERE name = 'def_auto_val'")
r="$r $(sql1 "SELECT spec->'hyperparameters'->>'schedule' FROM dml.models WHERE name = 'def_exact7'")"
check "without epochs, minibatch training cuts its rate on plateaus; with epochs the rate is constant ($r)" \
	'[ "$r" = "plateau constant" ]'
# The same training with a constant rate and with the plateau schedule
# (tolerance 0: an epoch improves when its validation loss is lower than
# every earlier one): identical until the loss has stalled for step_size
# epochs, then the rate is cut by gamma (1e-6: the weights all but stop).
for sched in constant plateau; do
	sql1 "SELECT 1 FROM dml_train('def_sched_$sched', 'def_noise', 'y', features => '{x1,x2}',
		optimizer => 'sgd', learning_rate => 0.5, batch_size => 16, epochs => 14, validation => 0.3,
		workers => 2, options => '{\"schedule\": \"$sched\", \"step_size\": 2, \"gamma\": 1e-6, \"tolerance\": 0}')" >/dev/null
done
read -r cut differ frozen moving <<<"$(sql1 "
	WITH c AS (SELECT epoch, val_loss FROM dml_epochs WHERE name = 'def_sched_constant'),
		 p AS (SELECT epoch, val_loss FROM dml_epochs WHERE name = 'def_sched_plateau'),
		 -- epochs of the plateau run since its validation loss last fell to a new low
		 s AS (SELECT epoch, val_loss, epoch - max(CASE WHEN val_loss < coalesce(prev_min, 'infinity') THEN epoch END)
						OVER (ORDER BY epoch) AS stalled
			   FROM (SELECT epoch, val_loss, min(val_loss) OVER (ORDER BY epoch ROWS BETWEEN UNBOUNDED PRECEDING
																  AND 1 PRECEDING) AS prev_min FROM p) q),
		 first_cut AS (SELECT min(epoch) AS e FROM s WHERE stalled >= 2),
		 first_diff AS (SELECT min(c.epoch) AS e FROM c JOIN p USING (epoch) WHERE c.val_loss <> p.val_loss)
	SELECT (SELECT e FROM first_cut), (SELECT e FROM first_diff),
		   (SELECT max(abs(p.val_loss - p0.val_loss) / p0.val_loss) FROM p, p p0, first_diff
			WHERE p.epoch > first_diff.e AND p0.epoch = first_diff.e),
		   (SELECT max(abs(c.val_loss - c0.val_loss) / c0.val_loss) FROM c, c c0, first_diff
			WHERE c.epoch > first_diff.e AND c0.epoch = first_diff.e)" | tr '|' ' ')"
check "the plateau schedule follows the constant rate until the loss stalls 2 epochs (epoch $cut), then changes course (first different epoch $differ)" \
	'[ -n "$cut" ] && [ -n "$differ" ] && [ "$differ" -eq $((cut + 1)) ]'
check "after the cut the rate is gamma times smaller: the validation loss moves by at most $frozen of itself, the constant rate's by $moving" \
	'num_le "$frozen" 1e-4 && num_le 1e-3 "$moving"'
sql1 "SELECT 1 FROM dml_train('def_mlp', 'def_logit', 'label', model => 'mlp', epochs => 1)" >/dev/null
r=$(sql1 "SELECT spec->'hidden' FROM dml.models WHERE name = 'def_mlp'")
check "an MLP without hidden has one layer of 100 units (scikit-learn's) ($r)" '[ "$r" = "[100]" ]'
sql1 "SELECT 1 FROM dml_train('def_mlp_adam', 'def_logit', 'label', model => 'mlp', batch_size => 128)" >/dev/null
r=$(sql1 "SELECT h->>'optimizer', h->>'weight_decay', h->>'schedule' FROM dml.models, LATERAL (SELECT spec->'hyperparameters' h) s
	WHERE name = 'def_mlp_adam' UNION ALL
	SELECT h->>'optimizer', h->>'weight_decay', h->>'schedule' FROM dml.models, LATERAL (SELECT spec->'hyperparameters' h) s
	WHERE name = 'def_mlp'" | tr '\n|' '  ')
check "an MLP trained by minibatches to convergence gets weight_decay 5e-4; by L-BFGS or with epochs none ($r)" \
	'[ "$r" = "adam 0.0005 plateau lbfgs 0 constant " ]'

# ---------------------------------------------------------------------
# 3. L-BFGS: the same model from 1 and 2 workers and from the in-server fit
# ---------------------------------------------------------------------
for w in 1 2; do
	sql1 "SELECT 1 FROM dml_train('def_lbfgs_w$w', 'def_logit', 'label', features => '{x1,x2,x3}',
		optimizer => 'lbfgs', workers => $w, options => '{\"in_server\": false}')" >/dev/null
done
sql1 "SELECT 1 FROM dml_train('def_lbfgs_srv', 'def_logit', 'label', features => '{x1,x2,x3}')" >/dev/null
r=$(sql1 "SELECT string_agg(name || '=' || coalesce(metrics->>'solver', 'workers') || '/' ||
	(metrics->>'optimizer'), ',' ORDER BY name) FROM dml.models WHERE name LIKE 'def\_lbfgs\_%'")
check "L-BFGS ran in the server and in workers ($r)" \
	'[ "$r" = "def_lbfgs_srv=in-server lbfgs/lbfgs,def_lbfgs_w1=workers/lbfgs,def_lbfgs_w2=workers/lbfgs" ]'
d=$(sql1 "SELECT max(greatest(abs(p1 - p2), abs(p1 - ps))) FROM (SELECT
	(dml_predict_proba('def_lbfgs_w1', t))[2] AS p1, (dml_predict_proba('def_lbfgs_w2', t))[2] AS p2,
	(dml_predict_proba('def_lbfgs_srv', t))[2] AS ps FROM def_logit t) s")
check "1 worker, 2 workers and the in-server fit agree (largest probability gap $d)" 'num_le "$d" 1e-3'

# the time budget holds L-BFGS too, in workers and in the server
for where in false true; do
	r=$(sql1 "SELECT stopped || ' ' || (epochs < 100000)::text FROM dml_train('def_lbfgs_time_$where', 'def_noise', 'y',
		features => '{x1,x2}', model => 'mlp', hidden => '{256}', optimizer => 'lbfgs', epochs => 100000,
		max_seconds => 1, options => '{\"tolerance\": 0, \"in_server\": $where}')")
	check "L-BFGS (in server: $where) stops when max_seconds is spent ($r)" '[ "$r" = "max time true" ]'
done

# ---------------------------------------------------------------------
# 4. a nearly separable problem: finite weights, converged
# ---------------------------------------------------------------------
for where in true false; do
	r=$(sql1 "SELECT stopped || ' ' || (final_loss > 1e-4)::text || ' ' || (final_loss < 0.2)::text
		FROM dml_train('def_sep_$where', 'def_sep', 'label', features => '{x,z}',
		options => '{\"in_server\": $where}')")
	check "separable data (in server: $where) converge to a finite model ($r)" '[ "$r" = "converged true true" ]'
done
acc=$(sql1 "SELECT avg((dml_predict_class('def_sep_true', t) = label::text)::int) FROM def_sep t")
check "and it separates them (accuracy $acc)" 'num_le 0.99 "$acc"'

# ---------------------------------------------------------------------
# 5. data as it comes
# ---------------------------------------------------------------------
out=$(pgc_psql -At -c "SELECT kind || ' ' || stopped FROM dml_train('def_mixed', 'def_mixed', 'grade')" 2>&1)
check "a text target with integer, boolean and constant features trains ($(echo "$out" | tail -1))" \
	'echo "$out" | tail -1 | grep -qE "^softmax (converged|max epochs)$"'
check "the constant feature is named in a NOTICE" \
	'grep <<<"$out" -q "NOTICE:  1 feature is constant in every training row, so left out of the model: always_five"'
r=$(sql1 "SELECT metrics->'constant_features' FROM dml.models WHERE name = 'def_mixed'")
check "and in the metrics ($r)" '[ "$r" = "[\"always_five\"]" ]'
r=$(sql1 "SELECT dml_predict_class('def_mixed', t) FROM def_mixed t WHERE i = 3")
check "the model predicts a label of the text target ($r)" '[ "$r" = high ] || [ "$r" = mid ] || [ "$r" = low ]'
r=$(sql1 "SELECT kind FROM dml_train('def_bool', 'def_mixed', 'flag', features => '{small_int,wave,always_five}')")
check "a boolean target gives logistic regression ($r)" '[ "$r" = logistic ]'

# ---------------------------------------------------------------------
# 6. where no model can be stored
# ---------------------------------------------------------------------
out=$(pgc_psql -At -v VERBOSITY=verbose -c "BEGIN READ ONLY" \
	-c "SELECT 1 FROM dml_train('def_ro', 'def_logit', 'label')" -c "ROLLBACK" 2>&1)
check "a read-only transaction says why it cannot train" \
	'grep <<<"$out" -q "ERROR:  25006: cannot train a model in a read-only transaction"'
out=$(pgc_psql -At -c "SET default_transaction_read_only = on" \
	-c "SELECT 1 FROM dml_train('def_ro', 'def_logit', 'label')" 2>&1)
check "so does default_transaction_read_only (no nextval error)" \
	'grep <<<"$out" -q "cannot train a model in a read-only transaction" && ! grep <<<"$out" -q nextval'

# ---------------------------------------------------------------------
# 7. the rows the defaults count
# ---------------------------------------------------------------------
wd() { sql1 "SELECT (spec->'hyperparameters'->>'weight_decay')::float8 * $2 FROM dml.models WHERE name = '$1' ORDER BY version DESC LIMIT 1"; }
sql1 "SELECT 1 FROM dml_train('def_rows', 'def_logit', 'label', workers => 1)" >/dev/null
r=$(wd def_rows 4000)
check "logistic's weight_decay is 0.1 / the table's 4000 rows (x 4000: $r)" 'awk -v v="$r" "BEGIN { exit !(v > 0.0999999 && v < 0.1000001) }"'
sql1 "DELETE FROM def_logit WHERE i % 4 = 0" >/dev/null
sql1 "SELECT 1 FROM dml_train('def_rows', 'def_logit', 'label', workers => 1)" >/dev/null
r=$(wd def_rows 3000)
check "rows deleted (not vacuumed) are not counted (0.1 / 3000, x 3000: $r)" 'awk -v v="$r" "BEGIN { exit !(v > 0.0999999 && v < 0.1000001) }"'
sql1 "DROP ROLE IF EXISTS def_rls_user; CREATE ROLE def_rls_user LOGIN;
	ALTER TABLE def_logit ENABLE ROW LEVEL SECURITY;
	GRANT SELECT ON def_logit TO def_rls_user;
	CREATE POLICY def_half ON def_logit TO def_rls_user USING (i <= 2000)" >/dev/null
pgc_allow_role def_rls_user
out=$(pgc_as_pg psql -X -q -At -U def_rls_user -c "SET client_min_messages = warning" \
	-c "SELECT kind FROM dml_train('def_rows_rls', 'def_logit', 'label', workers => 1)" 2>&1)
r=$(wd def_rows_rls 1500)
check "under row-level security only the caller's rows count (1500 of 3000, x 1500: $r; $out)" 'awk -v v="$r" "BEGIN { exit !(v > 0.0999999 && v < 0.1000001) }"'
sql1 "ALTER TABLE def_logit DISABLE ROW LEVEL SECURITY; DROP POLICY def_half ON def_logit;
	SELECT dml_drop_model('def_rows_rls'); REVOKE ALL ON def_logit FROM def_rls_user" >/dev/null

# Past what the plan needs counted (rows x inputs over 4,000,000: 5,001 rows
# of 800 inputs), the workers count the rows they read for the penalty: the
# same 0.1 / rows, the same model as that weight_decay given, without
# deleted rows, and under row-level security the caller's rows only.
sql1 "DROP TABLE IF EXISTS def_wide;
CREATE TABLE def_wide AS
	SELECT i, array(SELECT ((i * j) % 97 / 97.0 - 0.5)::float4 FROM generate_series(1, 800) j) AS x,
		   (i % 7 + (i * 13) % 5 > 5) AS label
	FROM generate_series(1, 12000) i" >/dev/null
sql1 "SELECT 1 FROM dml_train('def_wide', 'def_wide', 'label', features => '{x}', workers => 1)" >/dev/null
r=$(wd def_wide 12000)
check "past the plan's count the workers count for weight_decay: 0.1 / 12000 rows (x 12000: $r)" \
	'awk -v v="$r" "BEGIN { exit !(v > 0.0999999 && v < 0.1000001) }"'
sql1 "SELECT 1 FROM dml_train('def_wide_given', 'def_wide', 'label', features => '{x}', workers => 1,
	weight_decay => 0.1 / 12000)" >/dev/null
r=$(sql1 "SELECT count(DISTINCT md5(weights)) || ' ' || count(*) FROM dml.models WHERE name IN ('def_wide', 'def_wide_given')")
check "and the model is the one weight_decay => 0.1 / 12000 trains ($r: distinct weights, models)" '[ "$r" = "1 2" ]'
sql1 "DELETE FROM def_wide WHERE i % 4 = 0" >/dev/null
sql1 "SELECT 1 FROM dml_train('def_wide', 'def_wide', 'label', features => '{x}', workers => 2)" >/dev/null
r=$(wd def_wide 9000)
check "the workers' count leaves deleted rows out, on 2 workers too (0.1 / 9000, x 9000: $r)" \
	'awk -v v="$r" "BEGIN { exit !(v > 0.0999999 && v < 0.1000001) }"'
sql1 "ALTER TABLE def_wide ENABLE ROW LEVEL SECURITY;
	GRANT SELECT ON def_wide TO def_rls_user;
	CREATE POLICY def_wide_half ON def_wide TO def_rls_user USING (i <= 8000)" >/dev/null
out=$(pgc_as_pg psql -X -q -At -U def_rls_user -c "SET client_min_messages = warning" \
	-c "SELECT kind FROM dml_train('def_wide_rls', 'def_wide', 'label', features => '{x}', workers => 1)" 2>&1)
r=$(wd def_wide_rls 6000)
check "under row-level security the workers count the caller's rows (6000 of 9000, x 6000: $r; $out)" \
	'awk -v v="$r" "BEGIN { exit !(v > 0.0999999 && v < 0.1000001) }"'
sql1 "ALTER TABLE def_wide DISABLE ROW LEVEL SECURITY; DROP POLICY def_wide_half ON def_wide;
	SELECT dml_drop_model('def_wide_rls'); REVOKE ALL ON def_wide FROM def_rls_user; DROP ROLE def_rls_user;
	DROP TABLE def_wide" >/dev/null

sql1 "SELECT dml_drop_model(name) FROM (SELECT DISTINCT name FROM dml.models WHERE name LIKE 'def\_%') m;
DROP TABLE def_noise, def_sep, def_mixed, def_logit" >/dev/null
