/*-------------------------------------------------------------------------
 *
 * predict.h
 *	  Feature encoding and output decoding shared by row-level predict
 *	  (predict.c) and the relation paths (evaluate.c, predict_table.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_PREDICT_H
#define DML_PREDICT_H

#include "dml.h"

extern bool DmlDatumToDouble(Datum d, Oid typid, double *out);
extern void DmlFeatureInputs(const DmlFeature *f, float *dst, Datum value,
							 bool isnull, Oid typid);
extern void DmlFeatureInputsWide(const DmlFeature *f, float *dst, double *dst64, Datum value,
								 bool isnull, Oid typid);
extern int	DmlPredictedClass(DmlCachedModel *cm, const float *out);
extern double DmlLabelAsDouble(DmlCachedModel *cm, int cls);

#endif							/* DML_PREDICT_H */
