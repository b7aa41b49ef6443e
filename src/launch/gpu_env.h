// The environment `fluxtrain launch` gives the ranks of a job so that GPUs and NCCL work on a
// cluster (deploy/slurm and deploy/k8s set the same; docs/operations.md, "GPUs and NCCL"):
//
//   GpuLaunchEnv e = gpu_launch_env(current_environment());
//   e.set;       // {"CUDA_DEVICE_ORDER=PCI_BUS_ID", "NCCL_DEBUG=WARN"} where not set already
//   e.forward;   // names mpirun must pass on (-x): every NCCL_*, CUDA_*, FI_*, UCX_* variable
//   check_nccl_env(env, "/sys/class/net", "/sys/class/infiniband");   // ft::Error on a bad value
//
// One GPU per rank: every rank sees all of its node's GPUs and drives CUDA device `local rank mod
// visible GPUs` (tensor/device_runtime.h); the launcher places `slots` ranks per host, one per
// GPU. CUDA_DEVICE_ORDER=PCI_BUS_ID makes CUDA's numbering nvidia-smi's and NVML's (the GPU
// sampler's, obs/gpu_select.h). NCCL_DEBUG=WARN puts NCCL's own errors in the attempt's log,
// where the supervisor reads why a job failed. The cluster's NCCL settings (NCCL_SOCKET_IFNAME,
// NCCL_IB_HCA, NCCL_IB_DISABLE, NCCL_IB_TIMEOUT, NCCL_IB_RETRY_CNT, ...) come from the
// environment `fluxtrain launch` runs in and reach every rank unchanged.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace ft {

using EnvMap = std::map<std::string, std::string>;

EnvMap current_environment();

struct GpuLaunchEnv {
  std::vector<std::string> set;      // NAME=VALUE the ranks get (defaults the environment lacks)
  std::vector<std::string> forward;  // NAMEs of the environment passed on to every rank
};

GpuLaunchEnv gpu_launch_env(const EnvMap& env);

// NCCL_SOCKET_IFNAME must match an interface of this host and NCCL_IB_HCA an InfiniBand device of
// it (unless NCCL_IB_DISABLE=1), as NCCL reads them: a comma-separated list of name prefixes,
// "^" before the list excludes, "=" before it asks for exact names. Throws ft::Error naming the
// variable, its value and what the host has. Meant for ranks on this host (remote hosts may differ).
void check_nccl_env(const EnvMap& env, const std::string& net_dir = "/sys/class/net",
                    const std::string& ib_dir = "/sys/class/infiniband");

// Whether NCCL would select interface/device `name` for the value of NCCL_SOCKET_IFNAME/NCCL_IB_HCA.
// (For NCCL_IB_HCA a ":port" suffix on an entry is ignored.)
bool nccl_name_matches(const std::string& spec, const std::string& name);

}  // namespace ft
