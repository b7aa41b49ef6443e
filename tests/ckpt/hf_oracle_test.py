"""Hugging Face interop against the reference implementation (transformers' LlamaForCausalLM).

Export: the tiny model trained a few steps (untied GQA, tied MHA, and untied GQA saved sharded
under dp2 x tp2 ZeRO 1) is exported with `fluxtrain ckpt export-hf`; transformers loads the
directory and its fp32 logits on a token sequence must equal ours — from the training forward
and from the KV-cache decoder — within 1e-4 (relative to the largest logit), and greedy
generation (`fluxtrain generate --temperature 0`, KV cache) must produce the tokens that greedy
decoding with transformers' forward does.

Import: a randomly initialised transformers LlamaForCausalLM (norm weights randomised too, so a
misplaced tensor shows) is saved with save_pretrained, imported with `fluxtrain ckpt import-hf`,
and our loss on a token sequence must equal transformers' loss on the same tokens (1e-5
relative); then training continues from the imported checkpoint.

usage: hf_oracle_test.py FLUXTRAIN CONFIG   (run with the project venv's python: tests/requirements.txt)
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "oracle"))
import ckpt_lib as L  # noqa: E402
import safetensors_np  # noqa: E402

FT, CONFIG = sys.argv[1], sys.argv[2]
TOKENS = [1, 17, 200, 5, 99, 3, 3, 250, 42, 7, 128, 64, 31, 2, 77, 160, 11, 9, 190, 0]


def ours_logits(ckpt, tmp):
    out = os.path.join(tmp, "logits.safetensors")
    subprocess.run([FT, "generate", "--ckpt", ckpt, "--tokens", " ".join(map(str, TOKENS)), "--logits-out", out],
                   check=True)
    st, _ = safetensors_np.load(out)
    return st["logits"], st["logits_decoder"]


def hf_logits(model_dir):
    model = LlamaForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        return model(torch.tensor([TOKENS])).logits[0].numpy()


def greedy(ckpt, model_dir, failures, name, n=12):
    """Greedy generation: ours (KV cache) against transformers' generate() on the same prompt."""
    prompt = TOKENS[:6]
    g = subprocess.run([FT, "generate", "--ckpt", ckpt, "--tokens", " ".join(map(str, prompt)), "--temperature", "0",
                        "--max-tokens", str(n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ours = [int(t) for t in g.stdout.split()]
    model = LlamaForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    # Greedy decoding with transformers' forward (its generate() imports torch.distributed.fsdp,
    # which Debian's torch 1.13 cannot import under Python 3.11): argmax of the last position's
    # logits, appended, n times; stopping before the end-of-sequence id 2 as ours does.
    ids, ref = list(prompt), []
    with torch.no_grad():
        for _ in range(n):
            nxt = int(model(torch.tensor([ids])).logits[0, -1].argmax())
            if nxt == 2:
                break
            ids.append(nxt)
            ref.append(nxt)
    print(f"greedy {name:>14}: transformers {ref}, fluxtrain generate {ours} "
          f"({'same' if ours == ref else 'DIFFERENT'})")
    if g.returncode != 0 or ours != ref:
        failures.append(f"greedy {name}: ours {ours} (rc {g.returncode} {g.stderr[-300:]}) vs transformers {ref}")


def export_case(tmp, name, sets, failures, nproc=1):
    run = os.path.join(tmp, name)
    L.train(FT, CONFIG, run, ["train.steps=3", "ckpt.interval=3", "train.eval_interval=0", "train.batch_size=4",
                              "train.seq_len=16"] + sets, nproc=nproc)
    out = os.path.join(tmp, name + "_hf")
    p = L.ckpt(FT, "export-hf", run, out)
    if p.returncode != 0:
        failures.append(f"export-hf {name}: {p.stderr}")
        return
    cfg = json.load(open(os.path.join(out, "config.json")))
    ref = hf_logits(out)
    full, dec = ours_logits(run, tmp)
    scale = float(np.abs(ref).max())
    e_full = float(np.abs(full - ref).max()) / scale
    e_dec = float(np.abs(dec - ref).max()) / scale
    print(f"export {name:>14}: transformers {transformers.__version__} logits ({ref.shape[0]}x{ref.shape[1]}, "
          f"max |logit| {scale:.3f}) vs ours: training forward {e_full:.2e}, KV-cache decoder {e_dec:.2e} "
          f"(tied={cfg['tie_word_embeddings']}, kv heads {cfg['num_key_value_heads']}/{cfg['num_attention_heads']})")
    if e_full > 1e-4 or e_dec > 1e-4:
        failures.append(f"export {name}: logits differ by {e_full:.2e} / {e_dec:.2e}")
    greedy(run, out, failures, name)


def import_case(tmp, name, tied, kv, failures):
    torch.manual_seed(1)
    conf = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=160, num_hidden_layers=3,
                       num_attention_heads=4, num_key_value_heads=kv, rms_norm_eps=1e-5, rope_theta=10000.0,
                       max_position_embeddings=256, tie_word_embeddings=tied, initializer_range=0.1)
    model = LlamaForCausalLM(conf)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "norm" in n:
                p.copy_(1 + 0.2 * torch.randn_like(p))
    hf_dir = os.path.join(tmp, name + "_src")
    model.save_pretrained(hf_dir, safe_serialization=True)
    model.eval()
    with torch.no_grad():
        ids = torch.tensor([TOKENS])
        ref = float(model(ids, labels=ids).loss)
    out = os.path.join(tmp, name + "_ckpt")
    p = L.ckpt(FT, "import-hf", hf_dir, out, "--config", CONFIG)
    if p.returncode != 0:
        failures.append(f"import-hf {name}: {p.stderr}")
        return
    s = subprocess.run([FT, "generate", "--ckpt", out, "--tokens", " ".join(map(str, TOKENS)), "--score"],
                       stdout=subprocess.PIPE, text=True, check=True)
    ours = json.loads(s.stdout)["loss"]
    err = abs(ours - ref) / abs(ref)
    print(f"import {name:>14}: transformers loss {ref:.7f}, fluxtrain loss {ours:.7f} on the same "
          f"{len(TOKENS)} tokens (rel {err:.1e})")
    if err > 1e-5:
        failures.append(f"import {name}: loss {ours} vs {ref}")
    # Training continues from the imported weights.
    run = os.path.join(tmp, name + "_train")
    t = L.train(FT, out + ".toml", run, ["train.steps=2", "train.eval_interval=0", "train.batch_size=4",
                                         "train.seq_len=16", "data.source=\"synthetic\""], resume=out, check=False)
    if t.returncode != 0 or sorted(L.losses(run)) != [1, 2]:
        failures.append(f"import {name}: training from the import failed: {t.stderr[-800:]}")


def main():
    failures = []
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        export_case(tmp, "untied GQA", [], failures)
        export_case(tmp, "tied MHA", ["model.tie_embeddings=true", "model.n_kv_heads=4"], failures)
        # Saved sharded (tensor x data parallel, ZeRO 1): export gathers the pieces by geometry.
        export_case(tmp, "dp2 x tp2 z1", ["parallel.dp=2", "parallel.tp=2", "parallel.zero=1"], failures, nproc=4)
        import_case(tmp, "untied GQA", False, 2, failures)
        import_case(tmp, "tied MHA", True, 4, failures)
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("hf oracle: export and import agree with transformers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
