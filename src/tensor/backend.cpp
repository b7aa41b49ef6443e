#include "tensor/backend.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "build_id.h"
#include "util/error.h"

namespace ft {
namespace detail {
std::atomic<const OpTable*> g_op_tables[kNumDevices] = {};
}  // namespace detail

namespace {

// Registered backends are never freed (a reader may hold one while a test replaces it).
std::array<std::atomic<const Backend*>, kNumDevices> g_backends{};

size_t slot(Device d) {
  const auto i = static_cast<size_t>(d);
  FT_CHECK(i < kNumDevices, "device {} has no slot", i);
  return i;
}

// Plugins loaded on first use, each at most once (under its own once_flag: loading registers the
// backend).
struct Plugin {
  bool registered = false;
  BackendPlugin spec;
  std::once_flag once;
  DeviceLoadResult result;
};
std::array<Plugin, kNumDevices> g_plugins{};

// The directory of the running binary (/proc/self/exe), "" when it cannot be read.
std::string binary_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "" : exe.parent_path().string();
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

DeviceLoadResult load_plugin(const BackendPlugin& p) {
  if (p.missing) return {p.missing, p.missing_hint ? p.missing_hint : ""};
  const char* env = std::getenv(p.env_var);
  const bool from_env = env != nullptr && *env != '\0';
  const std::string dir = binary_dir();
  const std::string path = from_env ? std::string(env) : dir + "/" + p.file;
  const std::string use_ours = fmt::format("use the {} built with this fluxtrain", p.file);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    if (from_env)
      return {fmt::format("{}={}: no such file", p.env_var, path),
              fmt::format("point {} at the {} built with this fluxtrain, or unset it to use the one next to the binary",
                          p.env_var, p.file)};
    return {fmt::format("{} not found next to the binary ({})", p.file, dir),
            fmt::format("install it beside fluxtrain (the build writes both into one directory; scripts/gpu_check.sh "
                        "--pack carries both), point {} at it, or set train.device = \"cpu\"",
                        p.env_var)};
  }
  // RTLD_NOW: a symbol it needs that the binary lacks is an error here, not a crash later.
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* err = dlerror();
    return {fmt::format("loading {}: {}", path, one_line(err ? err : "unknown error")),
            p.open_hint ? fmt::format(fmt::runtime(p.open_hint), path) : use_ours};
  }
  auto entry = reinterpret_cast<FtBackendPluginEntry>(dlsym(h, FT_BACKEND_PLUGIN_ENTRY));
  if (entry == nullptr)
    return {fmt::format("{} has no entry point " FT_BACKEND_PLUGIN_ENTRY ": not a fluxtrain backend plugin", path),
            use_ours};
  if (const char* why = entry(FT_BUILD_ID, p.op_count, p.op_table_bytes))
    return {fmt::format("{}: {}", path, why), use_ours};
  return {};  // the plugin stays loaded for the process's life
}

}  // namespace

const char* build_id() {
  return FT_BUILD_ID;
}

void register_backend(const Backend& b) {
  FT_CHECK(b.device == Device::kCPU || !b.runtime.device_count || (b.runtime.make_context && b.runtime.synchronize),
           "register_backend({}): incomplete runtime", device_name(b.device));
  FT_CHECK(!b.memory.alloc || (b.memory.free && b.memory.copy_2d && b.memory.fill),
           "register_backend({}): incomplete memory", device_name(b.device));
  const size_t i = slot(b.device);
  g_backends[i].store(new Backend(b), std::memory_order_release);
  detail::g_op_tables[i].store(b.ops, std::memory_order_release);
}

void unregister_backend(Device d) {
  const size_t i = slot(d);
  g_backends[i].store(nullptr, std::memory_order_release);
  detail::g_op_tables[i].store(nullptr, std::memory_order_release);
}

const Backend* registered_backend(Device d) {
  return g_backends[slot(d)].load(std::memory_order_acquire);
}

std::string registered_backend_names() {
  std::string s = device_name(Device::kCPU);  // built in
  for (size_t i = 1; i < kNumDevices; ++i)
    if (const Backend* b = g_backends[i].load(); b && b->ops) s += std::string(", ") + device_name(b->device);
  return s;
}

ThreadChoice backend_threads(const Backend& b, const HostCpus& host) {
  return b.threads ? b.threads(host) : host_share(host);
}

PrecisionChoice guess_auto_precision() {
  const Backend* host = registered_backend(Device::kCPU);
  if (host != nullptr && host->guess_precision != nullptr) return host->guess_precision();
  return {Precision::kF32, "auto: fp32 (this program has no CPU backend to ask)"};
}

const Backend* find_backend(Device d) {
  load_device(d);
  return registered_backend(d);
}

void register_backend_plugin(Device d, const BackendPlugin& plugin) {
  FT_CHECK(d != Device::kCPU, "the CPU's backend is built in");
  Plugin& p = g_plugins[slot(d)];
  p.spec = plugin;
  p.registered = true;
}

void register_backend_instead_of_plugin(const Backend& b) {
  std::call_once(g_plugins[slot(b.device)].once, [] {});  // the plugin (if any) is never loaded now
  register_backend(b);
}

const DeviceLoadResult& load_device(Device d) {
  Plugin& p = g_plugins[slot(d)];
  std::call_once(p.once, [&p] {
    if (p.registered) p.result = load_plugin(p.spec);
  });
  return p.result;
}

}  // namespace ft
