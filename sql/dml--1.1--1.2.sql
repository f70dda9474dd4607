/* dml 1.1 -> 1.2 */

\echo Use "ALTER EXTENSION dml UPDATE TO '1.2'" to load this file. \quit

/*
 * Each issue's schema changes of the third wave, in the order they landed,
 * each section opened by a comment naming its issue.  sql/dml.sql is the
 * whole 1.2 install script; regress/t/upgrade.sh checks that an install
 * updated from 1.0 (through 1.1) has the same objects as a fresh one.
 */

/* ---- issue 19: a job's owner is a regrole, as the other role columns ---- */

/*
 * A dump then names the job's owner, so a restore into a cluster where the
 * role has another oid keeps it.  dml.jobs reads the column and dml_wait
 * returns the view's row type: both are made again around the change.
 */
DROP FUNCTION @extschema@.dml_wait(bigint, interval);
DROP VIEW dml.jobs;
ALTER TABLE dml.job_runs ALTER COLUMN owner TYPE regrole;

/*
 * dml.jobs: the jobs the calling role may see, with the live epoch, loss
 * and time left of running ones from dml.progress.  A running job whose
 * process is gone reads as failed, with the reason.
 */
CREATE VIEW dml.jobs WITH (security_barrier) AS
SELECT j.id, j.name, j.owner,
	   CASE WHEN l.lost IS NOT NULL THEN 'failed' ELSE j.state END AS state,
	   j.args, j.submitted, j.started,
	   CASE WHEN l.lost IS NOT NULL THEN NULL ELSE j.finished END AS finished,
	   COALESCE(p.epoch, j.epoch) AS epoch, COALESCE(p.epochs, j.epochs) AS epochs,
	   COALESCE(p.loss, j.loss) AS loss,
	   COALESCE(p.metric, j.metric) AS metric,
	   COALESCE(p.rows_per_second, j.rows_per_second) AS rows_per_second,
	   p.eta, j.model_id, j.resumes,
	   COALESCE(l.lost, j.error_message) AS error_message,
	   j.error_detail,
	   CASE WHEN l.lost IS NOT NULL THEN '57P01' ELSE j.error_sqlstate END AS error_sqlstate
FROM dml.job_runs j
LEFT JOIN dml.progress_rows() p ON p.job = j.id AND j.state = 'running'
LEFT JOIN LATERAL (SELECT CASE WHEN j.state = 'running'
						  THEN dml.job_lost(j.pid, j.owner, j.server_started) END AS lost) l ON true
WHERE dml.job_visible(j.owner);

/* wait until a job ends (or timeout passes) and return its row */
CREATE FUNCTION @extschema@.dml_wait(job bigint, timeout interval DEFAULT NULL)
RETURNS dml.jobs
AS 'MODULE_PATHNAME', 'dml_wait' LANGUAGE C VOLATILE PARALLEL UNSAFE;

GRANT SELECT ON dml.jobs TO PUBLIC;
