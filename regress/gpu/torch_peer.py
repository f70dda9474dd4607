#!/usr/bin/env python3
"""torch_peer.py: PyTorch's rate on the GPU for what make gpu-check times.

Without --fashion: the training step gpu_check.c's throughput test times,
MLP 784-1024-1024-10 (relu, softmax cross-entropy), batch 1024 resident on
the GPU, plain SGD.  With --fashion DIR: whole epochs over Fashion-MNIST
(the IDX files in DIR, standardized per pixel, resident on the GPU, a new
row order per epoch drawn on the device), two models as regress/gpu/e2e.sh
trains them with dml:
  fashion  784-256-128-10, Adam lr 0.001, batch 128, 5 epochs
  big      784-1024-1024-10, SGD lr 0.01, batch 1024, 5 epochs
with the median epoch's samples/s and the test accuracy.

Each runs in FP32 (TF32 off) and TF32, and two ways, so that PyTorch gets
its best setting for steps this small: "eager" (the usual loop) and
"graph" (the whole step, forward, backward and optimizer, captured once as
a CUDA graph and replayed, which removes Python and launch overhead; with
--fashion it runs the epoch's full batches only, and counts only those).
Prints one JSON line per run: {"what", "precision", "mode",
"samples_per_s", ...}.  Exits 3 when torch or a CUDA device is missing.

    python3 regress/gpu/torch_peer.py [--steps 200]
    python3 regress/gpu/torch_peer.py --fashion /usr/share/datasets/fashion-mnist

--cpu-check runs the eager loops on the CPU, on --limit rows and few steps,
to check this script on a machine without a GPU; its rates mean nothing.
"""

import argparse
import gzip
import json
import os
import statistics
import sys
import time

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"{e.name} is not installed", file=sys.stderr)
    sys.exit(3)


def mlp(sizes, dev):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).to(dev)


def make_opt(model, name, lr, graph):
    if name == "adam":
        # capturable keeps Adam's step count on the device, as a graph needs
        return torch.optim.Adam(model.parameters(), lr=lr, capturable=graph)
    return torch.optim.SGD(model.parameters(), lr=lr)


class Trainer:
    """One model, its optimizer and its step, eager or as a CUDA graph."""

    def __init__(self, sizes, opt, lr, batch, X, y, graph):
        self.dev = X.device
        torch.manual_seed(7)
        self.model = mlp(sizes, self.dev)
        self.opt = make_opt(self.model, opt, lr, graph)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.X, self.y, self.batch, self.graph = X, y, batch, graph
        self.idx = torch.zeros(batch, dtype=torch.long, device=self.dev)
        self.loss_sum = torch.zeros((), device=self.dev)
        if graph:
            self.idx.copy_(torch.arange(batch, device=self.dev) % X.shape[0])
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    self._step(self.idx)
            torch.cuda.current_stream().wait_stream(side)
            self.g = torch.cuda.CUDAGraph()
            self.opt.zero_grad(set_to_none=True)
            with torch.cuda.graph(self.g):
                self._step(self.idx, zero=False)

    def _step(self, idx, zero=True):
        if zero:
            self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(self.X.index_select(0, idx)), self.y.index_select(0, idx))
        loss.backward()
        self.opt.step()
        self.loss_sum += loss.detach()

    def step(self, idx):
        if self.graph:
            self.idx.copy_(idx)
            self.g.replay()
        else:
            self._step(idx)

    def accuracy(self, X, y):
        with torch.no_grad():
            return (self.model(X).argmax(1) == y).float().mean().item()


