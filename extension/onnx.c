/*-------------------------------------------------------------------------
 *
 * onnx.c
 *	  dml models to ONNX graphs and back, through protobuf-c's messages of
 *	  Debian's onnx.proto (see onnx.h for the graphs).
 *
 * Reading trusts nothing: protobuf-c unpacks (and rejects what does not
 * parse), then every tensor's dims are bounded and checked against its
 * data before a float is read, every shape against the layer before it,
 * and the path from the output back to the input may be no longer than
 * the node list.  It is fuzzed by regress/fuzz/fuzz_onnx.c.
 *
 *-------------------------------------------------------------------------
 */
#include "onnx.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"

#define FAIL(st, ...) \
	do { snprintf(errbuf, errlen, __VA_ARGS__); return (st); } while (0)

/* ---------------------------------------------------------------------
 * Allocations of one call, freed together
 * --------------------------------------------------------------------- */

typedef struct Arena
{
	void	  **ptrs;
	size_t		n;
	size_t		cap;
	int			oom;
} Arena;

static void *
arena_alloc(Arena *a, size_t size)
{
	void	   *p;

	if (a->oom)
		return NULL;
	if (a->n == a->cap)
	{
		size_t		cap = a->cap ? 2 * a->cap : 64;
		void	  **np = realloc(a->ptrs, cap * sizeof(void *));

		if (np == NULL)
		{
			a->oom = 1;
			return NULL;
		}
		a->ptrs = np;
		a->cap = cap;
	}
	p = calloc(1, size ? size : 1);
	if (p == NULL)
	{
		a->oom = 1;
		return NULL;
	}
	a->ptrs[a->n++] = p;
	return p;
}

static void
arena_free(Arena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->ptrs[i]);
	free(a->ptrs);
	memset(a, 0, sizeof(*a));
}

static char *
arena_strdup(Arena *a, const char *s)
{
	size_t		len = strlen(s);
	char	   *p = arena_alloc(a, len + 1);

	if (p)
		memcpy(p, s, len + 1);
	return p;
}

/* ---------------------------------------------------------------------
 * Export
 * --------------------------------------------------------------------- */

#define MAX_NODES	(2 * DML_MAX_LAYERS + 16)
#define MAX_INITS	(2 * DML_MAX_LAYERS + 16)

typedef struct GraphBuilder
{
	Arena	   *a;
	Onnx__NodeProto *nodes[MAX_NODES];
	int			nnodes;
	Onnx__TensorProto *inits[MAX_INITS];
	int			ninits;
} GraphBuilder;

/*
 * An initializer (little-endian raw data), dims d0 or (d0, d1) when d1 >= 0:
 * float from v, or double from v64 when it is not NULL (a float64 model's)
 */
static void
add_init(GraphBuilder *g, const char *name, const float *v, const double *v64,
		 int64_t d0, int64_t d1)
{
	Onnx__TensorProto *t = arena_alloc(g->a, sizeof(*t));
	size_t		n = (size_t) d0 * (size_t) (d1 >= 0 ? d1 : 1);
	size_t		width = v64 ? 8 : 4;
	unsigned char *raw = arena_alloc(g->a, width * n);
	int64_t    *dims = arena_alloc(g->a, 2 * sizeof(int64_t));

	if (!t || !raw || !dims)
		return;
	onnx__tensor_proto__init(t);
	t->name = arena_strdup(g->a, name);
	dims[0] = d0;
	dims[1] = d1;
	t->n_dims = d1 >= 0 ? 2 : 1;
	t->dims = dims;
	t->has_data_type = 1;
	t->data_type = v64 ? ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
	for (size_t i = 0; i < n; i++)
	{
		if (v64)
		{
			uint64_t	u;

			memcpy(&u, &v64[i], 8);
			dml_put_le32(raw + 8 * i, (uint32_t) u);
			dml_put_le32(raw + 8 * i + 4, (uint32_t) (u >> 32));
		}
		else
		{
			uint32_t	u;

			memcpy(&u, &v[i], 4);
			dml_put_le32(raw + 4 * i, u);
		}
	}
	t->has_raw_data = 1;
	t->raw_data.len = width * n;
	t->raw_data.data = raw;
	g->inits[g->ninits++] = t;
}

/* a 1-D string initializer */
static void
add_string_init(GraphBuilder *g, const char *name, const char *const *s, int n)
{
	Onnx__TensorProto *t = arena_alloc(g->a, sizeof(*t));
	ProtobufCBinaryData *data = arena_alloc(g->a, n * sizeof(ProtobufCBinaryData));
	int64_t    *dims = arena_alloc(g->a, sizeof(int64_t));

	if (!t || !data || !dims)
		return;
	onnx__tensor_proto__init(t);
	t->name = arena_strdup(g->a, name);
	dims[0] = n;
	t->n_dims = 1;
	t->dims = dims;
	t->has_data_type = 1;
	t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__STRING;
	for (int i = 0; i < n; i++)
	{
		data[i].len = strlen(s[i]);
		data[i].data = (uint8_t *) arena_strdup(g->a, s[i]);
	}
	t->n_string_data = n;
	t->string_data = data;
	g->inits[g->ninits++] = t;
}

/* an integer attribute */
static Onnx__AttributeProto *
attr_int(GraphBuilder *g, const char *name, int64_t v)
{
	Onnx__AttributeProto *at = arena_alloc(g->a, sizeof(*at));

	if (!at)
		return NULL;
	onnx__attribute_proto__init(at);
	at->name = arena_strdup(g->a, name);
	at->has_type = 1;
	at->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
	at->has_i = 1;
	at->i = v;
	return at;
}

/* a node op(inputs...) -> output, with up to two integer attributes */
static void
add_node(GraphBuilder *g, const char *op, const char *output, int nin,
		 const char *in0, const char *in1, const char *in2,
		 Onnx__AttributeProto *at0, Onnx__AttributeProto *at1)
{
	Onnx__NodeProto *nd = arena_alloc(g->a, sizeof(*nd));
	char	  **ins = arena_alloc(g->a, 3 * sizeof(char *));
	char	  **outs = arena_alloc(g->a, sizeof(char *));
	Onnx__AttributeProto **ats = arena_alloc(g->a, 2 * sizeof(*ats));
	const char *in[3] = {in0, in1, in2};
	char		name[64];

	if (!nd || !ins || !outs || !ats)
		return;
	onnx__node_proto__init(nd);
	for (int i = 0; i < nin; i++)
		ins[i] = arena_strdup(g->a, in[i]);
	nd->n_input = nin;
	nd->input = ins;
	outs[0] = arena_strdup(g->a, output);
	nd->n_output = 1;
	nd->output = outs;
	nd->op_type = arena_strdup(g->a, op);
	snprintf(name, sizeof(name), "%s_%d", op, g->nnodes);
	nd->name = arena_strdup(g->a, name);
	if (at0)
		ats[nd->n_attribute++] = at0;
	if (at1)
		ats[nd->n_attribute++] = at1;
	nd->attribute = ats;
	g->nodes[g->nnodes++] = nd;
}

