#!/bin/bash
# jobs.sh: training as a background job (dml_train_async), followed live
# from other sessions (dml.jobs, dml.progress with the step within the
# epoch, dml_job_epochs with each epoch's row before the commit), cancelled,
# queued under dml.max_concurrent_jobs (across databases too), isolated
# between roles, and marked failed after an immediate restart.  Runs
# against the cluster regress/run.sh started.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh

q() { pgc_psql -t -A "$@"; }
# the output of a statement expected to fail, errors included
err() { pgc_psql -t -A "$@" 2>&1 || true; }
# the value of one column of dml.jobs for job $1
job() { q -c "SELECT $2 FROM dml.jobs WHERE id = $1"; }
LONG="optimizer => 'sgd', batch_size => 1, epochs => 100000, workers => 2"

q -c "DROP TABLE IF EXISTS jobs_data, jobs_small, jobs_gone;
	CREATE TABLE jobs_data AS SELECT random() AS x1, random() AS x2, random() AS y
		FROM generate_series(1, 20000);
	CREATE TABLE jobs_small AS SELECT random() AS x1, random() AS x2, random() AS y
		FROM generate_series(1, 2000);
	CREATE TABLE jobs_gone AS SELECT * FROM jobs_small;
	DELETE FROM dml.models WHERE name LIKE 'jobs\_%'" >/dev/null
q -c "DROP ROLE IF EXISTS j_alice_member; DROP ROLE IF EXISTS j_alice; DROP ROLE IF EXISTS j_bob;
	DROP ROLE IF EXISTS j_dropped;
	CREATE ROLE j_alice LOGIN; CREATE ROLE j_bob LOGIN; CREATE ROLE j_dropped LOGIN;
	CREATE ROLE j_alice_member LOGIN IN ROLE j_alice;
	GRANT SELECT ON jobs_data, jobs_small TO j_alice, j_bob, j_dropped" >/dev/null
# their jobs' workers log in as them
pgc_allow_role j_alice j_bob j_dropped j_alice_member
q -c "LOAD 'dml'" -c "ALTER SYSTEM SET dml.max_concurrent_jobs = 2" -c "SELECT pg_reload_conf()" >/dev/null

# -- 1. submit and disconnect; follow from a second session; cancel from a third
id=$(q -c "SELECT dml_train_async('jobs_follow', 'jobs_data', 'y', $LONG)")
check "dml_train_async returns a job id at once" '[ -n "$id" ] && [ "$id" -gt 0 ]'
wait_until 60 '[ "$(job $id state)" = running ] && [ "$(job $id epoch)" -ge 1 ]'
check "the job runs after its session closed" '[ "$(job $id state)" = running ]'
e1=$(job $id epoch)
p1=$(q -c "SELECT epoch FROM dml.progress WHERE job = $id")
wait_until 30 '[ "$(job $id epoch)" -gt "$e1" ]'
check "dml.jobs shows epochs advancing ($e1 -> $(job $id epoch))" '[ "$(job $id epoch)" -gt "$e1" ]'
wait_until 30 '[ "$(q -c "SELECT epoch FROM dml.progress WHERE job = $id")" -gt "${p1:-0}" ]'
check "dml.progress shows the job, epochs advancing, 2 ranks, a loss and time left" \
	'[ "$(q -c "SELECT ranks = 2 AND loss IS NOT NULL AND eta IS NOT NULL AND epoch > ${p1:-0}
		AND name = '"'jobs_follow'"' FROM dml.progress WHERE job = $id")" = t ]'
# the step within the epoch: rank 0's, at most every 0.5 s
wait_until 30 '[ "$(q -c "SELECT steps > 1 AND step BETWEEN 0 AND steps FROM dml.progress WHERE job = $id")" = t ]'
s1=$(q -c "SELECT epoch * 1000000 + step FROM dml.progress WHERE job = $id")
wait_until 10 '[ "$(q -c "SELECT epoch * 1000000 + step FROM dml.progress WHERE job = $id")" -gt "${s1:-0}" ]'
check "dml.progress shows the step within the epoch, advancing ($(q -c "SELECT 'epoch ' || epoch + 1 || ': step ' || step || ' of ' || steps FROM dml.progress WHERE job = $id"))" \
	'[ "$(q -c "SELECT steps > 1 AND step BETWEEN 0 AND steps AND epoch * 1000000 + step > ${s1:-0} FROM dml.progress WHERE job = $id")" = t ]'
