#include "tensor/precision.h"

#include <fmt/format.h>

namespace ft {

PrecisionChoice gpu_auto_precision(const char* device, int cc_major, int cc_minor) {
  if (cc_major >= 8) return {Precision::kBF16, fmt::format("auto: a {} device (bf16 tensor cores)", device)};
  return {Precision::kF32, fmt::format("auto: a {} device of compute capability {}.{} (no bf16 tensor cores)", device,
                                       cc_major, cc_minor)};
}

}  // namespace ft
