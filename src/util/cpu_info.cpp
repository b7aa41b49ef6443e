#include "util/cpu_info.h"

#include <fstream>

#include "util/strings.h"

namespace ft {
namespace {

std::string read_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (starts_with(line, "model name")) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return std::string(trim(std::string_view(line).substr(colon + 1)));
    }
  }
  return "unknown cpu";
}

CpuInfo detect() {
  __builtin_cpu_init();
  CpuInfo c;
  c.model = read_model_name();
  c.avx2 = __builtin_cpu_supports("avx2");
  c.fma = __builtin_cpu_supports("fma");
  c.f16c = __builtin_cpu_supports("f16c");
  c.avx512f = __builtin_cpu_supports("avx512f");
  c.avx512bw = __builtin_cpu_supports("avx512bw");
  c.avx512vl = __builtin_cpu_supports("avx512vl");
  c.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
  c.avx512_fp16 = __builtin_cpu_supports("avx512fp16");
  c.amx_bf16 = __builtin_cpu_supports("amx-bf16");
  return c;
}

void add(std::string& s, bool has, const char* name) {
  if (!has) return;
  if (!s.empty()) s += ' ';
  s += name;
}

}  // namespace

std::string CpuInfo::describe() const {
  std::string s;
  add(s, avx2, "avx2");
  add(s, fma, "fma");
  add(s, f16c, "f16c");
  add(s, avx512f, "avx512f");
  add(s, avx512bw, "avx512bw");
  add(s, avx512vl, "avx512vl");
  add(s, avx512_bf16, "avx512_bf16");
  add(s, avx512_fp16, "avx512_fp16");
  add(s, amx_bf16, "amx_bf16");
  return s.empty() ? "no avx2" : s;
}

const CpuInfo& cpu_info() {
  static const CpuInfo c = detect();
  return c;
}

std::string compiled_isa() {
  std::string s;
#if defined(__AVX2__)
  add(s, true, "avx2");
#endif
#if defined(__FMA__)
  add(s, true, "fma");
#endif
#if defined(__F16C__)
  add(s, true, "f16c");
#endif
#if defined(__AVX512F__)
  add(s, true, "avx512f");
#endif
#if defined(__AVX512BW__)
  add(s, true, "avx512bw");
#endif
#if defined(__AVX512VL__)
  add(s, true, "avx512vl");
#endif
#if defined(__AVX512BF16__)
  add(s, true, "avx512_bf16");
#endif
#if defined(__AVX512FP16__)
  add(s, true, "avx512_fp16");
#endif
#if defined(__AMX_BF16__)
  add(s, true, "amx_bf16");
#endif
  return s;
}

std::string missing_compiled_isa() {
  const CpuInfo& c = cpu_info();
  std::string s;
#if defined(__AVX2__)
  add(s, !c.avx2, "avx2");
#endif
#if defined(__FMA__)
  add(s, !c.fma, "fma");
#endif
#if defined(__F16C__)
  add(s, !c.f16c, "f16c");
#endif
#if defined(__AVX512F__)
  add(s, !c.avx512f, "avx512f");
#endif
#if defined(__AVX512BW__)
  add(s, !c.avx512bw, "avx512bw");
#endif
#if defined(__AVX512VL__)
  add(s, !c.avx512vl, "avx512vl");
#endif
#if defined(__AVX512BF16__)
  add(s, !c.avx512_bf16, "avx512_bf16");
#endif
#if defined(__AVX512FP16__)
  add(s, !c.avx512_fp16, "avx512_fp16");
#endif
#if defined(__AMX_BF16__)
  add(s, !c.amx_bf16, "amx_bf16");
#endif
  (void)c;
  return s;
}

}  // namespace ft
