-- shape.sql: every object of extension dml with its definition, one line
-- each, sorted: what an update must make the same as a fresh install.
-- Columns are compared by name (an update appends them, an install may
-- order them otherwise); everything else by its text.
WITH ext AS (
	SELECT oid, extconfig, extcondition FROM pg_catalog.pg_extension WHERE extname = 'dml'
), members AS (
	SELECT d.classid, d.objid FROM pg_catalog.pg_depend d, ext
	WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext.oid
	  AND d.deptype = 'e'
), rels AS (
	SELECT c.* FROM members m JOIN pg_catalog.pg_class c
		ON m.classid = 'pg_catalog.pg_class'::regclass AND c.oid = m.objid
), lines AS (
	SELECT pg_catalog.pg_describe_object(classid, objid, 0) AS line FROM members
	UNION ALL
	SELECT pg_catalog.format('column %s.%s %s%s%s storage %s', c.oid::regclass, a.attname,
		pg_catalog.format_type(a.atttypid, a.atttypmod),
		CASE WHEN a.attnotnull THEN ' not null' ELSE '' END,
		coalesce(' default ' || pg_catalog.pg_get_expr(ad.adbin, ad.adrelid), ''), a.attstorage)
	FROM rels c JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
		AND NOT a.attisdropped
	LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
	UNION ALL
	SELECT pg_catalog.format('column %s.%s %s', t.oid::regtype, a.attname,
		pg_catalog.format_type(a.atttypid, a.atttypmod))
	FROM members m JOIN pg_catalog.pg_type t ON m.classid = 'pg_catalog.pg_type'::regclass
		AND t.oid = m.objid
	JOIN pg_catalog.pg_attribute a ON a.attrelid = t.typrelid AND a.attnum > 0
		AND NOT a.attisdropped
	UNION ALL
	SELECT pg_catalog.format('relation %s kind %s persistence %s acl %s', c.oid::regclass,
		c.relkind, c.relpersistence, c.relacl::text) FROM rels c
	UNION ALL
	SELECT pg_catalog.format('constraint %s on %s: %s', co.conname, co.conrelid::regclass,
		pg_catalog.pg_get_constraintdef(co.oid))
	FROM rels c JOIN pg_catalog.pg_constraint co ON co.conrelid = c.oid
	UNION ALL
	SELECT pg_catalog.format('index on %s: %s', i.indrelid::regclass,
		pg_catalog.pg_get_indexdef(i.indexrelid))
	FROM rels c JOIN pg_catalog.pg_index i ON i.indrelid = c.oid
	UNION ALL
	SELECT pg_catalog.format('trigger on %s: %s', tg.tgrelid::regclass,
		pg_catalog.pg_get_triggerdef(tg.oid))
	FROM rels c JOIN pg_catalog.pg_trigger tg ON tg.tgrelid = c.oid AND NOT tg.tgisinternal
	UNION ALL
	SELECT pg_catalog.format('view %s: %s', c.oid::regclass, pg_catalog.pg_get_viewdef(c.oid))
	FROM rels c WHERE c.relkind IN ('v', 'm')
	UNION ALL
	SELECT pg_catalog.format('sequence %s: %s %s %s %s %s %s', s.seqrelid::regclass,
		s.seqtypid::regtype, s.seqstart, s.seqincrement, s.seqmax, s.seqmin, s.seqcycle)
	FROM rels c JOIN pg_catalog.pg_sequence s ON s.seqrelid = c.oid
	UNION ALL
	SELECT pg_catalog.format('function %s: %s acl %s', p.oid::regprocedure,
		pg_catalog.pg_get_functiondef(p.oid), p.proacl::text)
	FROM members m JOIN pg_catalog.pg_proc p ON m.classid = 'pg_catalog.pg_proc'::regclass
		AND p.oid = m.objid AND p.prokind <> 'a'
	UNION ALL
	SELECT pg_catalog.format('aggregate %s: %s %s %s %s %s %s %s %s acl %s', p.oid::regprocedure,
		a.aggtransfn, a.aggfinalfn, a.aggcombinefn, a.aggserialfn, a.aggdeserialfn,
		a.aggtranstype::regtype, a.agginitval, p.proparallel, p.proacl::text)
	FROM members m JOIN pg_catalog.pg_proc p ON m.classid = 'pg_catalog.pg_proc'::regclass
		AND p.oid = m.objid AND p.prokind = 'a'
	JOIN pg_catalog.pg_aggregate a ON a.aggfnoid = p.oid
	UNION ALL
	SELECT pg_catalog.format('schema %s owner %s acl %s', n.nspname, n.nspowner::regrole,
		n.nspacl::text)
	FROM members m JOIN pg_catalog.pg_namespace n
		ON m.classid = 'pg_catalog.pg_namespace'::regclass AND n.oid = m.objid
	UNION ALL
	SELECT pg_catalog.format('dumped with its data: %s where %L', x.rel::regclass, x.cond)
	FROM ext, LATERAL ROWS FROM (pg_catalog.unnest(ext.extconfig), pg_catalog.unnest(ext.extcondition)) AS x(rel, cond)
	UNION ALL
	SELECT pg_catalog.format('initial privileges of %s: %s',
		pg_catalog.pg_describe_object(ip.classoid, ip.objoid, ip.objsubid), ip.initprivs::text)
	FROM members m JOIN pg_catalog.pg_init_privs ip ON ip.classoid = m.classid
		AND ip.objoid = m.objid
)
SELECT line FROM lines ORDER BY line COLLATE "C";
