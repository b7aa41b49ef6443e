// fluxtrain generate — text from a checkpoint, to see what the model learned:
//   fluxtrain generate --ckpt runs/demo --prompt "The ls command" [--max-tokens 48]
//                      [--temperature 0.8] [--top-p 0.95] [--seed 1]
// Greedy with --temperature 0. The tokenizer is the dataset's (data.path of the checkpoint's
// config) unless --tokenizer says otherwise. For oracle tests, --tokens "1 5 7" feeds ids instead
// of text, --score prints the mean next-token loss of those tokens and --logits-out FILE writes
// the logits of every position (the training forward and the KV-cache decoder) as safetensors.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "ckpt/checkpointer.h"
#include "ckpt/probe.h"
#include "ckpt/state_io.h"
#include "cli/command.h"
#include "config/config.h"
#include "data/tokenizer.h"
#include "generate/decoder.h"
#include "model/activation_sizes.h"
#include "model/llama.h"
#include "model/param_access.h"
#include "tensor/device_flag_hint.h"
#include "tensor/device_runtime.h"
#include "tensor/device_scalars.h"
#include "util/error.h"
#include "util/log.h"
#include "util/output_path.h"
#include "util/safetensors.h"

namespace {

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::string t = s;
  for (char& c : t)
    if (c == ',') c = ' ';
  std::istringstream in(t);
  long long v;
  while (in >> v) ids.push_back(static_cast<int32_t>(v));
  if (!in.eof()) throw ft::Error(fmt::format("--tokens '{}': expected token ids separated by spaces or commas", s));
  return ids;
}

