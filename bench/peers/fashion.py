"""Fashion-MNIST for the reference peers: IDX files (gzip) or a .npy cache.

Pixels are float32 scaled to [0, 1] (byte / 255), exactly what dml-load-idx
stores, so the peers and dml train on the same numbers.  Labels are int64.

    from fashion import load_fashion
    xtr, ytr, xte, yte, info = load_fashion(data_dir, npy_dir)

With npy_dir given, the arrays are read from npy_dir/fashion_{train,test}_{x,y}.npy
when all four exist, else read from the IDX files and written there.
"""

import gzip
import json
import os
import struct
import sys
import time

import numpy as np

DEFAULT_DIR = os.environ.get("FASHION_DIR", "/usr/share/datasets/fashion-mnist")
IMAGES_MAGIC = 2051
LABELS_MAGIC = 2049


def read_idx(path, magic):
    """Read one IDX ubyte file; return a uint8 array shaped by its header."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for an IDX header")
    got = struct.unpack(">I", raw[:4])[0]
    if got != magic:
        raise ValueError(f"{path}: magic number {got}, expected {magic}")
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    body = raw[4 + 4 * ndim:]
    if len(body) != int(np.prod(dims)):
        raise ValueError(f"{path}: {len(body)} data bytes, header says {int(np.prod(dims))}")
    return np.frombuffer(body, dtype=np.uint8).reshape(dims)


def read_split(data_dir, prefix):
    """Images (n, 784) float32 in [0,1] and labels (n,) int64 of one split."""
    x = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"), IMAGES_MAGIC)
    y = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"), LABELS_MAGIC)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{prefix}: {x.shape[0]} images but {y.shape[0]} labels")
    x = x.reshape(x.shape[0], -1).astype(np.float32) / np.float32(255.0)
    return x, y.astype(np.int64)


def load_fashion(data_dir=None, npy_dir=None):
    """Train and test arrays, and a dict saying where they came from and how long it took."""
    data_dir = data_dir or DEFAULT_DIR
    t0 = time.perf_counter()
    names = ["fashion_train_x", "fashion_train_y", "fashion_test_x", "fashion_test_y"]
    if npy_dir:
        paths = [os.path.join(npy_dir, n + ".npy") for n in names]
        if all(os.path.exists(p) for p in paths):
            arrays = [np.load(p) for p in paths]
            return (*arrays, {"source": "npy", "path": npy_dir,
                              "load_s": time.perf_counter() - t0})
    xtr, ytr = read_split(data_dir, "train")
    xte, yte = read_split(data_dir, "t10k")
    if npy_dir:
        os.makedirs(npy_dir, exist_ok=True)
        for n, a in zip(names, (xtr, ytr, xte, yte)):
            np.save(os.path.join(npy_dir, n + ".npy"), a)
    return xtr, ytr, xte, yte, {"source": "idx", "path": data_dir,
                                "load_s": time.perf_counter() - t0}


def standardize(xtr, xte):
    """Scale features by the training mean and std (std 0 left at 1), as dml does."""
    mean = xtr.mean(axis=0, dtype=np.float64)
    std = xtr.std(axis=0, dtype=np.float64)
    std[std == 0] = 1.0
    mean = mean.astype(np.float32)
    std = std.astype(np.float32)
    return (xtr - mean) / std, (xte - mean) / std


def emit(record):
    """Print one JSON line and flush, so a harness can follow progress."""
    print(json.dumps(record, sort_keys=False), flush=True)


def fail(msg):
    """Print an error to stderr and exit 1."""
    print(f"{os.path.basename(sys.argv[0])}: error: {msg}", file=sys.stderr)
    sys.exit(1)
