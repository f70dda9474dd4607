#!/bin/bash
# tune.sh: model selection (dml_tune, issue 17) on scikit-learn's shipped
# breast cancer data: a grid of 8 picks what a hand loop of 8 dml_train
# calls picks, to 1e-6; random search stays inside its distributions and
# repeats with its seed; halving gives the best configuration the full
# epochs and stops at least half of the others early, each rung going on
# from its last epoch to the model dml_train gives at full epochs; a diverging
# configuration is a failed trial, not a failed search; bad search values
# are clear errors; an ordinary role tunes its own table, cannot tune into
# another role's name, and sees no one else's trials.  Runs against the
# cluster regress/run.sh started.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh

q() { pgc_psql -t -A -v ON_ERROR_STOP=1 "$@"; }
err() { pgc_psql -t -A "$@" 2>&1 || true; }

if ! /usr/bin/python3 -c 'import sklearn, psycopg2' 2>/dev/null; then
	notok "python3-sklearn and python3-psycopg2 are installed (.ci/setup.sh)"
	exit 0
fi
# the rows as bench/datasets.py loads them: x0..x29 float8, y int4
/usr/bin/python3 - <<'PY'
import sys
sys.path.insert(0, "bench")
import psycopg2
from sklearn.datasets import load_breast_cancer
from datasets import load_table
X, y = load_breast_cancer(return_X_y=True)
conn = psycopg2.connect("")
conn.autocommit = True
load_table(conn.cursor(), "tune_bc", X, y, "float8", "int4")
PY
check "the breast cancer table is loaded" '[ "$(q -c "SELECT count(*) FROM tune_bc")" = 569 ]'
q -c "SET client_min_messages = warning" -c "SELECT dml_drop_model(name) FROM (SELECT DISTINCT name FROM dml.models WHERE name LIKE 'tune\_%') m" >/dev/null
q -c "DELETE FROM dml.trials WHERE name LIKE 'tune\_%'" >/dev/null

# the fixed part of every search below: minibatch Adam on 2 ranks, 0.2 held out
FIXED="model => 'mlp', optimizer => 'adam', epochs => 8, batch_size => 32, workers => 2, seed => 7, validation => 0.2"
LRS="0.0005 0.005"
HIDS="4 16"
WDS="0 0.01"
GRID="{\"learning_rate\": [0.0005, 0.005], \"hidden\": [[4], [16]], \"weight_decay\": [0, 0.01]}"