/* a graph input or output: a tensor of elem_type, (N) or (N, d1) when d1 > 0 */
static Onnx__ValueInfoProto *
value_info(Arena *a, const char *name, int elem_type, int64_t d1)
{
	Onnx__ValueInfoProto *vi = arena_alloc(a, sizeof(*vi));
	Onnx__TypeProto *tp = arena_alloc(a, sizeof(*tp));
	Onnx__TypeProto__Tensor *tt = arena_alloc(a, sizeof(*tt));
	Onnx__TensorShapeProto *sh = arena_alloc(a, sizeof(*sh));
	Onnx__TensorShapeProto__Dimension **dims = arena_alloc(a, 2 * sizeof(*dims));
	Onnx__TensorShapeProto__Dimension *d0 = arena_alloc(a, sizeof(*d0));
	Onnx__TensorShapeProto__Dimension *dd1 = arena_alloc(a, sizeof(*dd1));

	if (!vi || !tp || !tt || !sh || !dims || !d0 || !dd1)
		return NULL;
	onnx__value_info_proto__init(vi);
	onnx__type_proto__init(tp);
	onnx__type_proto__tensor__init(tt);
	onnx__tensor_shape_proto__init(sh);
	onnx__tensor_shape_proto__dimension__init(d0);
	onnx__tensor_shape_proto__dimension__init(dd1);
	d0->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
	d0->dim_param = arena_strdup(a, "N");
	dd1->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
	dd1->dim_value = d1;
	dims[0] = d0;
	dims[1] = dd1;
	sh->n_dim = d1 > 0 ? 2 : 1;
	sh->dim = dims;
	tt->has_elem_type = 1;
	tt->elem_type = elem_type;
	tt->shape = sh;
	tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
	tp->tensor_type = tt;
	vi->name = arena_strdup(a, name);
	vi->type = tp;
	return vi;
}

static const char *
act_op(DmlAct act)
{
	switch (act)
	{
		case DML_ACT_IDENTITY:
			return NULL;
		case DML_ACT_RELU:
			return "Relu";
		case DML_ACT_TANH:
			return "Tanh";
		case DML_ACT_SIGMOID:
			return "Sigmoid";
		default:
			return NULL;
	}
}

/* write the graph of m */
DmlStatus
dml_onnx_write(const DmlModel *m, const DmlOnnxExport *info,
			   unsigned char **out, size_t *outlen, char *errbuf, size_t errlen)
{
	const DmlNet *net = &m->net;
	int			C = net->sizes[0];
	int			K = net->sizes[net->nlayers];
	Arena		a = {0};
	GraphBuilder g;
	Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
	Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
	Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT;
	Onnx__OperatorSetIdProto *opsets[1] = {&opset};
	Onnx__ValueInfoProto *inputs[1];
	Onnx__ValueInfoProto *outputs[3];
	Onnx__StringStringEntryProto **meta;
	char		cur[32],
				next[32];
	float		one = 1.0f,
				half = 0.5f;
	double		one64 = 1.0,
				half64 = 0.5;
	size_t		size;
	unsigned char *buf;
	bool		classifier = net->loss != DML_LOSS_MSE;
	/* a float64 model's graph computes in double, so it answers as dml_predict does */
	bool		wide = m->precision == 64;
	int			elem = wide ? ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;

	if (classifier && (info->classes == NULL ||
					   info->nclasses != (net->loss == DML_LOSS_BCE ? 2 : K)))
		FAIL(DML_ERR_ARG, "a classifier with %d outputs needs %d class labels, not %d",
			 K, net->loss == DML_LOSS_BCE ? 2 : K, info->nclasses);
	memset(&g, 0, sizeof(g));
	g.a = &a;

	add_init(&g, "in_mean", m->in_mean, wide ? m->in_mean64 : NULL, C, -1);
	add_init(&g, "in_scale", m->in_scale, wide ? m->in_scale64 : NULL, C, -1);
	add_node(&g, "Sub", "centered", 2, "features", "in_mean", NULL, NULL, NULL);
	add_node(&g, "Mul", "standardized", 2, "centered", "in_scale", NULL, NULL, NULL);
	strcpy(cur, "standardized");
	for (int l = 0; l < net->nlayers; l++)
	{
		char		w[16],
					b[16];

		snprintf(w, sizeof(w), "W%d", l);
		snprintf(b, sizeof(b), "b%d", l);
		/* W (OC, C) as dml keeps it: Gemm with transB = 1 */
		add_init(&g, w, net->params + dml_net_weight_offset(net, l),
				 wide ? m->params64 + dml_net_weight_offset(net, l) : NULL,
				 net->sizes[l + 1], net->sizes[l]);
		add_init(&g, b, net->params + dml_net_bias_offset(net, l),
				 wide ? m->params64 + dml_net_bias_offset(net, l) : NULL, net->sizes[l + 1], -1);
		snprintf(next, sizeof(next), "z%d", l);
		add_node(&g, "Gemm", next, 3, cur, w, b, attr_int(&g, "transB", 1), NULL);
		strcpy(cur, next);
		if (l < net->nlayers - 1 && act_op(net->act) != NULL)
		{
			snprintf(next, sizeof(next), "h%d", l);
			add_node(&g, act_op(net->act), next, 1, cur, NULL, NULL, NULL, NULL);
			strcpy(cur, next);
		}
	}

	switch (net->loss)
	{
		case DML_LOSS_MSE:
			add_init(&g, "out_scale", m->out_scale, wide ? m->out_scale64 : NULL, K, -1);
			add_init(&g, "out_mean", m->out_mean, wide ? m->out_mean64 : NULL, K, -1);
			add_node(&g, "Mul", "scaled", 2, cur, "out_scale", NULL, NULL, NULL);
			add_node(&g, "Add", "prediction", 2, "scaled", "out_mean", NULL, NULL, NULL);
			outputs[0] = value_info(&a, "prediction", elem, K);
			graph.n_output = 1;
			break;
		case DML_LOSS_BCE:
			add_init(&g, "one", &one, wide ? &one64 : NULL, 1, -1);
			add_init(&g, "half", &half, wide ? &half64 : NULL, 1, -1);
			add_string_init(&g, "classes", info->classes, 2);
			add_node(&g, "Sigmoid", "probability", 1, cur, NULL, NULL, NULL, NULL);
			add_node(&g, "Sub", "probability0", 2, "one", "probability", NULL, NULL, NULL);
			add_node(&g, "Concat", "probabilities", 2, "probability0", "probability", NULL,
					 attr_int(&g, "axis", 1), NULL);
			/* dml's rule: class 1 from probability 0.5 on */
			add_node(&g, "GreaterOrEqual", "is_class1", 2, "probability", "half", NULL, NULL, NULL);
			add_node(&g, "Cast", "class_index", 1, "is_class1", NULL, NULL,
					 attr_int(&g, "to", ONNX__TENSOR_PROTO__DATA_TYPE__INT64), NULL);
			add_node(&g, "Gather", "label", 2, "classes", "class_index", NULL,
					 attr_int(&g, "axis", 0), NULL);
			outputs[0] = value_info(&a, "probability", elem, 1);
			outputs[1] = value_info(&a, "probabilities", elem, 2);
			outputs[2] = value_info(&a, "label", ONNX__TENSOR_PROTO__DATA_TYPE__STRING, 1);
			graph.n_output = 3;
			break;
		case DML_LOSS_SOFTMAX:
			add_string_init(&g, "classes", info->classes, K);
			add_node(&g, "Softmax", "probabilities", 1, cur, NULL, NULL,
					 attr_int(&g, "axis", 1), NULL);
			add_node(&g, "ArgMax", "class_index", 1, "probabilities", NULL, NULL,
					 attr_int(&g, "axis", 1), attr_int(&g, "keepdims", 1));
			add_node(&g, "Gather", "label", 2, "classes", "class_index", NULL,
					 attr_int(&g, "axis", 0), NULL);
			outputs[0] = value_info(&a, "probabilities", elem, K);
			outputs[1] = value_info(&a, "label", ONNX__TENSOR_PROTO__DATA_TYPE__STRING, 1);
			graph.n_output = 2;
			break;
	}
	inputs[0] = value_info(&a, "features", elem, C);

	meta = arena_alloc(&a, (info->nmeta + 1) * sizeof(*meta));
	for (int i = 0; meta && i < info->nmeta; i++)
	{
		meta[i] = arena_alloc(&a, sizeof(**meta));
		if (!meta[i])
			break;
		onnx__string_string_entry_proto__init(meta[i]);
		meta[i]->key = arena_strdup(&a, info->meta_keys[i]);
		meta[i]->value = arena_strdup(&a, info->meta_values[i]);
	}
	if (a.oom)
	{
		arena_free(&a);
		FAIL(DML_ERR_NOMEM, "out of memory building an ONNX graph");
	}

	graph.name = "dml";
	graph.n_node = g.nnodes;
	graph.node = g.nodes;
	graph.n_initializer = g.ninits;
	graph.initializer = g.inits;
	graph.n_input = 1;
	graph.input = inputs;
	graph.output = outputs;
	opset.domain = "";
	opset.has_version = 1;
	opset.version = DML_ONNX_OPSET;
	model.has_ir_version = 1;
	model.ir_version = DML_ONNX_IR_VERSION;
	model.n_opset_import = 1;
	model.opset_import = opsets;
	model.producer_name = "dml";
	model.producer_version = "1.1";
	model.doc_string = (char *) info->doc;
	model.graph = &graph;
	model.n_metadata_props = info->nmeta;
	model.metadata_props = meta;

	size = protobuf_c_message_get_packed_size(&model.base);
	buf = malloc(size ? size : 1);
	if (buf == NULL)
	{
		arena_free(&a);
		FAIL(DML_ERR_NOMEM, "out of memory for an ONNX graph of %zu bytes", size);
	}
	protobuf_c_message_pack(&model.base, buf);
	arena_free(&a);
	*out = buf;
	*outlen = size;
	return DML_OK;
}

