// The memory layer (tensor/memory.h): per-device, per-category accounting; copies and fills;
// devices without a backend; the poison build; and a second device registered the way the CUDA
// backend will register its own (here backed by host memory, so the dispatch and the accounting
// are tested on any machine).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "tensor/backend.h"
#include "tensor/memory.h"
#include "tensor/tensor.h"
#include "util/error.h"

namespace ft {
namespace {

TEST(Memory, TracksLiveAndPeakPerDeviceAndCategory) {
  auto& t = MemoryTracker::global();
  const int64_t live = t.live(MemCategory::kActivations), total = t.total_live();
  const int64_t cuda = t.total_live(Device::kCUDA);
  void* p = mem_alloc(Device::kCPU, 1000, MemCategory::kActivations);
  EXPECT_EQ(t.live(MemCategory::kActivations) - live, 1000);
  EXPECT_EQ(t.live(MemCategory::kActivations, Device::kCPU) - live, 1000);  // no device: the CPU's
  EXPECT_EQ(t.total_live() - total, 1000);
  EXPECT_GE(t.peak(MemCategory::kActivations), t.live(MemCategory::kActivations));
  EXPECT_GE(t.total_peak(), t.total_live());
  EXPECT_EQ(t.total_live(Device::kCUDA), cuda);  // another device's numbers are its own
  EXPECT_NE(t.describe_live(Device::kCPU).find("activations"), std::string::npos) << t.describe_live(Device::kCPU);
  mem_free(Device::kCPU, p, 1000, MemCategory::kActivations);
  EXPECT_EQ(t.live(MemCategory::kActivations), live);
  EXPECT_EQ(t.total_live(), total);
}

TEST(Memory, OutOfMemoryNamesTheSizeTheDeviceAndWhatHoldsIt) {
  Tensor held = Tensor::empty({1024}, DType::kF32, MemCategory::kParameters);
  try {
    mem_alloc(Device::kCPU, size_t{1} << 62, MemCategory::kActivations);
    FAIL() << "an allocation of 4 EiB succeeded";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("out of memory allocating"), std::string::npos) << m;
    EXPECT_NE(m.find("for activations on cpu"), std::string::npos) << m;
    EXPECT_NE(m.find("live on cpu (parameters"), std::string::npos) << m;
    EXPECT_FALSE(e.hint().empty());
  }
}

TEST(Memory, CopiesAndFillsOnTheHost) {
  const ExecContext& ctx = cpu_context();
  std::vector<int32_t> seqs(3 * 5);  // (3, 5): three rows of five
  std::iota(seqs.begin(), seqs.end(), 0);
  std::vector<int32_t> cols(3 * 4, -7);
  // Columns [1, 5) of each row, as Llama::load_batch takes the targets of (B, T + 1) sequences.
  mem_copy_2d(ctx, cols.data(), Device::kCPU, 4 * 4, seqs.data() + 1, Device::kCPU, 5 * 4, 4 * 4, 3);
  EXPECT_EQ(cols, (std::vector<int32_t>{1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14}));
  // Overlapping host copies behave like memmove.
  mem_copy(ctx, seqs.data() + 1, Device::kCPU, seqs.data(), Device::kCPU, 4 * 4);
  EXPECT_EQ(std::vector<int32_t>(seqs.begin(), seqs.begin() + 6), (std::vector<int32_t>{0, 0, 1, 2, 3, 5}));
  mem_fill(ctx, cols.data(), Device::kCPU, 0xFF, 2 * 4);
  EXPECT_EQ(cols[0], -1);
  EXPECT_EQ(cols[1], -1);
  EXPECT_EQ(cols[2], 3);
  mem_zero(ctx, cols.data(), Device::kCPU, cols.size() * 4);
  EXPECT_EQ(cols, std::vector<int32_t>(12, 0));
}

TEST(Memory, EmptyIsPoisonedInThePoisonBuildAndZerosAreZero) {
  Tensor e = Tensor::empty({37}, DType::kF32, MemCategory::kWorkspace);
  if (mem_poison_build()) {
    for (int i = 0; i < 37; ++i) EXPECT_TRUE(std::isnan(e.data<float>()[i])) << i;
    Tensor h = Tensor::empty({5}, DType::kBF16, MemCategory::kWorkspace);
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(std::isnan(bf16_to_f32(h.data<uint16_t>()[i]))) << i;
  }
  Tensor z = Tensor::zeros({37}, DType::kF32, MemCategory::kWorkspace);
  for (int i = 0; i < 37; ++i) EXPECT_EQ(z.data<float>()[i], 0.0f) << i;
  e.zero_();
  for (int i = 0; i < 37; ++i) EXPECT_EQ(e.data<float>()[i], 0.0f) << i;
}

// Runs before StandIn registers the CUDA device's memory in this process (tests run in order;
// CTest runs each alone).
TEST(Memory, ADeviceWithoutABackendIsAClearError) {
  if (device_memory_registered(Device::kCUDA)) GTEST_SKIP() << "this build has CUDA memory";
  for (auto make : {&Tensor::empty, &Tensor::zeros}) {
    try {
      make({4}, DType::kF32, MemCategory::kActivations, Device::kCUDA);
      FAIL() << "a CUDA tensor without a CUDA backend";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no memory on device 'cuda'"), std::string::npos) << e.what();
      EXPECT_FALSE(e.hint().empty());
    }
  }
  EXPECT_THROW(mem_alloc(Device::kCUDA, 64, MemCategory::kOther), Error);
  EXPECT_EQ(MemoryTracker::global().total_live(Device::kCUDA), 0);
}

// A second device as a backend registers it: host memory behind it, every call counted.
struct StandIn {
  static inline int allocs = 0, frees = 0, copies = 0, fills = 0;
  static inline Device last_dst = Device::kCPU, last_src = Device::kCPU;
  static void* alloc(size_t bytes) {
    ++allocs;
    return std::malloc(bytes);
  }
  static void free(void* p, size_t) {
    ++frees;
    std::free(p);
  }
  static void copy_2d(const ExecContext& ctx, void* dst, Device dd, size_t dp, const void* src, Device sd, size_t sp,
                      size_t row, size_t rows) {
    ++copies;
    last_dst = dd;
    last_src = sd;
    for (size_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<char*>(dst) + r * dp, static_cast<const char*>(src) + r * sp, row);
  }
  static void fill(const ExecContext&, void* dst, uint8_t byte, size_t bytes) {
    ++fills;
    std::memset(dst, byte, bytes);
  }
};

bool g_stand_in = false;  // a test here registered Device::kCUDA's memory

// Device::kCUDA's backend with its memory replaced by m (the rest as registered, if any).
void register_memory(const DeviceMemory& m) {
  const Backend* now = registered_backend(Device::kCUDA);
  Backend b = now ? *now : Backend{.device = Device::kCUDA};
  b.memory = m;
  register_backend(b);
}

TEST(Memory, ARegisteredDeviceIsAllocatedCopiedAndAccountedThroughItsBackend) {
  if (device_memory_registered(Device::kCUDA)) GTEST_SKIP() << "this build has CUDA memory";
  g_stand_in = true;
  register_memory({StandIn::alloc, StandIn::free, StandIn::copy_2d, StandIn::fill});
  ASSERT_TRUE(device_memory_registered(Device::kCUDA));
  auto& t = MemoryTracker::global();
  const int64_t cpu_before = t.total_live();
  const ExecContext gpu{.device = Device::kCUDA};
  {
    Tensor d = Tensor::zeros({6}, DType::kF32, MemCategory::kGradients, Device::kCUDA);
    EXPECT_EQ(d.device(), Device::kCUDA);
    EXPECT_EQ(StandIn::allocs, 1);
    EXPECT_GE(StandIn::fills, 1);  // zeros() fills on the device (and the poison build poisons first)
    EXPECT_EQ(t.live(MemCategory::kGradients, Device::kCUDA), 24);
    EXPECT_EQ(t.total_live(Device::kCUDA), 24);
    EXPECT_EQ(t.total_live(), cpu_before);  // the CPU's numbers do not move
    EXPECT_NE(t.describe_live(Device::kCUDA).find("on cuda (gradients"), std::string::npos);

    // Host -> device and back through the backend.
    Tensor h = Tensor::empty({6}, DType::kF32, MemCategory::kOther);
    for (int i = 0; i < 6; ++i) h.data<float>()[i] = 0.5f * static_cast<float>(i);
    d.copy_from(h);
    EXPECT_EQ(StandIn::last_dst, Device::kCUDA);
    EXPECT_EQ(StandIn::last_src, Device::kCPU);
    Tensor back = Tensor::zeros({6}, DType::kF32, MemCategory::kOther);
    mem_copy(gpu, back.raw(), Device::kCPU, d.raw(), Device::kCUDA, 24);
    EXPECT_EQ(StandIn::last_dst, Device::kCPU);
    EXPECT_EQ(StandIn::last_src, Device::kCUDA);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(back.data<float>()[i], 0.5f * static_cast<float>(i));
    EXPECT_EQ(StandIn::copies, 2);
  }
  EXPECT_EQ(StandIn::frees, 1);
  EXPECT_EQ(t.total_live(Device::kCUDA), 0);
  EXPECT_EQ(t.peak(MemCategory::kGradients, Device::kCUDA), 24);
  // A device copy ordered on another device's context is a bug of ours, not a user error.
  int x = 0, y = 1;
  EXPECT_ANY_THROW(mem_copy(cpu_context(), &x, Device::kCUDA, &y, Device::kCPU, 4));
}

// A device that faults (a GPU after an illegal address: every later call fails) while its memory is
// freed: mem_free never throws — also while an exception unwinds the stack, where a throw would end
// in std::terminate — counts the memory freed, and notes the failures (the first logged once).
struct Faulty {
  static inline bool faulted = false;
  static void fill(const ExecContext& ctx, void* dst, uint8_t byte, size_t bytes) {
    if (faulted)
      throw Error("CUDA op memory fill (bytes=24): cudaMemsetAsync failed: an illegal memory access was encountered");
    StandIn::fill(ctx, dst, byte, bytes);
  }
};

TEST(Memory, FreeingOnAFaultedDeviceNeverThrowsAndIsNoted) {
  if (device_memory_registered(Device::kCUDA) && !g_stand_in) GTEST_SKIP() << "this build has CUDA memory";
  g_stand_in = true;
  register_memory({StandIn::alloc, StandIn::free, StandIn::copy_2d, Faulty::fill});
  auto& t = MemoryTracker::global();
  const int64_t failures = mem_free_failures();
  try {
    Tensor a = Tensor::empty({6}, DType::kF32, MemCategory::kActivations, Device::kCUDA);
    Tensor b = Tensor::empty({6}, DType::kF32, MemCategory::kActivations, Device::kCUDA);
    Faulty::faulted = true;
    throw Error("CUDA op add_inplace (n=6): the op that faulted");  // a and b are freed while it unwinds
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "CUDA op add_inplace (n=6): the op that faulted");
  }
  Faulty::faulted = false;
  EXPECT_EQ(t.total_live(Device::kCUDA), 0);
  EXPECT_EQ(mem_free_failures(), failures + 2);
  EXPECT_NE(mem_first_free_failure().find("freeing cuda memory: CUDA op memory fill (bytes=24)"), std::string::npos)
      << mem_first_free_failure();
  register_memory({StandIn::alloc, StandIn::free, StandIn::copy_2d, StandIn::fill});
}

}  // namespace
}  // namespace ft
