// Faults the vgpu tests plant in kernels built with FT_VGPU_FAULTS (never the product build), to
// prove the executor's checks fire: tests/vgpu/fault_test.cpp sets them by name.
//
//   vgpu::set_fault("rmsnorm_backward_grid", -1);   // one block short
#pragma once

namespace vgpu {
bool fault_enabled(const char* name);
int fault_value(const char* name);
void set_fault(const char* name, int value);
}  // namespace vgpu
