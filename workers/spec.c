/*-------------------------------------------------------------------------
 *
 * spec.c
 *	  Parse the job as it came over the control socket (rank 0) and MPI
 *	  (the others): "key value" lines, values escaped (\\, \n, \r, \t);
 *	  the settings through jobspec.h's table.
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker.h"

/* undo the coordinator's escaping, in place */
static void
unescape(char *s)
{
	char	   *w = s;

	for (char *r = s; *r; r++)
	{
		if (*r == '\\' && r[1])
		{
			r++;
			*w++ = *r == 'n' ? '\n' : *r == 'r' ? '\r' : *r == 't' ? '\t' : *r;
		}
		else
			*w++ = *r;
	}
	*w = '\0';
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* sort names bytewise and remember each one's original position */
static void
sort_with_slots(char **names, int n, int *slot)
{
	char	  **orig = malloc(sizeof(char *) * (n ? n : 1));

	memcpy(orig, names, sizeof(char *) * n);
	qsort(names, n, sizeof(char *), cmp_str);
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++)
			if (names[i] == orig[j])
				slot[i] = j;
	free(orig);
}

/* qsort order of int64_t values (label keys) */
int
cmp_int64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a;
	int64_t		y = *(const int64_t *) b;

	return x < y ? -1 : x > y;
}

/*
 * A label's text as its int8 key: the integer itself (label_keys "int"),
 * or 0 and 1 for false and true ("bool").  -1 when the text is not one.
 */
int
label_text_key(const char *label_keys, const char *text, int64_t *key)
{
	char	   *end;

	if (strcmp(label_keys, "bool") == 0)
	{
		if (strcmp(text, "true") != 0 && strcmp(text, "false") != 0)
			return -1;
		*key = strcmp(text, "true") == 0;
		return 0;
	}
	errno = 0;
	*key = strtoll(text, &end, 10);
	return errno != 0 || end == text || *end != '\0' ? -1 : 0;
}

/*
 * Labels that come as int8 keys (dml.pack_rows, or parsed from COPY's
 * text).  class_keys sorted, class_key_index their output index.
 */
static int
classes_as_keys(WorkerSpec *spec)
{
	int64_t    *pairs = malloc(sizeof(int64_t) * 2 * spec->nclasses);

	spec->class_keys = malloc(sizeof(int64_t) * spec->nclasses);
	spec->class_key_index = malloc(sizeof(int) * spec->nclasses);
	if (!pairs || !spec->class_keys || !spec->class_key_index)
		return -1;
	for (int i = 0; i < spec->nclasses; i++)
	{
		if (label_text_key(spec->label_keys, spec->classes[i], &pairs[2 * i]) != 0)
			return -1;
		pairs[2 * i + 1] = spec->class_index[i];
	}
	qsort(pairs, spec->nclasses, 2 * sizeof(int64_t), cmp_int64);
	for (int i = 0; i < spec->nclasses; i++)
	{
		spec->class_keys[i] = pairs[2 * i];
		spec->class_key_index[i] = (int) pairs[2 * i + 1];
	}
	free(pairs);
	return 0;
}

#define GROW(arr, n, type) \
	do { arr = realloc(arr, sizeof(type) * ((n) + 1)); \
		 if (!(arr)) { snprintf(err, errlen, "out of memory"); fclose(f); return -1; } } while (0)

