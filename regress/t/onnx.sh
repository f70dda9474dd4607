#!/bin/bash
# onnx.sh: dml_export and dml_import, checked by independent readers.
#   1. dml_export of linear, logistic, softmax and MLP models: onnx.checker
#      (Debian's python3-onnx) accepts every graph; ONNX Runtime (PyPI)
#      gives dml_predict's values and probabilities to 1e-5 and the same
#      labels.  Float64 models (the exact linear and Newton logistic fits,
#      weights format 2) export in double: ONNX Runtime gives dml_predict's
#      values to 1e-12.
#   2. round trips: an exported ONNX graph imported back predicts as the
#      model (1e-5); dml's own package imported back is the same model
#      byte for byte; a double graph comes back as a float64 model (1e-12).
#   3. a PyTorch MLP (BatchNormalization, Gemm, Relu, Softmax; and Tanh
#      regression) exported with torch.onnx.export, and scikit-learn
#      models converted by skl2onnx (Scaler, MatMul/Add, Reshape; Tanh,
#      Softmax) predict in SQL as in Python (1e-5); metrics->'origin'
#      names where each came from.
#   4. what dml cannot run or must not trust is an error naming it: an
#      unsupported operator, two inputs, mixed activations, external data,
#      truncated or random bytes, a corrupted package, a package whose spec
#      does not fit its model; the server stays up.
#   5. ownership: only the name's owner adds a version; exporting needs the
#      right to use the model.
# Runs against the cluster regress/run.sh started.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh
source regress/travel/pyenv.sh
O=$T/onnx
mkdir -p "$O"
chmod 777 "$O"
cleanup() {
	pgc_psql -c "SELECT dml_drop_model(name) FROM (SELECT DISTINCT name FROM dml.models
		WHERE name LIKE 'ox\_%') s" -c "DROP TABLE IF EXISTS ox_data, ox_expect" >/dev/null 2>&1
	pgc_psql -c "DROP ROLE IF EXISTS ox_alice" -c "DROP ROLE IF EXISTS ox_bob" >/dev/null 2>&1
}
cleanup
trap cleanup EXIT
PYENV=$(dml_pyenv) || { notok "a Python environment with ONNX Runtime (pip install failed)"; exit 1; }

# export_to MODEL FORMAT FILE
export_to() {
	pgc_psql -t -A -c "SELECT encode(dml_export('$1', '$2'), 'base64')" | base64 -d >"$3"
}
# import_file NAME FILE FORMAT [SQL ARGS] [ROLE]: dml_import's output, errors included
import_file() {
	printf '%s\n' "SET ROLE ${5:-postgres};" "\\set data \`base64 -w0 $2\`" \
		"SELECT dml_import('$1', decode(:'data', 'base64'), '$3' ${4:-});" |
		pgc_as_pg psql -X -q -t -A -f - 2>&1
}
# rel_diff A B: largest |a - b| / (1 + |b|) over the rows, A and B float8[] expressions
rel_diff() {
	pgc_psql -t -A -c "SELECT max(abs(a - b) / (1 + abs(b))) FROM ox_data t,
		LATERAL unnest($1, $2) u(a, b) WHERE t.i <= 200"
}
small() { [ -n "$1" ] && [ "$(echo "$1" | awk '{print ($1 <= 1e-5)}')" = 1 ]; }
server_up() { [ "$(pgc_psql -t -A -c "SELECT 1" 2>/dev/null)" = 1 ]; }

pgc_psql -c "CREATE ROLE ox_alice LOGIN" -c "CREATE ROLE ox_bob LOGIN" \
	-c "CREATE TABLE ox_data AS SELECT i, sin(i * 0.37) * 2 AS x1, cos(i * 0.11) + 3 AS x2,
		2 * sin(i * 0.37) - cos(i * 0.11) + 0.1 * sin(i) AS r, sin(i * 0.37) > cos(i * 0.11) AS pos,
		CASE WHEN sin(i * 0.37) > 0.3 THEN 'up' WHEN cos(i * 0.11) > 0 THEN 'flat' ELSE 'down' END AS lab
		FROM generate_series(1, 800) i" >/dev/null
for spec in "ox_lin|r|linear|" "ox_log|pos|logistic|" "ox_nlog|pos|logistic|, optimizer => 'newton'" "ox_cls|lab|softmax|" \
	"ox_mlp|lab|mlp|, hidden => '{8,4}', epochs => 30, learning_rate => 0.01" \
	"ox_mreg|r|mlp|, hidden => '{6}', activation => 'tanh', epochs => 20"; do
	IFS='|' read -r name target kind extra <<<"$spec"
	pgc_psql -c "SELECT name FROM dml_train('$name', 'ox_data', '$target', features => '{x1,x2}',
		model => '$kind', workers => 1 $extra)" >/dev/null 2>>"$T/onnx-train.log"
