#include "parallel/wires.h"

namespace ft {

TrainerWires trainer_wires(const ParallelConfig& p, bool bf16_compute) {
  TrainerWires w;
  w.gemm_inputs = bf16_compute ? Wire::kBF16 : Wire::kF32;
  w.attention = w.gemm_inputs;
  w.grads = p.grad_compression == GradCompression::kBF16   ? Wire::kBF16
            : p.grad_compression == GradCompression::kFP16 ? Wire::kF16
                                                           : Wire::kF32;
  return w;
}

}  // namespace ft
