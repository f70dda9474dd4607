/*-------------------------------------------------------------------------
 *
 * mlp_epoch.c
 *	  In-memory epochs of the Fashion-MNIST MLP (784-256-128-10, ReLU,
 *	  softmax, Adam 0.001), as workers/train.c runs them on one rank:
 *	  the row gather, the forward-loss-backward pass and the Adam step
 *	  timed apart, in this process's CPU seconds (other work on the
 *	  machine moves them far less than wall time).
 *
 *	  mlp_epoch [-b BATCH] [-e EPOCHS] [-s STEPS] [-o PARAMS] [-8] [-g] IMAGES LABELS
 *
 *	  IMAGES and LABELS are the uncompressed idx files of the training
 *	  set (train-images-idx3-ubyte, train-labels-idx1-ubyte); the first
 *	  54,000 rows are used (the 0.9 that validation => 0.1 trains on),
 *	  pixels / 255.  With -s, stop after STEPS steps; with -o, write the
 *	  parameters as float32 to PARAMS, so that two runs (for example with
 *	  OPENBLAS_CORETYPE set and not) can be compared.  With -8, every
 *	  second epoch gathers its minibatches from the pixels as bytes
 *	  (dml_rows8_gather, as workers/train.c where options byte_rows
 *	  applies), the others from the float32 rows: the same rows bit for
 *	  bit, so the training goes on unchanged while the two gathers
 *	  alternate in one process.  With -g, every second epoch runs the
 *	  layers' products on OpenBLAS's sgemm (dml_set_gemm(false)), the
 *	  others on dml's kernel (kernels/gemm.h, on AVX-512).  The floor is
 *	  the epoch's FLOPs at bench/micro/sgemm's rate, run beside it.
 *
 *-------------------------------------------------------------------------
 */