done
check "six models to export" \
	'[ "$(pgc_psql -t -A -c "SELECT count(DISTINCT name) FROM dml.models WHERE name LIKE '"'ox\_%'"'")" = 6 ]'

# --- 1. export, checked by onnx.checker and ONNX Runtime -------------------
wide=
for m in ox_lin ox_log ox_nlog ox_cls ox_mlp ox_mreg; do
	export_to $m onnx "$O/$m.onnx"
	if [ "$(pgc_psql -t -A -c "SELECT kind FROM dml_models WHERE name = '$m'")" = linear ] ||
		[ $m = ox_mreg ]; then
		ans="dml_predict('$m', ARRAY[x1, x2])::text, ''"
	else
		ans="array_to_string(dml_predict_proba('$m', ARRAY[x1, x2]), ','), dml_predict_class('$m', ARRAY[x1, x2])"
	fi
	pgc_psql -t -A -F $'\t' -c "SELECT x1 || ',' || x2, $ans FROM ox_data ORDER BY i" >"$O/$m.tsv"
	/usr/bin/python3 -c "import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)" \
		"$O/$m.onnx" >"$O/$m.checker" 2>&1
	check "$m: onnx.checker accepts the export" '[ $? = 0 ]' || true
	res=$("$PYENV/bin/python" regress/travel/onnx_check.py "$O/$m.onnx" "$O/$m.tsv" 2>&1 | tail -1)
	err=$(echo "$res" | awk '{print $4}')
	check "$m: ONNX Runtime gives dml_predict's answers on 800 rows ($res)" \
		'small "$err" && [ "$(echo "$res" | awk "{print \$2}")" = 800 ] && [ "$(echo "$res" | awk "{print \$6}")" = 0 ]'
	# float64 models (weights format 2: the exact linear and Newton logistic fits)
	# export a graph in double, which ONNX Runtime runs to dml_predict's value
	if [ "$(pgc_psql -t -A -c "SELECT DISTINCT get_byte(weights, 4) FROM dml.models WHERE name = '$m'")" = 2 ]; then
		wide+=" $m"
		check "$m (float64): its graph takes and computes in double, to 1e-12 of dml_predict ($res)" \
			'[ "$(echo "$res" | awk "{print \$8}")" = "tensor(double)" ] &&
			 [ "$(echo "$err" | awk "{print (\$1 <= 1e-12)}")" = 1 ]'
	fi
done
check "the exact linear and Newton logistic models are float64 ones (format 2:${wide:-none})" \
	'[ "$wide" = " ox_lin ox_nlog" ]'

