// The GPU/NCCL environment `fluxtrain launch` gives the ranks, the check of NCCL's interface and
// InfiniBand settings against the host's devices (fake /sys/class trees in a temp dir), and a
// rank's local rank and size as the launchers set them (util/local_rank.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "launch/gpu_env.h"
#include "util/error.h"
#include "util/local_rank.h"

namespace ft {
namespace {

TEST(GpuLaunchEnv, DefaultsAndForwardedNames) {
  GpuLaunchEnv e = gpu_launch_env({{"NCCL_SOCKET_IFNAME", "ib0"},
                                   {"NCCL_IB_HCA", "mlx5"},
                                   {"CUDA_VISIBLE_DEVICES", "0,1"},
                                   {"FI_PROVIDER", "efa"},
                                   {"HOME", "/root"},
                                   {"NCCL_DEBUG", "INFO"}});
  EXPECT_EQ(e.set, std::vector<std::string>{"CUDA_DEVICE_ORDER=PCI_BUS_ID"});  // NCCL_DEBUG is the user's
  EXPECT_EQ(e.forward, (std::vector<std::string>{"CUDA_VISIBLE_DEVICES", "FI_PROVIDER", "NCCL_DEBUG", "NCCL_IB_HCA",
                                                 "NCCL_SOCKET_IFNAME"}));
  GpuLaunchEnv bare = gpu_launch_env({{"PATH", "/bin"}});
  EXPECT_EQ(bare.set, (std::vector<std::string>{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "NCCL_DEBUG=WARN"}));
  EXPECT_TRUE(bare.forward.empty());
}

TEST(GpuLaunchEnv, NcclNameMatchingAsNcclReadsIt) {
  EXPECT_TRUE(nccl_name_matches("eth", "eth0"));  // prefixes
  EXPECT_TRUE(nccl_name_matches("ib,eth", "eth1"));
  EXPECT_FALSE(nccl_name_matches("ib", "eth0"));
  EXPECT_FALSE(nccl_name_matches("=eth", "eth0"));  // exact names
  EXPECT_TRUE(nccl_name_matches("=eth0,eth1", "eth1"));
  EXPECT_FALSE(nccl_name_matches("^docker,lo", "lo"));  // exclusion
  EXPECT_TRUE(nccl_name_matches("^docker,lo", "eth0"));
  EXPECT_TRUE(nccl_name_matches("=mlx5_0:1,mlx5_1:1", "mlx5_1"));  // HCA ports
  EXPECT_FALSE(nccl_name_matches("=mlx5_0:1", "mlx5_10"));
}

class NcclEnvCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("ft_nccl_env_" + std::to_string(::getpid()));
    for (const char* n : {"net/lo", "net/eth0", "net/ib0", "ib/mlx5_0", "ib/mlx5_1"})
      std::filesystem::create_directories(root_ / n);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string what(const EnvMap& env, const std::string& ib = "ib") {
    try {
      check_nccl_env(env, (root_ / "net").string(), (root_ / ib).string());
    } catch (const Error& e) {
      return std::string(e.what()) + " | " + e.hint();
    }
    return "";
  }
  std::filesystem::path root_;
};

TEST_F(NcclEnvCheck, GoodSettingsPass) {
  EXPECT_EQ(what({}), "");
  EXPECT_EQ(what({{"NCCL_SOCKET_IFNAME", "ib"}, {"NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1"}}), "");
  EXPECT_EQ(what({{"NCCL_SOCKET_IFNAME", "^docker,lo"}}), "");
  EXPECT_EQ(what({{"NCCL_IB_HCA", "mlx5"}, {"NCCL_IB_DISABLE", "1"}}, "none"), "");  // IB off: not checked
}

TEST_F(NcclEnvCheck, BadSettingsNameVariableValueAndWhatTheHostHas) {
  EXPECT_EQ(what({{"NCCL_SOCKET_IFNAME", "enp"}}).substr(0, 88),
            "NCCL_SOCKET_IFNAME=enp matches no network interface of this host (it has: eth0, ib0, lo)");
  EXPECT_NE(what({{"NCCL_SOCKET_IFNAME", "=eth"}}).find("ip -br link"), std::string::npos);
  const std::string hca = what({{"NCCL_IB_HCA", "mlx5"}}, "none");
  EXPECT_NE(hca.find("NCCL_IB_HCA=mlx5 matches no InfiniBand device of this host (it has: none)"), std::string::npos)
      << hca;
  EXPECT_NE(hca.find("NCCL_IB_DISABLE=1"), std::string::npos) << hca;
}

TEST(LocalRank, FromTheLaunchersEnvironment) {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK", "MPI_LOCALRANKID"}) ::unsetenv(v);
  EXPECT_EQ(local_rank_from_env(), 0);
  ::setenv("SLURM_LOCALID", "3", 1);
  EXPECT_EQ(local_rank_from_env(), 3);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "5", 1);
  EXPECT_EQ(local_rank_from_env(), 5);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "x", 1);  // not a number: the next launcher's
  EXPECT_EQ(local_rank_from_env(), 3);
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  ::unsetenv("SLURM_LOCALID");
}

TEST(LocalRank, SizeFromTheLaunchersEnvironment) {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE", "LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS"})
    ::unsetenv(v);
  EXPECT_EQ(local_size_from_env(), 1);
  ::setenv("SLURM_NTASKS_PER_NODE", "4", 1);
  EXPECT_EQ(local_size_from_env(), 4);
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "0", 1);  // not a size: the next launcher's
  EXPECT_EQ(local_size_from_env(), 4);
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "8", 1);
  EXPECT_EQ(local_size_from_env(), 8);
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  ::unsetenv("SLURM_NTASKS_PER_NODE");
}

}  // namespace
}  // namespace ft
