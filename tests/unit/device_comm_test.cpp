// parallel.comm against the rank's device: which combinations put the mesh axes on the device
// transport, and the one-line errors of those that cannot work. The transport is a backend's
// (tensor/backend.h, Backend::comm), registered here by the test (this binary links no NCCL), first
// absent, then present.
#include "parallel/comm/device_comm.h"

#include <gtest/gtest.h>

#include "kernels/ops.h"
#include "tensor/backend.h"

namespace ft {
namespace {

std::string error_of(CommBackend c, const ExecContext& ctx) {
  try {
    use_device_comm(c, ctx);
  } catch (const Error& e) {
    return std::string(e.what()) + " | hint: " + e.hint();
  }
  return "";
}

std::shared_ptr<Communicator> no_make(std::shared_ptr<Communicator> host, const ExecContext&, const CommOptions&) {
  return host;
}

TEST(DeviceComm, ChoiceAgainstDeviceWithoutThenWithABackend) {
  ExecContext gpu;
  gpu.device = Device::kCUDA;
  const ExecContext& cpu = cpu_context();
  ASSERT_EQ(device_comm_backend(), nullptr);
  // Without a backend: CPU ranks use MPI; "nccl" says the build has none; a GPU rank uses MPI
  // (its device buffers staged through host memory) under "auto" and "mpi".
  EXPECT_FALSE(use_device_comm(CommBackend::kAuto, cpu));
  EXPECT_FALSE(use_device_comm(CommBackend::kMpi, cpu));
  EXPECT_NE(error_of(CommBackend::kNccl, cpu).find("parallel.comm = \"nccl\": this build has no NCCL"),
            std::string::npos);
  EXPECT_NE(error_of(CommBackend::kNccl, gpu).find("parallel.comm = \"nccl\": this build has no NCCL"),
            std::string::npos);
  EXPECT_FALSE(use_device_comm(CommBackend::kAuto, gpu));
  EXPECT_FALSE(use_device_comm(CommBackend::kMpi, gpu));

  const DeviceCommBackend nccl{"NCCL", &no_make};
  register_backend(Backend{.device = Device::kCUDA, .comm = &nccl});
  // With NCCL: "auto" puts a GPU rank on it, "mpi" keeps MPI (staged), CPU ranks stay on MPI.
  EXPECT_TRUE(use_device_comm(CommBackend::kAuto, gpu));
  EXPECT_TRUE(use_device_comm(CommBackend::kNccl, gpu));
  EXPECT_FALSE(use_device_comm(CommBackend::kMpi, gpu));
  EXPECT_FALSE(use_device_comm(CommBackend::kAuto, cpu));
  const std::string e = error_of(CommBackend::kNccl, cpu);
  EXPECT_NE(e.find("parallel.comm = \"nccl\" needs train.device = \"cuda\""), std::string::npos) << e;
  EXPECT_NE(e.find("hint: "), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << "one line: " << e;
  unregister_backend(Device::kCUDA);
}

}  // namespace
}  // namespace ft