# --- 2. round trips ---------------------------------------------------------
for m in ox_lin ox_log ox_nlog ox_cls ox_mlp ox_mreg; do
	import_file ${m}_rt "$O/$m.onnx" onnx >"$O/$m.rt.log"
	if [ $m = ox_lin ] || [ $m = ox_mreg ]; then
		d=$(rel_diff "ARRAY[dml_predict('${m}_rt', ARRAY[x1, x2])]" "ARRAY[dml_predict('$m', ARRAY[x1, x2])]")
	else
		d=$(rel_diff "dml_predict_proba('${m}_rt', t)" "dml_predict_proba('$m', t)")
	fi
	check "$m: its ONNX export imported back predicts the same, by row (largest difference $d)" 'small "$d"'
	if [[ " $wide " == *" $m "* ]]; then
		check "$m (float64): the double graph imports as a float64 model (format 2), equal to 1e-12 ($d)" \
			'[ "$(pgc_psql -t -A -c "SELECT get_byte(weights, 4) FROM dml.models WHERE name = '"'${m}_rt'"'")" = 2 ] &&
			 [ "$(echo "$d" | awk "{print (\$1 <= 1e-12)}")" = 1 ]'
	fi
	export_to $m dml "$O/$m.dmlp"
	import_file ${m}_nat "$O/$m.dmlp" dml >"$O/$m.nat.log"
	same=$(pgc_psql -t -A -c "SELECT a.weights = b.weights AND a.spec = b.spec AND a.kind = b.kind
		FROM dml.models a, dml.models b WHERE a.name = '$m' AND b.name = '${m}_nat'")
	check "$m: dml's package imported back is the same weights, spec and kind" '[ "$same" = t ]'
done
check "an import's origin is in its metrics" \
	'[ "$(pgc_psql -t -A -c "SELECT (metrics->'"'origin'->>'format'"') || (metrics->'"'origin'->>'producer'"') FROM dml_models WHERE name = '"'ox_cls_rt'"'")" = "onnxdml 1.1" ]'
check "a package keeps the model's metrics and adds its origin" \
	'[ "$(pgc_psql -t -A -c "SELECT (metrics ? '"'accuracy'"') AND metrics->'"'origin'->>'format'"' = '"'dml'"' FROM dml_models WHERE name = '"'ox_cls_nat'"'")" = t ]'

# --- 3. models from PyTorch and scikit-learn --------------------------------
/usr/bin/python3 regress/travel/onnx_peers.py torch "$O" >"$O/torch.log" 2>&1
check "PyTorch (Debian) trained and exported two models" '[ -s "$O/torch_cls.onnx" ] && [ -s "$O/torch_reg.onnx" ]' ||
	tail -5 "$O/torch.log"
"$PYENV/bin/python" regress/travel/onnx_peers.py sklearn "$O" >"$O/sklearn.log" 2>&1
check "scikit-learn trained two models and skl2onnx converted them" '[ -s "$O/skl_cls.onnx" ] && [ -s "$O/skl_reg.onnx" ]' ||
	tail -5 "$O/sklearn.log"
pgc_psql -c "CREATE TABLE ox_expect (model text, i int, f float8[], want float8[])" >/dev/null
for p in torch_cls torch_reg skl_reg skl_cls; do
	pgc_psql -c "\\copy ox_expect (i, f, want) FROM '$O/$p.tsv'" \
		-c "UPDATE ox_expect SET model = '$p' WHERE model IS NULL" >/dev/null
	import_file ox_$p "$O/$p.onnx" onnx ", inputs => '{f}'" >"$O/$p.import.log"
	d=$(pgc_psql -t -A -c "SELECT max(abs(g - w) / (1 + abs(w))) FROM ox_expect e,
		LATERAL unnest(CASE WHEN cardinality(e.want) = 1 THEN ARRAY[dml_predict('ox_$p', e.f)]
			ELSE dml_predict_proba('ox_$p', e.f) END, e.want) u(g, w) WHERE e.model = '$p'" 2>&1)
	check "$p: imported, predicts in SQL as in Python on 40 rows (largest difference $d)" 'small "$d"' ||
		cat "$O/$p.import.log"
done
check "the PyTorch import's origin names its producer and operators" \
	'[ "$(pgc_psql -t -A -c "SELECT metrics->'"'origin'->>'producer'"' LIKE '"'pytorch%'"' AND
		metrics->'"'origin'->>'operators'"' LIKE '"'BatchNormalization Gemm Relu%'"' FROM dml_models WHERE name = '"'ox_torch_cls'"'")" = t ]'
check "an imported classifier with no labels given predicts its class index" \
	'[ "$(pgc_psql -t -A -c "SELECT dml_predict('"'ox_torch_cls'"', f) = (SELECT k - 1 FROM unnest(want) WITH ORDINALITY u(p, k)
		ORDER BY p DESC LIMIT 1) FROM ox_expect WHERE model = '"'torch_cls'"' AND i = 3")" = t ]'
out=$(import_file ox_labels "$O/torch_cls.onnx" onnx ", inputs => '{f}', classes => '{low,mid,high}'")
check "classes => names the labels" \
	'[ "$(pgc_psql -t -A -c "SELECT dml_predict_class('"'ox_labels'"', f) IN ('"'low','mid','high'"') FROM ox_expect WHERE i = 0 LIMIT 1")" = t ]'
out=$(import_file ox_cols "$O/torch_reg.onnx" onnx ", inputs => '{a,b,c,d}'")
check "inputs => one column per value: dml_predict by row uses the columns" \
	'[ "$(pgc_psql -t -A -c "SELECT abs(dml_predict('"'ox_cols'"', s) - (SELECT want[1] FROM ox_expect WHERE model = '"'torch_reg'"' AND i = 5)) < 1e-5
		FROM (SELECT f[1] AS a, f[2] AS b, f[3] AS c, f[4] AS d FROM ox_expect WHERE model = '"'torch_reg'"' AND i = 5) s")" = t ]'

