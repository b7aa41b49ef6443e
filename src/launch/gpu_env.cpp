#include "launch/gpu_env.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

#include "util/error.h"
#include "util/strings.h"

extern char** environ;

namespace ft {
namespace {

std::vector<std::string> entries_of(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

bool starts(const std::string& s, const char* p) {
  return s.rfind(p, 0) == 0;
}

}  // namespace

EnvMap current_environment() {
  EnvMap env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

GpuLaunchEnv gpu_launch_env(const EnvMap& env) {
  GpuLaunchEnv out;
  const std::pair<const char*, const char*> defaults[] = {{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}, {"NCCL_DEBUG", "WARN"}};
  for (const auto& [name, value] : defaults)
    if (!env.count(name)) out.set.push_back(fmt::format("{}={}", name, value));
  for (const auto& [name, value] : env)
    if (starts(name, "NCCL_") || starts(name, "CUDA_") || starts(name, "FI_") || starts(name, "UCX_"))
      out.forward.push_back(name);
  return out;
}

bool nccl_name_matches(const std::string& spec_in, const std::string& name) {
  std::string spec = spec_in;
  bool exclude = false, exact = false;
  if (starts(spec, "^")) exclude = true, spec = spec.substr(1);
  if (starts(spec, "=")) exact = true, spec = spec.substr(1);
  bool hit = false;
  for (const std::string& raw : split(spec, ',')) {
    std::string e(trim(raw));
    e = e.substr(0, e.find(':'));  // NCCL_IB_HCA's mlx5_0:1 (port)
    if (e.empty()) continue;
    if (exact ? name == e : starts(name, e.c_str())) hit = true;
  }
  return exclude ? !hit : hit;
}

void check_nccl_env(const EnvMap& env, const std::string& net_dir, const std::string& ib_dir) {
  auto check = [&](const char* var, const std::string& dir, const char* what, const char* hint) {
    auto it = env.find(var);
    if (it == env.end() || trim(it->second).empty()) return;
    const std::vector<std::string> have = entries_of(dir);
    for (const std::string& n : have)
      if (nccl_name_matches(it->second, n)) return;
    throw Error(fmt::format("{}={} matches no {} of this host (it has: {})", var, it->second, what,
                            have.empty() ? "none" : fmt::format("{}", fmt::join(have, ", "))),
                hint);
  };
  check("NCCL_SOCKET_IFNAME", net_dir, "network interface",
        "NCCL_SOCKET_IFNAME takes interface name prefixes (eth, ib0, ^docker,lo to exclude, =eth0 for exact "
        "names): `ip -br link` lists them; unset it to let NCCL choose");
  auto dis = env.find("NCCL_IB_DISABLE");
  if (dis == env.end() || trim(dis->second) != "1")
    check("NCCL_IB_HCA", ib_dir, "InfiniBand device",
          "NCCL_IB_HCA takes device prefixes such as mlx5 or =mlx5_0:1,mlx5_1:1 (`ibv_devices` lists them); "
          "NCCL_IB_DISABLE=1 runs NCCL over sockets on a host without InfiniBand");
}

}  // namespace ft
