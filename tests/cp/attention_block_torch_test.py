"""Context parallelism's block attention (backends/cpu/attention_block.h) against PyTorch.

One rank of a ring: its queries (at the true positions of its zig-zag chunks) meet several
key/value blocks in turn — merged by log-sum-exp in forward, dq accumulated and each block's dk, dv
written in backward — and the result must equal PyTorch's causal attention of the same queries
over the concatenated keys (mask: key position <= query position), forward (out, lse) and backward
(autograd), with grouped-query heads. Cases: every block of a cp 3 ring for the middle rank (blocks
partly masked, one chunk of the rank's own seeing nothing of a later rank's block), and a block
entirely after every query (skipped whole: zero gradients).

usage: attention_block_torch_test.py ATTENTION_BLOCK_TOOL
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

TOOL = sys.argv[1]
B, H, HKV, D = 2, 4, 2, 16


def zigzag(T, cp, r):
    c = T // (2 * cp)
    return list(range(r * c, (r + 1) * c)) + list(range((2 * cp - 1 - r) * c, (2 * cp - r) * c))


def run_case(name, pos_q, blocks, rng):
    Tq, Tk, nb = len(pos_q), len(blocks[0]), len(blocks)
    row = (H + 2 * HKV) * D
    qkv = rng.standard_normal((B, Tq, row)).astype(np.float32)
    kvs = [rng.standard_normal((B, Tk, 2 * HKV * D)).astype(np.float32) for _ in blocks]
    dout = rng.standard_normal((B, Tq, H * D)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        fin, fout = os.path.join(tmp, "in.bin"), os.path.join(tmp, "out.bin")
        with open(fin, "wb") as f:
            f.write(np.array([B, Tq, Tk, H, HKV, D, nb], np.int64).tobytes())
            f.write(np.array(pos_q, np.int64).tobytes())
            for p in blocks:
                f.write(np.array(p, np.int64).tobytes())
            f.write(qkv.tobytes())
            for kv in kvs:
                f.write(kv.tobytes())
            f.write(dout.tobytes())
        subprocess.run([TOOL, fin, fout], check=True)
        got = np.fromfile(fout, np.float32)
    sizes = [B * Tq * H * D, B * H * Tq, B * Tq * H * D] + [B * Tk * 2 * HKV * D] * nb
    parts = np.split(got, np.cumsum(sizes)[:-1])
    out, lse, dq = parts[0].reshape(B, Tq, H, D), parts[1].reshape(B, H, Tq), parts[2].reshape(B, Tq, H, D)
    dkvs = [p.reshape(B, Tk, 2 * HKV, D) for p in parts[3:]]

    # PyTorch in float64: the queries against every block's keys at once.
    q = torch.tensor(qkv[:, :, :H * D].reshape(B, Tq, H, D), dtype=torch.float64, requires_grad=True)
    kv = torch.tensor(np.concatenate(kvs, axis=1).reshape(B, nb * Tk, 2 * HKV, D), dtype=torch.float64,
                      requires_grad=True)
    k = kv[:, :, :HKV].repeat_interleave(H // HKV, dim=2)
    v = kv[:, :, HKV:].repeat_interleave(H // HKV, dim=2)
    pos_k = torch.tensor(sum(blocks, []))
    mask = pos_k[None, :] <= torch.tensor(pos_q)[:, None]  # (Tq, nb·Tk)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) / D ** 0.5
    s = s.masked_fill(~mask, float("-inf"))
    ref_lse = torch.logsumexp(s, dim=-1)  # (B, H, Tq)
    ref_out = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), v)
    ref_out.backward(torch.tensor(dout.reshape(B, Tq, H, D), dtype=torch.float64))
    ref_dkv = kv.grad.numpy().reshape(B, nb, Tk, 2 * HKV, D)

    def err(a, b):
        b = np.asarray(b, np.float64)
        return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))

    checks = {"out": err(out, ref_out.detach().numpy()), "lse": err(lse, ref_lse.detach().numpy()),
              "dq": err(dq, q.grad.numpy())}
    for i in range(nb):
        checks[f"dkv[{i}]"] = err(dkvs[i], ref_dkv[:, i]) if np.abs(ref_dkv[:, i]).max() > 0 \
            else float(np.abs(dkvs[i]).max())
    print(f"{name}: " + ", ".join(f"{k} {v:.1e}" for k, v in checks.items()))
    return [f"{name} {k}: max error {v:.2e} > 1e-5" for k, v in checks.items() if not v <= 1e-5]


def main():
    rng = np.random.default_rng(0)
    failures = []
    T, cp = 24, 3
    # The middle rank of cp 3: its own block first, then the ring's order (the previous ranks').
    failures += run_case("cp3 rank 1, every block", zigzag(T, cp, 1), [zigzag(T, cp, r) for r in (1, 0, 2)], rng)
    failures += run_case("cp3 rank 0, every block", zigzag(T, cp, 0), [zigzag(T, cp, r) for r in (0, 2, 1)], rng)
    # Blocks of several 64-row tiles (the CPU kernel's), a diagonal inside tiles, and queries at the
    # front of rank 0 that see nothing of rank 1's block (the first seeing query is not tile-aligned).
    T, cp = 520, 2
    failures += run_case("cp2 T 520 rank 0", zigzag(T, cp, 0), [zigzag(T, cp, r) for r in (0, 1)], rng)
    failures += run_case("cp2 T 520 rank 1", zigzag(T, cp, 1), [zigzag(T, cp, r) for r in (1, 0)], rng)
    # A block after every query: skipped, its dk, dv zero.
    failures += run_case("block after every query", list(range(0, 6)), [list(range(0, 6)), list(range(6, 12))], rng)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("block attention matches PyTorch")


if __name__ == "__main__":
    main()
