#include "config/config.h"

#include <toml++/toml.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <vector>

#include "config/key_effects.h"
#include "model/param_layout.h"
#include "parallel/micro_batches.h"
#include "parallel/pipeline_parallel/pipeline_plan.h"
#include "util/config_binder.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"

namespace ft {

void Config::bind(ConfigBinder& b) {
  model.bind(b);
  train.bind(b);
  optim.bind(b);
  data.bind(b);
  parallel.bind(b);
  metrics.bind(b);
  sniff.bind(b);
  fault.bind(b);
  ckpt.bind(b);
}

namespace {

// fp16 on the gradient wire only where the gradients are loss-scaled (train.precision = "fp16"):
// the scale lifts them into fp16's range and the scaler backs off and skips a step whose sum
// overflowed. Unscaled (fp32, bf16 training: elements of 1e-5 and far below, the loss being a mean
// over the batch's tokens) they would lose their bits and flush below 6e-8, with no scale to
// adjust; bf16 sends the same bytes with fp32's range (docs/operations.md, "Gradient compression").
void check_grad_wire(const Config& c) {
  if (c.parallel.grad_compression != GradCompression::kFP16 || c.train.precision == Precision::kF16) return;
  throw Error(fmt::format("parallel.grad_compression = \"fp16\" needs train.precision = \"fp16\" (loss-scaled "
                          "gradients); it is \"{}\"",
                          precision_label(c.train.precision)),
              "use parallel.grad_compression = \"bf16\" (the same bytes, fp32's range), or train.precision = \"fp16\"");
}

// Sizes the memory accounting and the step's buffers count in 64 bits: refused before they
// overflow (a negative estimate would pass the memory check and crash later). Far above what
// any machine holds, so the memory check still gives its own, more useful, verdict below them.
void check_sizes(const Config& c, const MicroBatching& mb) {
  constexpr int64_t kMaxMicroBatches = int64_t{1} << 20;
  if (mb.count > kMaxMicroBatches) {
    throw Error(fmt::format("train.batch_size = {} in micro-batches of {} is {} micro-batches per rank: at most {}",
                            c.train.batch_size, mb.size, mb.count, kMaxMicroBatches),
                "raise train.micro_batch_size (0 = the whole per-rank batch) or lower train.batch_size");
  }
  const ModelConfig& m = c.model;
  const double L = static_cast<double>(m.n_layers), C = static_cast<double>(m.dim), F = static_cast<double>(m.ffn_dim),
               V = static_cast<double>(m.vocab_size),
               Q = (static_cast<double>(m.n_heads) + 2 * static_cast<double>(m.n_kv_heads)) * C,
               tokens = static_cast<double>(mb.size) * static_cast<double>(c.train.seq_len);
  const double params = L * (C * Q + C * C + 3 * C * F + 2 * C) + 2 * V * C;
  const double bytes =
      16 * params + 4 * tokens * (L * (8 * C + 4 * F + Q) + V) + 4 * static_cast<double>(m.max_seq_len) * C;
  constexpr double kMaxBytes = 0x1p60;  // 1 EiB
  if (!(bytes < kMaxBytes)) {
    throw Error(
        fmt::format("the model ({} layers, model.dim {}, model.ffn_dim {}, model.vocab_size {}) and micro-batch "
                    "({} x {} tokens) need about {:.2g} bytes per rank: more than the 2^60 (1 EiB) fluxtrain "
                    "can count",
                    m.n_layers, m.dim, m.ffn_dim, m.vocab_size, mb.size, c.train.seq_len, bytes),
        "use a smaller model or micro-batch; `fluxtrain train --dry-run` prints the memory of a run");
  }
}

}  // namespace

void Config::validate() const {
  model.validate();
  train.validate();
  optim.validate();
  data.validate();
  parallel.validate();
  metrics.validate();
  sniff.validate();
  fault.validate();
  ckpt.validate();
  if (fault.exclude_slow_hosts && sniff.interval == 0)
    throw Error("fault.exclude_slow_hosts = true but obs.sniff_interval = 0: no sniff test names a slow host",
                "set obs.sniff_interval (e.g. 50 steps), or fault.exclude_slow_hosts = false");
  // Across sections (errors before any rank starts): the model must split over the
  // tensor-parallel ranks, the batch into micro-batches (and, with sequence parallelism, their
  // tokens over the tp ranks), the layers into pipeline stages.
  ParamLayout::check_tp(model, parallel.tp);
  MicroBatching mb = split_batch(train.batch_size, train.micro_batch_size, parallel);
  check_sizes(*this, mb);
  if (parallel.sequence_parallel && parallel.tp > 1 && mb.size * train.seq_len % parallel.tp != 0) {
    throw Error(
        fmt::format("parallel.sequence_parallel splits the {} x {} tokens of a micro-batch "
                    "(micro-batch size x train.seq_len) over parallel.tp = {} ranks, which does not divide them",
                    mb.size, train.seq_len, parallel.tp),
        "make train.micro_batch_size x train.seq_len a multiple of parallel.tp");
  }
  if (parallel.pp > 1) PipelinePlan::make(model, train.seq_len, parallel, mb.count);
  parallel.check_seq_len(train.seq_len);
  check_grad_wire(*this);
  // A captured step replays no collective and no host decision: one rank only.
  if (train.cuda_graphs == CudaGraphs::kOn && (parallel.dp > 1 || parallel.tp > 1 || parallel.pp > 1)) {
    throw Error(fmt::format("train.cuda_graphs = \"on\" captures a single rank's step, but parallel.dp = {}, "
                            "parallel.tp = {}, parallel.pp = {} (each must be 1)",
                            parallel.dp, parallel.tp, parallel.pp),
                "use train.cuda_graphs = \"auto\": it captures only where it can");
  }
}

nlohmann::json Config::to_json() {
  ConfigBinder b;
  bind(b);
  return b.to_json();
}

namespace {

using KeyValues = std::vector<std::pair<std::string, ConfigValue>>;

// The text of a value as the file writes it (toml++ keeps only its position): one line.
std::string source_text(const toml::node& node, const std::vector<std::string_view>& lines) {
  const auto& src = node.source();
  if (src.begin.line == 0 || src.begin.line != src.end.line || src.begin.line > lines.size()) return "";
  const std::string_view line = lines[src.begin.line - 1];
  const size_t b = src.begin.column - 1, e = src.end.column - 1;
  return b < e && e <= line.size() ? std::string(line.substr(b, e - b)) : "";
}

void flatten(const toml::table& t, const std::string& prefix, const std::string& file,
             const std::vector<std::string_view>& lines, KeyValues& out) {
  for (auto&& [k, node] : t) {
    std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (auto* sub = node.as_table()) {
      flatten(*sub, key, file, lines, out);
    } else if (auto v = node.value<bool>(); node.is_boolean()) {
      out.emplace_back(key, *v);
    } else if (node.is_integer()) {
      out.emplace_back(key, *node.value<int64_t>());
    } else if (node.is_floating_point()) {
      const double d = *node.value<double>();
      if (std::abs(d) < std::numeric_limits<double>::min()) {
        if (const std::string raw = source_text(node, lines); float_underflows(raw))
          throw Error(fmt::format("{}: {} = {} is too small for a double: it would read as {}", file, key, raw, d),
                      "write 0 if zero is meant");
      }
      out.emplace_back(key, d);
    } else if (node.is_string()) {
      out.emplace_back(key, *node.value<std::string>());
    } else {
      throw Error(
          fmt::format("{}: key '{}' has an unsupported value type (arrays and dates are not config values)", file, key),
          "use a number, string or boolean");
    }
  }
}

}  // namespace

namespace {

// Every key of the file (already parsed), then every --set, then validation.
Config apply_config(const KeyValues& file_kv, const std::string& path, const std::vector<std::string>& overrides) {
  KeyValues set_kv;
  for (const auto& o : overrides) {
    auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error(fmt::format("--set {}: expected KEY=VALUE", o), "for example --set train.steps=100");
    }
    try {
      set_kv.emplace_back(o.substr(0, eq), parse_config_value(o.substr(eq + 1)));
    } catch (const Error& e) {
      throw Error(fmt::format("--set: {} = {}", o.substr(0, eq), e.what()), e.hint());
    }
  }

