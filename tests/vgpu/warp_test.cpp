// The executor's warp operations (executor.cpp: arrivals tracked per warp, a full check of the
// lanes only when a mask is complete or the waiting lanes' masks differ): two groups with their
// own masks in one warp complete with CUDA's results under several seeds, and each misuse is
// reported — a lane that exited, a lane beyond the block, masks or operations that differ.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "vgpu/cuda_sim.h"

namespace vgpu_warp {
void two_groups(int* out, unsigned* ballots);
void exited_lane(int* out);
void beyond_block(int* out);
void mixed_masks(int* out);
void mixed_kinds(int* out);
}  // namespace vgpu_warp

namespace {

// The message of the vgpu::Error that f throws ("" if none).
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const vgpu::Error& e) {
    return e.what();
  }
  return "";
}

TEST(VgpuWarp, TwoGroupsWithTheirOwnMasksCompleteInOneWarp) {
  vgpu::DeviceMemory out(32 * sizeof(int), "out"), ballots(32 * sizeof(unsigned), "ballots");
  for (const char* seed : {"1", "2", "3", "4", "5"}) {
    setenv("FT_VGPU_SEED", seed, 1);
    vgpu_warp::two_groups(static_cast<int*>(out.get()), static_cast<unsigned*>(ballots.get()));
    for (int lane = 0; lane < 32; ++lane) {
      const unsigned mask = lane < 16 ? 0x0000ffffu : 0xffff0000u;
      unsigned want = 0;  // __ballot_sync: bit l set for each lane l of the mask whose predicate holds
      for (int l = 0; l < 32; ++l)
        if ((mask >> l & 1) && l % 3 == 0) want |= 1u << l;
      EXPECT_EQ(static_cast<int*>(out.get())[lane], lane ^ 1) << "seed " << seed << " lane " << lane;
      EXPECT_EQ(static_cast<unsigned*>(ballots.get())[lane], want) << "seed " << seed << " lane " << lane;
    }
  }
  unsetenv("FT_VGPU_SEED");
}

TEST(VgpuWarp, WaitingForALaneThatExitedFails) {
  vgpu::DeviceMemory out(32 * sizeof(int), "out");
  const std::string e = error_of([&] { vgpu_warp::exited_lane(static_cast<int*>(out.get())); });
  // Lanes arriving after lane 5 exited name it; lanes that arrived before wait for ever (deadlock).
  EXPECT_TRUE(e.find("waits for thread (5,0,0) (warp 0 lane 5), which exited") != std::string::npos ||
              e.find("deadlock") != std::string::npos)
      << e;
  EXPECT_NE(e.find("exited_lane_kernel"), std::string::npos) << e;
}

TEST(VgpuWarp, AMaskNamingLanesBeyondTheBlockFails) {
  vgpu::DeviceMemory out(40 * sizeof(int), "out");
  const std::string e = error_of([&] { vgpu_warp::beyond_block(static_cast<int*>(out.get())); });
  EXPECT_NE(e.find("names lane 8 beyond the block"), std::string::npos) << e;
}

TEST(VgpuWarp, DifferentMasksMeetingFail) {
  vgpu::DeviceMemory out(32 * sizeof(int), "out");
  const std::string e = error_of([&] { vgpu_warp::mixed_masks(static_cast<int*>(out.get())); });
  EXPECT_NE(e.find("warp operations of different masks or kinds meet"), std::string::npos) << e;
}

TEST(VgpuWarp, DifferentOperationsMeetingFail) {
  vgpu::DeviceMemory out(32 * sizeof(int), "out");
  const std::string e = error_of([&] { vgpu_warp::mixed_kinds(static_cast<int*>(out.get())); });
  EXPECT_NE(e.find("warp operations of different masks or kinds meet"), std::string::npos) << e;
}

}  // namespace