# each epoch's row while the job runs, though dml.epochs gets them only with the model
wait_until 30 '[ "$(q -c "SELECT count(*) FROM dml_job_epochs($id)")" -ge 2 ]'
check "dml_job_epochs shows the running job's epochs, 1 to n with losses; dml.epochs has none yet" \
	'[ "$(q -c "SELECT min(epoch) = 1 AND max(epoch) = count(*) AND count(loss) = count(*) FROM dml_job_epochs($id)")" = t ] &&
	 [ "$(q -c "SELECT count(*) FROM dml_epochs WHERE name = '"'jobs_follow'"'")" = 0 ]'
check "pg_stat_activity names the training of the job's worker" \
	'q -c "SELECT query FROM pg_stat_activity WHERE backend_type = '"'dml job'"'" | grep -q "training \"jobs_follow\", epoch"'
check "the job's session user is the caller, not a superuser SET ROLE" \
	'[ "$(q -c "SELECT usename FROM pg_stat_activity WHERE backend_type = '"'dml job'"'")" = postgres ]'
t0=$(date +%s.%N)
cancelled=$(q -c "SELECT dml_cancel($id)")
gone=0
wait_until 10 '[ "$(pgc_job_procs)" -eq 0 ] && [ "$(job $id state)" = cancelled ] &&
	[ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = '"'dml job'"'")" = 0 ]' && gone=1
t1=$(date +%s.%N)
check "dml_cancel from a third session ends the job, no process left (in $(echo "$t1 - $t0" | bc)s)" \
	'[ "$cancelled" = t ] && [ $gone = 1 ]'
check "the cancelled job keeps its SQLSTATE and no model" \
	'[ "$(job $id "error_sqlstate || coalesce(model_id::text, '"'none'"')")" = 57014none ]'
check "dml_cancel of an ended job returns false" '[ "$(q -c "SELECT dml_cancel($id)")" = f ]'

# -- 2. bad arguments fail at once with dml_train's errors; nothing is queued
before=$(q -c "SELECT count(*) FROM dml.job_runs")
for args in "'jobs_bad', 'jobs_data', 'nope'" "'jobs_bad', 'jobs_data', 'y', epochs => 0" \
	"'jobs_bad', 'jobs_data', 'y', optimizer => 'magic'" "'jobs_bad', 'jobs_data', 'y', options => '{\"fast\": 1}'"; do
	sync_err=$(q -c "SELECT * FROM dml_train($args)" 2>&1 | grep ERROR)
	async_err=$(q -c "SELECT dml_train_async($args)" 2>&1 | grep ERROR)
	check "dml_train_async($args) fails as dml_train does: $async_err" \
		'[ -n "$async_err" ] && [ "$sync_err" = "$async_err" ]'
done
check "no bad job was queued" '[ "$(q -c "SELECT count(*) FROM dml.job_runs")" = "$before" ]'

# an MLP's labels are read by the job, not at the submit (a scan of the whole
# table): one label fails the job with dml_train's error; labels that are
# classes make a classifier, as dml_train makes, and many integers a regression
q -c "DROP TABLE IF EXISTS jobs_labels;
	CREATE TABLE jobs_labels AS SELECT i, random() AS x1, random() AS x2, 1 AS one,
		i % 3 AS three, i AS many, 'a'::text AS one_text FROM generate_series(1, 600) i" >/dev/null
for tgt in one one_text; do
	sync_err=$(q -c "SELECT * FROM dml_train('jobs_lab', 'jobs_labels', '$tgt',
		features => '{x1,x2}', model => 'mlp', epochs => 1)" 2>&1 | grep ERROR | sed 's/^.*ERROR: *//')
	id=$(q -c "SELECT dml_train_async('jobs_lab', 'jobs_labels', '$tgt',
		features => '{x1,x2}', model => 'mlp', epochs => 1)")
	q -c "SELECT state FROM dml_wait($id, timeout => '120 s')" >/dev/null
	check "an MLP job on a single label ($tgt) is queued, then fails with dml_train's error: $(job $id error_message)" \
		'[ -n "$id" ] && [ "$(job $id state)" = failed ] && [ -n "$sync_err" ] &&
		[ "$(job $id error_message)" = "$sync_err" ] && [ "$(job $id error_sqlstate)" = 22000 ]'