  // The preset decides the model's starting shape, whatever order keys come in.
  std::string preset = "tiny";
  for (const KeyValues* kv : std::initializer_list<const KeyValues*>{&file_kv, &set_kv})
    for (const auto& [k, v] : *kv)
      if (k == "model.preset") {
        if (auto* s = std::get_if<std::string>(&v))
          preset = *s;
        else
          throw Error(fmt::format("model.preset = {} must be a string", config_value_to_string(v)));
      }

  Config cfg;
  cfg.model = model_preset(preset);
  ConfigBinder b;
  cfg.bind(b);
  for (auto& [k, v] : file_kv) b.set(k, v, path);
  for (auto& [k, v] : set_kv) b.set(k, v, "--set");
  if (cfg.fault.collective_timeout_s > 0) cfg.parallel.collective_timeout_s = cfg.fault.collective_timeout_s;
  cfg.train.resolve_precision();  // decided once, at start
  std::set<std::string> set_keys;
  for (const KeyValues* kv : std::initializer_list<const KeyValues*>{&file_kv, &set_kv})
    for (auto& [k, v] : *kv) set_keys.insert(k);
  cfg.data.check_locations();  // before the key effects read data.path's manifest
  apply_key_effects(cfg, set_keys);
  cfg.validate();
  return cfg;
}

KeyValues parse_toml(const std::string& text, const std::string& path) {
  toml::table t;
  try {
    t = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    const auto& src = e.source();
    throw Error(fmt::format("{}:{}:{}: invalid TOML: {}", path, src.begin.line, src.begin.column, e.description()));
  }
  KeyValues kv;
  std::vector<std::string_view> lines;
  for (size_t begin = 0; begin <= text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    lines.push_back(std::string_view(text).substr(begin, end - begin));
    begin = end + 1;
  }
  flatten(t, "", path, lines, kv);
  return kv;
}

}  // namespace

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  KeyValues file_kv;
  if (!path.empty()) {
    if (!std::filesystem::exists(path)) {
      throw Error(fmt::format("config file {} does not exist", path),
                  "pass --config FILE (configs/tiny.toml is a small example)");
    }
    if (std::filesystem::is_directory(path)) {  // toml++ would read it as an empty table
      throw Error(fmt::format("config file {} is a directory, not a TOML file", path),
                  "pass --config FILE.toml (configs/tiny.toml is a small example)");
    }
    if (!std::filesystem::is_regular_file(path) && !std::filesystem::is_fifo(path) &&
        !std::filesystem::is_character_file(path)) {
      throw Error(fmt::format("config file {} is not a regular file", path), "pass --config FILE.toml");
    }
    file_kv = parse_toml(read_file(path), path);
  }
  return apply_config(file_kv, path, overrides);
}

