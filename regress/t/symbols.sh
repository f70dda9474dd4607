#!/bin/bash
# symbols.sh: the installed dml.so exports only what PostgreSQL looks up
# (Pg_magic_func, _PG_init, the SQL functions and their pg_finfo_ records)
# and dml_-prefixed names (extension/exports.map), so no symbol of ours can
# clash with another library loaded into a backend.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/tap.sh

so=$(pg_config --pkglibdir)/dml.so
syms=$(nm -D --defined-only "$so" | awk '{print $3}')
other=$(echo "$syms" | grep -vE '^(dml_.*|pg_finfo_dml_.*|Pg_magic_func|_PG_init)$' | head -5 | tr '\n' ' ')
check "dml.so exports nothing but PostgreSQL's entry points and dml_ names (${other:-none else})" \
	'[ -z "$other" ]'
check "dml.so exports Pg_magic_func and _PG_init" \
	'echo "$syms" | grep -qx Pg_magic_func && echo "$syms" | grep -qx _PG_init'
# every SQL function of the install script is exported with its finfo record
missing=
for f in $(grep -ohE "'MODULE_PATHNAME', *'[a-z_0-9]+'" sql/dml.sql | sed -E "s/.*'([a-z_0-9]+)'$/\1/" | sort -u); do
	echo "$syms" | grep -qx "$f" && echo "$syms" | grep -qx "pg_finfo_$f" || missing="$missing $f"
done
check "every SQL function of sql/dml.sql is exported (missing:${missing:- none})" '[ -z "$missing" ]'
check "the kernels are not exported (sgd_update, dense_forward)" \
	'! echo "$syms" | grep -qxE "sgd_update|dense_forward"'

echo "$n tests"