done
for tgt in three many; do
	q -c "SELECT name FROM dml_train('jobs_lab_sync_$tgt', 'jobs_labels', '$tgt',
		features => '{x1,x2}', model => 'mlp', epochs => 2, workers => 1)" >/dev/null 2>&1
	id=$(q -c "SELECT dml_train_async('jobs_lab_job_$tgt', 'jobs_labels', '$tgt',
		features => '{x1,x2}', model => 'mlp', epochs => 2, workers => 1)")
	q -c "SELECT state FROM dml_wait($id, timeout => '120 s')" >/dev/null
	kinds=$(q -c "SELECT string_agg(coalesce(spec->>'classes', 'regression'), ' | ' ORDER BY name)
		FROM dml.models WHERE name IN ('jobs_lab_sync_$tgt', 'jobs_lab_job_$tgt')")
	check "an MLP job on integer target $tgt decides classes as dml_train does: $kinds" \
		'[ "$(job $id state)" = succeeded ] && [ "$(q -c "SELECT count(DISTINCT coalesce(spec->>'"'classes'"', '"'r'"'))
			FROM dml.models WHERE name IN ('"'jobs_lab_sync_$tgt', 'jobs_lab_job_$tgt'"')
			HAVING count(*) = 2")" = 1 ]'
done
shape=$(q -c "SELECT string_agg(name || ' ' || CASE jsonb_typeof(spec->'classes')
		WHEN 'array' THEN jsonb_array_length(spec->'classes') ELSE 0 END, ', ' ORDER BY name)
	FROM dml.models WHERE name IN ('jobs_lab_job_three', 'jobs_lab_job_many')")
check "the integer target of 3 labels is a classifier, of 600 a regression: $shape" \
	'[ "$shape" = "jobs_lab_job_many 0, jobs_lab_job_three 3" ]'
id=$(q -c "BEGIN; SELECT dml_train_async('jobs_rolled_back', 'jobs_small', 'y', epochs => 1); ROLLBACK" | head -1)
check "a rolled-back submission leaves no job" '[ "$(q -c "SELECT count(*) FROM dml.job_runs WHERE name = '"'jobs_rolled_back'"'")" = 0 ]'

# -- 3. eight jobs, at most two at a time, in order, all succeed
ids=$(for i in 1 2 3 4 5 6 7 8; do
	q -c "SELECT dml_train_async('jobs_eight_$i', 'jobs_small', 'y', optimizer => 'sgd',
		epochs => 40, batch_size => 1, workers => 1)"; done | paste -sd,)
most=0
until [ "$(q -c "SELECT count(*) FROM dml.jobs WHERE id IN ($ids) AND state IN ('queued', 'running')")" = 0 ]; do
	r=$(q -c "SELECT count(*) FROM dml.jobs WHERE id IN ($ids) AND state = 'running'")
	[ "$r" -gt "$most" ] && most=$r
	[ "$(q -c "SELECT count(*) FROM dml.jobs WHERE id IN ($ids) AND state IN ('queued', 'running')
		AND submitted < now() - interval '300 s'")" -gt 0 ] && break
	sleep 0.05
done
overlap=$(q -c "SELECT max((SELECT count(*) FROM dml.job_runs b WHERE b.id IN ($ids)
	AND b.started <= a.started AND b.finished > a.started)) FROM dml.job_runs a WHERE a.id IN ($ids)")
check "8 jobs, dml.max_concurrent_jobs = 2: never more than 2 running (seen $most, overlap $overlap)" \
	'[ "$most" -le 2 ] && [ "$overlap" -le 2 ] && [ "$overlap" -ge 1 ]'
check "all 8 succeeded, each with a model" \
	'[ "$(q -c "SELECT count(*) FROM dml.jobs j JOIN dml_models m ON m.id = j.model_id
		WHERE j.id IN ($ids) AND j.state = '"'succeeded'"'")" = 8 ]'
