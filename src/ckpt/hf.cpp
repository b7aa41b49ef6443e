#include "ckpt/hf.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "ckpt/checkpointer.h"
#include "ckpt/offline.h"
#include "ckpt/state_io.h"
#include "tensor/dtype.h"
#include "tensor/memory.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/safetensors.h"

namespace fs = std::filesystem;

namespace ft {

using json = nlohmann::json;

json hf_config_json(const ModelConfig& m) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", m.dim},
          {"intermediate_size", m.ffn_dim},
          {"num_hidden_layers", m.n_layers},
          {"num_attention_heads", m.n_heads},
          {"num_key_value_heads", m.n_kv_heads},
          {"head_dim", m.head_dim()},
          {"vocab_size", m.vocab_size},
          {"max_position_embeddings", m.max_seq_len},
          {"rms_norm_eps", m.norm_eps},
          {"rope_theta", m.rope_theta},
          {"rope_scaling", nullptr},
          {"tie_word_embeddings", m.tie_embeddings},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"mlp_bias", false},
          {"initializer_range", m.init_std},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"pad_token_id", nullptr},
          {"torch_dtype", "float32"},
          {"use_cache", true}};
}

ModelConfig model_from_hf_config(const json& j, const std::string& name) {
  auto bad = [&](const std::string& what) {
    return Error(fmt::format("{}: {}", name, what), "fluxtrain imports LLaMA-architecture models (LlamaForCausalLM)");
  };
  if (!j.is_object()) throw bad("not a JSON object");
  auto num = [&](const char* k) -> int64_t {
    if (!j.contains(k) || !j[k].is_number_integer() || j[k].get<int64_t>() <= 0)
      throw bad(fmt::format("'{}' is missing or not a positive integer", k));
    return j[k].get<int64_t>();
  };
  if (j.value("model_type", std::string()) != "llama")
    throw bad(fmt::format("model_type is '{}', not 'llama'", j.value("model_type", std::string("?"))));
  if (j.value("hidden_act", std::string("silu")) != "silu") throw bad("hidden_act is not silu");
  if (j.value("attention_bias", false) || j.value("mlp_bias", false)) throw bad("biases are not supported");
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) throw bad("rope_scaling is not supported");
  ModelConfig m;
  m.preset = "tiny";
  m.dim = num("hidden_size");
  m.ffn_dim = num("intermediate_size");
  m.n_layers = num("num_hidden_layers");
  m.n_heads = num("num_attention_heads");
  m.n_kv_heads =
      j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null() ? num("num_key_value_heads") : m.n_heads;
  m.vocab_size = num("vocab_size");
  m.max_seq_len = j.contains("max_position_embeddings") ? num("max_position_embeddings") : 4096;
  m.norm_eps = j.value("rms_norm_eps", 1e-6);
  m.rope_theta = j.value("rope_theta", 10000.0);
  m.tie_embeddings = j.value("tie_word_embeddings", false);
  m.init_std = j.value("initializer_range", 0.02);
  if (j.contains("head_dim") && j["head_dim"].is_number_integer() && j["head_dim"].get<int64_t>() != m.dim / m.n_heads)
    throw bad(fmt::format("head_dim {} differs from hidden_size / num_attention_heads = {}",
                          j["head_dim"].get<int64_t>(), m.dim / m.n_heads));
  m.validate();
  return m;
}

