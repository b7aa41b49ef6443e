#include "plan/research/record.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <regex>

#include "plan/search.h"
#include "plan/traffic.h"
#include "util/error.h"

namespace ft::plan {

namespace {

using nlohmann::json;

std::optional<double> num(const json& r, const char* key) {
  auto it = r.find(key);
  if (it == r.end() || it->is_null()) return std::nullopt;
  if (it->is_number()) return it->get<double>();
  if (it->is_string()) {
    try {
      return std::stod(it->get<std::string>());
    } catch (...) {
    }
  }
  throw Error(fmt::format("record field '{}' = {} is not a number", key, it->dump()));
}

std::optional<int64_t> integer(const json& r, const char* key) {
  auto v = num(r, key);
  if (!v) return std::nullopt;
  return static_cast<int64_t>(std::llround(*v));
}

// A true/false field: nullopt where absent or null; anything else is an error naming it.
std::optional<bool> boolean(const json& r, const char* key) {
  auto it = r.find(key);
  if (it == r.end() || it->is_null()) return std::nullopt;
  if (it->is_boolean()) return it->get<bool>();
  throw Error(
      fmt::format("record {}: field '{}' = {} is not true or false", r.value("id", std::string("?")), key, it->dump()),
      "write true or false (JSON booleans, unquoted)");
}

std::string str(const json& r, const char* key) {
  auto it = r.find(key);
  if (it == r.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

bool contains(const std::string& s, const char* what) {
  return s.find(what) != std::string::npos;
}

bool starts_with_ci(const std::string& s, const char* p) {
  return to_lower(s).rfind(p, 0) == 0;
}

// A record's experts: num_experts, experts_per_token (top-k), moe_ffn_hidden (each expert's
// width; default ffn_hidden), shared_experts, capacity_factor. Errors name the field and value.
MoeSpec moe_from_record(const json& r) {
  MoeSpec moe;
  const std::string who = "record " + str(r, "id");
  const auto experts = integer(r, "num_experts");
  if (!experts || *experts <= 1) {
    if (experts && *experts < 1)
      throw Error(fmt::format("{}: num_experts = {} must be at least 1", who, *experts), "1 (or no field) = dense");
    return moe;
  }
  moe.experts = *experts;
  const auto k = integer(r, "experts_per_token");
  const auto width = num(r, "moe_ffn_hidden") ? integer(r, "moe_ffn_hidden") : integer(r, "ffn_hidden");
  if (!k || !width)
    throw Error(fmt::format("{}: num_experts = {} needs experts_per_token and moe_ffn_hidden", who, *experts),
                "experts_per_token: routed experts per token (top-k); moe_ffn_hidden: one expert's MLP width");
  if (*k < 1 || *k > moe.experts)
    throw Error(fmt::format("{}: experts_per_token = {} must be between 1 and num_experts = {}", who, *k, moe.experts));
  if (*width <= 0) throw Error(fmt::format("{}: moe_ffn_hidden = {} must be positive", who, *width));
  moe.top_k = *k;
  moe.expert_ffn = *width;
  moe.shared = integer(r, "shared_experts").value_or(0);
  if (moe.shared < 0) throw Error(fmt::format("{}: shared_experts = {} must be 0 or more", who, moe.shared));
  moe.capacity_factor = num(r, "capacity_factor").value_or(0);
  if (moe.capacity_factor != 0 && moe.capacity_factor < 1)
    throw Error(fmt::format("{}: capacity_factor = {} is below 1", who, moe.capacity_factor),
                "a capacity factor pads each expert to that multiple of its mean tokens (>= 1); leave it out for "
                "a dropless router");
  return moe;
}

// A record's model: attention from heads/kv_heads, the MLP from ffn_hidden (gated or not) or,
// when absent, from the parameter count; the LM head tied or not, whichever matches params_b.
// A non-gated MLP of width f becomes the SwiGLU width 2f/3: same parameters, same FLOPs.
ModelConfig model_from_record(const json& r, int64_t tp, std::vector<std::string>& notes) {
  ModelConfig m;
  m.preset = "record";
  m.n_layers = *integer(r, "layers");
  m.dim = *integer(r, "hidden");
  m.vocab_size = *integer(r, "vocab");
  const double L = static_cast<double>(m.n_layers), h = static_cast<double>(m.dim);
  const double V = static_cast<double>(m.vocab_size);
  if (m.n_layers <= 0 || m.dim <= 0 || m.vocab_size <= 0)
    throw Error(fmt::format("record {}: layers, hidden and vocab must be positive", str(r, "id")));
  // Heads only shape the attention bookkeeping here (its FLOPs depend on hidden alone), so a
  // count that does not divide hidden into even head dims is replaced by the nearest that does.
  auto valid_heads = [&](int64_t a) { return a > 0 && m.dim % a == 0 && (m.dim / a) % 2 == 0; };
  const std::optional<int64_t> heads = integer(r, "heads");
  m.n_heads = heads.value_or(m.dim / 128);
  if (!valid_heads(m.n_heads)) {
    int64_t best = 1;
    for (int64_t a = 1; a <= m.dim / 2; ++a)
      if (valid_heads(a) && std::llabs(a - m.n_heads) < std::llabs(best - m.n_heads)) best = a;
    notes.push_back(
        heads ? fmt::format("heads = {} do not split hidden = {} into even head dims: using {}", *heads, m.dim, best)
              : fmt::format("heads not given: assumed {} (head dim {})", best, m.dim / best));
    m.n_heads = best;
  } else if (!heads) {
    notes.push_back(fmt::format("heads not given: assumed hidden/128 = {}", m.n_heads));
  }
  m.n_kv_heads = integer(r, "kv_heads").value_or(m.n_heads);
  if (m.n_kv_heads <= 0 || m.n_heads % m.n_kv_heads != 0) {
    notes.push_back(
        fmt::format("kv_heads = {} do not divide heads = {}: using {}", m.n_kv_heads, m.n_heads, m.n_heads));
    m.n_kv_heads = m.n_heads;
  }
  const double attn = static_cast<double>(m.dim * m.qkv_dim() + m.n_heads * m.head_dim() * m.dim);
  const MoeSpec moe = moe_from_record(r);
  // A mixture of experts is planned as its active model: the experts a token passes through.
  const double P = num(r, moe.enabled() ? "active_params_b" : "params_b").value_or(0) * 1e9;
  struct Option {
    const char* how;
    double mlp;
  };
  std::vector<Option> options;
  if (moe.enabled()) {
    options = {{"MoE: active MLP of experts_per_token + shared_experts experts of moe_ffn_hidden",
                3 * h * static_cast<double>(moe.expert_ffn * (moe.top_k + moe.shared))}};
  } else if (auto f = num(r, "ffn_hidden")) {
    options = {{"gated MLP (ffn_hidden)", 3 * h * *f}, {"non-gated MLP (ffn_hidden)", 2 * h * *f}};
    if (P <= 0 && std::abs(*f - 4 * h) < 1) std::swap(options[0], options[1]);
  } else if (P > 0) {
    for (double heads : {2.0, 1.0}) {
      double mlp = (P - heads * V * h) / L - attn - 2 * h;
      if (mlp > 0)
        options.push_back({heads == 2 ? "MLP from params_b (untied head)" : "MLP from params_b (tied head)", mlp});
    }
    // Both solve the count exactly; prefer the one nearer the usual 8h² MLP.
    std::sort(options.begin(), options.end(), [&](const Option& a, const Option& b) {
      return std::abs(a.mlp - 8 * h * h) < std::abs(b.mlp - 8 * h * h);
    });
  }
  if (options.empty()) options.push_back({"MLP 4h (not given)", 8 * h * h});
  double best_err = -1, best_mlp = options[0].mlp;
  bool best_tie = false;
  const char* how = options[0].how;
  for (const auto& o : options) {
    for (bool tie : {false, true}) {
      const double n = L * (attn + o.mlp + 2 * h) + h + (tie ? 1 : 2) * V * h;
      const double err = P > 0 ? std::abs(n - P) : 0;
      if (best_err < 0 || err < best_err - 1e-6 * P) {
        best_err = err;
        best_mlp = o.mlp;
        best_tie = tie;
        how = o.how;
      }
    }
  }
  // A width the tensor-parallel ranks split evenly (the MLP of a non-LLaMA model need not be).
  const int64_t multiple = 8 * tp;
  m.ffn_dim = std::max<int64_t>(multiple, std::llround(best_mlp / (3 * h) / multiple) * multiple);
  m.tie_embeddings = best_tie;
  notes.push_back(fmt::format("{}: SwiGLU-equivalent ffn_dim {}, {} embeddings; {:.3f} B parameters{}", how, m.ffn_dim,
                              best_tie ? "tied" : "untied", m.num_params() / 1e9,
                              P > 0 ? fmt::format(" (record: {:.3f} B)", P / 1e9) : ""));
  return m;
}

int64_t gpus_per_node_from_text(const std::string& text, int64_t fallback) {
  static const std::regex per_node(R"((\d+)\s*x?\s*(?:[A-Za-z][\w\-]*\s+)?GPUs?\s*(?:/|per\s+)(?:server|node|host))",
                                   std::regex::icase);
  static const std::regex host(R"((\d+)-GPU\s+(?:host|server|node))", std::regex::icase);
  static const std::regex nx(R"((\d+)\s*x\s*[AHB]\d{3}[\w\-]*\s+per\s+node)", std::regex::icase);
  std::smatch mt;
  for (const auto* re : {&per_node, &host, &nx})
    if (std::regex_search(text, mt, *re)) return std::stoll(mt[1]);
  if (contains(to_lower(text), "dgx-2")) return 16;
  return fallback;
}

ActRecompute parse_recompute(const std::string& s) {
  const std::string t = to_lower(s);
  if (starts_with_ci(t, "none") || starts_with_ci(t, "no ")) return ActRecompute::kNone;
  if (starts_with_ci(t, "full") || contains(t, "remat")) return ActRecompute::kFull;
  // Megatron's "selective" recomputes the attention core, which flash attention recomputes in
  // backward anyway: it keeps what "none" keeps (fluxtrain's "selective" is another policy).
  if (starts_with_ci(t, "selective")) return ActRecompute::kNone;
  if (contains(t, "checkpoint")) return ActRecompute::kFull;
  return ActRecompute::kNone;
}

// `throughput_basis`: "step" (the default: iteration time, benchmark windows) or "wall_clock"
// (tokens over the run's days). A wall-clock run's interruptions come from `interruptions` (a
// count over `wall_days`) when the record states them, else from the default per-GPU rate.
void read_throughput_basis(const json& r, const std::string& who, RecordJob& out) {
  const std::string basis = to_lower(str(r, "throughput_basis"));
  if (basis.empty() || basis == "step") return;
  if (basis != "wall_clock")
    throw Error(fmt::format("{}: throughput_basis = '{}' is not a basis", who, basis),
                "\"step\" (iteration time) or \"wall_clock\" (tokens over the run's days, restarts included)");
  out.wall_clock_figure = true;
  const auto count = num(r, "interruptions");
  if (!count) return;
  const auto days = num(r, "wall_days");
  if (*count < 0 || !days || *days <= 0)
    throw Error(fmt::format("{}: interruptions = {} needs a positive wall_days (got {})", who, *count,
                            days ? fmt::format("{}", *days) : "none"),
                "interruptions is a count over the run; give its wall_days");
  Job& job = out.job;
  job.resilience.failures_per_gpu_day = *count / (*days * static_cast<double>(job.num_gpus()));
  out.notes.push_back(fmt::format("wall-clock figure: {} interruptions in {} days ({:.2e} per GPU-day)", *count, *days,
                                  job.resilience.failures_per_gpu_day));
}

}  // namespace

double network_bw_from_text(const std::string& text, int64_t gpus_per_node) {
  // "[N x] [words] R Gb/s [... per GPU]": N links of R Gb/s per node unless "per GPU" follows.
  static const std::regex rate(R"((?:(\d+)\s*x\s*(?:[A-Za-z][\w\- ]*?\s)?)?(\d+(?:\.\d+)?)\s*Gb/s([^;,]{0,40}))");
  std::smatch mt;
  if (!std::regex_search(text, mt, rate)) return 0;
  const double links = mt[1].matched ? std::stod(mt[1]) : 1.0;
  const double bytes_per_s = std::stod(mt[2]) * links * 1e9 / 8;
  if (contains(to_lower(mt[3]), "per gpu")) return bytes_per_s;
  return bytes_per_s / static_cast<double>(std::max<int64_t>(gpus_per_node, 1));
}

RecordJob job_from_record(const json& r) {
  if (!r.is_object())
    throw Error("a published-run record must be a JSON object", "see configs/planner/published-runs-dev.json");
  RecordJob out;
  out.id = str(r, "id");
  const std::string who = out.id.empty() ? "record" : "record " + out.id;
  std::vector<std::string> missing;
  for (const char* k : {"layers", "hidden", "vocab", "seq_len", "num_gpus", "gpu_type"})
    if (!r.contains(k) || r[k].is_null()) missing.push_back(k);
  if (!missing.empty()) {
    std::string list;
    for (auto& k : missing) list += (list.empty() ? "" : ", ") + k;
    throw Error(fmt::format("{}: not enough information to plan: missing {}", who, list),
                "a record needs the model shape (layers, hidden, vocab), seq_len, num_gpus and gpu_type");
  }
  Job& job = out.job;
  job.model = model_from_record(r, std::max<int64_t>(1, integer(r, "tp").value_or(1)), out.notes);
  job.moe = moe_from_record(r);
  job.seq_len = *integer(r, "seq_len");
  job.model.max_seq_len = std::max(job.model.max_seq_len, job.seq_len);
  job.model.validate();
  const std::string gpu_text = str(r, "gpu_type");
  const std::string gpu_name = gpu_name_from_description(gpu_text);
  if (gpu_name.empty()) {
    std::string list;
    for (auto& g : gpu_names()) list += (list.empty() ? "" : ", ") + g;
    throw Error(fmt::format("{}: not enough information to plan: GPU type '{}' is not in the catalog", who, gpu_text),
                fmt::format("known types: {}", list));
  }
  job.gpu = find_gpu(gpu_name);
  if (auto v = num(r, "hw_peak_bf16_dense_tflops")) job.gpu.peak_bf16 = job.gpu.peak_fp16 = *v * 1e12;
  if (auto v = num(r, "hw_peak_fp8_dense_tflops")) job.gpu.peak_fp8 = *v * 1e12;
  if (auto v = num(r, "hw_hbm_bw_tb_s")) job.gpu.hbm_bw = *v * 1e12;
  if (auto v = num(r, "hw_nvlink_gb_s")) job.gpu.nvlink_bw = *v * 1e9 / 2;
  if (auto v = num(r, "gpu_mem_gb")) job.gpu.memory_bytes = *v * 1073741824.0;
  const std::string net_text = str(r, "interconnect") + "; " + str(r, "hw_network");
  job.gpus_per_node = gpus_per_node_from_text(net_text, job.gpu.gpus_per_node);
  if (double bw = network_bw_from_text(net_text, job.gpus_per_node); bw > 0) {
    job.gpu.network_bw = bw;
    out.notes.push_back(fmt::format("network {:.1f} GB/s per GPU from the interconnect description", bw / 1e9));
  }
  job.gpus = *integer(r, "num_gpus");
  if (job.gpus <= 0) throw Error(fmt::format("{}: num_gpus = {} must be positive", who, job.gpus));
  job.nodes = std::max<int64_t>(1, (job.gpus + job.gpus_per_node - 1) / job.gpus_per_node);
  job.tokens = num(r, "tokens_trained").value_or(0);

  LayoutSpec& f = out.fixed;
  const std::string prec = to_lower(str(r, "precision"));
  if (contains(prec, "fp8") || contains(prec, "float8") || contains(prec, "fp4")) {
    f.precision = Precision::kF8;
    // The scaling recipe the text names: block-scaled formats, current (dynamic) scaling, else
    // Transformer Engine's delayed scaling. torchao's Float8 linears scale dynamically.
    if (contains(prec, "nvfp4") || contains(prec, "fp4"))
      f.fp8_recipe = Fp8Recipe::kNVFP4;
    else if (contains(prec, "mxfp8"))
      f.fp8_recipe = Fp8Recipe::kMXFP8;
    else if (contains(prec, "current") || contains(prec, "fp8-cs") || contains(prec, "dynamic") ||
             contains(prec, "float8 linears"))
      f.fp8_recipe = Fp8Recipe::kCurrent;
  } else if (contains(prec, "fp16") && !contains(prec, "bf16"))
    f.precision = Precision::kF16;
  else if (prec == "fp32" || prec == "float32")
    f.precision = Precision::kF32;
  else
    f.precision = Precision::kBF16;
  if (f.precision == Precision::kBF16 && job.gpu.peak_bf16 <= 0) f.precision = Precision::kF16;
  f.wire = published_wires(f.precision);  // other systems' traffic, not this trainer's
  // Model parallelism the record does not state: pipeline and context parallelism are taken as
  // not used; tensor parallelism too when the record says so (dp = num_gpus, "no model
  // parallelism"), else the search picks it like the other open fields.
  const std::string sharding = to_lower(str(r, "zero_or_sharding"));
  const std::optional<int64_t> given_tp = integer(r, "tp"), given_dp = integer(r, "dp");
  const int64_t pp = integer(r, "pp").value_or(1), cp = integer(r, "cp").value_or(1);
  std::optional<int64_t> tp = given_tp;
  if (!tp && ((given_dp && *given_dp * pp * cp == job.gpus) || contains(sharding, "no model parallel"))) tp = 1;
  const int64_t tp_min = tp.value_or(1);
  if (tp_min <= 0 || pp <= 0 || cp <= 0) throw Error(fmt::format("{}: tp, pp and cp must be positive", who));
  if (job.gpus % (tp_min * pp * cp) != 0)
    throw Error(
        fmt::format("{}: tp × pp × cp = {} × {} × {} does not divide num_gpus = {}", who, tp_min, pp, cp, job.gpus));
  if (tp) {
    const int64_t dp = job.gpus / (*tp * pp * cp);
    if (given_dp && *given_dp != dp)
      out.notes.push_back(fmt::format("dp = {} in the record, {} from num_gpus / (tp·pp·cp)", *given_dp, dp));
    f.tp = *tp;
    f.dp = dp;
  } else {
    out.notes.push_back("tp not given: chosen by the search");
  }
  f.pp = pp;
  f.cp = cp;
  f.ep = integer(r, "ep").value_or(1);
  if (f.ep < 1) throw Error(fmt::format("{}: ep = {} must be at least 1", who, f.ep));
  if (f.ep > 1 && !job.moe.enabled())
    throw Error(fmt::format("{}: ep = {} but num_experts is not given", who, f.ep),
                "give num_experts, experts_per_token and moe_ffn_hidden for a mixture of experts");
  if (job.moe.enabled() && job.moe.experts % f.ep != 0)
    throw Error(fmt::format("{}: ep = {} does not divide num_experts = {}", who, f.ep, job.moe.experts),
                "expert parallelism splits the experts evenly: use a divisor of num_experts");
  // Interleaving is opt-in: a run that used it gives vp, or says "interleaved" in
  // pipeline_schedule without the depth (then the search picks vp like the micro-batch).
  const std::string schedule = to_lower(str(r, "pipeline_schedule"));
  if (!schedule.empty() && schedule != "1f1b" && schedule != "interleaved")
    throw Error(fmt::format("{}: pipeline_schedule = '{}' is not a schedule", who, schedule),
                "\"1f1b\" or \"interleaved\" (Narayanan et al. 2021's virtual stages)");
  if (auto vp = integer(r, "vp"))
    f.vp = *vp;
  else if (schedule != "interleaved")
    f.vp = 1;
  // The attention kernel: "flash" (fused, the scores never reach HBM; the default) or "unfused"
  // (the softmax of B·heads·T² scores written and read, as before FlashAttention, 2022).
  // "cudnn": fused too, by a kernel written for Hopper (cuDNN's fused flash attention, which
  // Transformer Engine prefers on Hopper; FlashAttention-3), priced at eff.attention_hopper.
  const std::string attention = to_lower(str(r, "attention"));
  if (!attention.empty() && attention != "flash" && attention != "unfused" && attention != "cudnn")
    throw Error(fmt::format("{}: attention = '{}' is not an attention kernel", who, attention),
                "\"flash\" (fused, FlashAttention-2's class), \"cudnn\" (fused for Hopper: cuDNN, "
                "FlashAttention-3) or \"unfused\" (materialised softmax)");
  if (attention == "unfused") f.flash_attention = false;
  job.hopper_attention = attention == "cudnn";
  // Asynchronous TP (torchtitan's "AsyncTP", Megatron's tp-comm-overlap): the record says so.
  if (auto async = boolean(r, "async_tp")) job.async_tp = *async;
  // Megatron-LM's scatter/gather of pipeline sends (Narayanan et al. 2021, Sec. 4.1): each tp rank
  // sends its 1/tp of the activation over its own NIC; absent: whole activations (or tp shards
  // under sequence parallelism).
  if (auto sg = boolean(r, "pipeline_scatter_gather")) f.pp_scatter_gather = *sg;
  const std::string zero = to_lower(str(r, "zero_or_sharding"));
  if (!zero.empty()) {
    if (starts_with_ci(zero, "none"))
      f.zero = 0;
    else if (contains(zero, "shard_grad_op") || contains(zero, "not resharded") || contains(zero, "zero-2"))
      f.zero = 2;
    else if (contains(zero, "zero-3") || contains(zero, "full_shard") || contains(zero, "fully sharded") ||
             contains(zero, "fsdp"))
      f.zero = 3;
    else if (contains(zero, "zero-1") || contains(zero, "optimizer"))
      f.zero = 1;
  }
  if (const std::string rc = str(r, "activation_recompute"); !rc.empty()) {
    f.recompute = parse_recompute(rc);
    // torchtitan's "selective op" policy saves every op's output but every second matmul's, counted
    // in a block's order wq, wk, wv, wo, w1, w3, w2: backward recomputes wk, wo and w3 (its
    // parallelize_llama.py, _custom_policy).
    if (contains(to_lower(rc), "selective op")) {
      const ModelConfig& m = job.model;
      const double h = static_cast<double>(m.dim);
      const double recomputed =
          h * static_cast<double>(m.n_kv_heads * m.head_dim()) + h * h + h * static_cast<double>(m.ffn_dim);
      job.recompute_matmul_share = recomputed / static_cast<double>(m.params_per_layer() - 2 * m.dim);
      out.notes.push_back(fmt::format("selective op recompute: {:.0f}% of the forward matmuls again in backward",
                                      100 * job.recompute_matmul_share));
    }
    // torchtitan's "selective layer" policy (selective_ac_option = n, its default "2": "checkpoint
    // every other layer", torchtitan's config_manager.py) checkpoints every n-th block whole.
    if (contains(to_lower(rc), "selective layer")) {
      job.recompute_layer_share = 0.5;
      out.notes.push_back("selective layer recompute: every second block checkpointed whole");
    }
  }
  // Sequence parallelism as the run's framework had it (GPT-NeoX before 2024 had none); absent:
  // chosen by the search.
  if (auto sp = boolean(r, "sequence_parallel")) f.sequence_parallel = *sp;
  if (auto sync = boolean(r, "synchronize_each_layer")) f.sync_each_layer = *sync;
  read_throughput_basis(r, who, out);

  // Global batch: sequences, or tokens / seq_len.
  std::optional<int64_t> gb = integer(r, "global_batch_seqs");
  if (!gb) {
    if (auto tok = num(r, "global_batch_tokens")) gb = static_cast<int64_t>(std::llround(*tok / job.seq_len));
  }
  const int64_t dp = f.dp.value_or(job.gpus / (pp * cp));  // the most replicas the batch must split over
  std::optional<int64_t> mb = integer(r, "micro_batch");
  if (mb && *mb <= 0) mb.reset();
  if (gb && *gb % dp != 0) {
    out.notes.push_back(fmt::format("global batch {} does not split over dp = {}; rounded", *gb, dp));
    gb = std::max<int64_t>(dp, *gb / dp * dp);
  }
  if (gb && mb && (*gb / dp) % *mb != 0) {
    out.notes.push_back(
        fmt::format("micro_batch {} does not divide the {} sequences per replica; chosen instead", *mb, *gb / dp));
    mb.reset();
  }
  if (mb && pp > 1) {
    // 1F1B needs at least pp micro-batches; fewer means the record's micro_batch is the rank's
    // batch that the schedule splits further.
    const int64_t per_replica = gb ? *gb / dp : *mb;
    if (per_replica / *mb < pp) {
      out.notes.push_back(
          fmt::format("micro_batch {} leaves {} < pp micro-batches: read as the rank's batch", *mb, per_replica / *mb));
      if (!gb) gb = dp * *mb;
      mb.reset();
    }
  }
  if (!gb && mb) gb = dp * *mb;  // one micro-batch per step
  if (mb) f.micro_batch = *mb;
  out.global_batch_known = gb.has_value();
  job.global_batch = gb.value_or(dp);
  return out;
}

std::optional<PublishedFigure> published_figure(const json& r) {
  if (auto v = num(r, "tokens_per_s_per_gpu"); v && *v > 0) return PublishedFigure{"tokens_per_s_per_gpu", *v};
  if (auto v = num(r, "tflops_per_gpu"); v && *v > 0) return PublishedFigure{"tflops_per_gpu", *v};
  if (auto v = num(r, "mfu"); v && *v > 0) return PublishedFigure{"mfu", *v};
  if (auto v = num(r, "tokens_per_s_total"), n = num(r, "num_gpus"); v && n && *v > 0 && *n > 0)
    return PublishedFigure{"tokens_per_s_per_gpu", *v / *n};
  return std::nullopt;
}

namespace {

// TFLOP/s per GPU of a plan in the record's convention.
double tflops_in_convention(const RecordJob& rj, const PlanResult& p, const std::string& convention) {
  const std::string c = to_lower(convention);
  const ModelConfig& m = rj.job.model;
  if (contains(c, "eq.3") || contains(c, "96*b*s*l*h^2")) {
    // Narayanan et al. 2021, eq. 3: 96·B·s·l·h²·(1 + s/6h + V/16lh) per iteration.
    const double s = static_cast<double>(rj.job.seq_len), l = static_cast<double>(m.n_layers);
    const double h = static_cast<double>(m.dim), V = static_cast<double>(m.vocab_size);
    const double per_seq = 96.0 * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    return p.tokens_per_s_per_gpu / s * per_seq / 1e12;
  }
  if (contains(c, "recompute") || contains(c, "8x") || contains(c, "hardware"))
    return p.tokens_per_s_per_gpu * p.hardware_flops_per_token / 1e12;
  return p.tflops_per_gpu;
}

}  // namespace

RecordPrediction predict(const RecordJob& rj) {
  SearchOptions o;
  o.fixed = rj.fixed;
  o.tp_within_node = false;
  o.allow_uneven_stages = true;
  o.top = 1;
  // An unknown global batch: the best of 1, 2, 4, 8, 16 sequences per replica.
  std::vector<int64_t> batches = {rj.job.global_batch};
  if (!rj.global_batch_known) {
    const int64_t dp = rj.fixed.dp.value_or(rj.job.num_gpus() / (rj.fixed.pp.value_or(1) * rj.fixed.cp.value_or(1)));
    batches = {dp, 2 * dp, 4 * dp, 8 * dp, 16 * dp};
  }
  std::optional<RecordPrediction> best, smallest;
  for (int64_t gb : batches) {
    Job job = rj.job;
    job.global_batch = gb;
    SearchResult s = search_layouts(job, o);
    if (!s.best.empty() && (!best || better(s.best[0], best->plan, RankBy::kTime, 0)))
      best = RecordPrediction{job, s.best[0], true};
    if (s.smallest && (!smallest || s.smallest->memory.total() < smallest->plan.memory.total()))
      smallest = RecordPrediction{job, *s.smallest, false};
  }
  if (best) return *best;
  if (smallest) return *smallest;
  throw Error(fmt::format("record {}: no layout matches its tp/pp/dp and batch", rj.id));
}

double predicted_figure(const json& rec, const RecordJob& rj, const RecordPrediction& p, const std::string& metric) {
  // A wall-clock figure also pays the run's interruptions and checkpoint saves (plan/goodput.h).
  const PlanResult& r = p.plan;
  const double g =
      rj.wall_clock_figure && r.wall_seconds_with_failures > 0 ? r.wall_seconds / r.wall_seconds_with_failures : 1.0;
  if (metric == "tokens_per_s_per_gpu") return r.tokens_per_s_per_gpu * g;
  if (metric == "tflops_per_gpu") return tflops_in_convention(rj, r, str(rec, "tflops_convention")) * g;
  if (metric == "mfu") {
    auto peak = num(rec, "peak_tflops_assumed");
    if (peak && *peak > 0) return r.tokens_per_s_per_gpu * r.model_flops_per_token / (*peak * 1e12) * g;
    return r.mfu * g;
  }
  throw Error(fmt::format("unknown published metric '{}'", metric));
}

json predict_record(const json& rec) {
  RecordJob rj = job_from_record(rec);
  const RecordPrediction pred = predict(rj);
  const PlanResult& p = pred.plan;
  if (!rj.global_batch_known) rj.notes.push_back("global batch not given: chosen among 1..16 sequences per replica");
  if (!pred.fits) rj.notes.push_back("no layout fits the planner's memory estimate: the least-memory one is shown");

  json out = to_json(p);
  out["id"] = rj.id;
  out["gpu"] = rj.job.gpu.name;
  out["global_batch"] = pred.job.global_batch;
  out["fits"] = pred.fits;
  const std::string convention = str(rec, "tflops_convention");
  out["model_tflops_per_gpu"] = p.tflops_per_gpu;
  out["tflops_per_gpu"] = predicted_figure(rec, rj, pred, "tflops_per_gpu");
  out["tflops_convention"] = convention.empty() ? "model FLOPs: 6N + 12·L·h·s per token" : convention;
  out["mfu"] = predicted_figure(rec, rj, pred, "mfu");
  json chosen = json::array();
  const LayoutSpec& f = rj.fixed;
  if (!f.micro_batch) chosen.push_back("micro_batch");
  if (!f.recompute) chosen.push_back("recompute");
  if (!f.zero) chosen.push_back("zero");
  if (!f.vp && p.layout.pp > 1) chosen.push_back("vp");
  if (!rj.global_batch_known) chosen.push_back("global_batch");
  out["chosen"] = chosen;
  out["notes"] = rj.notes;
  // Which terms make the step, largest first, each with its share: why a prediction is what it is.
  json terms = json::array();
  for (const auto& t : dominant_terms(p.time))
    terms.push_back({{"term", t.name}, {"seconds", t.seconds}, {"share", t.seconds / p.time.total}});
  out["dominant_terms"] = terms;
  if (auto fig = published_figure(rec)) {
    const double predicted = predicted_figure(rec, rj, pred, fig->metric);
    out["comparison"] = {{"metric", fig->metric},
                         {"predicted", predicted},
                         {"published", fig->value},
                         {"error", (predicted - fig->value) / fig->value}};
  } else {
    out["comparison"] = nullptr;
  }
  return out;
}

std::string to_lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::optional<double> number_field(const nlohmann::json& r, const char* key) {
  auto it = r.find(key);
  if (it == r.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

}  // namespace ft::plan
