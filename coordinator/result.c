/*-------------------------------------------------------------------------
 *
 * result.c
 *	  The metrics of a trained model, as stored in dml.models.metrics, from
 *	  the typed result rank 0 sends (protocol.h: DmlResult, the servers'
 *	  staleness, the metric sums) and the job it ran.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "lib/stringinfo.h"
#include "utils/json.h"

#include "coordinator.h"
#include "shards.h"

/*
 * DmlResultJson
 *		The metrics object: where the model ran and how long it took, what
 *		it was evaluated on, the synchronization's facts, every metric of
 *		kernels' dml_metrics_json, the precision of the model blob, and the
 *		exact solvers' statistics of the fit (a JSON object, or NULL).
 */
char *
DmlResultJson(const DmlJob *job, const DmlResult *r, const int64 *server_staleness,
			  const double *peak_rss, const DmlMetrics *met, const unsigned char *blob, const char *statistics)
{
	StringInfoData buf;
	size_t		mlen = dml_metrics_json(met, NULL, 0);
	char	   *mj = palloc(mlen);

	dml_metrics_json(met, mj, mlen);
	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"device\": \"%s\", \"total_seconds\": %.4f, ",
					 r->gpu ? "gpu" : "cpu", r->total_seconds);
	appendStringInfo(&buf,
					 "\"evaluated_on\": \"%s\", \"train_rows\": %.0f, \"validation_rows\": %.0f, "
					 "\"epochs\": %d, \"final_loss\": %.10g, \"rows_per_second\": %.1f, "
					 "\"train_seconds\": %.4f, \"load_seconds\": %.4f, \"load\": \"%s\", "
					 "\"bytes_sent\": %.0f, \"workers\": %d, ",
					 r->on_validation ? "validation" : "training", r->train_rows,
					 r->validation_rows, r->epochs, r->final_loss, r->rows_per_second,
					 r->train_seconds, r->load_seconds, r->load_block ? "block" : "copy",
					 r->bytes_sent, r->workers);
	appendStringInfo(&buf, "\"optimizer\": \"%s\", \"stopped\": \"%s\", \"best_epoch\": %d, ",
					 dml_job_name(DML_NAMES_OPTIMIZER, job->optimizer),
					 dml_stop_name(r->out_of_time ? DML_STOP_MAX_TIME : (DmlStopReason) r->stopped),
					 r->best_epoch);
	/* format version 2 holds float64 values (kernels/format.c) */
	appendStringInfo(&buf, "\"precision\": \"%s\", ",
					 r->blob_len > 4 && blob[4] >= 2 ? "float64" : "float32");
	/* options "tf32": the GPU's GEMMs took their inputs rounded to TF32 */
	if (r->gpu && job->tf32)
		appendStringInfo(&buf, "\"tf32\": true, ");
	/* options "shuffle": the epochs shuffled blocks of this many rows */
	if (r->shuffle_block > 0)
		appendStringInfo(&buf, "\"shuffle\": \"blocks\", \"shuffle_block\": %d, ", r->shuffle_block);
	/* options "byte_rows": the steps read each input as a byte, value k / byte_rows */
	if (r->byte_rows > 0)
		appendStringInfo(&buf, "\"byte_rows\": %d, ", r->byte_rows);
	/* products of the steps ran on AMX's tiles (options "amx") */
	if (r->amx)
		appendStringInfo(&buf, "\"amx\": true, ");
	if (statistics)
		appendStringInfo(&buf, "\"statistics\": %s, ", statistics);
	/* dml_tune: the trial's place in the search's one job, over rows loaded once */
	if (r->trial_in_job > 0)
		appendStringInfo(&buf, "\"trial_in_job\": %d, ", r->trial_in_job);
	/* the memory budget, each data rank's peak resident set, what was streamed */
	appendStringInfo(&buf, "\"memory\": %.0f, \"peak_rss\": [", r->memory);
	for (int j = 0; j < r->workers; j++)
		appendStringInfo(&buf, "%s%.0f", j ? ", " : "", peak_rss[j]);
	appendStringInfo(&buf, "], \"streamed\": %d, ", r->streamed);
	if (r->streamed > 0)
	{
		appendStringInfo(&buf, "\"spill_format\": \"%s\", ",
						 r->spill_format == DML_SPILL_INT8 ? "int8" :
						 r->spill_format == DML_SPILL_FP16 ? "fp16" : "float32");
		appendStringInfo(&buf, "\"spill_bytes\": %.0f, \"window\": %d, "
						 "\"spill_read_bytes\": %.0f, \"spill_read_seconds\": %.4f, ",
						 r->spill_bytes, r->window, r->spill_read_bytes, r->spill_read_seconds);
		appendStringInfo(&buf, "\"spill_reused\": %d, \"spill_recreated\": %d, ",
						 r->spill_reused, r->spill_recreated);
	}
	DmlShardsJson(job, &buf, true);
	if (job->rank_hosts != NIL)
	{
		/* each rank's host, as rank 0 said at the start (HELLO) */
		ListCell   *lc;

		appendStringInfoString(&buf, "\"hosts\": [");
		foreach(lc, job->rank_hosts)
		{
			if (lc != list_head(job->rank_hosts))
				appendStringInfoString(&buf, ", ");
			escape_json(&buf, (char *) lfirst(lc));
		}
		appendStringInfoString(&buf, "], ");
	}
	/*
	 * Newton: steps located on a sample, searched on every row, and
	 * searched again; the ranks whose passes read row panels; the
	 * iteration from which the Hessian was formed in double (0: never)
	 */
	if (r->newton)
		appendStringInfo(&buf, "\"newton_steps\": {\"sampled\": %d, \"full\": %d, \"again\": %d, \"panels\": %d, \"precise\": %d}, ",
						 r->newton_sampled, r->newton_full, r->newton_again, r->newton_panels,
						 r->newton_precise);
	if (r->has_sync)
	{
		appendStringInfo(&buf, "\"sync\": \"%s\", \"compression\": \"%s\"",
						 dml_job_name(DML_NAMES_SYNC, job->sync),
						 dml_job_name(DML_NAMES_COMPRESSION, job->compression));
		if (r->servers > 0)
		{
			appendStringInfo(&buf, ", \"servers\": %d, \"server_staleness\": [", r->servers);
			for (int j = 0; j < r->servers; j++)
				appendStringInfo(&buf, "%s" INT64_FORMAT, j ? ", " : "", server_staleness[j]);
			appendStringInfoChar(&buf, ']');
		}
		if (r->allreduce)
			appendStringInfo(&buf, ", \"allreduce\": \"%s\"",
							 r->allreduce == 3 ? "hierarchical" : r->allreduce == 2 ? "shared memory" : "mpi");
		/* one host's sharded step: chunks a rank stepped off another's list (sync.c) */
		if (r->allreduce == 2 && r->chunks_taken >= 0)
			appendStringInfo(&buf, ", \"chunks_taken\": %.0f", r->chunks_taken);
		/* options "balance": steps that split their rows by the ranks' speed, rows so moved */
		if (r->balance)
			appendStringInfo(&buf, ", \"balance\": {\"steps\": %.0f, \"rows_moved\": %.0f}",
							 r->balance_steps, r->balance_rows);
		if (job->sync == DML_SYNC_SSP)
			appendStringInfo(&buf, ", \"staleness_bound\": %d", job->staleness);
		if (job->sync == DML_SYNC_AVERAGE)
			appendStringInfo(&buf, ", \"average_every\": %d", job->average_every);
		if (job->sync == DML_SYNC_GOSSIP)
			appendStringInfo(&buf, ", \"consensus_distance\": %.6g", r->consensus);
		appendStringInfoString(&buf, ", ");
	}
	appendStringInfoString(&buf, mj + 1);
	pfree(mj);
	return buf.data;
}
