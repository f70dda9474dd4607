/*-------------------------------------------------------------------------
 *
 * predict_plan.c
 *	  The planner support function of the record and array forms of
 *	  predict.
 *
 * dml_predict('m', t) with t a table's row is, to the executor, a
 * whole-row Var: every column is deformed, a composite datum is built per
 * row (heap_form_tuple, with toasted values flattened), and predict.c
 * deforms it again to find the features.  That costs more than the model.
 *
 * So at plan time (SupportRequestSimplify, during constant folding) a call
 * whose row argument is a plain whole-row Var of a table in this query
 * level becomes the column form:
 *
 *	  dml_predict('m', t)
 *	  => dml.predict_cols('m', '{id,c1,...}'::text[], t.id, t.c1, ...)
 *
 * with every column of the table, in attnum order, dropped ones left out:
 * exactly the fields of the whole row, under the same names.  The features
 * are still looked up by name at run time, so a plan cached under one
 * model version serves the next one, whatever its features.
 *
 * Left alone, because a column-by-column call would not be the same:
 *	- a row on the nullable side of an outer join: the whole row can be
 *	  NULL there (the record form is STRICT and answers NULL), while its
 *	  columns would come one by one as NULLs, features that are NULL;
 *	- rows that are not a table's (subqueries, functions, VALUES, CTEs,
 *	  views, joins), and any argument that is not a bare Var (ROW(...),
 *	  casts), whose fields need not be the table's columns;
 *	- rows not simply scanned in this query level's join tree: INSERT's
 *	  target (in RETURNING), ON CONFLICT's excluded row, UNION ALL
 *	  members, and foreign tables (the FDW builds their rows);
 *	- a table with more columns than a function takes arguments;
 *	- a caller without EXECUTE on the record form: the executor's check
 *	  of that function then fails as it always did.  (A plan cached for
 *	  one role and run by another: the column form makes the same check
 *	  at its first call.)
 *
 * The array form with its array written out, dml_predict('m', ARRAY[x1,
 * x2, ...]), builds that array for every row and takes it apart again:
 *
 *	  dml_predict('m', ARRAY[t.c1, t.c2])
 *	  => dml.predict_vals('m', t.c1, t.c2)
 *
 * (values_call below says when).
 *
 * Privileges on the table are unchanged: the parser marked the whole row
 * as selected, and the executor checks that against the range table, not
 * against the Vars the planner leaves.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "compat.h"

#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "nodes/supportnodes.h"
#include "parser/parse_func.h"
#include "parser/parsetree.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "dml.h"

/* where a range table entry sits in the join tree */
typedef enum JoinPlace
{
	PLACE_ABSENT,				/* not in it (an appendrel member, INSERT's target) */
	PLACE_INNER,				/* on no nullable side */
	PLACE_NULLABLE				/* under the nullable side of an outer join */
} JoinPlace;

/* where rtindex sits in the join tree under jtnode */
static JoinPlace
join_place(Node *jtnode, int rtindex, bool nullable)
{
	if (jtnode == NULL)
		return PLACE_ABSENT;
	if (IsA(jtnode, RangeTblRef))
	{
		if (((RangeTblRef *) jtnode)->rtindex != rtindex)
			return PLACE_ABSENT;
		return nullable ? PLACE_NULLABLE : PLACE_INNER;
	}
	if (IsA(jtnode, FromExpr))
	{
		ListCell   *lc;

		foreach(lc, ((FromExpr *) jtnode)->fromlist)
		{
			JoinPlace	p = join_place(lfirst(lc), rtindex, nullable);

			if (p != PLACE_ABSENT)
				return p;
		}
		return PLACE_ABSENT;
	}
	if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *j = (JoinExpr *) jtnode;
		bool		left = nullable || j->jointype == JOIN_RIGHT || j->jointype == JOIN_FULL;
		bool		right = nullable || j->jointype == JOIN_LEFT || j->jointype == JOIN_FULL ||
			j->jointype == JOIN_ANTI;
		JoinPlace	p = join_place(j->larg, rtindex, left);

		if (p != PLACE_ABSENT)
			return p;
		return join_place(j->rarg, rtindex, right);
	}
	/* a node we do not know: as if nullable, so nothing is rewritten */
	return PLACE_NULLABLE;
}

/*
 * The form of dml's schema standing in for a call that returns restype:
 * dml.predict<kind>_<suffix> ("cols": the column form of a record form,
 * whose arguments are (text, text[], "any"); "vals": the values form of an
 * array form, (text, "any"))
 */
static Oid
stand_in(Oid restype, const char *suffix)
{
	const char *kind;
	bool		cols = strcmp(suffix, "cols") == 0;
	Oid			argtypes[3] = {TEXTOID, cols ? TEXTARRAYOID : ANYOID, ANYOID};

	switch (restype)
	{
		case FLOAT8OID:
			kind = "";
			break;
		case TEXTOID:
			kind = "_class";
			break;
		case FLOAT8ARRAYOID:
			kind = "_proba";
			break;
		default:
			return InvalidOid;
	}
	return LookupFuncName(list_make2(makeString("dml"), makeString(psprintf("predict%s_%s", kind, suffix))),
						  cols ? 3 : 2, argtypes, true);
}

/* a call of stand-in fn with args in fcall's place: its result, collations and location */
static Node *
stand_in_call(FuncExpr *fcall, Oid fn, List *args)
{
	FuncExpr   *call = makeFuncExpr(fn, fcall->funcresulttype, args, fcall->funccollid,
									fcall->inputcollid, COERCE_EXPLICIT_CALL);

	call->funcvariadic = false;
	call->location = fcall->location;
	return (Node *) call;
}