DEV = "cuda"


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def synthetic_rate(batch, steps, tf32, graph):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    dev = torch.device(DEV)
    g = torch.Generator(device="cpu").manual_seed(7)
    X = torch.randn(batch, 784, generator=g).to(dev)
    y = torch.randint(0, 10, (batch,), generator=g).to(dev)
    t = Trainer([784, 1024, 1024, 10], "sgd", 0.01, batch, X, y, graph)
    idx = torch.arange(batch, device=dev)
    times = []
    for _ in range(5 if DEV == "cuda" else 1):
        for _ in range(20 if DEV == "cuda" else 1):
            t.step(idx)
        sync()
        t0 = time.perf_counter()
        for _ in range(steps):
            t.step(idx)
        t.loss_sum.item()  # the loss read back once, as dml reads it each epoch
        sync()
        times.append(time.perf_counter() - t0)
    return steps * batch / statistics.median(times)


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    if magic == 2051:
        n, r, c = (int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(3))
        return np.frombuffer(data, dtype=np.uint8, offset=16).reshape(n, r * c).astype(np.float32) / 255
    n = int.from_bytes(data[4:8], "big")
    return np.frombuffer(data, dtype=np.uint8, offset=8).astype(np.int64)


def fashion_runs(d, tf32, graph, epochs, limit):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    dev = torch.device(DEV)
    Xtr = read_idx(os.path.join(d, "train-images-idx3-ubyte.gz"))
    ytr = read_idx(os.path.join(d, "train-labels-idx1-ubyte.gz"))
    if limit:
        Xtr, ytr = Xtr[:limit], ytr[:limit]
    Xte = read_idx(os.path.join(d, "t10k-images-idx3-ubyte.gz"))
    yte = read_idx(os.path.join(d, "t10k-labels-idx1-ubyte.gz"))
    mu, sd = Xtr.mean(0), Xtr.std(0)
    sd[sd == 0] = 1
    Xtr, Xte = (Xtr - mu) / sd, (Xte - mu) / sd
    X, y = torch.from_numpy(Xtr).to(dev), torch.from_numpy(ytr).to(dev)
    Xt, yt = torch.from_numpy(Xte).to(dev), torch.from_numpy(yte).to(dev)
    n = X.shape[0]
    out = []
    for what, sizes, opt, lr, batch in (("fashion", [784, 256, 128, 10], "adam", 0.001, 128),
                                        ("big", [784, 1024, 1024, 10], "sgd", 0.01, 1024)):
        t = Trainer(sizes, opt, lr, batch, X, y, graph)
        gen = torch.Generator(device=dev).manual_seed(1)
        rates = []
        for _ in range(epochs):
            sync()
            t0 = time.perf_counter()
            perm = torch.randperm(n, device=dev, generator=gen)
            done = 0
            for lo in range(0, n, batch):
                idx = perm[lo:lo + batch]
                if graph and idx.shape[0] < batch:
                    break
                t.step(idx)
                done += idx.shape[0]
            t.loss_sum.item()
            sync()
            rates.append(done / (time.perf_counter() - t0))
        out.append(dict(what=what, precision="tf32" if tf32 else "fp32", mode="graph" if graph else "eager",
                        batch=batch, samples_per_s=round(statistics.median(rates)),
                        test_accuracy=round(t.accuracy(Xt, yt), 4)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--fashion", metavar="DIR", default=None)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--cpu-check", action="store_true")
    a = ap.parse_args()
    global DEV
    if a.cpu_check:
        DEV = "cpu"
    elif not torch.cuda.is_available():
        print("torch sees no CUDA device", file=sys.stderr)
        sys.exit(3)
    common = {"torch": torch.__version__,
              "device": "cpu" if a.cpu_check else torch.cuda.get_device_name(0)}
    for tf32 in (False, True):
        for graph in (False,) if a.cpu_check else (False, True):
            if a.fashion:
                for r in fashion_runs(a.fashion, tf32, graph, a.epochs, a.limit):
                    print(json.dumps({**r, **common}), flush=True)
            else:
                sps = synthetic_rate(a.batch, a.steps, tf32, graph)
                print(json.dumps({"what": "step", "precision": "tf32" if tf32 else "fp32",
                                  "mode": "graph" if graph else "eager", "samples_per_s": round(sps),
                                  **common}), flush=True)


if __name__ == "__main__":
    main()