void export_hf(const std::string& ckpt_dir, const std::string& out, const CkptKey* key) {
  if (fs::exists(out) && !(fs::is_directory(out) && fs::is_empty(out)))
    throw Error(fmt::format("{} already exists", out), "choose a new output directory");
  CheckpointManifest m = CheckpointManifest::load(ckpt_dir, key);
  Config cfg = config_from_json(m.config);
  ParamLayout layout = ParamLayout::llama(cfg.model);
  CheckpointReader reader(ckpt_dir, m, key);
  fs::create_directories(out);
  SafetensorsWriter w;
  for (const ParamSpec& p : layout.specs()) {
    std::vector<float> t = reader.tensor(p.name);
    w.add(p.name, "F32", p.global_shape, t.data(), t.size() * 4);
    secure_zero(t.data(), t.size() * 4);
  }
  w.metadata("format", "pt");
  w.metadata("fluxtrain_step", std::to_string(m.step));
  w.write(out + "/model.safetensors");
  write_file_atomic(out + "/config.json", hf_config_json(cfg.model).dump(2) + "\n");
  write_file_atomic(
      out + "/generation_config.json",
      json{{"bos_token_id", 1}, {"eos_token_id", 2}, {"do_sample", true}, {"temperature", 0.8}, {"top_p", 0.95}}.dump(
          2) +
          "\n");
  // The tokenizer: the run's dataset's SentencePiece model (byte fallback, identity normaliser).
  if (cfg.data.source == DataSource::kDataset && fs::exists(cfg.data.path + "/tokenizer.model")) {
    fs::copy_file(cfg.data.path + "/tokenizer.model", out + "/tokenizer.model", fs::copy_options::overwrite_existing);
    write_file_atomic(out + "/tokenizer_config.json", json{{"tokenizer_class", "LlamaTokenizer"},
                                                           {"bos_token", "<s>"},
                                                           {"eos_token", "</s>"},
                                                           {"unk_token", "<unk>"},
                                                           {"add_bos_token", false},
                                                           {"add_eos_token", false},
                                                           {"add_prefix_space", false},
                                                           {"legacy", false},
                                                           {"model_max_length", cfg.model.max_seq_len}}
                                                              .dump(2) +
                                                          "\n");
  } else {
    log_warn(
        "export-hf: the checkpoint's data ({}) has no tokenizer.model; exported without a "
        "tokenizer",
        cfg.data.path.empty() ? "synthetic" : cfg.data.path);
  }
  log_info("export-hf: {} tensors of step {} written to {}", layout.specs().size(), m.step, out);
}

namespace {

// The Hugging Face weights: one safetensors file or the shards of an index.
class HfWeights {
 public:
  explicit HfWeights(const std::string& dir) {
    if (fs::exists(dir + "/model.safetensors")) {
      files_.push_back(std::make_unique<SafetensorsFile>(dir + "/model.safetensors"));
    } else if (fs::exists(dir + "/model.safetensors.index.json")) {
      json idx = json::parse(read_file(dir + "/model.safetensors.index.json"));
      std::map<std::string, size_t> opened;
      if (!idx.contains("weight_map") || !idx["weight_map"].is_object())
        throw Error(fmt::format("{}/model.safetensors.index.json: no weight_map", dir));
      for (auto& [name, file] : idx["weight_map"].items()) {
        std::string f = file.get<std::string>();
        if (f.find('/') != std::string::npos) throw Error(fmt::format("{}: shard name {} is not a plain name", dir, f));
        if (!opened.count(f)) {
          opened[f] = files_.size();
          files_.push_back(std::make_unique<SafetensorsFile>(dir + "/" + f));
        }
      }
    } else {
      throw Error(fmt::format("{}: no model.safetensors or model.safetensors.index.json", dir),
                  "save the model with save_pretrained(..., safe_serialization=True)");
    }
  }
  const SafetensorsFile* find(const std::string& name) const {
    for (auto& f : files_)
      if (f->has(name)) return f.get();
    return nullptr;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (auto& f : files_)
      for (auto& n : f->names()) out.push_back(n);
    return out;
  }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
};

void to_f32(const SafetensorsFile::View& v, float* out, const std::string& name) {
  const size_t n = v.bytes / safetensors_dtype_size(v.dtype);
  if (v.dtype == "F32") {
    std::memcpy(out, v.data, v.bytes);
  } else if (v.dtype == "BF16" || v.dtype == "F16") {
    const bool bf = v.dtype == "BF16";
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, v.data + 2 * i, 2);
      out[i] = bf ? bf16_to_f32(h) : f16_to_f32(h);
    }
  } else {
    throw Error(fmt::format("{} has dtype {}; F32, BF16 and F16 are supported", name, v.dtype));
  }
}

}  // namespace