/* ---------------------------------------------------------------------
 * Import
 * --------------------------------------------------------------------- */

#define MAX_DIMS		8
#define MAX_ELEMENTS	((int64_t) 1 << 28)

/* a constant tensor's values, float or double, as doubles */
typedef struct Const
{
	int			ndims;
	int64_t		dims[MAX_DIMS];
	int64_t		n;
	double	   *v;				/* in the arena */
} Const;

typedef struct Reader
{
	Arena		a;
	Onnx__GraphProto *g;
	int			wide;			/* the input is double: a float64 model if it can be */
	char	   *errbuf;
	size_t		errlen;
} Reader;

#define RFAIL(...) \
	do { snprintf(r->errbuf, r->errlen, __VA_ARGS__); return DML_ERR_FORMAT; } while (0)

static float
le_float(const uint8_t *p)
{
	uint32_t	u = dml_get_le32(p);
	float		f;

	memcpy(&f, &u, 4);
	return f;
}

static double
le_double(const uint8_t *p)
{
	uint64_t	u = 0;
	double		d;

	for (int i = 7; i >= 0; i--)
		u = (u << 8) | p[i];
	memcpy(&d, &u, 8);
	return d;
}

/* a TensorProto's values as doubles, every size checked first */
static DmlStatus
tensor_floats(Reader *r, const Onnx__TensorProto *t, const char *what, Const *c)
{
	int64_t		n = 1;

	if (t->n_external_data > 0 ||
		(t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL))
		RFAIL("tensor \"%s\" keeps its data in an external file; export it with the data inside the model",
			  what);
	if (t->n_dims > MAX_DIMS)
		RFAIL("tensor \"%s\" has %zu dimensions", what, t->n_dims);
	c->ndims = (int) t->n_dims;
	for (size_t i = 0; i < t->n_dims; i++)
	{
		if (t->dims[i] < 0 || t->dims[i] > MAX_ELEMENTS)
			RFAIL("tensor \"%s\" has dimension %lld", what, (long long) t->dims[i]);
		c->dims[i] = t->dims[i];
		n *= t->dims[i];
		if (n > MAX_ELEMENTS)
			RFAIL("tensor \"%s\" has more than %lld elements", what, (long long) MAX_ELEMENTS);
	}
	c->n = n;
	c->v = arena_alloc(&r->a, (size_t) n * sizeof(double));
	if (c->v == NULL)
		return DML_ERR_NOMEM;
	if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
	{
		if (t->has_raw_data)
		{
			if (t->raw_data.len != (size_t) n * 4)
				RFAIL("tensor \"%s\" has %zu bytes of data for %lld floats", what,
					  t->raw_data.len, (long long) n);
			for (int64_t i = 0; i < n; i++)
				c->v[i] = le_float(t->raw_data.data + 4 * i);
		}
		else
		{
			if (t->n_float_data != (size_t) n)
				RFAIL("tensor \"%s\" has %zu values for %lld elements", what,
					  t->n_float_data, (long long) n);
			for (int64_t i = 0; i < n; i++)
				c->v[i] = t->float_data[i];
		}
	}
	else if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE)
	{
		if (t->has_raw_data)
		{
			if (t->raw_data.len != (size_t) n * 8)
				RFAIL("tensor \"%s\" has %zu bytes of data for %lld doubles", what,
					  t->raw_data.len, (long long) n);
			for (int64_t i = 0; i < n; i++)
				c->v[i] = le_double(t->raw_data.data + 8 * i);
		}
		else
		{
			if (t->n_double_data != (size_t) n)
				RFAIL("tensor \"%s\" has %zu values for %lld elements", what,
					  t->n_double_data, (long long) n);
			for (int64_t i = 0; i < n; i++)
				c->v[i] = t->double_data[i];
		}
	}
	else
		RFAIL("tensor \"%s\" has element type %d; dml reads float and double weights",
			  what, (int) t->data_type);
	for (int64_t i = 0; i < n; i++)
		if (!isfinite(c->v[i]))
			RFAIL("tensor \"%s\" holds a value that is not finite", what);
	return DML_OK;
}

