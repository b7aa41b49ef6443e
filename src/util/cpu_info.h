// What this CPU can do, read once at run time (cpuid through the compiler's builtins and
// /proc/cpuinfo), independent of what the binary was compiled for.
//
//   const ft::CpuInfo& cpu = ft::cpu_info();
//   if (cpu.avx512_bf16 || cpu.amx_bf16) { ... }          // native bf16 dot products
//   log_info("CPU {}: {}", cpu.model, cpu.describe());    // "avx2 fma f16c avx512f avx512_bf16"
#pragma once

#include <string>

extern "C" const char ft_compiled_isa[];

namespace ft {

struct CpuInfo {
  std::string model;  // "model name" of /proc/cpuinfo, or "unknown cpu"
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false;
  bool avx512_bf16 = false;  // vdpbf16ps: bf16 dot products on AVX-512
  bool avx512_fp16 = false;  // fp16 arithmetic on AVX-512 (Sapphire Rapids)
  bool amx_bf16 = false;     // AMX tiles with bf16

  // The instruction sets found, space-separated, widest last ("sse4.2 avx2 fma f16c avx512f ...").
  std::string describe() const;
};

const CpuInfo& cpu_info();

// The instruction sets this binary was compiled to use (-march), in __builtin_cpu_supports
// spelling: "avx2 fma f16c avx512f ...". cli/isa_guard.cpp checks them before main().
std::string compiled_isa();

}  // namespace ft
