/*-------------------------------------------------------------------------
 *
 * newton_pass.c
 *	  The float32 Newton iteration's statistics pass taken apart, as
 *	  workers/exact.c's newton_stats_chunk runs it over rows in memory
 *	  (consecutive, so taken where they lie): per chunk of 2,048 rows the
 *	  step's logits (dml_rows_dot and the intercept), eta moved by them,
 *	  the probabilities and loss (dml_logit_probs) and the gradient and
 *	  Hessian (dml_logit_stats32).  Each part is also run alone over all
 *	  the rows, beside a plain read of them (the bandwidth floor).
 *
 *	  newton_pass [-n ROWS] [-d COLS] [-r REPS] [-c ROWS] [-P]
 *	                                       (1000000 x 20, 9 reps)
 *
 *	  With -P, the rows are laid out as row panels first (ROWS a multiple
 *	  of 16) and the pass runs as exact.c runs it on them: the logits by
 *	  dml_panel_dot, the statistics by dml_panel_stats, and the whole pass
 *	  a sub-chunk of PANEL_RUN rows at a time (logits, eta, probabilities,
 *	  statistics), the lanes flushed each chunk.
 *
 *	  With -c, every chunk reads the same ROWS rows over again (its rows
 *	  rounded down to chunks of 2,048): what the parts cost where the rows
 *	  stay in cache.
 *
 *	  Prints the fastest of REPS for each (wall ms, the passes taken in
 *	  turn) and the sums, so two builds can be compared for the same
 *	  results.
 *
 *-------------------------------------------------------------------------
 */
#include "clock.h"
#include "kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK 2048
#define PANEL_RUN 128

enum
{
	P_READ, P_DOT, P_PROBS, P_STATS, P_ALL, NPARTS
};
static const char *part_name[NPARTS] = {
	"read the rows (sum)", "step logits (rows_dot)", "eta step + probabilities",
	"stats32 (gradient, Hessian)", "whole pass"
};