# --- 4. what cannot be imported ---------------------------------------------
/usr/bin/python3 regress/travel/onnx_craft.py "$O" "$O/ox_mlp.dmlp" "$O/ox_lin.onnx" >"$O/craft.log" 2>&1
expect_error() {	# label file format args pattern
	local out pattern=$5
	out=$(import_file ox_bad "$2" "$3" "$4")
	check "$1: an error naming it ($(echo "$out" | grep -E 'ERROR|DETAIL' | tail -1 | sed 's/^.*\(ERROR\|DETAIL\): *//' | cut -c1-100))" \
		'echo "$out" | grep -q "ERROR" && echo "$out" | grep -qE "$pattern" && server_up'
}
expect_error "Conv on the path" "$O/conv.onnx" onnx ", inputs => '{f}'" "operator Conv is not supported"
expect_error "LogSoftmax" "$O/logsoftmax.onnx" onnx ", inputs => '{f}'" "operator LogSoftmax is not supported"
expect_error "two inputs" "$O/two_inputs.onnx" onnx ", inputs => '{f}'" "one input tensor"
expect_error "Relu then Tanh" "$O/mixed_act.onnx" onnx ", inputs => '{f}'" "one hidden activation"
expect_error "weights in an external file" "$O/external.onnx" onnx ", inputs => '{f}'" "external file"
head -c 700 "$O/torch_cls.onnx" >"$O/trunc.onnx"
expect_error "a truncated ONNX file" "$O/trunc.onnx" onnx ", inputs => '{f}'" "not an ONNX model|not computed|lacks|must be a constant|has .* bytes"
head -c 4096 /dev/urandom >"$O/random.bin"
expect_error "random bytes as ONNX" "$O/random.bin" onnx ", inputs => '{f}'" "not an ONNX model|no graph|no input|no output"
expect_error "random bytes as a package" "$O/random.bin" dml "" "not a dml package"
head -c 200 "$O/ox_mlp.dmlp" >"$O/trunc.dmlp"
expect_error "a truncated package" "$O/trunc.dmlp" dml "" "package states"
cp "$O/ox_mlp.dmlp" "$O/flip.dmlp"
printf '\x7f' | dd of="$O/flip.dmlp" bs=1 seek=300 conv=notrunc 2>/dev/null
expect_error "a package with one byte changed" "$O/flip.dmlp" dml "" "checksum mismatch"
expect_error "a package whose spec does not fit its model" "$O/bad_spec.dmlp" dml "" "features make 8 inputs but the model takes 2"
expect_error "a dml export whose spec metadata was edited" "$O/bad_meta.onnx" onnx "" "one-hot"
expect_error "a graph with no columns named" "$O/torch_reg.onnx" onnx "" "say which columns"
expect_error "three columns for four values" "$O/torch_reg.onnx" onnx ", inputs => '{a,b,c}'" "names 3 columns but the graph takes 4"
expect_error "an unknown format" "$O/torch_reg.onnx" pmml "" "unknown import format"
check "nothing was stored by the failed imports" \
	'[ "$(pgc_psql -t -A -c "SELECT count(*) FROM dml.models WHERE name = '"'ox_bad'"'")" = 0 ]'

# --- 5. ownership -------------------------------------------------------------
out=$(import_file ox_owned "$O/torch_reg.onnx" onnx ", inputs => '{f}'" ox_alice)
check "a role imports into a new name and owns it" \
	'[ "$(pgc_psql -t -A -c "SELECT owner::text FROM dml.models WHERE name = '"'ox_owned'"'")" = ox_alice ]'
out=$(import_file ox_owned "$O/torch_reg.onnx" onnx ", inputs => '{f}'" ox_bob)
check "another role cannot add a version to it" \
	'echo "$out" | grep -q "model name \"ox_owned\" is not available"'
out=$(pgc_psql -c "SET ROLE ox_bob" -c "SELECT length(dml_export('ox_owned'))" 2>&1)
check "nor export it (to that role it does not exist)" 'echo "$out" | grep -q "model \"ox_owned\" does not exist"'
pgc_psql -c "SET ROLE ox_alice" -c "SELECT dml_grant('ox_owned', 'ox_bob', details => false)" >/dev/null
out=$(pgc_psql -c "SET ROLE ox_bob" -c "SELECT length(dml_export('ox_owned'))" 2>&1)
check "granted for prediction only, it cannot export it" \
	'echo "$out" | grep -q "permission denied to export model \"ox_owned\""'
out=$(import_file ox_owned "$O/torch_reg.onnx" onnx ", inputs => '{f}'" ox_bob)
check "nor add a version to it" 'echo "$out" | grep -q "must be owner of model \"ox_owned\""'
pgc_psql -c "SET ROLE ox_alice" -c "SELECT dml_grant('ox_owned', 'ox_bob')" >/dev/null
check "granted with details, it can export it" \
	'[ "$(pgc_psql -t -A -c "SET ROLE ox_bob" -c "SELECT length(dml_export('"'ox_owned'"')) > 0")" = t ]'
out=$(import_file ox_owned "$O/torch_reg.onnx" onnx ", inputs => '{f}'" ox_alice)
check "the owner adds version 2" '[ "$out" = 2 ]'
echo "# $n checks"
