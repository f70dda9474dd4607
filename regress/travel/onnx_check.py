"""onnx_check.py: run an ONNX model with ONNX Runtime on rows and compare
with dml's answers.

    python onnx_check.py MODEL.onnx ANSWERS.tsv

ANSWERS.tsv: one row per line, tab-separated: the features (comma-separated
floats), dml's answer (comma-separated floats: the prediction, or the class
probabilities) and dml's label (empty for regression).  Prints one line:
"rows N max_error E labels_wrong W input T" (E over every value,
|a - b| / (1 + |b|); T the graph's input type: a float64 model's export
takes tensor(double), and is fed the features in double).
"""
import sys

import numpy as np
import onnxruntime as ort


def main(model, answers):
    feats, want, labels = [], [], []
    with open(answers) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            feats.append([float(v) for v in parts[0].split(",")])
            want.append([float(v) for v in parts[1].split(",")])
            labels.append(parts[2] if len(parts) > 2 else "")
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0].name
    itype = sess.get_inputs()[0].type
    dtype = np.float64 if itype == "tensor(double)" else np.float32
    outs = sess.run(None, {inp: np.asarray(feats, dtype=dtype)})
    names = [o.name for o in sess.get_outputs()]
    # class probabilities where the graph has them, else its first output
    first = names.index("probabilities") if "probabilities" in names else 0
    got = np.asarray(outs[first], dtype=np.float64).reshape(len(feats), -1)
    exp = np.asarray(want, dtype=np.float64)
    if got.shape != exp.shape:
        print("rows %d shape %s but dml gave %s" % (len(feats), got.shape, exp.shape))
        return 1
    err = float(np.max(np.abs(got - exp) / (1 + np.abs(exp))))
    wrong = 0
    if "label" in names and labels[0] != "":
        lab = outs[names.index("label")].reshape(-1)
        wrong = sum(1 for a, b in zip(lab, labels)
                    if (a.decode() if isinstance(a, bytes) else str(a)) != b)
    print("rows %d max_error %.3g labels_wrong %d input %s" % (len(feats), err, wrong, itype))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
