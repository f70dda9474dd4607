/*-------------------------------------------------------------------------
 *
 * metrics.c
 *	  Training and evaluation metrics as sums that merge across ranks:
 *	  MSE, MAE and R^2 for regression; accuracy, log loss, macro F1 and the
 *	  confusion matrix for classification.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

DmlStatus
dml_metrics_init(DmlMetrics *m, DmlLoss loss, int K)
{
	m->loss = loss;
	m->K = loss == DML_LOSS_BCE ? 2 : K;
	m->nvalues = DML_MET_CONF + (loss == DML_LOSS_MSE ? 0 : (size_t) m->K * m->K);
	m->v = calloc(m->nvalues, sizeof(double));
	return m->v ? DML_OK : DML_ERR_NOMEM;
}

void
dml_metrics_free(DmlMetrics *m)
{
	free(m->v);
	m->v = NULL;
}

void
dml_metrics_reset(DmlMetrics *m)
{
	memset(m->v, 0, m->nvalues * sizeof(double));
}

/* probabilities below this are clipped in the log loss, as scikit-learn does */
#define PROB_EPS 1e-15

void
dml_metrics_add(DmlMetrics *m, const float *pred, const float *y, int B)
{
	double	   *v = m->v;
	int			K = m->K;

	for (int b = 0; b < B; b++)
	{
		v[DML_MET_N] += 1.0;
		if (m->loss == DML_LOSS_MSE)
		{
			/* regression metrics on the first output */
			double		e = (double) pred[(size_t) b * K] - y[(size_t) b * K];

			v[DML_MET_LOSS] += e * e;
			v[DML_MET_ABS] += fabs(e);
			v[DML_MET_SQ] += e * e;
			v[DML_MET_Y] += y[(size_t) b * K];
			v[DML_MET_YY] += (double) y[(size_t) b * K] * y[(size_t) b * K];
		}
		else
		{
			int			label = (int) y[b];
			int			guess = 0;
			double		p;

			/* labels are class indexes; anything else is not counted */
			if (!(y[b] >= 0.0f && y[b] < (float) K))
			{
				v[DML_MET_N] -= 1.0;
				continue;
			}
			if (m->loss == DML_LOSS_BCE)
			{
				double		p1 = pred[b];

				guess = p1 >= 0.5;
				p = label ? p1 : 1.0 - p1;
			}
			else
			{
				const float *row = pred + (size_t) b * K;

				for (int k = 1; k < K; k++)
					if (row[k] > row[guess])
						guess = k;
				p = row[label];
			}
			if (p < PROB_EPS)
				p = PROB_EPS;
			v[DML_MET_LOSS] += -log(p);
			v[DML_MET_CONF + (size_t) label * K + guess] += 1.0;
		}
	}
}

double
dml_metrics_loss(const DmlMetrics *m)
{
	return m->v[DML_MET_N] > 0 ? m->v[DML_MET_LOSS] / m->v[DML_MET_N] : NAN;
}

static double
r2(const DmlMetrics *m)
{
	double		n = m->v[DML_MET_N];
	double		sst = m->v[DML_MET_YY] - m->v[DML_MET_Y] * m->v[DML_MET_Y] / n;

	return sst > 0 ? 1.0 - m->v[DML_MET_SQ] / sst : NAN;
}

static double
accuracy(const DmlMetrics *m)
{
	double		right = 0;

	for (int k = 0; k < m->K; k++)
		right += m->v[DML_MET_CONF + (size_t) k * m->K + k];
	return m->v[DML_MET_N] > 0 ? right / m->v[DML_MET_N] : NAN;
}

/* R^2 for regression, accuracy for classification */
double
dml_metrics_score(const DmlMetrics *m)
{
	return m->loss == DML_LOSS_MSE ? r2(m) : accuracy(m);
}

/* F1 averaged over classes that occur in truth or prediction */
static double
macro_f1(const DmlMetrics *m)
{
	int			K = m->K;
	const double *c = m->v + DML_MET_CONF;
	double		sum = 0;
	int			counted = 0;

	for (int k = 0; k < K; k++)
	{
		double		tp = c[(size_t) k * K + k],
					actual = 0,
					predicted = 0;

		for (int j = 0; j < K; j++)
		{
			actual += c[(size_t) k * K + j];
			predicted += c[(size_t) j * K + k];
		}
		if (actual + predicted == 0)
			continue;
		sum += 2 * tp / (actual + predicted);
		counted++;
	}
	return counted ? sum / counted : NAN;
}

/* JSON numbers cannot be NaN or infinite: write null */
static void
add_num(char *buf, size_t len, size_t *pos, const char *key, double x, int comma)
{
	if (isfinite(x))
		dml_json_add(buf, len, pos, "%s\"%s\": %.10g", comma ? ", " : "", key, x);
	else
		dml_json_add(buf, len, pos, "%s\"%s\": null", comma ? ", " : "", key);
}

size_t
dml_metrics_json(const DmlMetrics *m, char *buf, size_t len)
{
	size_t		pos = 0;
	double		n = m->v[DML_MET_N];

	if (len > 0)
		buf[0] = '\0';
	dml_json_add(buf, len, &pos, "{");
	add_num(buf, len, &pos, "rows", n, 0);
	if (m->loss == DML_LOSS_MSE)
	{
		add_num(buf, len, &pos, "mse", n > 0 ? m->v[DML_MET_SQ] / n : NAN, 1);
		add_num(buf, len, &pos, "mae", n > 0 ? m->v[DML_MET_ABS] / n : NAN, 1);
		add_num(buf, len, &pos, "r2", r2(m), 1);
	}
	else
	{
		add_num(buf, len, &pos, "accuracy", accuracy(m), 1);
		add_num(buf, len, &pos, "log_loss", dml_metrics_loss(m), 1);
		add_num(buf, len, &pos, "macro_f1", macro_f1(m), 1);
		dml_json_add(buf, len, &pos, ", \"confusion\": [");
		for (int k = 0; k < m->K; k++)
		{
			dml_json_add(buf, len, &pos, "%s[", k ? ", " : "");
			for (int j = 0; j < m->K; j++)
				dml_json_add(buf, len, &pos, "%s%.0f", j ? ", " : "",
					m->v[DML_MET_CONF + (size_t) k * m->K + j]);
			dml_json_add(buf, len, &pos, "]");
		}
		dml_json_add(buf, len, &pos, "]");
	}
	dml_json_add(buf, len, &pos, "}");
	return pos + 1;
}
