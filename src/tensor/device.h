// Device: where memory lives and ops run. The CPU is the host; a CUDA device is a GPU of the node
// (which one is ExecContext::device_index).
//
//   Tensor x = Tensor::empty({N}, DType::kF32, MemCategory::kActivations, Device::kCPU);
//   device_name(x.device());   // "cpu"
#pragma once

#include <cstddef>
#include <cstdint>

namespace ft {

enum class Device : uint8_t { kCPU = 0, kCUDA = 1, kCount };
constexpr size_t kNumDevices = static_cast<size_t>(Device::kCount);
const char* device_name(Device d);  // "cpu", "cuda"

}  // namespace ft
