"""PyTorch's causal attention on the layout of fluxtrain's attention ops, timed.

Torch 1.13 on the CPU has no fused scaled-dot-product attention, so this is what a PyTorch
model runs: softmax(q kᵀ / sqrt(D) + mask) v with autograd, kv heads repeated for GQA.
Prints one line: "fwd_s=<seconds> fwdbwd_s=<seconds> threads=<n>" (best of the repeats,
best thread count). Called by attention_bench; usable alone:

    /usr/bin/python3 bench/attention_torch.py B T H Hkv D reps max_threads
"""
import math
import sys
import time

import torch


def attention(qkv, B, T, H, Hkv, D, mask):
    q, k, v = qkv.split([H * D, Hkv * D, Hkv * D], dim=-1)
    q = q.view(B, T, H, D).transpose(1, 2)
    k = k.view(B, T, Hkv, D).transpose(1, 2).repeat_interleave(H // Hkv, dim=1)
    v = v.view(B, T, Hkv, D).transpose(1, 2).repeat_interleave(H // Hkv, dim=1)
    s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(D))
    p = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
    return (p @ v).transpose(1, 2).reshape(B, T, H * D)


def main():
    B, T, H, Hkv, D, reps, max_threads = (int(a) for a in sys.argv[1:8])
    torch.manual_seed(0)
    qkv = torch.randn(B, T, (H + 2 * Hkv) * D, requires_grad=True)
    dout = torch.randn(B, T, H * D)
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    best = None
    for threads in range(1, max_threads + 1):
        torch.set_num_threads(threads)
        fwd = fwdbwd = float("inf")
        for _ in range(reps + 1):  # the first run warms up
            t0 = time.perf_counter()
            out = attention(qkv, B, T, H, Hkv, D, mask)
            t1 = time.perf_counter()
            out.backward(dout)
            t2 = time.perf_counter()
            qkv.grad = None
            fwd, fwdbwd = min(fwd, t1 - t0), min(fwdbwd, t2 - t0)
        if best is None or fwdbwd < best[1]:
            best = (fwd, fwdbwd, threads)
    print(f"fwd_s={best[0]:.6f} fwdbwd_s={best[1]:.6f} threads={best[2]}")


if __name__ == "__main__":
    main()