/* the attribute of a node by name, or NULL */
static const Onnx__AttributeProto *
attribute(const Onnx__NodeProto *nd, const char *name)
{
	for (size_t i = 0; i < nd->n_attribute; i++)
		if (nd->attribute[i] && nd->attribute[i]->name && strcmp(nd->attribute[i]->name, name) == 0)
			return nd->attribute[i];
	return NULL;
}

static int64_t
attr_i(const Onnx__NodeProto *nd, const char *name, int64_t dflt)
{
	const Onnx__AttributeProto *at = attribute(nd, name);

	return at && at->has_i ? at->i : dflt;
}

static float
attr_f(const Onnx__NodeProto *nd, const char *name, float dflt)
{
	const Onnx__AttributeProto *at = attribute(nd, name);

	return at && at->has_f ? at->f : dflt;
}

static const char *
op_of(const Onnx__NodeProto *nd)
{
	return nd->op_type ? nd->op_type : "(no op_type)";
}

/* the constant named name (an initializer or a Constant node's output), or NULL */
static const Onnx__TensorProto *
find_const(Reader *r, const char *name)
{
	Onnx__GraphProto *g = r->g;

	if (name == NULL || name[0] == '\0')
		return NULL;
	for (size_t i = 0; i < g->n_initializer; i++)
		if (g->initializer[i] && g->initializer[i]->name &&
			strcmp(g->initializer[i]->name, name) == 0)
			return g->initializer[i];
	for (size_t i = 0; i < g->n_node; i++)
	{
		const Onnx__NodeProto *nd = g->node[i];

		if (nd && nd->op_type && strcmp(nd->op_type, "Constant") == 0 &&
			nd->n_output == 1 && nd->output[0] && strcmp(nd->output[0], name) == 0)
		{
			const Onnx__AttributeProto *at = attribute(nd, "value");

			return at ? at->t : NULL;
		}
	}
	return NULL;
}

/* constant input i of node nd as floats */
static DmlStatus
const_input(Reader *r, const Onnx__NodeProto *nd, size_t i, Const *c)
{
	const Onnx__TensorProto *t;

	if (i >= nd->n_input)
		RFAIL("%s node \"%s\" lacks input %zu", op_of(nd), nd->name ? nd->name : "", i + 1);
	t = find_const(r, nd->input[i]);
	if (t == NULL)
		RFAIL("input \"%s\" of %s must be a constant (an initializer)", nd->input[i], op_of(nd));
	return tensor_floats(r, t, nd->input[i], c);
}

/* the node whose output is name, or NULL */
static const Onnx__NodeProto *
producer(Reader *r, const char *name)
{
	for (size_t i = 0; i < r->g->n_node; i++)
	{
		const Onnx__NodeProto *nd = r->g->node[i];

		if (nd == NULL)
			continue;
		for (size_t j = 0; j < nd->n_output; j++)
			if (nd->output[j] && strcmp(nd->output[j], name) == 0)
				return nd;
	}
	return NULL;
}

/* an activation's name in a message */
static const char *
act_label(int act)
{
	return act == DML_ACT_IDENTITY ? "no activation" : act_op((DmlAct) act);
}

/* Concat(Sub(1, p), p) on axis 1: a binary classifier's two probabilities */
static int
is_one_minus_concat(Reader *r, const Onnx__NodeProto *nd)
{
	const Onnx__NodeProto *sub;
	const Onnx__TensorProto *one;
	Const		c;

	if (strcmp(op_of(nd), "Concat") != 0 || nd->n_input != 2 ||
		attr_i(nd, "axis", 0) != 1 || find_const(r, nd->input[1]) != NULL)
		return 0;
	sub = producer(r, nd->input[0]);
	if (sub == NULL || strcmp(op_of(sub), "Sub") != 0 || sub->n_input != 2 ||
		strcmp(sub->input[1], nd->input[1]) != 0)
		return 0;
	one = find_const(r, sub->input[0]);
	if (one == NULL || tensor_floats(r, one, sub->input[0], &c) != DML_OK || c.n != 1 ||
		c.v[0] != 1.0)
		return 0;
	return 1;
}

