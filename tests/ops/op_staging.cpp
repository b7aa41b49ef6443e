#include "ops/op_staging.h"

#include <fmt/format.h>

#include <cstddef>
#include <type_traits>
#include <vector>

#include "tensor/device_runtime.h"
#include "tensor/memory.h"
#include "util/error.h"

namespace ft::test {
namespace {

struct Staged {
  const std::byte* host;
  size_t bytes;
  std::byte* device;
};

// The run in progress on this thread: the table ops are forwarded to and the staged buffers.
thread_local const OpTable* t_target = nullptr;
thread_local const std::vector<Staged>* t_staged = nullptr;

template <typename T>
T translate(T x) {
  if constexpr (std::is_pointer_v<T>) {
    if (x == nullptr) return x;
    const auto* p = reinterpret_cast<const std::byte*>(x);
    for (const Staged& s : *t_staged)
      if (p == s.host || (p > s.host && p < s.host + s.bytes))
        return reinterpret_cast<T>(const_cast<std::byte*>(s.device + (p - s.host)));
    throw Error("op harness: the row passed a pointer that is in none of the case's buffers",
                "pass the case's buffers (Case::f32, ...) or offsets into them");
  } else {
    return x;
  }
}

template <typename F, typename... A>
void forward(F f, const ExecContext& ctx, A... a) {
  f(ctx, translate(a)...);
}

#define FT_OP(name, params, args)                           \
  void name(const ExecContext& ctx, FT_OP_UNPAREN params) { \
    forward(t_target->name, ctx, FT_OP_UNPAREN args);       \
  }
#include "kernels/op_decls.inc"
#undef FT_OP

const OpTable& translating_table() {
  static const OpTable table = [] {
    OpTable t;
    t.backend = "staged";
#define FT_OP(name, params, args) t.name = &name;
#include "kernels/op_decls.inc"
#undef FT_OP
    return t;
  }();
  return table;
}

}  // namespace

void run_case(const OpCase& row, const OpTable& ops, const ExecContext& ctx, Case& c) {
  if (ctx.on_host()) {
    row.run(ops, ctx, c);
    return;
  }
  run_case_staged(row, ops, ctx, c);
}

void run_case_staged(const OpCase& row, const OpTable& ops, const ExecContext& ctx, Case& c) {
  const Device d = ctx.device;
  std::vector<Staged> staged;
  auto release = [&] {
    for (const Staged& s : staged)
      if (s.device) mem_free(d, s.device, s.bytes, MemCategory::kOther);
  };
  try {
    for (Buffer& b : c.buffers()) {
      Staged s{b.data.data(), b.data.size(), nullptr};
      if (s.bytes > 0) {
        s.device = static_cast<std::byte*>(mem_alloc(d, s.bytes, MemCategory::kOther));
        staged.push_back(s);
        mem_copy(ctx, s.device, d, s.host, Device::kCPU, s.bytes);
      } else {
        staged.push_back(s);
      }
    }
    t_target = &ops;
    t_staged = &staged;
    row.run(translating_table(), ctx, c);
    t_target = nullptr;
    t_staged = nullptr;
    synchronize(ctx);
    for (size_t i = 0; i < staged.size(); ++i)
      if (staged[i].device && c.buffers()[i].is_output())
        mem_copy(ctx, c.buffers()[i].data.data(), Device::kCPU, staged[i].device, d, staged[i].bytes);
  } catch (...) {
    t_target = nullptr;
    t_staged = nullptr;
    release();
    throw;
  }
  release();
}

}  // namespace ft::test
