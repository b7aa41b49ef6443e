"""The PyTorch peer of `fluxtrain train`: the same LLaMA (tests/oracle/llama_torch.py), the same
batch, sequence length, AdamW and gradient clipping, timed over the same number of steps.

usage: torch_train.py RESOLVED_CONFIG_JSON THREADS STEPS
prints the median tokens/s and the median tokens per CPU-second (process CPU time, all threads:
it does not grow while other processes hold the cores of a shared machine)
"""
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "oracle"))
from llama_torch import Llama  # noqa: E402


def main():
    cfg = json.load(open(sys.argv[1]))
    threads, steps = int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    mc, tc, oc = cfg["model"], cfg["train"], cfg["optim"]
    C, V, H, Hkv, F = mc["dim"], mc["vocab_size"], mc["n_heads"], mc["n_kv_heads"], mc["ffn_dim"]
    D = C // H
    g = torch.Generator().manual_seed(0)
    params = {"model.embed_tokens.weight": torch.randn(V, C, generator=g) * 0.02, "model.norm.weight": torch.ones(C)}
    if not mc["tie_embeddings"]:
        params["lm_head.weight"] = torch.randn(V, C, generator=g) * 0.02
    for i in range(mc["n_layers"]):
        p = f"model.layers.{i}."
        for name, shape in [("self_attn.q_proj", (H * D, C)), ("self_attn.k_proj", (Hkv * D, C)),
                            ("self_attn.v_proj", (Hkv * D, C)), ("self_attn.o_proj", (C, H * D)),
                            ("mlp.gate_proj", (F, C)), ("mlp.up_proj", (F, C)), ("mlp.down_proj", (C, F))]:
            params[p + name + ".weight"] = torch.randn(*shape, generator=g) * 0.02
        params[p + "input_layernorm.weight"] = torch.ones(C)
        params[p + "post_attention_layernorm.weight"] = torch.ones(C)
    model = Llama(mc, params)
    opt = torch.optim.AdamW(model.parameters(), lr=oc["lr"], betas=(oc["beta1"], oc["beta2"]), eps=oc["eps"],
                            weight_decay=oc["weight_decay"])
    B, T = tc["batch_size"], tc["seq_len"]
    micro = tc["micro_batch_size"] or B
    bf16 = tc["precision"] == "bf16"
    times, cpu_times = [], []
    for step in range(steps):
        tokens = torch.randint(0, V, (B, T + 1), generator=g)
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        for m in range(0, B, micro):
            x, y = tokens[m:m + micro, :-1], tokens[m:m + micro, 1:]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, V), y.reshape(-1)) * (x.shape[0] / B)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), oc["grad_clip"])
        opt.step()
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
        print(f"torch step {step + 1}/{steps}: {B * T / times[-1]:.1f} tok/s", file=sys.stderr, flush=True)
    steady = times[1:] if len(times) > 1 else times
    steady_cpu = cpu_times[1:] if len(cpu_times) > 1 else cpu_times
    print(f"{B * T / statistics.median(steady):.2f} {B * T / statistics.median(steady_cpu):.2f}")


if __name__ == "__main__":
    main()
