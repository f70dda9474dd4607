/* dml 1.0 -> 1.1 */

\echo Use "ALTER EXTENSION dml UPDATE TO '1.1'" to load this file. \quit

/*
 * --- issue 19: the catalog survives pg_dump -------------------------------
 *
 * Role columns become regrole, so a dump writes role names and a restore
 * into another cluster (pg_dumpall) maps them to that cluster's roles; the
 * catalog tables and the id sequence are marked as configuration, so
 * pg_dump dumps their rows.  Views that read a changed column are dropped
 * and made again from their own definition and privileges (whatever an
 * earlier section of this script made of them).
 */
DO $travel$
DECLARE
	v			record;
	views		text[] := '{}';
	defs		text[] := '{}';
	grants		text[] := '{}';
	a			record;
	i			integer;
BEGIN
	FOR v IN
		SELECT DISTINCT c.oid, c.oid::pg_catalog.regclass::text AS qname,
			   pg_catalog.pg_get_viewdef(c.oid) AS def, c.relacl, c.relowner
		FROM pg_catalog.pg_depend d
		JOIN pg_catalog.pg_rewrite r ON d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass
			AND r.oid = d.objid
		JOIN pg_catalog.pg_class c ON c.oid = r.ev_class
		JOIN pg_catalog.pg_attribute att ON att.attrelid = d.refobjid AND att.attnum = d.refobjsubid
		WHERE d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
		  AND c.oid <> d.refobjid
		  AND ((d.refobjid = 'dml.models'::pg_catalog.regclass AND att.attname = 'owner') OR
			   (d.refobjid = 'dml.grants'::pg_catalog.regclass AND att.attname = 'grantee'))
	LOOP
		views := views || v.qname;
		defs := defs || v.def;
		FOR a IN SELECT * FROM pg_catalog.aclexplode(v.relacl) x WHERE x.grantee <> v.relowner
		LOOP
			grants := grants || pg_catalog.format('GRANT %s ON %s TO %s', a.privilege_type, v.qname,
				CASE WHEN a.grantee = 0 THEN 'PUBLIC'
					 ELSE a.grantee::pg_catalog.regrole::text END);
		END LOOP;
		EXECUTE pg_catalog.format('DROP VIEW %s', v.qname);
	END LOOP;

	ALTER TABLE dml.models ALTER COLUMN owner TYPE pg_catalog.regrole;
	ALTER TABLE dml.grants ALTER COLUMN grantee TYPE pg_catalog.regrole;

	FOR i IN 1 .. pg_catalog.array_length(views, 1) LOOP
		EXECUTE pg_catalog.format('CREATE VIEW %s AS %s', views[i], defs[i]);
	END LOOP;
	FOR i IN 1 .. pg_catalog.array_length(grants, 1) LOOP
		EXECUTE grants[i];
	END LOOP;
END
$travel$;

/*
 * Weights are float32s that pglz cannot shrink: kept out of line without
 * trying (the try cost 45 ms on each 1 MB model stored).
 */
ALTER TABLE dml.models ALTER COLUMN weights SET STORAGE EXTERNAL;

SELECT pg_catalog.pg_extension_config_dump('dml.models', '');
SELECT pg_catalog.pg_extension_config_dump('dml.models_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('dml.epochs', '');
SELECT pg_catalog.pg_extension_config_dump('dml.deployments', '');
SELECT pg_catalog.pg_extension_config_dump('dml.grants', '');

/* --- issue 19: models out of and into dml (export.c) ---------------------- */
/*
 * A model version out of and into dml: ONNX (opset 13), or dml's own
 * package for moving a model between dml databases (export.c)
 */
CREATE FUNCTION @extschema@.dml_export(model text, format text DEFAULT 'onnx')
RETURNS bytea
AS 'MODULE_PATHNAME', 'dml_export'
LANGUAGE C STABLE STRICT;

CREATE FUNCTION @extschema@.dml_import(
	name		text,
	data		bytea,
	format		text DEFAULT 'onnx',
	inputs		text[] DEFAULT NULL,
	classes		text[] DEFAULT NULL,
	target		text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dml_import'
LANGUAGE C VOLATILE CALLED ON NULL INPUT;
