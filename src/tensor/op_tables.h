// Op dispatch's view of the backend registry (tensor/backend.h): each device's OpTable
// (kernels/ops.h), one atomic load on every op's path. Written only by register_backend. Kept
// apart from backend.h so that kernels/ops.h — which CUDA device code includes too — pulls in no
// more than this.
//
//   const OpTable* t = detail::g_op_tables[static_cast<size_t>(ctx.device)].load();
#pragma once

#include <atomic>

#include "tensor/device.h"

namespace ft {

struct OpTable;  // kernels/ops.h

namespace detail {
extern std::atomic<const OpTable*> g_op_tables[kNumDevices];
}  // namespace detail

}  // namespace ft