check "dml_job_epochs of a succeeded job is its model's dml.epochs rows" \
	'[ "$(q -c "SELECT count(*) FROM dml_job_epochs(${ids%%,*})")" = 40 ] &&
	 [ "$(q -c "SELECT count(*) FROM (SELECT restarts, epoch, loss, recorded, stopped FROM dml_job_epochs(${ids%%,*})
		EXCEPT SELECT e.restarts, e.epoch, e.loss, e.recorded, e.stopped FROM dml.epochs e
		JOIN dml.job_runs j ON j.model_id = e.model_id WHERE j.id = ${ids%%,*}) d")" = 0 ]'
check "they started in the order they were queued" \
	'[ "$(q -c "SELECT string_agg(id::text, '"','"' ORDER BY started) FROM dml.job_runs WHERE id IN ($ids)")" = "$ids" ]'

# -- 4. roles: a role sees and cancels its own jobs (and members do), no one else's
aid=$(q -U j_alice -c "SELECT dml_train_async('jobs_alice', 'jobs_data', 'y', $LONG)")
wait_until 60 '[ "$(job $aid state)" = running ] && [ "$(job $aid epoch)" -ge 1 ]'
check "alice's job runs as alice" \
	'[ "$(q -c "SELECT usename FROM pg_stat_activity WHERE backend_type = '"'dml job'"'")" = j_alice ]'
check "alice sees her job in dml.jobs and dml.progress" \
	'[ "$(q -U j_alice -c "SELECT count(*) FROM dml.jobs WHERE id = $aid") $(q -U j_alice -c "SELECT count(*) FROM dml.progress WHERE job = $aid")" = "1 1" ]'
check "a member of alice sees it too" \
	'[ "$(q -U j_alice_member -c "SELECT count(*) FROM dml.jobs WHERE id = $aid")" = 1 ]'
check "bob sees neither her job nor its progress, nor any of postgres's jobs" \
	'[ "$(q -U j_bob -c "SELECT (SELECT count(*) FROM dml.jobs) + (SELECT count(*) FROM dml.progress)")" = 0 ]'
check "bob cannot cancel it" \
	'err -U j_bob -c "SELECT dml_cancel($aid)" | grep -q "job $aid does not exist"'
check "bob cannot read its epochs" \
	'err -U j_bob -c "SELECT count(*) FROM dml_job_epochs($aid)" | grep -q "job $aid does not exist"'
check "the member reads its epochs" \
	'[ "$(q -U j_alice_member -c "SELECT count(*) > 0 FROM dml_job_epochs($aid)")" = t ]'
check "bob cannot wait for it" \
	'err -U j_bob -c "SELECT state FROM dml_wait($aid, interval '"'1 s'"')" | grep -q "job $aid does not exist"'
check "bob cannot read the table under it" \
	'err -U j_bob -c "SELECT count(*) FROM dml.job_runs" | grep -q "permission denied"'
check "bob's search_path does not reach the catalog SQL run for him" \
	'[ "$(q -U j_bob -c "CREATE TEMP TABLE job_runs (id bigint); CREATE TEMP TABLE jobs (id bigint);
		SET search_path = pg_temp, public;
		SELECT dml_cancel(dml_train_async('"'jobs_bob'"', '"'public.jobs_small'"', '"'y'"', epochs => 1));
		SELECT count(*) FROM job_runs")" = "t
0" ] &&
	[ "$(q -c "SELECT count(*) FROM dml.jobs WHERE name = '"'jobs_bob'"' AND owner::text = '"'j_bob'"'")" = 1 ]'
check "the member cancels it" '[ "$(q -U j_alice_member -c "SELECT dml_cancel($aid)")" = t ]'
check "dml_wait returns the ended job's row" \
	'[ "$(q -U j_alice -c "SELECT state FROM dml_wait($aid)")" = cancelled ]'