/*
 * columns_call
 *		The column form of record-form call fcall, or NULL when it would not
 *		be the same call (see the head of this file).
 */
static Node *
columns_call(PlannerInfo *root, FuncExpr *fcall)
{
	Var		   *var;
	RangeTblEntry *rte;
	Oid			fn;
	Relation	rel;
	TupleDesc	td;
	List	   *args;
	List	   *cols = NIL;
	Datum	   *names;
	int			ncols = 0;

	if (root == NULL || list_length(fcall->args) != 2)
		return NULL;
	var = lsecond(fcall->args);
	if (!IsA(var, Var) || var->varattno != InvalidAttrNumber || var->varlevelsup != 0)
		return NULL;
	if (var->varno < 1 || var->varno > list_length(root->parse->rtable))
		return NULL;
	rte = rt_fetch(var->varno, root->parse->rtable);
	if (rte->rtekind != RTE_RELATION ||
		!(rte->relkind == RELKIND_RELATION || rte->relkind == RELKIND_PARTITIONED_TABLE ||
		  rte->relkind == RELKIND_MATVIEW))
		return NULL;
	if (root->parse->onConflict && root->parse->onConflict->exclRelIndex == var->varno)
		return NULL;
	if (join_place((Node *) root->parse->jointree, var->varno, false) != PLACE_INNER)
		return NULL;
	if (pg_proc_aclcheck(fcall->funcid, GetUserId(), ACL_EXECUTE) != ACLCHECK_OK)
		return NULL;
	fn = stand_in(fcall->funcresulttype, "cols");
	if (!OidIsValid(fn))
		return NULL;

	/* the parser holds a lock on the table already */
	rel = table_open(rte->relid, NoLock);
	td = RelationGetDescr(rel);
	if (var->vartype != RelationGetForm(rel)->reltype)
	{
		table_close(rel, NoLock);
		return NULL;
	}
	names = palloc(sizeof(Datum) * Max(td->natts, 1));
	for (int a = 0; a < td->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(td, a);
		Var		   *col;

		if (att->attisdropped)
			continue;
		names[ncols++] = CStringGetTextDatum(NameStr(att->attname));
		col = makeVar(var->varno, att->attnum, att->atttypid, att->atttypmod,
					  att->attcollation, 0);
		col->location = var->location;
		cols = lappend(cols, col);
	}
	table_close(rel, NoLock);
	if (2 + ncols > FUNC_MAX_ARGS)
		return NULL;

	args = list_make2(linitial(fcall->args),
					  makeConst(TEXTARRAYOID, -1, InvalidOid, -1,
								PointerGetDatum(construct_array(names, ncols, TEXTOID, -1,
																false, TYPALIGN_INT)),
								false, false));
	return stand_in_call(fcall, fn, list_concat(args, cols));
}

/*
 * values_call
 *		The values form of array-form call fcall whose array is written out
 *		as ARRAY[e1, ..., en] (one dimension, float8 elements), or NULL.
 *		The executor would build that array for every row and the function
 *		take it apart again: the elements go to the function as they are.
 *		The same call: the array form is STRICT, but ARRAY[...] is never
 *		NULL, so only a NULL model makes it NULL, as it does
 *		dml.predict_vals (not STRICT, so that a NULL value reaches its
 *		check); and dml.predict_vals makes the array form's checks (the
 *		count, NULL and non-finite values) in its order, so its errors.
 *		Left alone: any other array (a column, a parameter, a function's
 *		result, ARRAY[...] of arrays or of a subquery), more elements than a
 *		function takes arguments, a caller without EXECUTE on the array form.
 */
static Node *
values_call(FuncExpr *fcall)
{
	ArrayExpr  *arr;
	Oid			fn;

	if (list_length(fcall->args) != 2)
		return NULL;
	arr = lsecond(fcall->args);
	if (!IsA(arr, ArrayExpr) || arr->multidims || arr->element_typeid != FLOAT8OID ||
		arr->array_typeid != FLOAT8ARRAYOID || arr->elements == NIL ||
		1 + list_length(arr->elements) > FUNC_MAX_ARGS)
		return NULL;
	if (pg_proc_aclcheck(fcall->funcid, GetUserId(), ACL_EXECUTE) != ACLCHECK_OK)
		return NULL;
	fn = stand_in(fcall->funcresulttype, "vals");
	if (!OidIsValid(fn))
		return NULL;
	return stand_in_call(fcall, fn,
						 list_concat(list_make1(linitial(fcall->args)), list_copy(arr->elements)));
}

PG_FUNCTION_INFO_V1(dml_predict_support);

/*
 * dml_predict_support
 *		Planner support of dml_predict, dml_predict_class and
 *		dml_predict_proba by row: a table's row becomes its columns; and of
 *		their array forms: ARRAY[...] becomes its elements.
 */
Datum
dml_predict_support(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	Node	   *req = (Node *) PG_GETARG_POINTER(0);
	FuncExpr   *fcall;

	if (!IsA(req, SupportRequestSimplify))
		PG_RETURN_POINTER(NULL);
	fcall = ((SupportRequestSimplify *) req)->fcall;
	if (list_length(fcall->args) == 2 && exprType(lsecond(fcall->args)) == FLOAT8ARRAYOID)
		PG_RETURN_POINTER(values_call(fcall));
	PG_RETURN_POINTER(columns_call(((SupportRequestSimplify *) req)->root, fcall));
}