Config load_config_text(const std::string& toml_text, const std::string& name,
                        const std::vector<std::string>& overrides) {
  return apply_config(parse_toml(toml_text, name), name, overrides);
}

std::string describe_config_keys() {
  Config cfg;
  ConfigBinder b;
  cfg.bind(b);
  std::string out;
  for (const auto& k : b.keys()) {
    out += fmt::format("{:<28} = {:<14} # {}\n", k, config_value_to_string(b.get(k)), b.doc(k));
  }
  return out;
}

Config config_from_json(const nlohmann::json& j) {
  Config cfg;
  std::string preset = "tiny";
  if (j.contains("model") && j["model"].contains("preset") && j["model"]["preset"].is_string())
    preset = j["model"]["preset"].get<std::string>();
  try {
    cfg.model = model_preset(preset);
  } catch (const Error&) {
  }
  ConfigBinder b;
  cfg.bind(b);
  if (!j.is_object()) return cfg;
  for (auto& [section, keys] : j.items()) {
    if (!keys.is_object()) continue;
    for (auto& [k, v] : keys.items()) {
      std::string key = section + "." + k;
      if (!b.has(key)) {
        log_warn("checkpoint config: key {} is unknown to this build; ignored", key);
        continue;
      }
      ConfigValue cv;
      if (v.is_boolean())
        cv = v.get<bool>();
      else if (v.is_number_integer())
        cv = v.get<int64_t>();
      else if (v.is_number())
        cv = v.get<double>();
      else if (v.is_string())
        cv = v.get<std::string>();
      else
        continue;
      b.set(key, cv, "checkpoint config");
    }
  }
  return cfg;
}

}  // namespace ft