# -- 5. a queued job fails cleanly when its owner or its relation is dropped;
#       max_queued_jobs
q -c "LOAD 'dml'" -c "ALTER SYSTEM SET dml.max_concurrent_jobs = 1" -c "SELECT pg_reload_conf()" >/dev/null
hold=$(q -c "SELECT dml_train_async('jobs_hold', 'jobs_data', 'y', $LONG)")
wait_until 60 '[ "$(job $hold state)" = running ]'
did=$(q -U j_dropped -c "SELECT dml_train_async('jobs_dropped', 'jobs_small', 'y', epochs => 1)")
gid=$(q -c "SELECT dml_train_async('jobs_gone', 'jobs_gone', 'y', epochs => 1)")
check "while one runs, the others wait (max_concurrent_jobs = 1)" \
	'[ "$(job $did state) $(job $gid state)" = "queued queued" ]'
err=$(err -c "SET dml.max_queued_jobs = 1; SELECT dml_train_async('jobs_third', 'jobs_small', 'y')")
check "too many queued jobs is an error with a hint" \
	'echo "$err" | grep -q "has too many queued jobs" && echo "$err" | grep -q "HINT:  Wait for queued jobs"' \
	"it said: $err
the jobs: $(q -c "SELECT id, name, state, owner, error_message FROM dml.jobs ORDER BY id")"
q -c "DROP OWNED BY j_dropped; DROP ROLE j_dropped; DROP TABLE jobs_gone" >/dev/null
q -c "SELECT dml_cancel($hold)" >/dev/null
wait_until 60 '[ "$(job $did state)" = failed ] && [ "$(job $gid state)" = failed ]'
check "the job of a dropped role failed: $(job $did error_message)" \
	'[ "$(job $did error_message)" = "the role that submitted the job was dropped" ]'
check "the job of a dropped relation failed: $(job $gid error_message)" \
	'[ "$(job $gid error_sqlstate)" = 42P01 ]'

# -- 5b. dml.max_concurrent_jobs bounds the cluster, not a database: a job of
#        another database waits for the one running here, and starts when
#        it ends (the ending job starts that database's queue)
q -d postgres -c "DROP DATABASE IF EXISTS jobs_db2" -c "CREATE DATABASE jobs_db2" >/dev/null
q -d jobs_db2 -c "CREATE EXTENSION dml" -c "CREATE TABLE t2 AS SELECT random() AS x, random() AS y
	FROM generate_series(1, 500)" >/dev/null
hold=$(q -c "SELECT dml_train_async('jobs_hold2', 'jobs_data', 'y', $LONG)")
wait_until 60 '[ "$(job $hold state)" = running ] && [ "$(job $hold epoch)" -ge 1 ]'
other=$(q -d jobs_db2 -c "SELECT dml_train_async('jobs_db2', 't2', 'y', epochs => 2, workers => 1)")
# its worker tried and left: no job process in jobs_db2, while the one here ran on two more epochs
e0=$(job $hold epoch)
wait_until 60 '[ "$(job $hold epoch)" -ge $((e0 + 2)) ] &&
	[ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE datname = '"'jobs_db2'"' AND backend_type = '"'dml job'"'")" = 0 ]'
check "max_concurrent_jobs = 1: a job of another database stays queued while one runs here" \
	'[ "$(q -d jobs_db2 -c "SELECT state FROM dml.jobs WHERE id = $other")" = queued ]'
q -c "SELECT dml_cancel($hold)" >/dev/null
wait_until 60 '[ "$(q -d jobs_db2 -c "SELECT state FROM dml.jobs WHERE id = $other")" = succeeded ]'
check "when it ends, the other database's job starts by itself and succeeds" \
	'[ "$(q -d jobs_db2 -c "SELECT state FROM dml.jobs WHERE id = $other")" = succeeded ]'
q -d postgres -c "DROP DATABASE jobs_db2" >/dev/null

# -- 6. a synchronous dml_train is in dml.progress from another session
pgc_psql -c "SELECT * FROM dml_train('jobs_sync', 'jobs_data', 'y', $LONG)" >$T/jobs-sync.log 2>&1 &
client=$!
wait_until 60 '[ "$(q -c "SELECT count(*) FROM dml.progress WHERE name = '"'jobs_sync'"' AND job IS NULL AND epoch >= 1")" = 1 ]'
check "dml.progress shows a synchronous dml_train from another session" \
	'[ "$(q -c "SELECT count(*) FROM dml.progress WHERE name = '"'jobs_sync'"' AND job IS NULL AND epoch >= 1")" = 1 ]'
