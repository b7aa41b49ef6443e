// A backend's thread rule (tensor/host_threads.h) and the host's "auto" guess (tensor/backend.h):
// the CPU computes on every usable CPU, a GPU rank keeps a few host threads, the user's count
// wins on both; the config's "auto" is the CPU backend's guess from its flags.
#include <gtest/gtest.h>

#include "backends/cpu/native_precision.h"
#include "kernels/ops.h"
#include "tensor/backend.h"
#include "tensor/host_threads.h"

namespace ft {
namespace {

HostCpus offered(int usable, int sharing) {
  return {.configured = 0, .from_env = 0, .usable = usable, .sharing = sharing, .budget = "affinity test"};
}

TEST(HostThreads, TheCpuRuleTakesTheUsersCountThenTheEnvironmentThenItsShare) {
  HostCpus h = offered(16, 3);
  ThreadChoice t = host_share(h);
  EXPECT_EQ(t.threads, 5);
  EXPECT_EQ(t.source, "16 usable CPUs shared by 3 ranks on this host: affinity test");
  h.from_env = 7;
  EXPECT_EQ(host_share(h).threads, 7);
  EXPECT_EQ(host_share(h).source, "OMP_NUM_THREADS=7");
  h.configured = 2;
  EXPECT_EQ(host_share(h).threads, 2);
  EXPECT_EQ(host_share(h).source, "train.threads = 2");
  EXPECT_EQ(host_share(offered(1, 4)).threads, 1);  // never 0
}

TEST(HostThreads, AGpuRankKeepsAFewUnlessTheUserSaysOtherwise) {
  const ThreadChoice g = gpu_host_threads(offered(64, 2));
  EXPECT_EQ(g.threads, kGpuHostThreads);
  EXPECT_NE(g.source.find("64 usable CPUs shared by 2 ranks"), std::string::npos)
      << "names the share it capped: " << g.source;
  EXPECT_NE(g.source.find("at most 4"), std::string::npos) << g.source;
  EXPECT_EQ(gpu_host_threads(offered(2, 1)).threads, 2);  // fewer than the cap: the share
  HostCpus user = offered(64, 2);
  user.configured = 24;
  EXPECT_EQ(gpu_host_threads(user).threads, 24);
  user = offered(64, 2);
  user.from_env = 12;
  EXPECT_EQ(gpu_host_threads(user).threads, 12);
}

TEST(HostThreads, TheTrainerAsksTheDevicesBackend) {
  const HostCpus h = offered(64, 2);
  EXPECT_EQ(backend_threads(cpu_backend(), h).threads, 32);
  EXPECT_EQ(backend_threads(Backend{.device = Device::kCUDA}, h).threads, 32) << "no rule: the host's share";
  EXPECT_EQ(backend_threads(Backend{.device = Device::kCUDA, .threads = gpu_host_threads}, h).threads, 4);
}

TEST(GuessAutoPrecision, IsTheHostBackendsGuess) {
  (void)backend_of(ExecContext{});  // the CPU's backend registered, as before main in fluxtrain
  const PrecisionChoice want = cpu::native_precision_guess();
  const PrecisionChoice got = guess_auto_precision();
  EXPECT_EQ(got.precision, want.precision);
  EXPECT_EQ(got.reason, want.reason);
  // A host backend that guesses otherwise is asked, not the CPU's flags.
  Backend other = cpu_backend();
  other.guess_precision = [] { return PrecisionChoice{Precision::kBF16, "auto: the stand-in says bf16"}; };
  register_backend(other);
  EXPECT_EQ(guess_auto_precision().reason, "auto: the stand-in says bf16");
  other.guess_precision = nullptr;
  register_backend(other);
  EXPECT_EQ(guess_auto_precision().precision, Precision::kF32) << "no guess: fp32";
  register_backend(cpu_backend());
}

}  // namespace
}  // namespace ft
