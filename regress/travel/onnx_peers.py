"""onnx_peers.py: models trained outside dml, exported to ONNX, with the
answers their own library gives, for regress/t/onnx.sh to import and check.

    /usr/bin/python3 onnx_peers.py torch OUTDIR     (Debian's PyTorch)
    PYENV/bin/python onnx_peers.py sklearn OUTDIR   (scikit-learn, skl2onnx)

Writes OUTDIR/NAME.onnx and OUTDIR/NAME.tsv for each model: one test row a
line, "i <tab> {features} <tab> {answer}" (the prediction, or the class
probabilities), in PostgreSQL's array syntax.
"""
import os
import sys

import numpy as np

N_FEATURES = 4


def data(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(400, N_FEATURES)).astype(np.float32) * [1.0, 3.0, 0.5, 2.0] + [0, 5, -1, 2]
    X = X.astype(np.float32)
    score = X[:, 0] - 0.4 * X[:, 1] + 2.0 * X[:, 2] + np.sin(X[:, 3])
    y_cls = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3]))
    return X, score.astype(np.float32), y_cls


def write(outdir, name, Xtest, answers):
    with open(os.path.join(outdir, name + ".tsv"), "w") as f:
        for i, (x, a) in enumerate(zip(Xtest, answers)):
            f.write("%d\t{%s}\t{%s}\n" % (i, ",".join(repr(float(v)) for v in x),
                                          ",".join(repr(float(v)) for v in np.atleast_1d(a))))


def torch_models(outdir):
    import torch
    from torch import nn

    torch.manual_seed(0)
    X, score, y_cls = data(1)
    Xt = torch.from_numpy(X)
    models = {
        "torch_cls": (nn.Sequential(nn.BatchNorm1d(N_FEATURES), nn.Linear(N_FEATURES, 16), nn.ReLU(),
                                    nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3), nn.Softmax(dim=1)),
                      torch.from_numpy(y_cls).long()),
        "torch_reg": (nn.Sequential(nn.Linear(N_FEATURES, 12), nn.Tanh(), nn.Linear(12, 1)),
                      torch.from_numpy(score).reshape(-1, 1)),
    }
    for name, (model, y) in models.items():
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(200):
            opt.zero_grad()
            out = model(Xt)
            if name == "torch_cls":
                loss = nn.functional.nll_loss(torch.log(out + 1e-9), y)
            else:
                loss = nn.functional.mse_loss(out, y)
            loss.backward()
            opt.step()
        model.eval()
        Xtest = X[:40]
        with torch.no_grad():
            ans = model(torch.from_numpy(Xtest)).numpy()
        torch.onnx.export(model, torch.from_numpy(Xtest), os.path.join(outdir, name + ".onnx"),
                          input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, opset_version=13)
        write(outdir, name, Xtest, ans)


def sklearn_models(outdir):
    from sklearn.neural_network import MLPClassifier, MLPRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from skl2onnx import to_onnx

    X, score, y_cls = data(2)
    Xtest = X[:40]
    reg = make_pipeline(StandardScaler(), MLPRegressor(hidden_layer_sizes=(10,), max_iter=2000,
                                                       random_state=0))
    reg.fit(X, score)
    cls = MLPClassifier(hidden_layer_sizes=(12, 6), activation="tanh", max_iter=2000, random_state=0)
    cls.fit(X, y_cls)
    for name, model, ans, opts in [
            ("skl_reg", reg, reg.predict(Xtest), None),
            ("skl_cls", cls, cls.predict_proba(Xtest), {id(cls): {"zipmap": False}})]:
        onx = to_onnx(model, Xtest[:1], options=opts, target_opset=13)
        with open(os.path.join(outdir, name + ".onnx"), "wb") as f:
            f.write(onx.SerializeToString())
        write(outdir, name, Xtest, ans)


if __name__ == "__main__":
    import warnings
    warnings.filterwarnings("ignore")
    {"torch": torch_models, "sklearn": sklearn_models}[sys.argv[1]](sys.argv[2])