check "pg_stat_activity names it" \
	'q -c "SELECT query FROM pg_stat_activity" | grep -q "training \"jobs_sync\", epoch"'
q -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%training \"jobs_sync\"%' AND pid <> pg_backend_pid()" >/dev/null
wait "$client"
wait_until 5 '[ "$(q -c "SELECT count(*) FROM dml.progress WHERE name = '"'jobs_sync'"'")" = 0 ]'
check "its row goes when it is cancelled" '[ "$(q -c "SELECT count(*) FROM dml.progress WHERE name = '"'jobs_sync'"'")" = 0 ]'

check "dml_wait in the submitting transaction is an error, not a wait for ever" \
	'err -c "SELECT dml_wait(dml_train_async('"'jobs_self'"', '"'jobs_small'"', '"'y'"', epochs => 1))" |
		grep -q "starts when this transaction commits"'

# -- 7. dml_wait is cancellable and honours its timeout
wid=$(q -c "SELECT dml_train_async('jobs_wait', 'jobs_data', 'y', $LONG)")
check "dml_wait with a timeout returns the running job's row" \
	'[ "$(q -c "SELECT state FROM dml_wait($wid, interval '"'0.5 s'"')")" != "" ]'
pgc_psql -c "SELECT * FROM dml_wait($wid)" >$T/jobs-wait.log 2>&1 &
client=$!
wait_until 10 '[ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '"'%dml_wait($wid)%'"' AND pid <> pg_backend_pid()")" = 1 ]'
q -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%dml_wait($wid)%' AND pid <> pg_backend_pid()" >/dev/null
wait "$client"
check "dml_wait is cancellable" 'grep -q "canceling statement due to user request" $T/jobs-wait.log'

q -c "SELECT dml_cancel($wid)" >/dev/null

# -- 8. durable checkpoints: a cancelled job, and one killed by an immediate
#       restart, resume to the model of an uninterrupted run
RESUMABLE="optimizer => 'adam', batch_size => 100, epochs => 30, workers => 2,
	options => '{\"straggler\": \"0:20\"}'"
ckpt() { q -c "SELECT count(*) FROM pg_ls_dir('dml_checkpoints/' || (SELECT oid FROM pg_database
	WHERE datname = current_database())) f WHERE f = '$1'" 2>/dev/null || echo 0; }
same_model() { [ "$(q -c "SELECT max(abs(dml_predict('$1', r) - dml_predict('jobs_ref', r))) <= 1e-6
	FROM jobs_small r")" = t ]; }
q -c "SELECT * FROM dml_train('jobs_ref', 'jobs_small', 'y', $RESUMABLE)" >/dev/null 2>&1
cid=$(q -c "SET dml.checkpoint_seconds = 0; SELECT dml_train_async('jobs_cancel_resume', 'jobs_small', 'y', $RESUMABLE)" | tail -1)
wait_until 60 '[ "$(job $cid "coalesce(epoch, 0)")" -ge 5 ]'
q -c "SELECT dml_cancel($cid)" >/dev/null
check "a cancelled job keeps its checkpoint (epoch $(job $cid epoch) of 30)" \
	'[ "$(job $cid state)" = cancelled ] && [ "$(job $cid epoch)" -lt 30 ] && [ "$(ckpt $cid)" = 1 ]'
check "bob cannot resume it" 'err -U j_bob -c "SELECT dml_resume($cid)" | grep -q "job $cid does not exist"'
check "dml_resume finishes it" \
	'[ "$(q -c "SELECT dml_resume($cid)")" = $cid ] && [ "$(q -c "SELECT state || resumes FROM dml_wait($cid, interval '"'120 s'"')")" = succeeded1 ]'
check "dml_job_epochs of the resumed job: the epochs after its checkpoint, as dml.epochs has them" \
	'[ "$(q -c "SELECT count(*) FROM (SELECT epoch, loss FROM dml_job_epochs($cid)
		EXCEPT SELECT epoch, loss FROM dml_epochs WHERE name = '"'jobs_cancel_resume'"') d")" = 0 ] &&
	 [ "$(q -c "SELECT max(epoch) FROM dml_job_epochs($cid)")" = 30 ]'