# -- 1. grid of 8 against a hand loop of 8 dml_train calls
grid=$(q -c "SET client_min_messages = warning" \
	-c "SELECT trial, state, metric_value, (arguments->>'learning_rate')::float8, arguments->'hidden'->>0,
		arguments->>'weight_decay', coalesce(version::text, '') FROM dml_tune('tune_grid', 'tune_bc', 'y',
		search => '$GRID', $FIXED)" | tail -n +1)
echo "$grid" | sed 's/^/# grid: /'
check "the grid ran 8 trials" '[ "$(grep -c "|finished|" <<<"$grid")" = 8 ]'
best_grid=$(head -1 <<<"$grid")
hand=""
for lr in $LRS; do for h in $HIDS; do for wd in $WDS; do
	v=$(q -c "SET client_min_messages = warning" \
		-c "SELECT FROM dml_train('tune_hand', 'tune_bc', 'y',
			hidden => '{$h}', learning_rate => $lr, weight_decay => $wd, $FIXED)" \
		-c "SELECT metrics->>'accuracy' FROM dml.models WHERE name = 'tune_hand' ORDER BY version DESC LIMIT 1" | tail -1)
	hand="$hand$v|$lr|$h|$wd"$'\n'
done; done; done
echo "$hand" | sed 's/^/# hand: /'
# the hand loop's best, first in grid order on ties (the grid's order too)
best_hand=$(grep . <<<"$hand" | awk -F'|' 'NR == 1 || $1 > b { b = $1; l = $0 } END { print l }')
bg_metric=$(cut -d'|' -f3 <<<"$best_grid")
bh_metric=$(cut -d'|' -f1 <<<"$best_hand")
check "the grid picks the hand loop's configuration ($(cut -d'|' -f4-6 <<<"$best_grid") vs $(cut -d'|' -f2-4 <<<"$best_hand"))" \
	'[ "$(cut -d"|" -f4-6 <<<"$best_grid")" = "$(cut -d"|" -f2-4 <<<"$best_hand")" ]'
check "with the same metric to 1e-6 ($bg_metric vs $bh_metric)" \
	'[ "$(echo "define abs(x) { if (x < 0) return -x; return x }; abs($bg_metric - $bh_metric) < 0.000001" | bc -l)" = 1 ]'
# every trial's metric equals its hand-loop twin's
same=0
while IFS='|' read -r m lr h wd; do
	[ -z "$m" ] && continue
	g=$(awk -F'|' -v lr="$lr" -v h="$h" -v wd="$wd" '$4 == lr && $5 == h && $6 == wd { print $3 }' <<<"$grid")
	[ -n "$g" ] && [ "$(echo "define abs(x) { if (x < 0) return -x; return x }; abs($g - $m) < 0.000001" | bc -l)" = 1 ] && same=$((same + 1))
done <<<"$hand"
check "each of the 8 trials has its dml_train twin's metric ($same of 8)" '[ $same = 8 ]'
check "only the best is kept, as version 1, and deployed" \
	'[ "$(q -c "SELECT count(*) FROM dml.models WHERE name = '"'"'tune_grid'"'"'")" = 1 ] &&
	 [ "$(cut -d"|" -f7 <<<"$best_grid")" = 1 ] &&
	 [ "$(q -c "SELECT version FROM dml.deployments WHERE name = '"'"'tune_grid'"'"'")" = 1 ]'
check "dml.trials holds the 8 trials with their epochs" \
	'[ "$(q -c "SELECT count(*) FROM dml.trials WHERE name = '"'"'tune_grid'"'"' AND jsonb_array_length(epoch_metrics) = 8")" = 8 ]'
check "dml_predict uses the best model" \
	'[ -n "$(q -c "SELECT dml_predict('"'"'tune_grid'"'"', t) FROM tune_bc t LIMIT 1")" ]'

# keep => 'all': every trial a version (2..9 after the 1 above), the best deployed
out=$(q -c "SET client_min_messages = warning" \
	-c "SELECT trial, version FROM dml_tune('tune_grid', 'tune_bc', 'y',
		search => '{\"learning_rate\": [0.0005, 0.005]}', keep => 'all', $FIXED)")
check "keep => 'all' keeps every trial as the next versions" \
	'[ "$(q -c "SELECT string_agg(version::text, '"'"','"'"' ORDER BY version) FROM dml.models WHERE name = '"'"'tune_grid'"'"'")" = "1,2,3" ]'
check "and deploys the best" \
	'[ "$(q -c "SELECT version FROM dml.deployments WHERE name = '"'"'tune_grid'"'"'")" = "$(head -1 <<<"$out" | cut -d"|" -f2)" ]'

# -- 2. random search: inside its distributions, and the same with the same seed
RND="{\"learning_rate\": {\"log_uniform\": [0.0001, 0.01]}, \"weight_decay\": {\"uniform\": [0, 0.1]}, \"batch_size\": {\"choice\": [16, 64]}, \"activation\": [\"relu\", \"tanh\"]}"
FAST="model => 'mlp', hidden => '{4}', validation => 0.2, seed => 11"
r1=$(q -c "SET client_min_messages = warning" \
	-c "SELECT arguments::text, metric_value FROM dml_tune('tune_rand', 'tune_bc', 'y', search => '$RND',
		strategy => 'random', trials => 6, optimizer => 'adam', epochs => 3, workers => 1, $FAST) ORDER BY trial")
r2=$(q -c "SET client_min_messages = warning" \
	-c "SELECT arguments::text, metric_value FROM dml_tune('tune_rand', 'tune_bc', 'y', search => '$RND',
		strategy => 'random', trials => 6, optimizer => 'adam', epochs => 3, workers => 1, $FAST) ORDER BY trial")
echo "$r1" | sed 's/^/# random: /'
check "random search ran 6 trials" '[ "$(grep -c . <<<"$r1")" = 6 ]'
check "the same seed gives the same configurations and metrics" '[ "$r1" = "$r2" ]'
inside=$(q -c "SELECT count(*) FROM dml.trials WHERE name = 'tune_rand'
	AND (arguments->>'learning_rate')::float8 BETWEEN 0.0001 AND 0.01
	AND (arguments->>'weight_decay')::float8 BETWEEN 0 AND 0.1
	AND arguments->>'batch_size' IN ('16', '64') AND arguments->>'activation' IN ('relu', 'tanh')")
check "every sample lies in its distribution ($inside of 12)" '[ "$inside" = 12 ]'
check "the samples differ from each other" \
	'[ "$(q -c "SELECT count(DISTINCT arguments->>'"'"'learning_rate'"'"') FROM dml.trials WHERE name = '"'"'tune_rand'"'"'")" = 6 ]'
r3=$(q -c "SET client_min_messages = warning" \
	-c "SELECT arguments::text FROM dml_tune('tune_rand', 'tune_bc', 'y', search => '$RND',
		strategy => 'random', trials => 6, optimizer => 'adam', epochs => 3, workers => 1,
		model => 'mlp', hidden => '{4}', seed => 12) ORDER BY trial")
check "another seed samples other configurations" '[ "$r3" != "$(cut -d"|" -f1 <<<"$r1")" ]'

# -- 3. halving: the best gets the full epochs, at least half stop early
h=$(q -c "SET client_min_messages = warning" \
	-c "SELECT trial, state, epochs_run, metric_value FROM dml_tune('tune_halv', 'tune_bc', 'y',
		search => '$GRID', strategy => 'halving', $FIXED)")
echo "$h" | sed 's/^/# halving: /'
check "halving ran 8 configurations" '[ "$(grep -c . <<<"$h")" = 8 ]'
check "the best trained the full 8 epochs" '[ "$(head -1 <<<"$h" | cut -d"|" -f2,3)" = "finished|8" ]'
stopped=$(grep -c "|stopped early|" <<<"$h")
check "at least half of the others stopped early ($stopped of 7)" '[ "$stopped" -ge 4 ]'
check "stopped trials ran fewer epochs" \
	'grep "|stopped early|" <<<"$h" | awk -F"|" "\$3 >= 8 || \$3 < 1 { bad = 1 } END { exit bad }"'
first=$(q -c "SELECT epoch_metrics->0->>'epoch' FROM dml.trials WHERE name = 'tune_halv' AND state = 'finished'")
check "each rung goes on from the last: the survivor's last run began at epoch 5 ($first)" '[ "$first" = 5 ]'
check "halving keeps only the best model" \
	'[ "$(q -c "SELECT count(*) FROM dml.models WHERE name = '"'"'tune_halv'"'"'")" = 1 ]'
bt=$(head -1 <<<"$h" | cut -d'|' -f1)
ba=$(q -c "SELECT arguments FROM dml.trials WHERE name = 'tune_halv' AND trial = $bt")
tw=$(q -c "SET client_min_messages = warning" \
	-c "SELECT FROM dml_train('tune_twin', 'tune_bc', 'y',
		hidden => ARRAY[('$ba'::jsonb->'hidden'->>0)::int], learning_rate => ('$ba'::jsonb->>'learning_rate')::float8,
		weight_decay => ('$ba'::jsonb->>'weight_decay')::float8, $FIXED)" \
	-c "SELECT metrics->>'accuracy' FROM dml.models WHERE name = 'tune_twin' ORDER BY version DESC LIMIT 1" | tail -1)
hm=$(head -1 <<<"$h" | cut -d'|' -f4)
check "the survivor's model is dml_train's at full epochs ($hm vs $tw)" \
	'[ "$(echo "define abs(x) { if (x < 0) return -x; return x }; abs($hm - $tw) < 0.000001" | bc -l)" = 1 ]'

# -- 4. a diverging configuration fails; the search goes on
d=$(q -c "SET client_min_messages = warning" \
	-c "SELECT trial, state, metric_value FROM dml_tune('tune_div', 'tune_bc', 'y',
		search => '{\"learning_rate\": [0.001, 100]}', model => 'mlp', optimizer => 'sgd',
		hidden => '{16}', epochs => 5, batch_size => 8, workers => 1, options => '{\"momentum\": 0.99}')")
echo "$d" | sed 's/^/# diverging: /'
check "the sane configuration finished and is kept" \
	'[ "$(head -1 <<<"$d" | cut -d"|" -f1,2)" = "1|finished" ] &&
	 [ "$(q -c "SELECT count(*) FROM dml.models WHERE name = '"'"'tune_div'"'"'")" = 1 ]'
check "the diverging one is a failed trial, with its error" \
	'[ "$(sed -n 2p <<<"$d" | cut -d"|" -f1,2)" = "2|failed" ] &&
	 [ -n "$(q -c "SELECT error FROM dml.trials WHERE name = '"'"'tune_div'"'"' AND trial = 2 AND state = '"'"'failed'"'"'")" ]'

# -- 5. bad search values are clear errors, before anything trains
e=$(err -c "SELECT * FROM dml_tune('tune_bad', 'tune_bc', 'y', search => '{\"learnin_rate\": [0.1]}')")
check "an unknown argument" 'grep -q "search names unknown argument \"learnin_rate\"" <<<"$e"'
e=$(err -c "SELECT * FROM dml_tune('tune_bad', 'tune_bc', 'y', search => '{\"learning_rate\": []}')")
check "an empty list" 'grep -q "search list for \"learning_rate\" is empty" <<<"$e"'
e=$(err -c "SELECT * FROM dml_tune('tune_bad', 'tune_bc', 'y', search => '{\"activation\": {\"uniform\": [0, 1]}}', strategy => 'random')")
check "a distribution for a non-numeric argument" \
	'grep -q "search distribution \"uniform\" needs a numeric argument, but \"activation\" is not numeric" <<<"$e"'
e=$(err -c "SELECT * FROM dml_tune('tune_bad', 'tune_bc', 'y', search => '{\"learning_rate\": {\"uniform\": [0.1, 1]}}')")
check "a distribution in a grid" 'grep -q "grid search needs a list of values for \"learning_rate\"" <<<"$e"'
e=$(err -c "SELECT * FROM dml_tune('tune_bad', 'tune_bc', 'y', search => '{\"learning_rate\": 0.1}')")
check "a bare value" 'grep -q "must be a list of values or a distribution" <<<"$e"'
e=$(err -c "SELECT * FROM dml_tune('tune_bad', 'tune_bc', 'y', search => '{\"learning_rate\": [\"fast\"]}')")
check "a string for a number" 'grep -q "search values of \"learning_rate\" must be numbers" <<<"$e"'
e=$(err -c "SELECT * FROM dml_tune('tune_bad', 'tune_bc', 'y', search => '{\"learning_rate\": [0.1]}', strategy => 'bayes')")
check "an unknown strategy" 'grep -q "unknown strategy \"bayes\"" <<<"$e"'
e=$(err -c "SELECT * FROM dml_tune('tune_bad', 'tune_bc', 'y', search => '{\"learning_rate\": [0.1]}', strategy => 'halving')")
check "halving without epochs" 'grep -q "halving needs epochs" <<<"$e"'
e=$(err -c "SELECT * FROM dml_tune('tune_bad', 'tune_bc', 'y', search => '{\"learning_rate\": [0.1]}', metric => 'auc')")
check "an unknown metric" 'grep -q "unknown metric \"auc\"" <<<"$e"'
check "no error trained or stored anything" \
	'[ "$(q -c "SELECT count(*) FROM dml.trials WHERE name = '"'"'tune_bad'"'"'")" = 0 ] &&
	 [ "$(q -c "SELECT count(*) FROM dml.models WHERE name = '"'"'tune_bad'"'"'")" = 0 ]'

# -- 6. an ordinary role
q -c "DROP TABLE IF EXISTS tune_mine; DROP ROLE IF EXISTS tune_alice; DROP ROLE IF EXISTS tune_bob;
	CREATE ROLE tune_alice LOGIN; CREATE ROLE tune_bob LOGIN;
	GRANT SELECT ON tune_bc TO tune_bob" >/dev/null
pgc_allow_role tune_alice tune_bob
q -c "CREATE TABLE tune_mine AS SELECT * FROM tune_bc; ALTER TABLE tune_mine OWNER TO tune_alice" >/dev/null
a=$(q -U tune_alice -c "SET client_min_messages = warning" \
	-c "SELECT state FROM dml_tune('tune_alice_m', 'tune_mine', 'y', search => '{\"weight_decay\": [0.001, 0.1]}')")
check "an ordinary role tunes on its own table" '[ "$(grep -c finished <<<"$a")" = 2 ]'
check "its model is its own" \
	'[ "$(q -c "SELECT owner FROM dml.models WHERE name = '"'"'tune_alice_m'"'"'")" = tune_alice ]'
e=$(err -U tune_bob -c "SELECT * FROM dml_tune('tune_alice_m', 'tune_bc', 'y', search => '{\"weight_decay\": [0.001, 0.1]}')")
check "another role cannot tune into its model name" 'grep -q "model name \"tune_alice_m\" is not available" <<<"$e"'
check "and stored nothing" \
	'[ "$(q -c "SELECT count(*) FROM dml.trials WHERE owner = '"'"'tune_bob'"'"'::regrole")" = 0 ]'
e=$(err -U tune_bob -c "SELECT * FROM dml_tune('tune_bob_m', 'tune_mine', 'y', search => '{\"weight_decay\": [0.001]}')")
check "nor tune on a table it may not read" 'grep -q "permission denied" <<<"$e"'
check "its owner sees its trials" \
	'[ "$(q -U tune_alice -c "SELECT count(*) FROM dml_trials")" = 2 ]'
check "another role sees none of them" \
	'[ "$(q -U tune_bob -c "SELECT count(*) FROM dml_trials")" = 0 ]'
e=$(err -U tune_bob -c "SELECT count(*) FROM dml.trials")
check "nor reads the table" 'grep -q "permission denied" <<<"$e"'

# -- 7. dml_tune_async: a background job, its trials in dml.progress
e=$(err -U tune_alice -c "SELECT dml_tune_async('tune_alice_j', 'tune_mine', 'y', search => '{\"learnin_rate\": [1]}')")
check "dml_tune_async checks the search before queueing" \
	'grep -q "search names unknown argument" <<<"$e" &&
	 [ "$(q -c "SELECT count(*) FROM dml.job_runs WHERE name = '"'"'tune_alice_j'"'"'")" = 0 ]'
# the straggler hook (2 ms a step: 143 steps an epoch, 4 epochs, so over a
# second a trial) keeps each trial running long enough to be seen between
# two polls, however busy the machine: without it, in a fresh-clone run
# under two busy loops, the polls missed all three trials
id=$(q -U tune_alice -c "SELECT dml_tune_async('tune_alice_j', 'tune_mine', 'y',
	search => '{\"learning_rate\": [0.001, 0.01, 0.1]}', model => 'mlp', hidden => '{8}',
	optimizer => 'sgd', batch_size => 4, epochs => 4, workers => 1,
	options => '{\"straggler\": \"0:2\"}')")
check "dml_tune_async returns a job id" '[ -n "$id" ] && [ "$id" -gt 0 ]'
seen=0
wait_until 120 '[ -n "$(q -U tune_alice -c "SELECT phase FROM dml.progress WHERE job = $id AND phase LIKE '"'"'trial % of 3'"'"'")" ] && seen=1
	[ $seen = 1 ] || [ "$(q -c "SELECT state FROM dml.jobs WHERE id = $id")" != running -a "$(q -c "SELECT state FROM dml.jobs WHERE id = $id")" != queued ]' || true
check "dml.progress shows the job's trial as it runs" '[ $seen = 1 ]'
st=$(q -U tune_alice -c "SELECT state FROM dml_wait($id)")
check "the search job succeeds" '[ "$st" = succeeded ]'
check "its job row names the best trial's model" \
	'[ "$(q -c "SELECT j.model_id = t.model_id FROM dml.jobs j, dml.trials t WHERE j.id = $id AND t.name = '"'"'tune_alice_j'"'"' AND t.model_id IS NOT NULL")" = t ]'
check "its 3 trials are the role's, in dml_trials" \
	'[ "$(q -U tune_alice -c "SELECT count(*) FROM dml_trials WHERE name = '"'"'tune_alice_j'"'"'")" = 3 ] &&
	 [ "$(q -U tune_bob -c "SELECT count(*) FROM dml_trials WHERE name = '"'"'tune_alice_j'"'"'")" = 0 ]'

# -- 8. one launch, one load: a search's trials over the same rows share one job
one=$(q -c "SET client_min_messages = warning" \
	-c "SELECT trial FROM dml_tune('tune_one', 'tune_bc', 'y', search => '$GRID', keep => 'all', $FIXED)")
order=$(q -c "SELECT string_agg(metrics->>'trial_in_job', ',' ORDER BY version) FROM dml.models WHERE name = 'tune_one'")
check "the grid's 8 trials ran one after another in one job ($order)" '[ "$order" = "1,2,3,4,5,6,7,8" ]'
loads=$(q -c "SELECT count(DISTINCT metrics->>'load_seconds') FROM dml.models WHERE name = 'tune_one'")
check "over rows loaded once (one load time among the 8: $loads)" '[ "$loads" = 1 ]'
# the hand loop of section 1 stored its 8 models as versions of tune_hand
twins=$(q -c "SELECT count(*) FROM dml.models o JOIN dml.models h ON h.name = 'tune_hand'
		AND h.spec->'hidden' = o.spec->'hidden'
		AND h.spec->'hyperparameters'->'learning_rate' = o.spec->'hyperparameters'->'learning_rate'
		AND h.spec->'hyperparameters'->'weight_decay' = o.spec->'hyperparameters'->'weight_decay'
	WHERE o.name = 'tune_one' AND md5(o.weights) = md5(h.weights)")
check "each trial's model is bit for bit its dml_train twin's ($twins of 8)" '[ "$twins" = 8 ]'
wait_until 10 '[ "$(pgc_job_procs)" = 0 ]'
check "no worker outlives the search" '[ "$(pgc_job_procs)" = 0 ] && [ "$(pgc_job_dirs)" = 0 ]'
# its end: rank 0 told that no trial follows, every rank leaves MPI and
# mpirun exits 0 by itself (a kill cost the search a second and more)
ended=$(q -c "SET client_min_messages = debug1" -c "SELECT count(*) FROM dml_tune('tune_end', 'tune_bc', 'y',
	search => '{\"learning_rate\": [0.001, 0.01]}', model => 'logistic', optimizer => 'adam', epochs => 1,
	workers => 2)" 2>&1 | grep -o "the search's job ended by itself (mpirun's exit status [0-9-]*)" || true)
check "a search's job ends by itself at the end: $ended" \
	'[ "$ended" = "the search'"'"'s job ended by itself (mpirun'"'"'s exit status 0)" ]'
wait_until 10 '[ "$(pgc_job_procs)" = 0 ]'
check "and leaves no worker" '[ "$(pgc_job_procs)" = 0 ] && [ "$(pgc_job_dirs)" = 0 ]'

# Newton's trials (each a launch of its own: resident jobs take the
# iterative optimizers, supervise.c's resident_ok), each laying the rows
# out as row panels on both ranks: every trial's model is its dml_train
# twin's bit for bit
NTF="model => 'logistic', optimizer => 'newton', features => '{x0,x1,x2,x3,x4,x5,x6,x7,x8,x9}', workers => 2, validation => 0"
q -c "SET client_min_messages = warning" \
	-c "SELECT FROM dml_tune('tune_nt', 'tune_bc', 'y', search => '{\"weight_decay\": [0.001, 0.01, 0.1]}', $NTF, keep => 'all')" >/dev/null
for wd in 0.001 0.01 0.1; do
	q -c "SET client_min_messages = warning" -c "SELECT FROM dml_train('tune_nt_hand', 'tune_bc', 'y', $NTF, weight_decay => $wd)" >/dev/null
done
nt=$(q -c "SELECT string_agg(metrics->'newton_steps'->>'panels', ',' ORDER BY version) FROM dml.models WHERE name = 'tune_nt'")
twins=$(q -c "SELECT count(*) FROM dml.models o JOIN dml.models h ON h.name = 'tune_nt_hand'
		AND h.spec->'hyperparameters'->'weight_decay' = o.spec->'hyperparameters'->'weight_decay'
	WHERE o.name = 'tune_nt' AND md5(o.weights) = md5(h.weights)")
check "Newton's trials on row panels (ranks $nt): each model is bit for bit its dml_train twin's ($twins of 3)" \
	'[ "$nt" = "2,2,2" ] && [ "$twins" = 3 ]'

# a trial that reads the rows otherwise (another kind of model) gets a job of its own
q -c "SET client_min_messages = warning" \
	-c "SELECT FROM dml_tune('tune_kinds', 'tune_bc', 'y', search => '{\"model\": [\"mlp\", \"logistic\"], \"learning_rate\": [0.001, 0.01]}',
		optimizer => 'adam', epochs => 3, batch_size => 32, workers => 2, seed => 7, keep => 'all')" >/dev/null
kinds=$(q -c "SELECT string_agg(kind || ':' || (metrics->>'trial_in_job'), ',' ORDER BY version) FROM dml.models WHERE name = 'tune_kinds'")
check "trials whose data plan differs fall back to a launch of their own ($kinds)" \
	'[ "$kinds" = "mlp:1,mlp:2,logistic:1,logistic:2" ]'

# a worker killed in every trial of the shared job: each restarts from its checkpoint
SRCH='{"learning_rate": [0.001, 0.005, 0.01]}'
FIXF="model => 'mlp', hidden => '{8}', optimizer => 'adam', epochs => 5, batch_size => 32, workers => 2, seed => 7, keep => 'all'"
clean=$(q -c "SET client_min_messages = warning" \
	-c "SELECT trial, state, metric_value FROM dml_tune('tune_nofault', 'tune_bc', 'y', search => '$SRCH', $FIXF) ORDER BY trial")
faulted=$(q -c "SET client_min_messages = warning" \
	-c "SELECT trial, state, metric_value FROM dml_tune('tune_fault', 'tune_bc', 'y', search => '$SRCH',
		options => '{\"fault\": \"1:3:kill\", \"max_restarts\": 1, \"checkpoint_every\": 1}', $FIXF) ORDER BY trial")
echo "$faulted" | sed 's/^/# faulted: /'
check "a worker killed in each trial: every trial finishes" '[ "$(grep -c "|finished|" <<<"$faulted")" = 3 ]'
check "with the metrics of the same search without faults" '[ "$clean" = "$faulted" ]'
restarted=$(q -c "SELECT count(DISTINCT e.model_id) FROM dml.epochs e JOIN dml.models m ON m.id = e.model_id
	WHERE m.name = 'tune_fault' AND e.restarts > 0")
check "each trial was restarted once ($restarted of 3)" '[ "$restarted" = 3 ]'
wait_until 10 '[ "$(pgc_job_procs)" = 0 ]'
check "and no worker outlives that search" '[ "$(pgc_job_procs)" = 0 ] && [ "$(pgc_job_dirs)" = 0 ]'

# a cancel while the shared job runs its second trial ends the job and stores nothing
T=${DML_TEST_TMP:-/tmp}
log=$(mktemp "$T/tune-cancel.XXXXXX")
chmod 666 "$log"
pgc_psql -c "SELECT * FROM dml_tune('tune_cancel', 'tune_bc', 'y', search => '{\"epochs\": [1, 100000]}',
	model => 'mlp', optimizer => 'sgd', batch_size => 1, workers => 2)" >"$log" 2>&1 &
client=$!
wait_until 120 'grep -q "trial 2 of 2" "$log" && [ "$(grep -c "epoch 1:" "$log")" -ge 2 ]'
# (once polled, still counted again: a count that missed live ranks here was
# pgc_job_procs' tr | grep -q under pipefail, fixed in pgcluster.sh)
wait_until 30 '[ "$(pgc_job_procs)" -ge 3 ]'
running=$(pgc_job_procs)
check "the second trial runs in the shared job ($running processes)" '[ "$running" -ge 3 ]'
q -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%tune_cancel%' AND pid <> pg_backend_pid()" >/dev/null
wait_until 30 '! kill -0 $client 2>/dev/null'
check "the search is cancelled" 'grep -q "canceling statement due to user request" "$log"'
wait_until 10 '[ "$(pgc_job_procs)" = 0 ]'
check "its workers are gone and its job directory removed" '[ "$(pgc_job_procs)" = 0 ] && [ "$(pgc_job_dirs)" = 0 ]'
check "and nothing was stored" \
	'[ "$(q -c "SELECT count(*) FROM dml.models WHERE name = '"'"'tune_cancel'"'"'")" = 0 ] &&
	 [ "$(q -c "SELECT count(*) FROM dml.trials WHERE name = '"'"'tune_cancel'"'"'")" = 0 ]'
rm -f "$log"

# an ordinary role under row-level security: every trial of the shared job reads what the role may see
q -c "DROP TABLE IF EXISTS tune_rls; CREATE TABLE tune_rls AS SELECT * FROM tune_bc;
	ALTER TABLE tune_rls ENABLE ROW LEVEL SECURITY;
	CREATE POLICY tune_half ON tune_rls FOR SELECT TO tune_alice USING (x0 < 14);
	GRANT SELECT ON tune_rls TO tune_alice" >/dev/null
vis=$(q -U tune_alice -c "SELECT count(*) FROM tune_rls")
q -U tune_alice -c "SET client_min_messages = warning" \
	-c "SELECT FROM dml_tune('tune_alice_rls', 'tune_rls', 'y', search => '{\"learning_rate\": [0.001, 0.01]}', keep => 'all', $FIXED)" >/dev/null
rows=$(q -c "SELECT string_agg(((metrics->>'train_rows')::int + (metrics->>'validation_rows')::int)::text || ':' ||
	(metrics->>'trial_in_job'), ',' ORDER BY version) FROM dml.models WHERE name = 'tune_alice_rls'")
check "each trial of an ordinary role's shared job trains on the $vis rows it sees of 569 ($rows)" \
	'[ "$vis" -lt 569 ] && [ "$rows" = "$vis:1,$vis:2" ]'
check "its models are its own" \
	'[ "$(q -c "SELECT string_agg(DISTINCT owner::text, '"'"','"'"') FROM dml.models WHERE name = '"'"'tune_alice_rls'"'"'")" = tune_alice ]'

q -c "SET client_min_messages = warning" -c "SELECT dml_drop_model(name) FROM (SELECT DISTINCT name FROM dml.models WHERE name LIKE 'tune\_%') m" >/dev/null
q -c "DELETE FROM dml.trials WHERE name LIKE 'tune\_%'; DROP TABLE tune_mine, tune_rls, tune_bc;
	DROP ROLE tune_alice; DROP ROLE tune_bob" >/dev/null
echo "# $n checks"