/* a row of jobspec.h's table: store val in its member; 0 when key is none, -1 for a bad value */
static int
read_setting(WorkerSpec *spec, const char *key, char *val)
{
#define GET_INT(name, names) spec->name = atoi(val)
#define GET_DBL(name, names) spec->name = strtod(val, NULL)
#define GET_I64(name, names) spec->name = strtoull(val, NULL, 10)
#define GET_STR(name, names) spec->name = val
#define GET_OPT(name, names) spec->name = val
#define GET_ENUM(name, names) \
	do { \
		int			v_ = dml_job_parse(names, val); \
		if (v_ < 0) \
			return -1; \
		spec->name = v_; \
	} while (0)
#define GET(type, name, stored, names) \
	if (strcmp(key, #name) == 0) \
	{ \
		GET_##type(name, names); \
		return 1; \
	}
	DML_JOB_SETTINGS(GET)
#undef GET
#undef GET_INT
#undef GET_DBL
#undef GET_I64
#undef GET_STR
#undef GET_OPT
#undef GET_ENUM
	return 0;
}

/* parse the serialized job text[len]; 0 on success, else -1 with err filled */
int
spec_parse(WorkerSpec *spec, const char *text, size_t len_text, char *err, size_t errlen)
{
	FILE	   *f = len_text > 0 ? fmemopen((void *) text, len_text, "r") : NULL;
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		len;
	int			ended = 0;
	DmlFeature *cur = NULL;

	memset(spec, 0, sizeof(*spec));
	spec->average_every = 1;
	spec->shared_memory = 1;
	spec->byte_rows = 1;
	spec->amx = 1;
	spec->topk_ratio = 0.01;
	spec->target_name = "target";
	if (f == NULL)
	{
		snprintf(err, errlen, "the job is empty");
		return -1;
	}
	while ((len = getline(&line, &cap, f)) > 0)
	{
		char	   *key = line;
		char	   *val;

		if (line[len - 1] == '\n')
			line[--len] = '\0';
		val = strchr(line, ' ');
		if (val == NULL)
			continue;
		*val++ = '\0';
		unescape(val);
		val = strdup(val);

		switch (read_setting(spec, key, val))
		{
			case 1:
				continue;
			case -1:
				snprintf(err, errlen, "the job's %s \"%s\" is unknown", key, val);
				fclose(f);
				return -1;
		}
		if (strcmp(key, "job") == 0)
			spec->predict = strcmp(val, "predict") == 0;
		else if (strcmp(key, "id") == 0)
			spec->has_id = atoi(val);
		else if (strcmp(key, "id_bytes") == 0)
			spec->id_bytes = atoi(val);
		else if (strcmp(key, "conninfo") == 0)
			spec->conninfo = val;
		else if (strcmp(key, "snapshot") == 0)
			spec->snapshot = val;
		else if (strcmp(key, "role") == 0)
			spec->role = val;
		else if (strcmp(key, "world") == 0)
			spec->world = atoi(val);
		else if (strcmp(key, "outputs") == 0)
			spec->outputs = atoi(val);
		else if (strcmp(key, "hidden") == 0 && spec->nhidden < DML_MAX_LAYERS - 1)
			spec->hidden[spec->nhidden++] = atoi(val);
		else if (strcmp(key, "shared_memory") == 0)
			spec->shared_memory = atoi(val);
		else if (strcmp(key, "byte_rows") == 0)
			spec->byte_rows = atoi(val);
		else if (strcmp(key, "amx") == 0)
			spec->amx = atoi(val);
		else if (strcmp(key, "balance") == 0)
			spec->balance = atoi(val);
		else if (strcmp(key, "resume") == 0)
			spec->resume = atoi(val);
		else if (strcmp(key, "target") == 0)
			spec->classification = strcmp(val, "label") == 0;
		else if (strcmp(key, "target_name") == 0)
			spec->target_name = val;
		else if (strcmp(key, "discover_classes") == 0)
			spec->discover = atoi(val);
		else if (strcmp(key, "load") == 0)
			spec->load_block = strcmp(val, "block") == 0;
		else if (strcmp(key, "label_keys") == 0)
			spec->label_keys = val;
		else if (strcmp(key, "class") == 0)
		{
			GROW(spec->classes, spec->nclasses, char *);
			spec->classes[spec->nclasses++] = val;
		}
		else if (strncmp(key, "feature_", 8) == 0)
		{
			GROW(spec->features, spec->nfeatures, DmlFeature);
			cur = &spec->features[spec->nfeatures++];
			memset(cur, 0, sizeof(*cur));
			if (strcmp(key, "feature_num") == 0)
			{
				cur->kind = DML_FEAT_NUM;
				cur->width = 1;
				cur->name = val;
			}
			else if (strcmp(key, "feature_vec") == 0)
			{
				char	   *sp = strchr(val, ' ');

				cur->kind = DML_FEAT_VEC;
				cur->width = atoi(val);
				cur->name = sp ? sp + 1 : val;
			}
			else
			{
				cur->kind = DML_FEAT_CAT;
				cur->name = val;
			}
		}
		else if (strcmp(key, "level") == 0 && cur && cur->kind == DML_FEAT_CAT)
		{
			GROW(cur->levels, cur->nlevels, char *);
			cur->levels[cur->nlevels++] = val;
		}
		else if (strcmp(key, "slice") == 0)
		{
			SpecSlice  *s;
			char	   *p = val;

			GROW(spec->slices, spec->nslices, SpecSlice);
			s = &spec->slices[spec->nslices++];
			s->rank = (int) strtol(p, &p, 10);
			s->whole = (int) strtol(p, &p, 10);
			s->shard = 0;
			s->query = p + (*p == ' ');
		}
		else if (strcmp(key, "shard_slice") == 0)
		{
			/* "server rank query": a slice read from shard server k */
			SpecSlice  *s;
			char	   *p = val;

			GROW(spec->slices, spec->nslices, SpecSlice);
			s = &spec->slices[spec->nslices++];
			s->shard = (int) strtol(p, &p, 10);
			s->rank = (int) strtol(p, &p, 10);
			s->whole = 0;
			s->query = p + (*p == ' ');
			if (s->shard < 1 || s->shard > spec->nshards)
			{
				snprintf(err, errlen, "the job has a slice of an unknown shard server");
				fclose(f);
				return -1;
			}
		}
		else if (strcmp(key, "shard_server") == 0 || strcmp(key, "shard_name") == 0 ||
				 strcmp(key, "shard_snapshot") == 0)
		{
			/* "k value": shard servers are numbered 1, 2, ... in order */
			char	   *p = val;
			int			k = (int) strtol(p, &p, 10);

			p += (*p == ' ');
			if (strcmp(key, "shard_server") == 0 && k == spec->nshards + 1)
			{
				GROW(spec->shards, spec->nshards, SpecShard);
				memset(&spec->shards[spec->nshards], 0, sizeof(SpecShard));
				spec->nshards++;
			}
			if (k < 1 || k > spec->nshards)
			{
				snprintf(err, errlen, "the job names an unknown shard server");
				fclose(f);
				return -1;
			}
			if (strcmp(key, "shard_server") == 0)
				spec->shards[k - 1].conninfo = p;
			else if (strcmp(key, "shard_name") == 0)
				spec->shards[k - 1].name = p;
			else
				spec->shards[k - 1].snapshot = p;
		}
		else if (strcmp(key, "end") == 0)
			ended = 1;
	}
	free(line);
	fclose(f);
	if (!ended)
	{
		snprintf(err, errlen, "the job is incomplete");
		return -1;
	}

	/* lookup tables: sorted labels and levels with their output slots */
	spec->class_index = malloc(sizeof(int) * (spec->nclasses ? spec->nclasses : 1));
	sort_with_slots(spec->classes, spec->nclasses, spec->class_index);
	if (spec->label_keys && spec->nclasses > 0 && classes_as_keys(spec) != 0)
	{
		snprintf(err, errlen, "the job has a label that is not an %s", spec->label_keys);
		return -1;
	}
	spec->ninputs = 0;
	for (int i = 0; i < spec->nfeatures; i++)
	{
		DmlFeature *ft = &spec->features[i];

		if (ft->kind == DML_FEAT_CAT)
		{
			ft->width = ft->nlevels > 0 ? ft->nlevels : 1;
			ft->level_slot = malloc(sizeof(int) * (ft->nlevels ? ft->nlevels : 1));
			sort_with_slots(ft->levels, ft->nlevels, ft->level_slot);
		}
		ft->offset = spec->ninputs;
		spec->ninputs += ft->width;
	}
	if (spec->world < 1 || spec->ninputs < 1 || (spec->outputs < 1 && !spec->discover) ||
		spec->nslices < 1 || (spec->discover && (!spec->label_keys || !spec->classification)) ||
		spec->servers < 0 || spec->servers >= spec->world || spec->staleness < 0 ||
		spec->average_every < 1 || !(spec->topk_ratio > 0 && spec->topk_ratio <= 1))
	{
		snprintf(err, errlen, "the job is inconsistent");
		return -1;
	}
	return 0;
}