check "it went on after its checkpoint, not from the start" \
	'[ "$(q -c "SELECT min(epoch) > 1 AND max(epoch) = 30 FROM dml_epochs WHERE name = '"'jobs_cancel_resume'"'")" = t ]'
check "its model is the uninterrupted run's, to 1e-6" 'same_model jobs_cancel_resume'
check "a finished job drops its checkpoint" '[ "$(ckpt $cid)" = 0 ]'
check "a succeeded job cannot be resumed" 'err -c "SELECT dml_resume($cid)" | grep -q "Only a failed or cancelled job can be resumed"'

rid=$(q -c "SET dml.checkpoint_seconds = 0; SELECT dml_train_async('jobs_crash', 'jobs_small', 'y', $RESUMABLE)" | tail -1)
wait_until 60 '[ "$(job $rid "coalesce(epoch, 0)")" -ge 5 ] && [ "$(ckpt $rid)" = 1 ]'
pgc_restart immediate
check "the server is back" 'q -c "SELECT 1" | grep -q 1'
check "the job killed by the restart is failed at once, with the reason" \
	'[ "$(job $rid "state || '"': '"' || error_message")" = "failed: the server restarted while the job ran" ]'
wait_until 10 '[ "$(pgc_job_procs)" -eq 0 ]'
check "no worker outlived the server" '[ "$(pgc_job_procs)" -eq 0 ]'
check "its checkpoint survived the crash" '[ "$(ckpt $rid)" = 1 ]'
check "dml_resume finishes it, and the dead run is written down" \
	'[ "$(q -c "SELECT dml_resume($rid)")" = $rid ] && [ "$(q -c "SELECT state FROM dml_wait($rid, interval '"'120 s'"')")" = succeeded ]'
check "its model is the uninterrupted run's, to 1e-6" 'same_model jobs_crash'
check "the killed job's directory went with the next job" '[ "$(pgc_job_dirs)" -eq 0 ]'

# the live rows of a running job are the rows its commit stores
lid=$(q -c "SELECT dml_train_async('jobs_live', 'jobs_small', 'y', $RESUMABLE)")
wait_until 60 '[ "$(q -c "SELECT count(*) FROM dml_job_epochs($lid)")" -ge 3 ] && [ "$(job $lid state)" = running ]'
live="SELECT e.restarts, e.epoch, e.loss, e.val_loss, e.val_metric, e.rows_per_second, e.seconds,
	e.bytes_sent, e.staleness, e.bytes_within, e.bytes_across"
q -c "$live FROM dml_job_epochs($lid) e ORDER BY 1, 2" >$T/jobs-live.txt
q -c "SELECT state FROM dml_wait($lid, interval '120 s')" >/dev/null
q -c "$live FROM dml.epochs e JOIN dml.job_runs j ON j.model_id = e.model_id WHERE j.id = $lid
	ORDER BY 1, 2 LIMIT $(wc -l <$T/jobs-live.txt)" >$T/jobs-committed.txt
check "the $(wc -l <$T/jobs-live.txt) rows dml_job_epochs showed while it ran are the rows dml.epochs got at its commit" \
	'[ "$(job $lid state)" = succeeded ] && [ "$(wc -l <$T/jobs-live.txt)" -ge 3 ] &&
	 cmp -s $T/jobs-live.txt $T/jobs-committed.txt' || diff $T/jobs-live.txt $T/jobs-committed.txt | head -5
check "a job id no one has is an error" 'err -c "SELECT * FROM dml_job_epochs(-1)" | grep -q "job -1 does not exist"'