int
main(int argc, char **argv)
{
	int64_t		n = 1000000;
	int64_t		cached = 0;
	int			d = 20,
				reps = 9,
				opt;
	float	   *X,
			   *vf,
			   *ob;
	double	   *eta,
			   *ed,
			   *pr,
				best[NPARTS],
				g[64],
				Hs[DML_HESS_TILE_P * DML_HESS_TILE_P],
				loss = 0,
				rsum = 0;
	int		   *label;
	int			panels = 0;
	float	   *lanes = NULL;
	double	   *dlanes = NULL;
	DmlRng		rng;

	while ((opt = getopt(argc, argv, "n:d:r:c:P")) != -1)
	{
		if (opt == 'n')
			n = atoll(optarg);
		else if (opt == 'd')
			d = atoi(optarg);
		else if (opt == 'r')
			reps = atoi(optarg);
		else if (opt == 'c')
			cached = atoll(optarg) / CHUNK * CHUNK;
		else if (opt == 'P')
			panels = 1;
		else
		{
			fprintf(stderr, "usage: newton_pass [-n ROWS] [-d COLS] [-r REPS] [-c ROWS] [-P]\n");
			return 2;
		}
	}
	if (!dml_hess_tiles_ok(d + 1))
	{
		fprintf(stderr, "newton_pass: the float32 tiles do not run for d = %d on this CPU\n", d);
		return 2;
	}
	X = malloc(sizeof(float) * n * d);
	eta = malloc(sizeof(double) * n);
	label = malloc(sizeof(int) * n);
	vf = malloc(sizeof(float) * (d + 1));
	ob = malloc(sizeof(float) * CHUNK);
	ed = malloc(sizeof(double) * CHUNK);
	pr = malloc(sizeof(double) * CHUNK);
	if (!X || !eta || !label || !vf || !ob || !ed || !pr)
		return 1;
	dml_rng_seed(&rng, 20);
	for (int64_t i = 0; i < n * d; i++)
		X[i] = (float) (dml_rng_uniform(&rng) * 2 - 1);
	for (int64_t i = 0; i < n; i++)
		label[i] = dml_rng_uniform(&rng) < 0.5;
	for (int c = 0; c <= d; c++)
		vf[c] = (float) (0.01 * c - 0.1);
	if (panels)
	{
		n = n / DML_PANEL * DML_PANEL;
		dml_panel_layout(X, n / DML_PANEL, d, true);
		lanes = calloc(dml_panel_lanes(d + 1), sizeof(float));
		dlanes = calloc(dml_panel_lanes(d + 1), sizeof(double));
		if (!lanes || !dlanes)
			return 1;
	}
	for (int k = 0; k < NPARTS; k++)
		best[k] = 1e30;
	for (int r = 0; r < reps; r++)
		for (int part = 0; part < NPARTS; part++)
		{
			double		t;

			memset(g, 0, sizeof(g));
			memset(Hs, 0, sizeof(Hs));
			memset(eta, 0, sizeof(double) * n);
			if (panels)
				memset(dlanes, 0, sizeof(double) * dml_panel_lanes(d + 1));
			t = dml_clock_seconds();
			loss = 0;
			for (int64_t j0 = 0; j0 < n; j0 += CHUNK)
			{
				int			B = n - j0 < CHUNK ? (int) (n - j0) : CHUNK;
				const float *Zb = X + (size_t) (cached ? j0 % cached : j0) * d;

				if (part == P_READ)
				{
					float		s[16] = {0};
					size_t		m = (size_t) B * d;

					/* 16 lanes of sums; a chunk's last floats (m % 16) in lane 0 */
					for (size_t i = 0; i + 16 <= m; i += 16)
						for (int l = 0; l < 16; l++)
							s[l] += Zb[i + l];
					for (size_t i = m / 16 * 16; i < m; i++)
						s[0] += Zb[i];
					for (int l = 0; l < 16; l++)
						rsum += s[l];
					continue;
				}
				if (panels && part != P_READ)
				{
					/* the panels' pass, PANEL_RUN rows at a time, as exact.c's */
					for (int s0 = 0; s0 < B; s0 += PANEL_RUN)
					{
						int			b = B - s0 < PANEL_RUN ? B - s0 : PANEL_RUN;
						const float *Zs = Zb + (size_t) s0 * d;

						if (part == P_DOT || part == P_ALL)
						{
							dml_panel_dot(ob + s0, Zs, b / DML_PANEL, d, vf);
							for (int i = 0; i < b; i++)
								ed[s0 + i] = ob[s0 + i];
						}
						if (part == P_PROBS || part == P_ALL)
						{
							for (int i = 0; i < b; i++)
								eta[j0 + s0 + i] -= 0.5 * ed[s0 + i];
							loss += dml_logit_probs(eta + j0 + s0, label + j0 + s0, b, pr + s0, true);
						}
						if (part == P_STATS)
							for (int i = 0; i < b; i++)
								pr[s0 + i] = 0.25 + 0.5 * (i & 1);
						if (part == P_STATS || part == P_ALL)
						{
							/* the next run's panels (the chunk's, or the next chunk's first) */
							int64_t		after = (cached ? 0 : n - (j0 + s0 + b));

							dml_panel_stats(Zs, b / DML_PANEL, d, pr + s0, label + j0 + s0, lanes,
											Zs + (size_t) b * d,
											(int) (after < PANEL_RUN ? after : PANEL_RUN) / DML_PANEL);
						}
					}
					if (part == P_STATS || part == P_ALL)
						dml_panel_flush(lanes, dlanes, d + 1);
					continue;
				}
				if (part == P_DOT || part == P_ALL)
				{
					memset(ob, 0, sizeof(float) * B);
					dml_rows_dot(ob, Zb, vf, B, d);
					for (int i = 0; i < B; i++)
						ed[i] = ob[i] + vf[d];
				}
				if (part == P_PROBS || part == P_ALL)
				{
					for (int i = 0; i < B; i++)
						eta[j0 + i] -= 0.5 * ed[i];
					loss += dml_logit_probs(eta + j0, label + j0, B, pr, true);
				}
				if (part == P_STATS || part == P_ALL)
				{
					const float *next = j0 + B < n && !cached ? Zb + (size_t) B * d : NULL;
					int			nn = n - (j0 + B) < CHUNK ? (int) (n - (j0 + B)) : CHUNK;

					if (part == P_STATS)
						for (int i = 0; i < B; i++)
							pr[i] = 0.25 + 0.5 * (i & 1);
					dml_logit_stats32(Zb, B, d, d, pr, label + j0, g, Hs, next, nn);
				}
			}
			if (panels && (part == P_STATS || part == P_ALL))
				dml_panel_sum(dlanes, d + 1, g, Hs);
			t = dml_clock_seconds() - t;
			best[part] = t < best[part] ? t : best[part];
		}
	printf("newton_pass %lld x %d (%.1f MB of float32 rows%s%s), fastest of %d:\n",
		   (long long) n, d, n * d * 4 / 1e6, cached ? ", read from cache" : "",
		   panels ? ", row panels" : "", reps);
	for (int k = 0; k < NPARTS; k++)
		printf("  %-30s %7.2f ms  %5.2f GB/s of rows\n", part_name[k], best[k] * 1e3,
			   n * d * 4 / best[k] / 1e9);
	printf("  loss %.17g g[0] %.17g H[0] %.17g H[%d] %.17g (read sum %g)\n", loss, g[0], Hs[0],
		   d * DML_HESS_TILE_P + d, Hs[d * DML_HESS_TILE_P + d], rsum);
	return 0;
}
