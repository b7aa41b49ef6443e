#include "plan/catalog.h"

#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <thread>

#include "util/config_binder.h"
#include "util/error.h"
#include "util/strings.h"

namespace ft::plan {

namespace {

constexpr double kT = 1e12;  // TFLOP/s, TB/s
constexpr double kG = 1e9;   // GB/s
constexpr double kGiB = 1073741824.0;

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Achievable fractions per family, fitted once on the published runs of
// configs/planner/published-runs-dev.json with `fluxtrain plan --fit-records` (docs/planner.md).
// Families without published runs borrow the closest generation's values.
Efficiency family_efficiency(const std::string& family) {
  Efficiency e;
  if (family == "a100" || family == "v100") {
    e.gemm = 0.750;
    e.attention = e.attention_hopper = 0.329;  // no warpgroup MMA: a Hopper kernel's class is FA2's
  } else if (family == "h100" || family == "b200") {
    e.gemm = 0.697;
    e.gemm_fp8 = 0.697;
    e.attention = 0.195;
    e.attention_hopper = 0.377;
  } else if (family == "cpu") {
    e.gemm = 0.5;
    e.attention = e.attention_hopper = 0.2;
    e.memory_traffic = 1.0;
    e.collective = 0.5;
    return e;
  }
  e.memory_traffic = 1.649;
  e.collective = 0.8;
  e.overlap = 0.470;
  return e;
}

GpuSpec make(std::string name, std::string family, std::string description, double fp32, double bf16, double fp16,
             double fp8, double mem_gib, double hbm_tbs, double nvlink_gbs, double net_gbs) {
  GpuSpec g;
  g.name = std::move(name);
  g.family = family;
  g.description = std::move(description);
  g.peak_fp32 = fp32 * kT;
  g.peak_bf16 = bf16 * kT;
  g.peak_fp16 = fp16 * kT;
  g.peak_fp8 = fp8 * kT;
  g.memory_bytes = mem_gib * kGiB;
  g.hbm_bw = hbm_tbs * kT;
  g.nvlink_bw = nvlink_gbs * kG;
  g.network_bw = net_gbs * kG;
  g.gpus_per_node = 8;
  g.runtime_reserved = 1.0 * kGiB;
  g.eff = family_efficiency(family);
  return g;
}

}  // namespace

Precision precision_from_name(const std::string& name) {
  std::string n = lower(name);
  if (n == "fp32" || n == "f32") return Precision::kF32;
  if (n == "bf16") return Precision::kBF16;
  if (n == "fp16" || n == "f16") return Precision::kF16;
  if (n == "fp8") return Precision::kF8;
  throw Error(fmt::format("unknown precision '{}'", name), "use one of fp32, bf16, fp16, fp8");
}

double GpuSpec::peak_or_zero(Precision p) const {
  switch (p) {
    case Precision::kF32:
      return peak_fp32;
    case Precision::kBF16:
      return peak_bf16;
    case Precision::kF16:
      return peak_fp16;
    case Precision::kF8:
      return peak_fp8;
  }
  return 0;
}

double GpuSpec::peak(Precision p) const {
  if (const double v = peak_or_zero(p); v > 0) return v;
  std::string have;
  for (Precision q : {Precision::kF32, Precision::kBF16, Precision::kF16, Precision::kF8})
    if (peak_or_zero(q) > 0) have += (have.empty() ? "" : ", ") + std::string(precision_label(q));
  throw Error(fmt::format("GPU '{}' has no {} tensor cores", name, precision_label(p)),
              fmt::format("choose a precision it supports: {}", have));
}

const std::vector<GpuSpec>& gpu_catalog() {
  // Dense peaks from the vendors' datasheets (sparsity headline halved): H100 SXM / H200 "FP8
  // Tensor Core 3,958 TFLOPS" with sparsity -> 1979 dense; HGX B200 FP8 72 PFLOPS and FP4
  // 144 PFLOPS per 8 GPUs with sparsity -> 4500 and 9000 dense per GPU; GB200 NVL72 FP8 720 and
  // FP4 1,440 PFLOPS per 72 GPUs with sparsity -> 5000 and 10000 dense. Blackwell's block-scaled
  // MXFP8 runs at the FP8 rate, NVFP4 at the FP4 rate (peak_fp4; Hopper has none). NVLink per direction
  // (half the bidirectional figure); network = the usual per-GPU NIC of the reference system
  // (DGX A100: HDR 200 Gb/s, DGX H100/H200/B200: NDR 400 Gb/s per GPU).
  static const std::vector<GpuSpec> catalog = [] {
    std::vector<GpuSpec> c;
    // clang-format off
    //          name          family   description                                fp32  bf16    fp16    fp8     GiB   TB/s   NVL  net
    c.push_back(make("a100-40gb", "a100", "NVIDIA A100 SXM4 40GB (DGX A100)",        19.5, 312,   312,    0,      40,  1.555, 300, 25));
    c.push_back(make("a100-80gb", "a100", "NVIDIA A100 SXM4 80GB (DGX A100)",        19.5, 312,   312,    0,      80,  2.039, 300, 25));
    c.push_back(make("h100-sxm", "h100", "NVIDIA H100 SXM5 80GB (DGX H100)",         67,   989.4, 989.4,  1978.9, 80,  3.35,  450, 50));
    c.push_back(make("h200", "h100", "NVIDIA H200 SXM 141GB (HGX H200)",              67,   989.4, 989.4,  1978.9, 141, 4.8,   450, 50));
    c.push_back(make("b200", "b200", "NVIDIA B200 180GB (HGX/DGX B200, 1000 W)",     75,   2250,  2250,   4500,   179, 8.0,   900, 50));
    c.back().peak_fp4 = 9000 * kT;
    // Further types that published runs used.
    c.push_back(make("a100-pcie", "a100", "NVIDIA A100 PCIe 80GB (PCIe Gen4 between GPUs)", 19.5, 312,   312,    0,      80,  1.935, 32,  25));
    c.push_back(make("h100-pcie", "h100", "NVIDIA H100 PCIe 80GB (PCIe Gen5 between GPUs)", 51,   756,   756,    1513,   80,  2.0,   64,  50));
    c.push_back(make("h100-nvl", "h100", "NVIDIA H100 NVL 94GB",                      60,   835,   835,    1671,   94,  3.9,   300, 50));
    c.push_back(make("v100-32gb", "v100", "NVIDIA V100 SXM 32GB (DGX-2H, fp16 only)", 15.7, 0,     125,    0,      32,  0.9,   150, 12.5));
    c.push_back(make("h800", "h100", "NVIDIA H800 SXM5 80GB (export variant)",       67,   989.4, 989.4,  1978.9, 80,  3.35,  200, 50));
    // Meta's Grand Teton H100 (96 GB HBM2e, 500 W): peak "between SXM and NVL" (torchtitan);
    // the midpoint of 989 and 835 TFLOP/s.
    c.push_back(make("h100-96gb", "h100", "NVIDIA H100 96GB HBM2e (Grand Teton, 500 W)", 60, 912,  912,    1824,   96,  2.4,   450, 50));
    // clang-format on
    // GB200 NVL72: one NVLink domain of 72 GPUs.
    GpuSpec gb200 =
        make("gb200", "b200", "NVIDIA B200 in GB200 NVL72 (1200 W)", 80, 2500, 2500, 5000, 186, 8.0, 900, 50);
    gb200.gpus_per_node = 72;
    gb200.peak_fp4 = 10000 * kT;
    c.push_back(gb200);
    c.push_back(detect_cpu());
    return c;
  }();
  return catalog;
}

std::vector<std::string> gpu_names() {
  std::vector<std::string> n;
  for (const auto& g : gpu_catalog()) n.push_back(g.name);
  return n;
}

GpuSpec find_gpu(const std::string& name) {
  std::string n = lower(std::string(trim(name)));
  static const std::vector<std::pair<std::string, std::string>> aliases = {
      {"a100", "a100-80gb"},     {"a100-80", "a100-80gb"}, {"a100-40", "a100-40gb"}, {"h100", "h100-sxm"},
      {"h100-80gb", "h100-sxm"}, {"h200-141gb", "h200"},   {"b200-180gb", "b200"},   {"v100", "v100-32gb"},
      {"this", "cpu"},           {"host", "cpu"}};
  for (auto& [a, real] : aliases)
    if (n == a) n = real;
  for (const auto& g : gpu_catalog())
    if (g.name == n) return g;
  std::string from_text = gpu_name_from_description(name);
  if (!from_text.empty()) return find_gpu(from_text);
  std::string list;
  for (auto& g : gpu_names()) list += (list.empty() ? "" : ", ") + g;
  throw Error(fmt::format("unknown GPU type '{}'", name),
              fmt::format("known types: {} (closest: {}); describe another one with --gpu-file FILE.toml", list,
                          closest_match(n, gpu_names())));
}

std::string gpu_name_from_description(const std::string& text) {
  std::string t = lower(text);
  auto has = [&](const char* s) { return t.find(s) != std::string::npos; };
  if (has("a100")) {
    if (has("pcie")) return "a100-pcie";
    return has("40gb") || has("40 gb") ? "a100-40gb" : "a100-80gb";
  }
  if (has("h800")) return "h800";
  if (has("h200")) return "h200";
  if (has("h100")) {
    if (has("96gb") || has("96 gb") || has("grand teton")) return "h100-96gb";
    if (has("pcie")) return "h100-pcie";
    if (has("nvl")) return "h100-nvl";
    return "h100-sxm";
  }
  if (has("gb200")) return "gb200";
  if (has("b200")) return "b200";
  if (has("v100")) return "v100-32gb";
  return "";
}

GpuSpec detect_cpu() {
  const double cores = static_cast<double>(std::max(1u, std::thread::hardware_concurrency()));
  double ghz = 2.0;
  double mem = 16.0 * kGiB;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (starts_with(line, "cpu MHz")) {
      auto colon = line.find(':');
      if (colon != std::string::npos) ghz = std::stod(line.substr(colon + 1)) / 1000.0;
      break;
    }
  }
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (starts_with(line, "MemTotal:")) {
      mem = std::stod(line.substr(9)) * 1024.0;
      break;
    }
  }
  GpuSpec g;
  g.name = "cpu";
  g.family = "cpu";
  g.description = fmt::format("this machine: {:.0f} cores at {:.1f} GHz, {:.1f} GiB", cores, ghz, mem / kGiB);
  // Per core and cycle: AVX-512 2 FMA ports x 16 fp32 lanes x 2 = 64 FLOP; AMX bf16 1024 FLOP.
  g.peak_fp32 = cores * ghz * 1e9 * 64;
  g.peak_bf16 = cores * ghz * 1e9 * 1024;
  g.peak_fp16 = 0;
  g.peak_fp8 = 0;
  g.memory_bytes = mem;
  g.hbm_bw = cores * 10 * kG;  // DRAM bandwidth available to these cores (calibrated)
  g.nvlink_bw = 5 * kG;        // ranks on one machine exchange through shared memory
  g.network_bw = 1.25 * kG;    // 10 Gb/s Ethernet between machines
  g.gpus_per_node = static_cast<int64_t>(cores);
  g.runtime_reserved = 0;
  g.is_cpu = true;
  g.eff = family_efficiency("cpu");
  return g;
}

