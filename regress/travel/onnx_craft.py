"""onnx_craft.py: hostile and unsupported inputs for dml_import (Debian's
python3-onnx builds the graphs; zlib's CRC-32 is the package's).

    /usr/bin/python3 onnx_craft.py OUTDIR PACKAGE [EXPORT]

Writes into OUTDIR: conv.onnx (a Conv on the path), logsoftmax.onnx,
two_inputs.onnx, mixed_act.onnx (Relu then Tanh), external.onnx (weights in
an external file), and bad_spec.dmlp: PACKAGE (a dml export) with its spec's first
feature made a vector of 7, past the model's inputs and the checksum made right again.
"""
import os
import struct
import sys
import zlib

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def save(path, nodes, inits, inputs=("x",), out="y", n_in=2):
    graph = helper.make_graph(
        nodes, "crafted",
        [helper.make_tensor_value_info(i, TensorProto.FLOAT, ["N", n_in]) for i in inputs],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["N", None])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def w(name, *shape):
    return numpy_helper.from_array(np.ones(shape, dtype=np.float32) * 0.5, name)


def main(outdir, package):
    save(os.path.join(outdir, "conv.onnx"),
         [helper.make_node("Gemm", ["x", "W", "b"], ["h"], transB=1),
          helper.make_node("Conv", ["h", "K"], ["y"])],
         [w("W", 3, 2), w("b", 3), w("K", 1, 1, 1)])
    save(os.path.join(outdir, "logsoftmax.onnx"),
         [helper.make_node("Gemm", ["x", "W", "b"], ["h"], transB=1),
          helper.make_node("LogSoftmax", ["h"], ["y"], axis=1)],
         [w("W", 3, 2), w("b", 3)])
    save(os.path.join(outdir, "two_inputs.onnx"),
         [helper.make_node("Add", ["x", "x2"], ["s"]),
          helper.make_node("Gemm", ["s", "W", "b"], ["y"], transB=1)],
         [w("W", 3, 2), w("b", 3)], inputs=("x", "x2"))
    save(os.path.join(outdir, "mixed_act.onnx"),
         [helper.make_node("Gemm", ["x", "W1", "b1"], ["h1"], transB=1),
          helper.make_node("Relu", ["h1"], ["a1"]),
          helper.make_node("Gemm", ["a1", "W2", "b2"], ["h2"], transB=1),
          helper.make_node("Tanh", ["h2"], ["a2"]),
          helper.make_node("Gemm", ["a2", "W3", "b3"], ["y"], transB=1)],
         [w("W1", 3, 2), w("b1", 3), w("W2", 3, 3), w("b2", 3), w("W3", 1, 3), w("b3", 1)])
    ext = w("W", 3, 2)
    ext.ClearField("raw_data")
    ext.data_location = TensorProto.EXTERNAL
    entry = ext.external_data.add()
    entry.key, entry.value = "location", "/etc/passwd"
    save(os.path.join(outdir, "external.onnx"),
         [helper.make_node("Gemm", ["x", "W", "b"], ["y"], transB=1)], [ext, w("b", 3)])

    # the package, its spec part replaced, the checksum recomputed
    data = open(package, "rb").read()
    off, parts = 12, []
    for _ in range(4):
        (n,) = struct.unpack_from("<I", data, off)
        parts.append(data[off + 4:off + 4 + n])
        off += 4 + n
    parts[1] = parts[1].replace(b'"kind": "num"', b'"kind": "vec"', 1).replace(b'"width": 1', b'"width": 7', 1)
    body = b"".join(struct.pack("<I", len(p)) + p for p in parts)
    total = 12 + len(body) + 4
    head = struct.pack("<III", 0x504C4D44, 1, total) + body
    with open(os.path.join(outdir, "bad_spec.dmlp"), "wb") as f:
        f.write(head + struct.pack("<I", zlib.crc32(head) & 0xFFFFFFFF))


def bad_meta(outdir, export):
    import onnx
    model = onnx.load(export)
    for p in model.metadata_props:
        if p.key == "dml.spec":
            p.value = p.value.replace('"kind": "num"', '"kind": "cat", "levels": ["a"]', 1) \
                .replace('"width": 1', '"width": 2', 1)
    onnx.save(model, os.path.join(outdir, "bad_meta.onnx"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    if len(sys.argv) > 3:
        bad_meta(sys.argv[1], sys.argv[3])