/* an int64 constant (a shape), at most MAX_DIMS values */
static DmlStatus
const_shape(Reader *r, const Onnx__NodeProto *nd, size_t i, int64_t *v, int *n)
{
	const Onnx__TensorProto *t = i < nd->n_input ? find_const(r, nd->input[i]) : NULL;

	if (t == NULL || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
		RFAIL("%s needs a constant int64 shape", op_of(nd));
	if (t->has_raw_data)
	{
		if (t->raw_data.len % 8 != 0 || t->raw_data.len / 8 > MAX_DIMS)
			RFAIL("%s shape of %zu bytes", op_of(nd), t->raw_data.len);
		*n = (int) (t->raw_data.len / 8);
		for (int k = 0; k < *n; k++)
		{
			uint64_t	u = 0;

			for (int j = 7; j >= 0; j--)
				u = (u << 8) | t->raw_data.data[8 * k + j];
			v[k] = (int64_t) u;
		}
	}
	else
	{
		if (t->n_int64_data > MAX_DIMS)
			RFAIL("%s shape of %zu values", op_of(nd), t->n_int64_data);
		*n = (int) t->n_int64_data;
		memcpy(v, t->int64_data, *n * sizeof(int64_t));
	}
	return DML_OK;
}

/* ---- the model being assembled ---- */

typedef struct Layer
{
	int			in;
	int			out;
	double	   *w;				/* (out, in) */
	double	   *b;				/* (out) */
} Layer;

typedef struct Build
{
	/* standardization before the first layer: (x - a) * s, per input */
	int			npre;			/* width of a and s, 0 until known (1 = broadcast) */
	double	   *pre_a;
	double	   *pre_s;
	int			nlayers;
	Layer		layers[DML_MAX_LAYERS];
	int			act;			/* hidden activation, -1 until seen */
	int			pending;		/* activation after the last layer so far, -1: none */
	int			softmax;
	int			ended;			/* Softmax or a final Sigmoid was seen */
} Build;

/* broadcast index: a constant of n values (1 or the width) at position i */
static double
bc(const Const *c, int i)
{
	return c->n == 1 ? c->v[0] : c->v[i];
}

/* an elementwise op with a constant, before any layer: compose into (x - a) * s */
static DmlStatus
pre_affine(Reader *r, Build *b, const char *op, const Const *c, int const_first)
{
	int			w = b->npre;

	if (c->n != 1)
	{
		if (w == 1)
		{
			/* widen the broadcast standardization to the constant's width */
			double	   *na = arena_alloc(&r->a, c->n * sizeof(double));
			double	   *ns = arena_alloc(&r->a, c->n * sizeof(double));

			if (!na || !ns)
				return DML_ERR_NOMEM;
			for (int64_t i = 0; i < c->n; i++)
			{
				na[i] = b->pre_a[0];
				ns[i] = b->pre_s[0];
			}
			b->pre_a = na;
			b->pre_s = ns;
			b->npre = w = (int) c->n;
		}
		else if (c->n != w)
			RFAIL("%s by a constant of %lld values where the input has %d", op,
				  (long long) c->n, w);
	}
	for (int i = 0; i < w; i++)
	{
		double		v = bc(c, i);

		if (strcmp(op, "Mul") == 0)
			b->pre_s[i] *= v;
		else if (strcmp(op, "Div") == 0)
		{
			if (v == 0)
				RFAIL("Div by zero in the standardization");
			b->pre_s[i] /= v;
		}
		else if (b->pre_s[i] == 0)
			RFAIL("%s after a scale of zero in the standardization", op);
		else if (strcmp(op, "Add") == 0)
			b->pre_a[i] -= v / b->pre_s[i];
		else if (!const_first)	/* Sub: y - v */
			b->pre_a[i] += v / b->pre_s[i];
		else
		{
			/* v - (x - a) s = (x - (a + v / s)) (-s) */
			b->pre_a[i] += v / b->pre_s[i];
			b->pre_s[i] = -b->pre_s[i];
		}
	}
	return DML_OK;
}

/* an elementwise op with a constant right after a layer: fold it into the layer */
static DmlStatus
post_affine(Reader *r, Layer *L, const char *op, const Const *c, int const_first)
{
	if (c->n != 1 && c->n != L->out)
		RFAIL("%s by a constant of %lld values after a layer of %d outputs", op,
			  (long long) c->n, L->out);
	for (int k = 0; k < L->out; k++)
	{
		double		v = bc(c, k);
		double		mul = 1,
					add = 0;

		if (strcmp(op, "Mul") == 0)
			mul = v;
		else if (strcmp(op, "Div") == 0)
		{
			if (v == 0)
				RFAIL("Div by zero after a layer");
			mul = 1 / v;
		}
		else if (strcmp(op, "Add") == 0)
			add = v;
		else if (!const_first)
			add = -v;
		else
		{
			mul = -1;
			add = v;
		}
		for (int j = 0; j < L->in; j++)
			L->w[(size_t) k * L->in + j] *= mul;
		L->b[k] = L->b[k] * mul + add;
	}
	return DML_OK;
}

/* a dense layer from a weight constant (in, out) or, transposed, (out, in) */
static DmlStatus
add_layer(Reader *r, Build *b, const char *op, const Const *W, int transposed,
		  double alpha, const Const *bias, double beta)
{
	Layer	   *L;
	int			in,
				out;

	if (W->ndims != 2)
		RFAIL("%s weight has %d dimensions; dml reads a matrix", op, W->ndims);
	in = (int) (transposed ? W->dims[1] : W->dims[0]);
	out = (int) (transposed ? W->dims[0] : W->dims[1]);
	if (in < 1 || out < 1 || in > DML_MAX_WIDTH || out > DML_MAX_WIDTH)
		RFAIL("%s of %d inputs and %d outputs is out of range 1..%d", op, in, out, DML_MAX_WIDTH);
	if (b->nlayers == DML_MAX_LAYERS)
		RFAIL("more than %d dense layers", DML_MAX_LAYERS);
	if (b->nlayers > 0)
	{
		Layer	   *prev = &b->layers[b->nlayers - 1];

		if (prev->out != in)
			RFAIL("%s takes %d inputs but the layer before gives %d", op, in, prev->out);
		if (b->pending < 0)
			b->pending = DML_ACT_IDENTITY;	/* two linear maps in a row */
		if (b->act < 0)
			b->act = b->pending;
		else if (b->act != b->pending)
			RFAIL("hidden layers use %s and %s; a dml network has one hidden activation",
				  act_label(b->act), act_label(b->pending));
		b->pending = -1;
	}
	else if (b->pending >= 0)
		RFAIL("%s before the first dense layer", act_label(b->pending));
	if (bias && bias->n != 1 && bias->n != out)
		RFAIL("%s bias has %lld values for %d outputs", op, (long long) bias->n, out);
	L = &b->layers[b->nlayers];
	L->in = in;
	L->out = out;
	L->w = arena_alloc(&r->a, (size_t) in * out * sizeof(double));
	L->b = arena_alloc(&r->a, (size_t) out * sizeof(double));
	if (!L->w || !L->b)
		return DML_ERR_NOMEM;
	for (int k = 0; k < out; k++)
	{
		for (int j = 0; j < in; j++)
			L->w[(size_t) k * in + j] = alpha *
				W->v[transposed ? (size_t) k * in + j : (size_t) j * out + k];
		L->b[k] = bias ? beta * bc(bias, k) : 0;
	}
	b->nlayers++;
	return DML_OK;
}

static int
act_of_op(const char *op)
{
	if (strcmp(op, "Relu") == 0)
		return DML_ACT_RELU;
	if (strcmp(op, "Tanh") == 0)
		return DML_ACT_TANH;
	if (strcmp(op, "Sigmoid") == 0)
		return DML_ACT_SIGMOID;
	return -1;
}

/* one node of the path, in order from the input */
static DmlStatus
read_node(Reader *r, Build *b, const Onnx__NodeProto *nd, const char *data)
{
	const char *op = op_of(nd);
	const char *domain = nd->domain ? nd->domain : "";
	DmlStatus	st;
	Const		c1,
				c2,
				c3,
				c4;

	if (domain[0] != '\0' && strcmp(domain, "ai.onnx") != 0 &&
		!(strcmp(domain, "ai.onnx.ml") == 0 && strcmp(op, "Scaler") == 0))
		RFAIL("operator %s of domain \"%s\" is not supported", op, domain);
	if (strcmp(op, "Identity") == 0 || strcmp(op, "Dropout") == 0)
		return DML_OK;
	if (b->ended)
		RFAIL("%s after the output function; dml's networks end in Softmax or Sigmoid", op);
	if (strcmp(op, "Flatten") == 0)
	{
		if (b->nlayers > 0 || attr_i(nd, "axis", 1) != 1)
			RFAIL("Flatten is supported only on the input, with axis 1");
		return DML_OK;
	}
	if (strcmp(op, "Cast") == 0)
	{
		if (attr_i(nd, "to", 0) != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT &&
			attr_i(nd, "to", 0) != ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE)
			RFAIL("Cast to element type %lld; dml computes in float or double", (long long) attr_i(nd, "to", 0));
		return DML_OK;
	}
	if (strcmp(op, "Reshape") == 0)
	{
		int64_t		shape[MAX_DIMS];
		int			n;
		int			K = b->nlayers ? b->layers[b->nlayers - 1].out : 0;

		/* only a no-op on rows: (N, K) kept, or (N) from (N, 1) */
		if ((st = const_shape(r, nd, 1, shape, &n)) != DML_OK)
			return st;
		if (b->nlayers == 0 || b->pending >= 0 ||
			!((n == 2 && (shape[0] == -1 || shape[0] == 0) && shape[1] == K) ||
			  (n == 1 && shape[0] == -1 && K == 1)))
			RFAIL("Reshape is supported only on the output, keeping one row per input row");
		return DML_OK;
	}
	if (strcmp(op, "Gemm") == 0 || strcmp(op, "MatMul") == 0)
	{
		int			gemm = op[0] == 'G';

		if (nd->n_input < 2 || strcmp(nd->input[0], data) != 0)
			RFAIL("%s must take the data as its first input", op);
		if (gemm && attr_i(nd, "transA", 0) != 0)
			RFAIL("Gemm with transA = 1 is not supported");
		if ((st = const_input(r, nd, 1, &c1)) != DML_OK)
			return st;
		if (gemm && nd->n_input > 2 && nd->input[2][0] != '\0')
		{
			if ((st = const_input(r, nd, 2, &c2)) != DML_OK)
				return st;
			return add_layer(r, b, op, &c1, attr_i(nd, "transB", 0) != 0,
							 attr_f(nd, "alpha", 1.0f), &c2, attr_f(nd, "beta", 1.0f));
		}
		return add_layer(r, b, op, &c1, gemm && attr_i(nd, "transB", 0) != 0,
						 gemm ? attr_f(nd, "alpha", 1.0f) : 1.0, NULL, 0);
	}
	if (act_of_op(op) >= 0)
	{
		if (b->nlayers == 0)
			RFAIL("%s before the first dense layer", op);
		if (b->pending >= 0)
			RFAIL("%s right after %s", op, act_label(b->pending));
		b->pending = act_of_op(op);
		return DML_OK;
	}
	if (strcmp(op, "Softmax") == 0)
	{
		int64_t		axis = attr_i(nd, "axis", -1);

		if (axis != 1 && axis != -1)
			RFAIL("Softmax over axis %lld; dml's is over the outputs (axis 1)", (long long) axis);
		if (b->nlayers == 0 || b->pending >= 0)
			RFAIL("Softmax must follow a dense layer");
		b->softmax = 1;
		b->ended = 1;
		return DML_OK;
	}
	if (strcmp(op, "Add") == 0 || strcmp(op, "Sub") == 0 || strcmp(op, "Mul") == 0 ||
		strcmp(op, "Div") == 0)
	{
		int			const_first;

		if (nd->n_input != 2)
			RFAIL("%s with %zu inputs", op, nd->n_input);
		const_first = strcmp(nd->input[1], data) == 0;
		if ((st = const_input(r, nd, const_first ? 0 : 1, &c1)) != DML_OK)
			return st;
		if (const_first && strcmp(op, "Div") == 0)
			RFAIL("Div of a constant by the data is not an affine map");
		if (b->nlayers == 0)
			return pre_affine(r, b, op, &c1, const_first);
		if (b->pending >= 0)
			RFAIL("%s after %s; dml applies constants only before the first layer or right after a layer",
				  op, act_label(b->pending));
		return post_affine(r, &b->layers[b->nlayers - 1], op, &c1, const_first);
	}
	if (strcmp(op, "BatchNormalization") == 0 || strcmp(op, "Scaler") == 0)
	{
		Const		mean,
					k,
					shift;
		int64_t		n;
		const Onnx__AttributeProto *off = NULL,
				   *sc = NULL;

		if (strcmp(op, "Scaler") == 0)
		{
			/* ai.onnx.ml: y = (x - offset) * scale */
			off = attribute(nd, "offset");
			sc = attribute(nd, "scale");
			n = off ? (int64_t) off->n_floats : 0;
			if (!off || !sc || n < 1 || sc->n_floats != (size_t) n || n > DML_MAX_WIDTH)
				RFAIL("Scaler needs offset and scale of one length");
		}
		else
		{
			if (attr_i(nd, "training_mode", 0) != 0)
				RFAIL("BatchNormalization in training mode");
			if (nd->n_input < 5)
				RFAIL("BatchNormalization with %zu inputs", nd->n_input);
			if ((st = const_input(r, nd, 1, &c1)) != DML_OK ||
				(st = const_input(r, nd, 2, &c2)) != DML_OK ||
				(st = const_input(r, nd, 3, &c3)) != DML_OK ||
				(st = const_input(r, nd, 4, &c4)) != DML_OK)
				return st;
			n = c1.n;
			if (n < 1 || n > DML_MAX_WIDTH || c2.n != n || c3.n != n || c4.n != n)
				RFAIL("BatchNormalization's scale, bias, mean and var differ in length");
		}
		mean.n = k.n = shift.n = n;
		mean.v = arena_alloc(&r->a, n * sizeof(double));
		k.v = arena_alloc(&r->a, n * sizeof(double));
		shift.v = arena_alloc(&r->a, n * sizeof(double));
		if (!mean.v || !k.v || !shift.v)
			return DML_ERR_NOMEM;
		for (int64_t i = 0; i < n; i++)
		{
			if (off)
			{
				mean.v[i] = off->floats[i];
				k.v[i] = sc->floats[i];
				shift.v[i] = 0;
			}
			else
			{
				double		var = c4.v[i] + attr_f(nd, "epsilon", 1e-5f);

				if (!(var > 0))
					RFAIL("BatchNormalization with a variance that is not positive");
				mean.v[i] = c3.v[i];
				k.v[i] = c1.v[i] / sqrt(var);
				shift.v[i] = c2.v[i];
			}
		}
		if (b->nlayers == 0)
		{
			if ((st = pre_affine(r, b, "Sub", &mean, 0)) != DML_OK ||
				(st = pre_affine(r, b, "Mul", &k, 0)) != DML_OK)
				return st;
			return pre_affine(r, b, "Add", &shift, 0);
		}
		if (b->pending >= 0)
			RFAIL("%s after %s is not supported", op, act_label(b->pending));
		if ((st = post_affine(r, &b->layers[b->nlayers - 1], "Sub", &mean, 0)) != DML_OK ||
			(st = post_affine(r, &b->layers[b->nlayers - 1], "Mul", &k, 0)) != DML_OK)
			return st;
		return post_affine(r, &b->layers[b->nlayers - 1], "Add", &shift, 0);
	}
	RFAIL("operator %s is not supported: dml imports Gemm, MatMul, Add, Sub, Mul, Div, "
		  "BatchNormalization, Relu, Tanh, Sigmoid and Softmax", op);
}

/* the model from the assembled layers */
static DmlStatus
finish(Reader *r, Build *b, DmlModel *m)
{
	int			sizes[DML_MAX_LAYERS + 1];
	int			C,
				K;
	DmlLoss		loss = DML_LOSS_MSE;
	DmlAct		act = b->act >= 0 ? (DmlAct) b->act : DML_ACT_RELU;
	DmlModel	tmp;

	if (b->nlayers == 0)
		RFAIL("the graph has no Gemm or MatMul: nothing dml can run");
	C = b->layers[0].in;
	K = b->layers[b->nlayers - 1].out;
	if (b->pending >= 0)
	{
		if (b->pending != DML_ACT_SIGMOID)
			RFAIL("the network ends in %s; dml's end in a dense layer, then Softmax or Sigmoid",
				  act_label(b->pending));
		if (K != 1)
			RFAIL("Sigmoid on %d outputs (several binary labels) is not supported", K);
		loss = DML_LOSS_BCE;
	}
	else if (b->softmax)
	{
		if (K < 2)
			RFAIL("Softmax over one output");
		loss = DML_LOSS_SOFTMAX;
	}
	if (b->npre > 1 && b->npre != C)
		RFAIL("the standardization has %d values but the first layer takes %d inputs", b->npre, C);
	sizes[0] = C;
	for (int l = 0; l < b->nlayers; l++)
		sizes[l + 1] = b->layers[l].out;
	if (dml_model_alloc(&tmp, b->nlayers, sizes, act, loss) != DML_OK)
		return DML_ERR_NOMEM;
	for (int l = 0; l < b->nlayers; l++)
	{
		Layer	   *L = &b->layers[l];
		float	   *w = tmp.net.params + dml_net_weight_offset(&tmp.net, l);
		float	   *bias = tmp.net.params + dml_net_bias_offset(&tmp.net, l);

		for (size_t i = 0; i < (size_t) L->in * L->out; i++)
			w[i] = (float) L->w[i];
		for (int k = 0; k < L->out; k++)
			bias[k] = (float) L->b[k];
	}
	for (int i = 0; i < C; i++)
	{
		tmp.in_mean[i] = (float) b->pre_a[b->npre == 1 ? 0 : i];
		tmp.in_scale[i] = (float) b->pre_s[b->npre == 1 ? 0 : i];
	}
	for (size_t i = 0; i < tmp.net.nparams; i++)
		if (!isfinite(tmp.net.params[i]))
		{
			dml_model_free(&tmp);
			RFAIL("the folded weights overflow a float");
		}
	/*
	 * A graph that computes in double with one dense layer (a linear or
	 * logistic model, dml's own float64 export among them) becomes a
	 * float64 model: it predicts in double, as the graph does.  dml's
	 * float64 models have one layer; deeper double graphs are rounded.
	 */
	if (r->wide && b->nlayers == 1)
	{
		Layer	   *L = &b->layers[0];

		if (dml_model_make_f64(&tmp) != DML_OK)
		{
			dml_model_free(&tmp);
			return DML_ERR_NOMEM;
		}
		memcpy(tmp.params64 + dml_net_weight_offset(&tmp.net, 0), L->w,
			   (size_t) L->in * L->out * sizeof(double));
		memcpy(tmp.params64 + dml_net_bias_offset(&tmp.net, 0), L->b, (size_t) L->out * sizeof(double));
		for (int i = 0; i < C; i++)
		{
			tmp.in_mean64[i] = b->pre_a[b->npre == 1 ? 0 : i];
			tmp.in_scale64[i] = b->pre_s[b->npre == 1 ? 0 : i];
		}
	}
	*m = tmp;
	return DML_OK;
}

void
dml_onnx_import_free(DmlOnnxImport *info)
{
	for (int i = 0; i < info->nmeta; i++)
	{
		free(info->meta_keys[i]);
		free(info->meta_values[i]);
	}
	free(info->meta_keys);
	free(info->meta_values);
	info->meta_keys = info->meta_values = NULL;
	info->nmeta = 0;
}

/* the graph's parts that say what the model is: input, path, metadata */
static DmlStatus
read_graph(Reader *r, Onnx__ModelProto *mp, DmlModel *m, DmlOnnxImport *info)
{
	Onnx__GraphProto *g = mp->graph;
	const char *input = NULL;
	const char *output = NULL;
	const char *cur;
	const Onnx__NodeProto **path;
	size_t		npath = 0;
	Build		b;
	DmlStatus	st;

	if (g == NULL)
		RFAIL("the model has no graph");
	r->g = g;
	if (g->n_node > DML_ONNX_MAX_NODES || g->n_initializer > DML_ONNX_MAX_NODES)
		RFAIL("the graph has more than %d nodes or initializers", DML_ONNX_MAX_NODES);
	for (size_t i = 0; i < g->n_node; i++)
		if (g->node[i] == NULL)
			RFAIL("the graph has an empty node");
	for (size_t i = 0; i < mp->n_opset_import; i++)
		if (mp->opset_import[i] && mp->opset_import[i]->has_version &&
			(mp->opset_import[i]->domain == NULL || mp->opset_import[i]->domain[0] == '\0' ||
			 strcmp(mp->opset_import[i]->domain, "ai.onnx") == 0))
			info->opset = mp->opset_import[i]->version;
	snprintf(info->producer, sizeof(info->producer), "%s %s",
			 mp->producer_name ? mp->producer_name : "", mp->producer_version ? mp->producer_version : "");

	/* the one input that is not a weight */
	for (size_t i = 0; i < g->n_input; i++)
	{
		const char *name = g->input[i] && g->input[i]->name ? g->input[i]->name : "";

		if (find_const(r, name) != NULL)
			continue;
		if (input != NULL)
			RFAIL("the graph has inputs \"%s\" and \"%s\"; dml imports graphs with one input tensor",
				  input, name);
		input = name;
		if (g->input[i]->type && g->input[i]->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
			g->input[i]->type->tensor_type && g->input[i]->type->tensor_type->has_elem_type)
		{
			int			et = g->input[i]->type->tensor_type->elem_type;

			if (et == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE)
				r->wide = 1;
			else if (et != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
				RFAIL("input \"%s\" has element type %d; dml feeds float or double", name, et);
		}
	}
	if (input == NULL || input[0] == '\0')
		RFAIL("the graph has no input");
	/* the first output of floats or doubles (a label output of another type is skipped) */
	for (size_t i = 0; i < g->n_output && output == NULL; i++)
	{
		const Onnx__ValueInfoProto *vi = g->output[i];

		if (vi == NULL || vi->name == NULL)
			continue;
		if (vi->type && vi->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
			vi->type->tensor_type && vi->type->tensor_type->has_elem_type &&
			vi->type->tensor_type->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT &&
			vi->type->tensor_type->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE)
			continue;
		output = vi->name;
	}
	if (output == NULL)
		RFAIL("the graph has no output of floats or doubles");
	snprintf(info->input_name, sizeof(info->input_name), "%s", input);

	/* from that output back to the input */
	path = arena_alloc(&r->a, (g->n_node + 1) * sizeof(*path));
	if (path == NULL)
		return DML_ERR_NOMEM;
	cur = output;
	while (strcmp(cur, input) != 0)
	{
		const Onnx__NodeProto *nd = producer(r, cur);
		const char *data = NULL;

		if (nd == NULL)
			RFAIL("output \"%s\" is not computed from input \"%s\"", output, input);
		if (npath == g->n_node)
			RFAIL("the graph has a cycle");
		if (is_one_minus_concat(r, nd))
		{
			/* probabilities (1 - p, p) of a binary classifier: p is the output */
			cur = nd->input[1];
			continue;
		}
		for (size_t i = 0; i < nd->n_input; i++)
		{
			if (nd->input[i] == NULL || nd->input[i][0] == '\0' || find_const(r, nd->input[i]))
				continue;
			if (data != NULL && strcmp(data, nd->input[i]) != 0)
				RFAIL("%s combines two computed tensors (\"%s\", \"%s\"); dml imports a chain of layers",
					  op_of(nd), data, nd->input[i]);
			data = nd->input[i];
		}
		if (data == NULL)
			RFAIL("%s computes \"%s\" from constants only", op_of(nd), cur);
		path[npath++] = nd;
		cur = data;
	}

	memset(&b, 0, sizeof(b));
	b.act = -1;
	b.pending = -1;
	b.npre = 1;
	b.pre_a = arena_alloc(&r->a, sizeof(double));
	b.pre_s = arena_alloc(&r->a, sizeof(double));
	if (!b.pre_a || !b.pre_s)
		return DML_ERR_NOMEM;
	b.pre_s[0] = 1;
	cur = input;
	info->ops[0] = '\0';
	for (size_t i = npath; i-- > 0;)
	{
		const Onnx__NodeProto *nd = path[i];
		size_t		used = strlen(info->ops);

		snprintf(info->ops + used, sizeof(info->ops) - used, "%s%s", used ? " " : "", op_of(nd));
		if ((st = read_node(r, &b, nd, cur)) != DML_OK)
			return st;
		cur = nd->output[0];
	}
	return finish(r, &b, m);
}

/* parse an ONNX model into a dml model */
DmlStatus
dml_onnx_read(DmlModel *m, DmlOnnxImport *info, const unsigned char *buf, size_t len,
			  char *errbuf, size_t errlen)
{
	Onnx__ModelProto *mp;
	Reader		r;
	DmlStatus	st;
	DmlModel	tmp;

	memset(info, 0, sizeof(*info));
	if (len == 0)
		FAIL(DML_ERR_FORMAT, "the ONNX model is empty");
	if (len > DML_ONNX_MAX_BYTES)
		FAIL(DML_ERR_FORMAT, "the ONNX model is %zu bytes, more than %zu", len, DML_ONNX_MAX_BYTES);
	mp = onnx__model_proto__unpack(NULL, len, buf);
	if (mp == NULL)
		FAIL(DML_ERR_FORMAT, "not an ONNX model: the protobuf does not parse");
	memset(&r, 0, sizeof(r));
	r.errbuf = errbuf;
	r.errlen = errlen;
	st = read_graph(&r, mp, &tmp, info);
	if (st == DML_ERR_NOMEM && !r.a.oom)
		snprintf(errbuf, errlen, "out of memory reading an ONNX model");
	else if (st == DML_ERR_NOMEM)
		snprintf(errbuf, errlen, "out of memory reading an ONNX model of %zu bytes", len);
	if (st == DML_OK && mp->n_metadata_props > 0)
	{
		size_t		n = mp->n_metadata_props;

		info->meta_keys = calloc(n, sizeof(char *));
		info->meta_values = calloc(n, sizeof(char *));
		if (!info->meta_keys || !info->meta_values)
			st = DML_ERR_NOMEM;
		for (size_t i = 0; st == DML_OK && i < n; i++)
		{
			Onnx__StringStringEntryProto *e = mp->metadata_props[i];

			if (e == NULL || e->key == NULL || e->value == NULL)
				continue;
			info->meta_keys[info->nmeta] = strdup(e->key);
			info->meta_values[info->nmeta] = strdup(e->value);
			if (!info->meta_keys[info->nmeta] || !info->meta_values[info->nmeta])
			{
				free(info->meta_keys[info->nmeta]);
				free(info->meta_values[info->nmeta]);
				st = DML_ERR_NOMEM;
				break;
			}
			info->nmeta++;
		}
		if (st != DML_OK)
		{
			snprintf(errbuf, errlen, "out of memory reading an ONNX model's metadata");
			dml_onnx_import_free(info);
			dml_model_free(&tmp);
		}
	}
	arena_free(&r.a);
	onnx__model_proto__free_unpacked(mp, NULL);
	if (st == DML_OK)
		*m = tmp;
	return st;
}