int run_generate(int argc, char** argv) {
  CLI::App app{"Generate text from a checkpoint"};
  std::string ckpt, prompt, tokens_arg, tokenizer_path, key_file, logits_out;
  int64_t max_tokens = 48;
  double temperature = 0.8, top_p = 0.95;
  uint64_t seed = 1;
  bool score = false;
  app.add_option("--ckpt", ckpt, "checkpoint (step dir, checkpoint root or run dir)")->required();
  app.add_option("--prompt", prompt, "text to continue");
  app.add_option("--tokens", tokens_arg, "token ids to continue instead of text (\"1 5 7\")");
  app.add_option("--max-tokens", max_tokens, "new tokens to generate")->check(ft::cli::at_least(1));
  app.add_option("--temperature", temperature, "sampling temperature; 0 = greedy");
  app.add_option("--top-p", top_p, "nucleus sampling: keep the most probable tokens up to this mass");
  app.add_option("--seed", seed, "random seed of the sampler");
  app.add_option("--tokenizer", tokenizer_path, "SentencePiece model (default: the dataset's tokenizer.model)");
  app.add_option("--key-file", key_file, "checkpoint key file (default FLUXTRAIN_CKPT_KEY)");
  app.add_flag("--score", score, "print the mean next-token loss of the prompt tokens (nats) instead of generating");
  app.add_option("--logits-out", logits_out, "write the prompt's logits (safetensors) instead of generating");
  std::string device = "auto";
  app.add_option("--device", device,
                 "where the model runs: cpu, cuda (the first visible GPU) or auto (a GPU when this build has the "
                 "CUDA backend and one is visible, else the CPU)");
  FT_PARSE(app, argc, argv);
  ft::check_device_name(device, "--device");  // the device names train.device takes (tensor/device_runtime.h)
  if (prompt.empty() == tokens_arg.empty()) throw ft::Error("give either --prompt TEXT or --tokens IDS");
  if (!(temperature >= 0) || !(top_p > 0 && top_p <= 1))
    throw ft::Error(fmt::format("--temperature {} must be >= 0 and --top-p {} in (0, 1]", temperature, top_p));

  // The newest checkpoint that verifies, as eval picks it: a damaged newest one is skipped, named.
  const std::string dir = ft::newest_valid_checkpoint(ckpt, "generate", key_file);
  if (!logits_out.empty()) {
    ft::check_output_path(logits_out, ft::OutputRule{.flag = "--logits-out",
                                                     .kind = "safetensors file",
                                                     .inputs = {dir},
                                                     .is_ours = ft::is_safetensors_file,
                                                     .replaces_own = true});
  }
  ft::CkptKey key;
  if (!key_file.empty() || ft::has_key_env()) key = ft::CkptKey::load(key_file);
  const ft::CkptKey* kp = key.empty() ? nullptr : &key;
  ft::CheckpointManifest m = ft::CheckpointManifest::load(dir, kp);
  ft::Config cfg = ft::config_from_json(m.config);
  // --device, whatever device the checkpoint's run trained on (checkpoints have one format).
  const ft::Device dev = ft::resolve_device(device, "--device");
  const ft::ExecContext ctx = [&] {
    try {
      return ft::make_exec_context(dev);
    } catch (const ft::Error& e) {
      throw ft::device_error_for_flag(e, "--device");
    }
  }();
  ft::ParamLayout layout = ft::ParamLayout::llama(cfg.model);
  ft::FlatParams params(layout, dev);
  {  // read on the host, one copy to the model's device
    std::vector<float> host(static_cast<size_t>(layout.total()));
    ft::CheckpointReader reader(dir, m, kp);
    reader.fill(ft::state_pieces(layout, {{0, layout.total()}}), host.data(), nullptr, nullptr);
    ft::mem_copy(ctx, params.weight_arena(), dev, host.data(), ft::Device::kCPU, host.size() * sizeof(float));
  }

  std::unique_ptr<ft::Tokenizer> tok;
  if (!prompt.empty()) {
    std::string path = tokenizer_path;
    if (path.empty() && cfg.data.source == ft::DataSource::kDataset) path = cfg.data.path + "/tokenizer.model";
    if (path.empty())
      throw ft::Error(
          fmt::format("{}: the checkpoint's run used no dataset, so there is no tokenizer for --prompt", dir),
          "pass --tokenizer FILE, or --tokens with token ids");
    tok = std::make_unique<ft::Tokenizer>(ft::Tokenizer::load(path));
    if (m.tokenizer_hash && tok->hash() != m.tokenizer_hash)
      throw ft::Error(fmt::format("{}: tokenizer {} is not the one the checkpoint was trained with", dir, path),
                      "use the dataset's tokenizer.model");
  }
  std::vector<int32_t> ids = tok ? tok->encode(prompt) : parse_ids(tokens_arg);
  if (ids.empty()) throw ft::Error("the prompt has no tokens");
  // Positions past model.max_seq_len have no RoPE table: refused before any work, not after the
  // text was generated.
  const int64_t max_len = cfg.model.max_seq_len, prompt_len = static_cast<int64_t>(ids.size());
  if (prompt_len > max_len)
    throw ft::Error(
        fmt::format("the prompt has {} tokens, more than the checkpoint's model.max_seq_len = {}", prompt_len, max_len),
        "shorten the prompt");

  if (score || !logits_out.empty()) {
    // The training forward (the code path the trainer runs) over the whole prompt, and the
    // KV-cache decoder fed one token at a time: both sets of logits.
    const int64_t T = static_cast<int64_t>(ids.size()) - (score ? 1 : 0), V = cfg.model.vocab_size;
    if (T < 1) throw ft::Error("--score needs at least two tokens");
    std::vector<int32_t> seq(ids.begin(), ids.begin() + T);
    seq.push_back(score ? ids[static_cast<size_t>(T)] : -1);  // -1: no target for the last position
    ft::Llama model(ctx, cfg.model, layout, ft::Precision::kF32);
    ft::Activations acts;
    acts.allocate(cfg.model, 1, T, ft::loss_chunk_tokens(cfg.model, 0, T), {}, {}, ft::Precision::kF32, dev);
    if (score) {
      ft::DeviceScalars sum(ctx, 1);
      model.forward_loss(params, acts, seq.data(), sum.at(0));
      const double loss = sum.read_back()[0] / static_cast<double>(T);
      fmt::print("{{\"loss\": {:.9g}, \"tokens\": {}, \"step\": {}}}\n", loss, T, m.step);
      return 0;
    }
    std::vector<float> full(static_cast<size_t>(T * V));
    ft::Tensor on_device = ft::Tensor::empty({T, V}, ft::DType::kF32, ft::MemCategory::kActivations, dev);
    model.forward_logits(params, acts, seq.data(), on_device.data<float>());
    ft::mem_copy(ctx, full.data(), ft::Device::kCPU, on_device.raw(), dev, full.size() * sizeof(float));
    ft::Decoder dec(ctx, cfg.model, layout, params.weight_arena(), T);
    std::vector<float> inc;
    for (int64_t t = 0; t < T; ++t) {
      const std::vector<float>& l = dec.feed({ids[static_cast<size_t>(t)]});
      inc.insert(inc.end(), l.begin(), l.end());
    }
    ft::SafetensorsWriter w;
    w.add("tokens", "I32", {T}, ids.data(), static_cast<size_t>(T) * 4);
    w.add("logits", "F32", {T, V}, full.data(), full.size() * 4);
    w.add("logits_decoder", "F32", {T, V}, inc.data(), inc.size() * 4);
    w.write(logits_out);
    return 0;
  }

  // The last new token is sampled, never fed: it needs no position of its own.
  const int64_t most = max_len - prompt_len + 1;
  if (max_tokens > most)
    throw ft::Error(fmt::format("--max-tokens {}: the prompt's {} tokens and {} new ones would pass the checkpoint's "
                                "model.max_seq_len = {}",
                                max_tokens, prompt_len, max_tokens, max_len),
                    fmt::format("ask for at most {} new tokens (--max-tokens {}), or shorten the prompt", most, most));
  ft::Decoder dec(ctx, cfg.model, layout, params.weight_arena(), prompt_len + max_tokens);
  ft::SampleOptions opt{temperature, top_p, seed};
  std::vector<float> logits = dec.feed(ids);
  std::vector<int32_t> out;
  const int32_t eos = tok ? tok->eos_id() : 2;
  // Ids the tokenizer cannot decode (a model vocabulary larger than the tokenizer's) are never
  // drawn.
  const size_t usable =
      tok ? static_cast<size_t>(std::min<int64_t>(tok->vocab_size(), cfg.model.vocab_size)) : logits.size();
  for (int64_t i = 0; i < max_tokens; ++i) {
    std::fill(logits.begin() + static_cast<int64_t>(usable), logits.end(), -INFINITY);
    int32_t next = ft::sample_token(logits, opt, static_cast<uint64_t>(i));
    if (next == eos) break;
    out.push_back(next);
    if (i + 1 < max_tokens) logits = dec.feed({next});
  }
  if (tok) {
    fmt::print("{}{}\n", prompt, tok->decode(out));
  } else {
    std::string s;
    for (int32_t t : out) s += (s.empty() ? "" : " ") + std::to_string(t);
    fmt::print("{}\n", s);
  }
  return 0;
}

ft::cli::Register register_generate("generate",
                                    "generate text from a checkpoint (KV cache; greedy, temperature, top-p)",
                                    run_generate);

}  // namespace
