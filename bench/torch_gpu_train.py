"""The PyTorch peer of fluxtrain on a GPU (scripts/gpu_check.sh, stage 3): a LLaMA written in plain
PyTorch the way one usually is (fused QKV and gate/up projections, RoPE, RMSNorm, SDPA with causal
masking and grouped-query attention, SwiGLU, an untied LM head), trained with bf16 autocast over
fp32 weights, AdamW (fused) and gradient clipping at 1.0 on random tokens; eager or torch.compile.

usage: torch_gpu_train.py [--mode eager|compile] [--dim 2048 --layers 22 --heads 32 --kv-heads 4
                          --ffn 5632 --vocab 32000 --seq 2048 --batch 8] [--warmup 3 --steps 10]
                          [--gemm] [--device cuda|cpu]
prints one JSON line: tokens/s (median step), step times, peak memory, the FLOPs per token of
fluxtrain's convention (6 N_matmul + 12 L C T: ModelConfig::train_flops_per_token) and MFU against
the H100/H200 dense bf16 peak (989.4 TFLOP/s) and, with --gemm, against torch's own 8192³ bf16
matmul rate measured in the same process.
--device cpu with a tiny shape checks the script on a machine without a GPU (old torch without
SDPA falls back to the attention formula there).
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

PEAK_BF16 = 989.4e12  # plan/catalog.cpp: H100 / H200 SXM dense bf16


def flops_per_token(a):
    D = a.dim // a.heads
    per_layer = a.dim * (a.heads + 2 * a.kv_heads) * D + a.heads * D * a.dim + 3 * a.dim * a.ffn
    matmul_params = a.layers * per_layer + a.vocab * a.dim
    return 6.0 * matmul_params + 12.0 * a.layers * a.dim * a.seq


def rms_norm(x, w, eps=1e-5):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * w


def rope(x, cos, sin):  # x (B, heads, T, D); rotate half, as Hugging Face LLaMA
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rot * sin


def attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):
        try:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        except TypeError:  # torch < 2.5: no enable_gqa
            pass
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.shape[-2]
    mask = torch.full((T, T), float("-inf"), device=q.device).triu(1)
    return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + mask, -1) @ v


class Block(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.H, self.Hkv, self.D = a.heads, a.kv_heads, a.dim // a.heads
        self.attn_norm = torch.nn.Parameter(torch.ones(a.dim))
        self.wqkv = torch.nn.Linear(a.dim, (a.heads + 2 * a.kv_heads) * self.D, bias=False)
        self.wo = torch.nn.Linear(a.heads * self.D, a.dim, bias=False)
        self.mlp_norm = torch.nn.Parameter(torch.ones(a.dim))
        self.w13 = torch.nn.Linear(a.dim, 2 * a.ffn, bias=False)
        self.w2 = torch.nn.Linear(a.ffn, a.dim, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        H, Hkv, D = self.H, self.Hkv, self.D
        q, k, v = self.wqkv(rms_norm(x, self.attn_norm)).split([H * D, Hkv * D, Hkv * D], -1)
        q = rope(q.view(B, T, H, D).transpose(1, 2), cos, sin)
        k = rope(k.view(B, T, Hkv, D).transpose(1, 2), cos, sin)
        v = v.view(B, T, Hkv, D).transpose(1, 2)
        x = x + self.wo(attention(q, k, v).transpose(1, 2).reshape(B, T, H * D))
        g, u = self.w13(rms_norm(x, self.mlp_norm)).chunk(2, -1)
        return x + self.w2(F.silu(g) * u)


class Llama(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embed = torch.nn.Embedding(a.vocab, a.dim)
        self.blocks = torch.nn.ModuleList(Block(a) for _ in range(a.layers))
        self.norm = torch.nn.Parameter(torch.ones(a.dim))
        self.head = torch.nn.Linear(a.dim, a.vocab, bias=False)
        D = a.dim // a.heads
        inv = 10000.0 ** (-torch.arange(0, D // 2, dtype=torch.float64) * 2 / D)
        ang = torch.arange(a.seq, dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", torch.cat([ang.cos(), ang.cos()], -1).float(), persistent=False)
        self.register_buffer("sin", torch.cat([ang.sin(), ang.sin()], -1).float(), persistent=False)
        for p in self.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)

    def forward(self, tokens):
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x, self.cos, self.sin)
        return self.head(rms_norm(x, self.norm))


def gemm_rate(device):
    n = 8192
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(10):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3)
    return 2.0 * n ** 3 / statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    for name, default in [("dim", 2048), ("layers", 22), ("heads", 32), ("kv-heads", 4), ("ffn", 5632),
                          ("vocab", 32000), ("seq", 2048), ("batch", 8), ("warmup", 3), ("steps", 10)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--gemm", action="store_true")
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    out = {"mode": a.mode, "torch": torch.__version__, "shape": {k: getattr(a, k) for k in
           ("dim", "layers", "heads", "kv_heads", "ffn", "vocab", "seq", "batch")}}
    if a.device == "cuda" and not torch.cuda.is_available():
        out.update(status="skip", reason="torch.cuda.is_available() is False: no usable GPU")
        print(json.dumps(out))
        return 0
    dev = torch.device(a.device)
    torch.manual_seed(0)
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # as fluxtrain: fp32 means fp32 (bf16 GEMMs are unaffected)
        out["gpu"] = torch.cuda.get_device_name()
        if a.gemm:
            out["gemm_bf16_flops"] = gemm_rate(dev)
    model = Llama(a).to(dev)
    out["params"] = sum(x.numel() for x in model.parameters())
    kw = {"fused": True} if a.device == "cuda" else {}  # fused AdamW: one kernel per step on the GPU
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, **kw)
    step_fn = model if a.mode == "eager" else torch.compile(model)

    def step(tokens):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            logits = step_fn(tokens[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, a.vocab), tokens[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    times, losses = [], []
    t_start = time.perf_counter()
    for i in range(a.warmup + a.steps):
        tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device=dev)
        if a.device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = step(tokens)
        losses.append(float(loss))  # reads the loss back: the step is complete
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
        elif i == 0:
            out["first_step_s"] = time.perf_counter() - t0  # includes torch.compile's compilation
    fpt = flops_per_token(a)
    tps = a.batch * a.seq / statistics.median(times)
    out.update(status="ok", tokens_per_s=tps, step_s=times, loss_first=losses[0], loss_last=losses[-1],
               flops_per_token=fpt, mfu=tps * fpt / PEAK_BF16, wall_s=time.perf_counter() - t_start)
    if "gemm_bf16_flops" in out:
        out["mfu_vs_measured_gemm"] = tps * fpt / out["gemm_bf16_flops"]
    if a.device == "cuda":
        out["peak_memory_bytes"] = torch.cuda.max_memory_allocated()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
