#include "util/cpu_info.h"

#include <fstream>

#include "util/strings.h"

// The instruction sets of -march, as data (no code): cli/isa_guard.cpp, compiled for baseline
// x86-64, reads it before anything else runs, to refuse a CPU that lacks one with a clear error
// instead of dying with SIGILL.
extern "C" const char ft_compiled_isa[] =
    ""
#if defined(__AVX2__)
    " avx2"
#endif
#if defined(__FMA__)
    " fma"
#endif
#if defined(__F16C__)
    " f16c"
#endif
#if defined(__AVX512F__)
    " avx512f"
#endif
#if defined(__AVX512BW__)
    " avx512bw"
#endif
#if defined(__AVX512VL__)
    " avx512vl"
#endif
#if defined(__AVX512BF16__)
    " avx512bf16"
#endif
#if defined(__AVX512FP16__)
    " avx512fp16"
#endif
#if defined(__AMX_BF16__)
    " amx-bf16"
#endif
    ;

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
  return std::string(trim(ft_compiled_isa));
}

}  // namespace ft
