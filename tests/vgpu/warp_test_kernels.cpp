// vgpu_warp_test's kernels (compiled as the .cu files are: instrumented host C++ on the SIMT
// executor), each launched on the default stream, where a fault throws vgpu::Error at once.
#include "backends/cuda/simt.h"

namespace vgpu_warp {

// Two 16-lane groups of one warp, each with its own mask: out[lane] = the xor-1 neighbour's lane,
// ballots[lane] = the group's ballot of lane % 3 == 0.
__global__ void two_groups_kernel(int* out, unsigned* ballots) {
  const int lane = static_cast<int>(threadIdx.x);
  const unsigned mask = lane < 16 ? 0x0000ffffu : 0xffff0000u;
  out[lane] = __shfl_xor_sync(mask, lane, 1);
  ballots[lane] = __ballot_sync(mask, lane % 3 == 0);
}

// Lane 5 exits; the others shuffle with a full mask, waiting for it.
__global__ void exited_lane_kernel(int* out) {
  const int lane = static_cast<int>(threadIdx.x);
  if (lane == 5) return;
  out[lane] = __shfl_sync(0xffffffffu, lane, 0);
}

// A block of 40 threads: its second warp's 8 lanes name all 32 in their mask.
__global__ void beyond_block_kernel(int* out) {
  const int t = static_cast<int>(threadIdx.x);
  out[t] = __shfl_sync(0xffffffffu, t, 0);
}

// Lane 0 names lanes 0 and 1, every other lane the whole warp.
__global__ void mixed_masks_kernel(int* out) {
  const int lane = static_cast<int>(threadIdx.x);
  out[lane] = __shfl_sync(lane == 0 ? 0x3u : 0xffffffffu, lane, 0);
}

// The same mask, different operations: even lanes vote, odd lanes shuffle.
__global__ void mixed_kinds_kernel(int* out) {
  const int lane = static_cast<int>(threadIdx.x);
  out[lane] = lane % 2 ? __shfl_sync(0xffffffffu, lane, 0) : static_cast<int>(__ballot_sync(0xffffffffu, 1));
}

void two_groups(int* out, unsigned* ballots) {
  FT_LAUNCH(two_groups_kernel, dim3(1), dim3(32), 0, nullptr)(out, ballots);
}
void exited_lane(int* out) {
  FT_LAUNCH(exited_lane_kernel, dim3(1), dim3(32), 0, nullptr)(out);
}
void beyond_block(int* out) {
  FT_LAUNCH(beyond_block_kernel, dim3(1), dim3(40), 0, nullptr)(out);
}
void mixed_masks(int* out) {
  FT_LAUNCH(mixed_masks_kernel, dim3(1), dim3(32), 0, nullptr)(out);
}
void mixed_kinds(int* out) {
  FT_LAUNCH(mixed_kinds_kernel, dim3(1), dim3(32), 0, nullptr)(out);
}

}  // namespace vgpu_warp