Config import_hf(const std::string& hf_dir, const std::string& out, Config base, const CkptKey* key) {
  const std::string cfg_path = hf_dir + "/config.json";
  json hc;
  try {
    hc = json::parse(read_file(cfg_path));
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not JSON: {}", cfg_path, e.what()));
  }
  base.model = model_from_hf_config(hc, cfg_path);
  // The weights are read into one process's layout; base.parallel's (dp, tp, pp, cp, ZeRO) is
  // then written from it as `ckpt reshard` writes one (the files the trainer would hold).
  const ParallelConfig layout_wanted = base.parallel;
  base.parallel = ParallelConfig{};
  HfWeights weights(hf_dir);
  ParamLayout layout = ParamLayout::llama(base.model);
  std::set<std::string> used;
  std::vector<float> arena(static_cast<size_t>(layout.total()), 0.0f);
  for (const ParamSpec& p : layout.specs()) {
    const SafetensorsFile* f = weights.find(p.name);
    if (!f)
      throw Error(fmt::format("{}: no tensor {} in the weights", hf_dir, p.name),
                  "is it a LlamaForCausalLM checkpoint?");
    SafetensorsFile::View v = f->get(p.name);
    if (v.shape != p.global_shape)
      throw Error(fmt::format("{}: {} has shape {}, config.json implies {}", hf_dir, p.name, shape_str(v.shape),
                              shape_str(p.global_shape)));
    to_f32(v, arena.data() + p.offset, p.name);
    used.insert(p.name);
  }
  for (const std::string& n : weights.names()) {
    if (used.count(n)) continue;
    if (n == "lm_head.weight" && base.model.tie_embeddings) continue;  // tied: the embedding is the head
    if (n.find("rotary_emb.inv_freq") != std::string::npos) continue;  // a buffer, recomputed
    log_warn("import-hf: tensor {} is not part of the model; ignored", n);
  }
  CheckpointManifest m;
  m.step = 0;
  m.has_loader = false;
  m.origin = "import-hf";
  m.created = utc_timestamp();
  Config copy = base;
  m.config = copy.to_json();
  const bool spread = layout_wanted.world_size() > 1 || layout_wanted.zero != 0;
  const std::string one = spread ? fmt::format("{}.one-process-{}", out, ::getpid()) : out;
  if (spread && fs::exists(out))
    throw Error(fmt::format("{} already exists", out), "choose a new output directory, or remove the old one first");
  write_offline_checkpoint(
      one, m, base,
      [&](int, const std::vector<StatePiece>& pieces, float* w, float* mm, float* v) {
        for (const StatePiece& p : pieces) {
          std::memcpy(w + p.compact, arena.data() + p.spec->offset + p.begin, static_cast<size_t>(p.count()) * 4);
          std::fill_n(mm + p.compact, p.count(), 0.0f);
          std::fill_n(v + p.compact, p.count(), 0.0f);
        }
      },
      key, static_cast<uint32_t>(base.ckpt.chunk_mb << 20));
  secure_zero(arena.data(), arena.size() * 4);
  if (spread) {
    base.parallel = layout_wanted;
    try {
      reshard_checkpoint(one, out, base, key, key && !key->empty(), "import-hf");
    } catch (...) {
      std::error_code ec;
      fs::remove_all(one, ec);
      throw;
    }
    fs::remove_all(one);
  }
  log_info("import-hf: {} ({} parameters) written as a checkpoint to {}", hf_dir, base.model.num_params(), out);
  return base;
}

}  // namespace ft
