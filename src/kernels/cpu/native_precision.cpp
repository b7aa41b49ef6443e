#include "kernels/cpu/native_precision.h"

#include <fmt/format.h>

#include <dnnl.hpp>

#include "util/cpu_info.h"

namespace ft::cpu {

std::string onednn_isa_name() {
  using dnnl::cpu_isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case cpu_isa::sse41:
      return "sse41";
    case cpu_isa::avx:
      return "avx";
    case cpu_isa::avx2:
      return "avx2";
    case cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case cpu_isa::avx512_core:
      return "avx512_core";
    case cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return fmt::format("isa 0x{:x}", static_cast<unsigned>(dnnl::get_effective_cpu_isa()));
  }
}

bool onednn_has_native_bf16() {
  using dnnl::cpu_isa;
  const cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == cpu_isa::avx512_core_bf16 || isa == cpu_isa::avx512_core_amx;
}

PrecisionChoice auto_precision() {
  const CpuInfo& c = cpu_info();
  const std::string flags = c.amx_bf16 ? "amx_bf16" : c.avx512_bf16 ? "avx512_bf16" : "";
  if (flags.empty()) return {Precision::kF32, "auto: the CPU has neither AVX512-BF16 nor AMX"};
  if (!onednn_has_native_bf16()) {
    return {Precision::kF32, fmt::format("auto: the CPU has {} but oneDNN is limited to {} (ONEDNN_MAX_CPU_ISA)", flags,
                                         onednn_isa_name())};
  }
  return {Precision::kBF16, fmt::format("auto: the CPU has {}", flags)};
}

}  // namespace ft::cpu
