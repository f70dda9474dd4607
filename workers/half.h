/*-------------------------------------------------------------------------
 *
 * half.h
 *	  IEEE binary16 conversions for fp16 gradient compression (half.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_HALF_H
#define DML_HALF_H

#include <stddef.h>
#include <stdint.h>

extern void half_from_float(uint16_t *h, const float *x, size_t n, float scale);
extern void half_to_float(float *x, const uint16_t *h, size_t n, float scale);
extern void half_add(uint16_t *acc, const uint16_t *in, size_t n);

#endif							/* DML_HALF_H */