# -- 9. dml.checkpoint_retention: failed jobs keep the newest checkpoints only
q -c "LOAD 'dml'" -c "ALTER SYSTEM SET dml.checkpoint_retention = 1" -c "SELECT pg_reload_conf()" >/dev/null
k1=$(q -c "SET dml.checkpoint_seconds = 0; SELECT dml_train_async('jobs_keep1', 'jobs_data', 'y', $LONG)" | tail -1)
wait_until 60 '[ "$(ckpt $k1)" = 1 ]'
q -c "SELECT dml_cancel($k1)" >/dev/null
k2=$(q -c "SET dml.checkpoint_seconds = 0; SELECT dml_train_async('jobs_keep2', 'jobs_data', 'y', $LONG)" | tail -1)
wait_until 60 '[ "$(ckpt $k2)" = 1 ]'
q -c "SELECT dml_cancel($k2)" >/dev/null
check "with dml.checkpoint_retention = 1 the newer cancelled job keeps its checkpoint, the older not" \
	'[ "$(ckpt $k1) $(ckpt $k2)" = "0 1" ]'
q -c "LOAD 'dml'" -c "ALTER SYSTEM RESET dml.checkpoint_retention" -c "SELECT pg_reload_conf()" >/dev/null

# -- 10. preloaded: dml.progress in shared memory reserved at startup, and a
#        job cut short by a crash goes on by itself (dml.resume_after_restart)
preloaded() { q -c "SHOW shared_preload_libraries" | grep -qw dml; }
preloaded || q -c "ALTER SYSTEM SET shared_preload_libraries = 'dml'" >/dev/null
q -c "LOAD 'dml'" -c "ALTER SYSTEM SET dml.resume_after_restart = on" >/dev/null
pgc_restart fast
check "preloaded: the launcher runs" \
	'[ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = '"'dml launcher'"'")" = 1 ]'
aid=$(q -c "SET dml.checkpoint_seconds = 0; SELECT dml_train_async('jobs_auto', 'jobs_small', 'y', $RESUMABLE)" | tail -1)
wait_until 60 '[ "$(q -c "SELECT coalesce(max(epoch), 0) FROM dml.progress WHERE job = $aid")" -ge 5 ] && [ "$(ckpt $aid)" = 1 ]'
check "preloaded: dml.progress shows the job" \
	'[ "$(q -c "SELECT coalesce(max(epoch), 0) FROM dml.progress WHERE job = $aid")" -ge 5 ]'
pgc_restart immediate
requeued() { case "$(job $aid "state || resumes")" in queued1|running1|succeeded1) true ;; *) false ;; esac; }
wait_until 30 requeued
check "after a crash the job is queued again from its checkpoint by itself ($(job $aid "state || resumes"))" requeued
check "and ends with the uninterrupted run's model" \
	'[ "$(q -c "SELECT state FROM dml_wait($aid, interval '"'120 s'"')")" = succeeded ] && same_model jobs_auto'
q -c "ALTER SYSTEM RESET dml.resume_after_restart" >/dev/null

# -- 11. not preloaded: dml.progress takes its shared memory on first use
#        (plpgsql stands in: an empty list would be one library named "")
q -c "ALTER SYSTEM SET shared_preload_libraries = 'plpgsql'" >/dev/null
pgc_restart fast
pgc_psql -c "SELECT * FROM dml_train('jobs_lazy', 'jobs_data', 'y', $LONG)" >$T/jobs-lazy.log 2>&1 &
client=$!
wait_until 60 '[ "$(q -c "SELECT coalesce(max(epoch), 0) FROM dml.progress WHERE name = '"'jobs_lazy'"'")" -ge 1 ]'
check "not preloaded: dml.progress still shows a training from another session" \
	'[ "$(q -c "SELECT coalesce(max(epoch), 0) FROM dml.progress WHERE name = '"'jobs_lazy'"'")" -ge 1 ]'
q -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%training \"jobs_lazy\"%' AND pid <> pg_backend_pid()" >/dev/null
wait "$client"
q -c "ALTER SYSTEM RESET shared_preload_libraries" >/dev/null
pgc_restart fast

q -c "LOAD 'dml'" -c "ALTER SYSTEM RESET dml.max_concurrent_jobs" -c "SELECT pg_reload_conf()" >/dev/null
q -c "REVOKE ALL ON jobs_data, jobs_small FROM j_alice, j_bob;
	DROP ROLE j_alice_member; DROP ROLE j_alice; DROP ROLE j_bob" >/dev/null
check "the server is still up" 'q -c "SELECT 1" | grep -q 1'
