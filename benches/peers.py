"""The numpy side of `cargo bench --bench peers` (issue 40, item 1).

The programs of benches/peers.rs at the same sizes, written as a numpy user would write them
(f32 throughout, `@` for the products, which is OpenBLAS's sgemm), each timed per call: one
untimed call, then 7 rounds of `reps` calls; prints one JSON object mapping each program to
its [min, median, max] milliseconds per call over the rounds. The bench sets
OPENBLAS_NUM_THREADS (and the OMP/MKL equivalents) to the thread count it compares with
before it starts this script: 1, and 2 for `tp_ffn` against eagle at P = 2.

    python3 benches/peers.py [program ...]

(only the programs named, when any are).
"""

import json
import sys
import time

import numpy as np

T, D, F = 64, 256, 1024
ROWS, COLS = 16, 256
RT, RD, RH = 16, 128, 64
EPS = np.float32(1e-5)
rng = np.random.default_rng(7)


def rand(*shape):
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def gelu(v):
    inner = (v + v * v * v * np.float32(0.044715)) * np.float32(0.7978845608028654)
    return v * np.float32(0.5) * (np.tanh(inner) + np.float32(1.0))


x_ffn, w1, w2 = rand(T, D), rand(D, F), rand(F, D)
x = rand(ROWS, COLS)
gamma, beta = rand(1, COLS), rand(1, COLS)
x_rot = rand(RT, RD)
ER, ED, EH = 64, 128, 128
x_exp, w1_exp, w2_exp = rand(ER, ED), rand(ED, EH), rand(EH, ED)
AQ, AD = 128, 64
q_att, k_att, v_att = rand(AQ, AD), rand(AQ, AD), rand(AQ, AD)
theta = np.power(np.float32(10000.0), np.arange(RH, dtype=np.float32) * np.float32(-2.0 / RD))
pos = np.arange(RT, dtype=np.float32)[:, None]


def tp_ffn():
    return gelu(x_ffn @ w1) @ w2


def softmax():
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layernorm():
    d = x - x.mean(axis=1, keepdims=True)
    var = (d * d).mean(axis=1, keepdims=True)
    return d / np.sqrt(var + EPS) * gamma + beta


def log_softmax():
    d = x - x.max(axis=1, keepdims=True)
    return d - np.log(np.exp(d).sum(axis=1, keepdims=True))


def gelu_rows():
    return gelu(x)


def rotary():
    ang = pos * theta
    c, s = np.cos(ang), np.sin(ang)
    x1, x2 = x_rot[:, :RH], x_rot[:, RH:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=1)


def attention():
    s = (q_att @ k_att.T) * np.float32(0.125)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)) @ v_att


def expert_ffn():
    return np.maximum(x_exp @ w1_exp, np.float32(0.0)) @ w2_exp


PROGRAMS = {
    "tp_ffn": (tp_ffn, 20),
    "softmax": (softmax, 2000),
    "layernorm": (layernorm, 2000),
    "log_softmax": (log_softmax, 2000),
    "gelu": (gelu_rows, 2000),
    "rotary": (rotary, 2000),
    "attention": (attention, 200),
    "expert_ffn": (expert_ffn, 200),
}


def main():
    out = {}
    only = sys.argv[1:]
    for name, (f, reps) in PROGRAMS.items():
        if only and name not in only:
            continue
        f()
        rounds = []
        for _ in range(7):
            t0 = time.perf_counter()
            for _ in range(reps):
                f()
            rounds.append((time.perf_counter() - t0) / reps * 1e3)
        rounds.sort()
        out[name] = [rounds[0], rounds[3], rounds[6]]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
