// Hugging Face interop: a checkpoint to a `LlamaForCausalLM` directory (model.safetensors,
// config.json, generation_config.json and, when the run's dataset has one, the SentencePiece
// tokenizer) and back. Parameter names are Hugging Face's already and our RoPE is its
// rotate-half convention, so tensors are copied as they are — no permutation.
//
//   export_hf("runs/demo/checkpoints/step_00000300", "hf/demo", &key);
//   Config c = import_hf("hf/demo", "ckpts/imported", base_config, nullptr);   // a step-0
//   checkpoint
#pragma once

#include <string>

#include "ckpt/crypto.h"
#include "config/config.h"

namespace ft {

// Throws when out exists (unless it is an empty directory).
void export_hf(const std::string& ckpt_dir, const std::string& out, const CkptKey* key);

// Reads hf_dir/config.json (a LLaMA: model_type "llama", SiLU, no biases, plain RoPE) and its
// weights (model.safetensors, or the shards listed in model.safetensors.index.json; F32, BF16 or
// F16), and writes a checkpoint at step 0 with zero AdamW moments into out, under base's layout
// (parallel.*: dp, tp, pp, cp, ZeRO — the files the trainer would hold; read into one process, then
// resharded as `ckpt reshard` does). `base` gives every section but model.*; returns the config
// written into the checkpoint.
Config import_hf(const std::string& hf_dir, const std::string& out, Config base, const CkptKey* key);

// The HF config.json of a model (LlamaConfig fields).
nlohmann::json hf_config_json(const ModelConfig& m);
// The ModelConfig of an HF config.json; throws naming the field that fluxtrain cannot represent.
ModelConfig model_from_hf_config(const nlohmann::json& j, const std::string& name);

}  // namespace ft