#include "clock.h"
#include "kernels.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
main(int argc, char **argv)
{
	int			B = 256,
				epochs = 3,
				n = 54000,
				d = 784,
				i = 1;
	long		max_steps = -1,
				steps = 0;
	const char *out = NULL;
	bool		bytes = false,
				ab = false;
	float		zero[784] = {0},
				one[784];
	DmlRows8	r8;
	int			sizes[4] = {784, 256, 128, 10};
	DmlNet		net;
	DmlWork		work;
	DmlOptim	o = {0};
	DmlOptimState st;
	DmlRng		rng;
	float	   *X,
			   *y,
			   *Xb,
			   *yb,
			   *grads;
	int		   *idx;
	unsigned char *px,
				lb[60000];
	FILE	   *fi,
			   *fl;

	for (; i < argc - 1 && argv[i][0] == '-'; i += 2)
	{
		if (strcmp(argv[i], "-8") == 0)
		{
			bytes = true;
			i--;
		}
		else if (strcmp(argv[i], "-g") == 0)
		{
			ab = true;
			i--;
		}
		else if (strcmp(argv[i], "-b") == 0)
			B = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "-e") == 0)
			epochs = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "-s") == 0)
			max_steps = atol(argv[i + 1]);
		else if (strcmp(argv[i], "-o") == 0)
			out = argv[i + 1];
		else
			break;
	}
	if (argc - i != 2 || B < 1 || epochs < 1)
	{
		fprintf(stderr, "usage: mlp_epoch [-b BATCH] [-e EPOCHS] [-s STEPS] [-o PARAMS] [-8] [-g] IMAGES LABELS\n");
		return 2;
	}
	X = malloc(sizeof(float) * n * d);
	y = malloc(sizeof(float) * n);
	Xb = malloc(sizeof(float) * B * d);
	yb = malloc(sizeof(float) * B);
	idx = malloc(sizeof(int) * n);
	px = malloc((size_t) n * d);
	fi = fopen(argv[i], "rb");
	fl = fopen(argv[i + 1], "rb");
	if (!X || !y || !Xb || !yb || !idx || !px || !fi || !fl ||
		fseek(fi, 16, SEEK_SET) != 0 || fseek(fl, 8, SEEK_SET) != 0 ||
		fread(px, 1, (size_t) n * d, fi) != (size_t) n * d || fread(lb, 1, n, fl) != (size_t) n)
	{
		fprintf(stderr, "mlp_epoch: cannot read %s or %s\n", argv[i], argv[i + 1]);
		return 1;
	}
	for (long j = 0; j < (long) n * d; j++)
		X[j] = px[j] / 255.0f;
	for (int j = 0; j < n; j++)
		y[j] = lb[j];
	/* the bytes k with divisor 255, mean 0 and scale 1: k / 255, X's values */
	for (int c = 0; c < d; c++)
		one[c] = 1.0f;
	r8 = (DmlRows8) {px, zero, one, 255.0f, 1.0f / 255.0f};
	if (dml_net_alloc(&net, 3, sizes, DML_ACT_RELU, DML_LOSS_SOFTMAX) != DML_OK)
		return 1;
	dml_net_init(&net, 7);
	o.kind = DML_OPT_ADAM;
	o.lr = 0.001f;
	o.beta1 = 0.9f;
	o.beta2 = 0.999f;
	o.eps = 1e-8f;
	st.kind = DML_OPT_ADAM;
	st.n = net.nparams;
	st.t = 0;
	st.s1 = calloc(net.nparams, sizeof(float));
	st.s2 = calloc(net.nparams, sizeof(float));
	grads = malloc(sizeof(float) * net.nparams);
	if (!st.s1 || !st.s2 || !grads || dml_work_alloc(&work, &net, B) != DML_OK)
		return 1;
	printf("OpenBLAS core %s, batch %d\n", openblas_get_corename(), B);
	for (int e = 0; e < epochs && steps != max_steps; e++)
	{
		double		tg = 0,
					tf = 0,
					to = 0,
					loss = 0,
					t0 = dml_clock_cpu_seconds(),
					w;
		int			rows = 0;

		for (int j = 0; j < n; j++)
			idx[j] = j;
		dml_rng_seed(&rng, 1000 + e);
		dml_set_gemm(!(ab && e % 2 == 1));
		dml_shuffle(idx, n, &rng);
		for (int pos = 0; pos < n && steps != max_steps; pos += B, steps++)
		{
			int			c = n - pos < B ? n - pos : B;
			double		a = dml_clock_cpu_seconds(),
						m,
						f;

			if (bytes && e % 2 == 1)
				dml_rows8_gather(&r8, y, d, idx + pos, c, n - pos, Xb, yb);
			else
				dml_gather_rows(X, y, d, idx + pos, c, n - pos, Xb, yb);
			m = dml_clock_cpu_seconds();
			loss += dml_net_gradient(&net, &work, grads, Xb, yb, c, 1.0f / c);
			f = dml_clock_cpu_seconds();
			optim_step(&st, &o, net.params, grads);
			to += dml_clock_cpu_seconds() - f;
			tg += m - a;
			tf += f - m;
			rows += c;
		}
		w = dml_clock_cpu_seconds() - t0;
		printf("epoch %d%s: %d rows, CPU %.1f ms (gather%s %.1f, forward-backward %.1f, adam %.1f); "
			   "%.1f GFLOP/s over the epoch, %.1f in forward-backward; loss %.6f\n",
			   e + 1, ab ? (e % 2 == 1 ? " (sgemm)" : " (dml's products)") : "", rows, 1e3 * w,
			   bytes && e % 2 == 1 ? " from bytes" : "", 1e3 * tg, 1e3 * tf, 1e3 * to,
			   rows * 1007104.0 / w * 1e-9, rows * 1007104.0 / tf * 1e-9, loss / rows);
	}
	if (out)
	{
		FILE	   *f = fopen(out, "wb");

		if (!f || fwrite(net.params, sizeof(float), net.nparams, f) != net.nparams || fclose(f) != 0)
			return 1;
	}
	return 0;
}
