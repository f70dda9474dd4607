/*-------------------------------------------------------------------------
 *
 * predict_rows.c
 *	  A model's forward pass at inference, as dml_predict_table runs it
 *	  (dml_model_predict over batches of 1,024 rows), against the same
 *	  pass with the hidden layers on OpenBLAS's sgemm and a ReLU pass of
 *	  their own (dml_model_predict before its own kernel, dml_dense_rows).
 *
 *	  predict_rows [-n ROWS] [-r REPS] [-b BATCH] [-s 256] [SIZES]
 *	                          (1000000 rows, 7 reps, 1024, 20-64-64-1)
 *
 *	  SIZES is the layers' widths, inputs first, joined by '-'; the
 *	  hidden layers use ReLU.  The two take turns, REPS times each; prints
 *	  the fastest and the median of each (wall ms over all the rows), and
 *	  the largest difference between their outputs against the largest
 *	  output.  -s 256 runs dml's kernels on AVX2 where the CPU has AVX-512
 *	  (OpenBLAS keeps its own choice).
 *
 *-------------------------------------------------------------------------
 */
#include "clock.h"
#include "kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* dml_model_predict with every layer on dense_forward (sgemm, or skinny for the output) */
static void
predict_sgemm(const DmlModel *m, float *out, const float *X, int B, float *scratch)
{
	const DmlNet *net = &m->net;
	int			w = 0;
	float	   *buf[2];
	const float *inp;
	int			cur = 0;

	for (int l = 0; l <= net->nlayers; l++)
		if (net->sizes[l] > w)
			w = net->sizes[l];
	buf[0] = scratch;
	buf[1] = scratch + (size_t) B * w;
	dml_model_standardize(m, buf[0], X, B);
	inp = buf[0];
	for (int l = 0; l < net->nlayers; l++)
	{
		int			OC = net->sizes[l + 1];
		float	   *dst = (l == net->nlayers - 1) ? out : buf[cur ^ 1];

		dense_forward(dst, inp, net->params + dml_net_weight_offset(net, l),
					  net->params + dml_net_bias_offset(net, l), B, net->sizes[l], OC);
		if (l < net->nlayers - 1)
			activation_forward(dst, dst, (size_t) B * OC, net->act);
		inp = dst;
		cur ^= 1;
	}
	dml_model_finish(m, out, B);
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
	int64_t		n = 1000000;
	int			reps = 7,
				batch = 1024,
				sizes[DML_MAX_LAYERS + 1] = {20, 64, 64, 1},
				nl = 3,
				opt;
	DmlModel	m;
	DmlRng		rng;
	float	   *X,
			   *out[2],
			   *scratch;
	double	   *t[2];

	while ((opt = getopt(argc, argv, "n:r:b:s:")) != -1)
	{
		if (opt == 'n')
			n = atoll(optarg);
		else if (opt == 'r')
			reps = atoi(optarg);
		else if (opt == 'b')
			batch = atoi(optarg);
		else if (opt == 's')
			dml_set_simd(atoi(optarg));
		else
		{
			fprintf(stderr, "usage: predict_rows [-n ROWS] [-r REPS] [-b BATCH] [-s 256] [SIZES]\n");
			return 2;
		}
	}
	if (optind < argc)
	{
		char	   *s = argv[optind];

		nl = -1;
		while (*s && nl < DML_MAX_LAYERS)
		{
			sizes[++nl] = (int) strtol(s, &s, 10);
			if (*s == '-')
				s++;
		}
		if (nl < 1)
		{
			fprintf(stderr, "predict_rows: SIZES needs two widths at least\n");
			return 2;
		}
	}
	if (reps < 1 || batch < 1 || n < 1 ||
		dml_model_alloc(&m, nl, sizes, DML_ACT_RELU, DML_LOSS_MSE) != DML_OK)
	{
		fprintf(stderr, "predict_rows: bad arguments\n");
		return 2;
	}
	dml_net_init(&m.net, 7);
	dml_rng_seed(&rng, 11);
	for (int c = 0; c < sizes[0]; c++)
	{
		m.in_mean[c] = (float) (dml_rng_uniform(&rng) * 10 - 5);
		m.in_scale[c] = (float) (0.5 + dml_rng_uniform(&rng));
	}
	for (size_t i = 0; i < m.net.nparams; i++)
		m.net.params[i] += (float) (0.01 * (dml_rng_uniform(&rng) - 0.5));	/* nonzero biases */
	X = malloc(sizeof(float) * n * sizes[0]);
	out[0] = malloc(sizeof(float) * n * sizes[nl]);
	out[1] = malloc(sizeof(float) * n * sizes[nl]);
	scratch = malloc(sizeof(float) * dml_model_scratch_floats(&m, batch));
	t[0] = malloc(sizeof(double) * reps);
	t[1] = malloc(sizeof(double) * reps);
	if (!X || !out[0] || !out[1] || !scratch || !t[0] || !t[1])
		return 1;
	for (size_t i = 0; i < (size_t) n * sizes[0]; i++)
		X[i] = (float) (dml_rng_uniform(&rng) * 10 - 5);
	for (int r = 0; r < reps; r++)
		for (int k = 0; k < 2; k++)
		{
			double		t0 = dml_clock_seconds();

			for (int64_t b0 = 0; b0 < n; b0 += batch)
			{
				int			B = n - b0 < batch ? (int) (n - b0) : batch;

				if (k == 0)
					predict_sgemm(&m, out[0] + b0 * sizes[nl], X + b0 * sizes[0], B, scratch);
				else
					dml_model_predict(&m, out[1] + b0 * sizes[nl], X + b0 * sizes[0], B, scratch);
			}
			t[k][r] = dml_clock_seconds() - t0;
		}
	{
		double		diff = 0,
					big = 0;

		for (size_t i = 0; i < (size_t) n * sizes[nl]; i++)
		{
			diff = fmax(diff, fabs((double) out[0][i] - out[1][i]));
			big = fmax(big, fabs((double) out[0][i]));
		}
		printf("predict_rows %lld rows, model", (long long) n);
		for (int l = 0; l <= nl; l++)
			printf("%s%d", l ? "-" : " ", sizes[l]);
		printf(", batches of %d, %d reps (wall ms: fastest, median)\n", batch, reps);
		for (int k = 0; k < 2; k++)
		{
			qsort(t[k], reps, sizeof(double), cmp_double);
			printf("  %-44s %8.2f %8.2f\n",
				   k == 0 ? "hidden layers on sgemm, ReLU a pass" : "dml_model_predict (dml_dense_rows)",
				   t[k][0] * 1e3, t[k][reps / 2] * 1e3);
		}
		printf("  largest difference %.3g, largest output %.3g; hidden layers on dml_dense_rows:",
			   diff, big);
		for (int l = 0; l < nl - 1; l++)
			printf(" %s", dml_dense_rows_applies(sizes[l], sizes[l + 1]) ? "yes" : "no");
		printf(" (%s)\n", dml_simd() >= 512 ? "AVX-512" : dml_simd() >= 256 ? "AVX2" : "no SIMD");
	}
	return 0;
}
