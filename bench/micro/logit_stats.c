/*-------------------------------------------------------------------------
 *
 * logit_stats.c
 *	  One pass of the float64 Newton polish (kernels/logit.c's
 *	  dml_logit_stats: gradient, Hessian and log-likelihood over the rows)
 *	  on seeded random rows, timed in this process's CPU seconds.
 *
 *	  logit_stats [-n ROWS] [-d COLS] [-r REPS]     (1000000 x 20, 7 reps)
 *
 *	  Prints the fastest pass and the results' first values, so that two
 *	  builds (another revision's logit.c linked in its place) can be
 *	  compared for time and for the same sums.
 *
 *-------------------------------------------------------------------------
 */
#include "clock.h"
#include "kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
	int64_t		n = 1000000;
	int			d = 20,
				reps = 7,
				opt;
	double	   *X,
			   *y,
			   *beta,
			   *g,
			   *H,
				best = 1e30,
				nll = 0;
	DmlRng		rng;

	while ((opt = getopt(argc, argv, "n:d:r:")) != -1)
	{
		if (opt == 'n')
			n = atoll(optarg);
		else if (opt == 'd')
			d = atoi(optarg);
		else if (opt == 'r')
			reps = atoi(optarg);
		else
		{
			fprintf(stderr, "usage: logit_stats [-n ROWS] [-d COLS] [-r REPS]\n");
			return 2;
		}
	}
	X = malloc(sizeof(double) * n * d);
	y = malloc(sizeof(double) * n);
	beta = malloc(sizeof(double) * (d + 1));
	g = malloc(sizeof(double) * (d + 1));
	H = malloc(sizeof(double) * (d + 1) * (d + 1));
	if (!X || !y || !beta || !g || !H)
		return 1;
	dml_rng_seed(&rng, 20);
	for (int64_t i = 0; i < n * d; i++)
		X[i] = dml_rng_uniform(&rng) - 0.5;
	for (int64_t i = 0; i < n; i++)
		y[i] = dml_rng_uniform(&rng) < 0.5;
	for (int c = 0; c <= d; c++)
		beta[c] = 0.1 * c - 1;
	for (int r = 0; r < reps; r++)
	{
		double		t;

		memset(g, 0, sizeof(double) * (d + 1));
		memset(H, 0, sizeof(double) * (d + 1) * (d + 1));
		t = dml_clock_cpu_seconds();
		nll = dml_logit_stats(g, H, X, y, NULL, n, d, beta);
		t = dml_clock_cpu_seconds() - t;
		best = t < best ? t : best;
	}
	printf("%lld x %d: fastest of %d passes %.1f ms CPU; nll %.17g g[0] %.17g H[0] %.17g\n",
		   (long long) n, d, reps, best * 1e3, nll, g[0], H[0]);
	return 0;
}
