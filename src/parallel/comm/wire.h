// The element types float data travels in on the wire, and their widths: what a collective is
// asked to send (Communicator), what the trainer chooses per kind of traffic (parallel/wires.h)
// and what the planner counts (plan/traffic.h). A header of its own so that the planner reads
// the widths without the communicator.
//
//   comm.all_reduce(grads, n, ReduceOp::kSum, Wire::kBF16);
//   int64_t bytes = n * wire_bytes(Wire::kBF16);   // 2 per element
#pragma once

#include <cstdint>

namespace ft {

// What travels on the wire for float data: fp32, or bf16 or IEEE fp16 (half the bytes; each hop
// sums in fp32, what it sends is rounded to nearest even). fp16 keeps 3 more mantissa bits than
// bf16 but overflows past 65504 (a sum that does becomes ±inf on every rank) and flushes below
// ~6e-8: it is for loss-scaled gradients (parallel.grad_compression = "fp16").
enum class Wire : uint8_t { kF32 = 0, kBF16 = 1, kF16 = 2 };
inline int64_t wire_bytes(Wire w) {
  return w == Wire::kF32 ? 4 : 2;
}

}  // namespace ft
