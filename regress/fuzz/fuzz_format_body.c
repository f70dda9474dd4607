/*-------------------------------------------------------------------------
 *
 * fuzz_format_body.c
 *	  The model blob target with a custom mutator that repairs what random
 *	  mutation breaks: the magic, the version, the stated length and the
 *	  CRC-32, and (most of the time) the layer count, codes and sizes.
 *
 * Without it nearly every mutant dies at the length or checksum check, so
 * the shape validation, the float reads and dml_model_predict are barely
 * reached.  One mutant in eight is left as libFuzzer made it, so the
 * rejection paths stay covered here too.  The checks are fuzz_format.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "fuzz_format.c"

size_t		LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t		LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
									size_t max_size, unsigned int seed);

/* xorshift32 on the mutation's seed: which repairs to make */
static uint32_t
body_rand(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* most mutants are kept below this many bytes */
#define BODY_SOFT_MAX 4096

/* bytes a blob of these shapes takes (kernels.h, "The model blob") */
static size_t
body_need(uint32_t nlayers, const int *sizes)
{
	return 24 + 4 * (size_t) (nlayers + 1) +
		4 * (2 * (size_t) sizes[0] + 2 * (size_t) sizes[nlayers] +
			 dml_net_param_count((int) nlayers, sizes)) + 4;
}

/*
 * Repair a mutant in place and return its new size (at most max_size):
 * header constants, then (usually) shapes pulled into range and the body
 * resized to what they need, then the length field and the CRC.
 */
static size_t
body_fixup(uint8_t *data, size_t size, size_t max_size, uint32_t seed)
{
	uint32_t	r = seed | 1;
	uint32_t	nlayers;
	int			sizes[DML_MAX_LAYERS + 1];
	int			shapes_ok = 1;
	size_t		need;

	if (max_size < 28 + 8)
		return size;
	if (size < 28 + 8)
	{
		memset(data + size, 0, 28 + 8 - size);
		size = 28 + 8;
	}
	dml_put_le32(data, DML_FORMAT_MAGIC);
	dml_put_le32(data + 4, DML_FORMAT_VERSION_F32);

	/* pull the header into range three times in four */
	nlayers = dml_get_le32(data + 12);
	if (body_rand(&r) % 4 != 0)
	{
		if (nlayers < 1 || nlayers > DML_MAX_LAYERS)
			nlayers = 1 + nlayers % 4;
		dml_put_le32(data + 12, nlayers);
		dml_put_le32(data + 16, dml_get_le32(data + 16) % (DML_ACT_SIGMOID + 1));
		dml_put_le32(data + 20, dml_get_le32(data + 20) % (DML_LOSS_SOFTMAX + 1));
	}
	if (nlayers < 1 || nlayers > DML_MAX_LAYERS ||
		24 + 4 * (size_t) (nlayers + 1) + 4 > max_size)
		shapes_ok = 0;
	else
	{
		size_t		hdr = 24 + 4 * (size_t) (nlayers + 1);
		int			clamp = body_rand(&r) % 4 != 0;

		if (size < hdr + 4)
		{
			memset(data + size, 0, hdr + 4 - size);
			size = hdr + 4;
		}
		for (uint32_t l = 0; l <= nlayers; l++)
		{
			uint32_t	s = dml_get_le32(data + 24 + 4 * l);

			if (clamp && (s < 1 || s > DML_MAX_WIDTH))
			{
				s = 1 + s % 16;
				dml_put_le32(data + 24 + 4 * l, s);
			}
			if (s < 1 || s > DML_MAX_WIDTH)
				shapes_ok = 0;
			sizes[l] = (int) s;
		}
	}

	/*
	 * Resize the body to what the shapes need, seven times in eight.  Big
	 * blobs cost milliseconds each, so most mutants stay under
	 * BODY_SOFT_MAX: wider shapes are folded down to 1..16 units.
	 */
	if (shapes_ok && body_rand(&r) % 8 != 0)
	{
		size_t		cap = max_size;

		if (body_rand(&r) % 64 != 0 && cap > BODY_SOFT_MAX)
			cap = BODY_SOFT_MAX;
		need = body_need(nlayers, sizes);
		if (need > cap && body_rand(&r) % 4 != 0)
		{
			for (uint32_t l = 0; l <= nlayers; l++)
			{
				sizes[l] = 1 + (sizes[l] - 1) % 16;
				dml_put_le32(data + 24 + 4 * l, (uint32_t) sizes[l]);
			}
			need = body_need(nlayers, sizes);
		}
		if (need <= cap)
		{
			/* new floats: small values, so predictions mostly stay finite */
			if (need > size)
				memset(data + size, 0, need - size);
			for (size_t i = size; i + 4 <= need; i += 4)
			{
				float		f = ((float) (body_rand(&r) % 2001) - 1000.0f) / 500.0f;
				uint32_t	u;

				memcpy(&u, &f, 4);
				dml_put_le32(data + i, u);
			}
			size = need;
		}
	}
	dml_put_le32(data + 8, (uint32_t) size);
	dml_put_le32(data + size - 4, dml_crc32(data, size - 4));
	return size;
}

size_t
LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
						unsigned int seed)
{
	size = LLVMFuzzerMutate(data, size, max_size);
	if (seed % 8 == 0)
		return size;
	return body_fixup(data, size, max_size, seed);
}
