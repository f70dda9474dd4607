#!/usr/bin/env python3
"""torch_peer.py: PyTorch's rate for the step gpu_check times (make gpu-check).

The same training step as gpu_check.c's throughput test: MLP
784-1024-1024-10 (relu, softmax cross-entropy), batch 1024 resident on the
GPU, plain SGD, FP32 (TF32 off) and TF32.  Prints one JSON line per
precision: {"precision", "samples_per_s", "torch", "device"}.  Exits 3 when
torch or a CUDA device is missing, so the caller can say why it skipped.

    python3 regress/gpu/torch_peer.py [--steps 50] [--batch 1024]
"""

import argparse
import json
import sys
import time

try:
    import torch
except ImportError:
    print("torch is not installed", file=sys.stderr)
    sys.exit(3)


def rate(batch, steps, tf32):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    dev = torch.device("cuda")
    g = torch.Generator(device="cpu").manual_seed(7)
    X = torch.randn(batch, 784, generator=g).to(dev)
    y = torch.randint(0, 10, (batch,), generator=g).to(dev)
    model = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(X), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    loss.item()  # the loss read back once, as dml reads it every few steps
    torch.cuda.synchronize()
    return steps * batch / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch", type=int, default=1024)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch sees no CUDA device", file=sys.stderr)
        sys.exit(3)
    for tf32 in (False, True):
        sps = rate(a.batch, a.steps, tf32)
        print(json.dumps({"precision": "tf32" if tf32 else "fp32", "samples_per_s": round(sps),
                          "torch": torch.__version__,
                          "device": torch.cuda.get_device_name(0)}), flush=True)


if __name__ == "__main__":
    main()