void apply_gpu_overrides(GpuSpec& g, const std::string& toml_path) {
  if (!std::filesystem::exists(toml_path))
    throw Error(fmt::format("GPU file {} does not exist", toml_path),
                "write a TOML file with a [gpu] table (docs/planner.md shows one)");
  toml::table t;
  try {
    t = toml::parse_file(toml_path);
  } catch (const toml::parse_error& e) {
    throw Error(fmt::format("{}:{}:{}: invalid TOML: {}", toml_path, e.source().begin.line, e.source().begin.column,
                            e.description()));
  }
  if (auto base = t["gpu"]["base"].value<std::string>()) g = find_gpu(*base);
  double fp32 = g.peak_fp32 / kT, bf16 = g.peak_bf16 / kT, fp16 = g.peak_fp16 / kT, fp8 = g.peak_fp8 / kT,
         fp4 = g.peak_fp4 / kT;
  double mem = g.memory_bytes / kGiB, hbm = g.hbm_bw / kT, nvl = g.nvlink_bw / kG, net = g.network_bw / kG;
  double reserved = g.runtime_reserved / kGiB;
  std::string base, name = g.name;
  ConfigBinder b;
  b.add("gpu.base", &base, "catalog entry the values start from");
  b.add("gpu.name", &name, "name shown in tables");
  b.add("gpu.peak_fp32_tflops", &fp32, "dense fp32 TFLOP/s");
  b.add("gpu.peak_bf16_tflops", &bf16, "dense bf16 TFLOP/s");
  b.add("gpu.peak_fp16_tflops", &fp16, "dense fp16 TFLOP/s");
  b.add("gpu.peak_fp8_tflops", &fp8, "dense fp8 TFLOP/s (0 = none)");
  b.add("gpu.peak_fp4_tflops", &fp4, "dense NVFP4 TFLOP/s (0 = none; Blackwell)");
  b.add("gpu.memory_gib", &mem, "device memory in GiB");
  b.add("gpu.hbm_tbs", &hbm, "memory bandwidth in TB/s");
  b.add("gpu.nvlink_gbs", &nvl, "NVLink bandwidth per GPU per direction in GB/s");
  b.add("gpu.network_gbs", &net, "network bandwidth per GPU per direction in GB/s");
  b.add("gpu.gpus_per_node", &g.gpus_per_node, "GPUs per node");
  double hop_us = g.network_hop_latency * 1e6;
  b.add("gpu.pod_gpus", &g.pod_gpus, "GPUs under one full-bisection pod (0 = one tier)");
  b.add("gpu.spine_oversubscription", &g.spine_oversubscription, "oversubscription of the spine between pods");
  b.add("gpu.network_hop_latency_us", &hop_us, "latency of one inter-node step of a collective (us)");
  b.add("gpu.runtime_reserved_gib", &reserved, "memory the runtime keeps (CUDA context, workspaces)");
  b.add("gpu.efficiency.gemm", &g.eff.gemm, "fraction of peak reached by GEMMs");
  b.add("gpu.efficiency.gemm_fp8", &g.eff.gemm_fp8, "fraction of the fp8 peak reached by fp8 GEMMs");
  b.add("gpu.efficiency.attention", &g.eff.attention, "fraction of peak reached by attention kernels");
  b.add("gpu.efficiency.attention_hopper", &g.eff.attention_hopper,
        "fraction of peak reached by Hopper-native fused attention (cuDNN, FlashAttention-3)");
  b.add("gpu.efficiency.memory_traffic", &g.eff.memory_traffic, "multiplier on element-wise bytes");
  b.add("gpu.efficiency.collective", &g.eff.collective, "fraction of link bandwidth reached by collectives");
  b.add("gpu.efficiency.overlap", &g.eff.overlap, "fraction of overlappable communication that hides");
  std::function<void(const toml::table&, const std::string&)> walk = [&](const toml::table& tab,
                                                                         const std::string& prefix) {
    for (auto&& [k, node] : tab) {
      std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
      if (auto* sub = node.as_table())
        walk(*sub, key);
      else if (node.is_integer())
        b.set(key, *node.value<int64_t>(), toml_path);
      else if (node.is_floating_point())
        b.set(key, *node.value<double>(), toml_path);
      else if (node.is_string())
        b.set(key, *node.value<std::string>(), toml_path);
      else if (node.is_boolean())
        b.set(key, *node.value<bool>(), toml_path);
      else
        throw Error(fmt::format("{}: key '{}' has an unsupported value type", toml_path, key));
    }
  };
  walk(t, "");
  g.name = name;
  g.peak_fp32 = fp32 * kT;
  g.peak_bf16 = bf16 * kT;
  g.peak_fp16 = fp16 * kT;
  g.peak_fp8 = fp8 * kT;
  g.peak_fp4 = fp4 * kT;
  g.memory_bytes = mem * kGiB;
  g.hbm_bw = hbm * kT;
  g.nvlink_bw = nvl * kG;
  g.network_bw = net * kG;
  g.runtime_reserved = reserved * kGiB;
  auto positive = [&](const char* key, double v) {
    if (!(v > 0)) throw Error(fmt::format("{}: {} = {} must be positive", toml_path, key, v));
  };
  positive("gpu.memory_gib", mem);
  positive("gpu.hbm_tbs", hbm);
  positive("gpu.nvlink_gbs", nvl);
  positive("gpu.network_gbs", net);
  if (g.gpus_per_node <= 0) throw Error(fmt::format("{}: gpu.gpus_per_node must be positive", toml_path));
  if (g.pod_gpus < 0) throw Error(fmt::format("{}: gpu.pod_gpus = {} must be 0 or more", toml_path, g.pod_gpus));
  if (!(g.spine_oversubscription >= 1))
    throw Error(
        fmt::format("{}: gpu.spine_oversubscription = {} must be at least 1", toml_path, g.spine_oversubscription),
        "1 = full bisection; Llama 3's cluster: 7");
  if (!(hop_us >= 0))
    throw Error(fmt::format("{}: gpu.network_hop_latency_us = {} must be 0 or more", toml_path, hop_us));
  g.network_hop_latency = hop_us * 1e-6;
  for (auto [key, v] : {std::pair{"gemm", g.eff.gemm},
                        {"gemm_fp8", g.eff.gemm_fp8},
                        {"attention", g.eff.attention},
                        {"attention_hopper", g.eff.attention_hopper},
                        {"collective", g.eff.collective}})
    if (!(v > 0 && v <= 1)) throw Error(fmt::format("{}: gpu.efficiency.{} = {} must be in (0, 1]", toml_path, key, v));
  if (!(g.eff.overlap >= 0 && g.eff.overlap <= 1))
    throw Error(fmt::format("{}: gpu.efficiency.overlap = {} must be in [0, 1]", toml_path, g.eff.overlap));
  if (!(g.eff.memory_traffic > 0))
    throw Error(fmt::format("{}: gpu.efficiency.memory_traffic must be positive", toml_path));
}

}  // namespace ft::plan
