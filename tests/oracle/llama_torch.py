"""The LLaMA architecture in plain PyTorch: the oracle fluxtrain's C++ model is checked against.

Written from the architecture's definition (pre-norm blocks, RMSNorm, rotary embeddings in the
"rotate half" convention, grouped-query attention, SwiGLU MLP), with parameter names of
Hugging Face's LlamaForCausalLM so weights load by name.
"""
import math

import torch
import torch.nn.functional as F


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, theta):
    # x: (B, heads, T, D)
    T, D = x.shape[-2], x.shape[-1]
    inv = theta ** (-torch.arange(0, D // 2, dtype=torch.float64) * 2 / D)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(x.dtype)
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(x.dtype)
    half = D // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rot * sin


class Llama(torch.nn.Module):
    def __init__(self, cfg, params):
        """cfg: the "model" section of fluxtrain's resolved config; params: {hf_name: tensor}."""
        super().__init__()
        self.cfg = cfg
        self.p = torch.nn.ParameterDict({k.replace(".", "/"): torch.nn.Parameter(v.clone()) for k, v in params.items()})

    def w(self, name):
        return self.p[name.replace(".", "/")]

    def forward(self, tokens):
        c = self.cfg
        B, T = tokens.shape
        H, Hkv, C = c["n_heads"], c["n_kv_heads"], c["dim"]
        D = C // H
        x = F.embedding(tokens, self.w("model.embed_tokens.weight"))
        mask = torch.full((T, T), float("-inf")).triu(1)
        for i in range(c["n_layers"]):
            pre = f"model.layers.{i}."
            h = rms_norm(x, self.w(pre + "input_layernorm.weight"), c["norm_eps"])
            q = (h @ self.w(pre + "self_attn.q_proj.weight").T).view(B, T, H, D).transpose(1, 2)
            k = (h @ self.w(pre + "self_attn.k_proj.weight").T).view(B, T, Hkv, D).transpose(1, 2)
            v = (h @ self.w(pre + "self_attn.v_proj.weight").T).view(B, T, Hkv, D).transpose(1, 2)
            q, k = rope(q, c["rope_theta"]), rope(k, c["rope_theta"])
            k = k.repeat_interleave(H // Hkv, dim=1)
            v = v.repeat_interleave(H // Hkv, dim=1)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D) + mask, dim=-1) @ v
            att = att.transpose(1, 2).reshape(B, T, H * D)
            x = x + att @ self.w(pre + "self_attn.o_proj.weight").T
            h = rms_norm(x, self.w(pre + "post_attention_layernorm.weight"), c["norm_eps"])
            g = h @ self.w(pre + "mlp.gate_proj.weight").T
            u = h @ self.w(pre + "mlp.up_proj.weight").T
            x = x + (F.silu(g) * u) @ self.w(pre + "mlp.down_proj.weight").T
        x = rms_norm(x, self.w("model.norm.weight"), c["norm_eps"])
        head = self.w("model.embed_tokens.weight") if c["tie_embeddings"] else self.w("lm_head.weight")
        return x @ head.T
