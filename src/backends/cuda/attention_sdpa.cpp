// Causal GQA attention on bf16/fp16 through cuDNN's SDPA (the cuDNN frontend graph API), with the
// fp32 kernels as the fallback where cuDNN refuses a shape (cuda_ops.h, attention_forward_lowp).
//
// The only translation unit that includes the cuDNN frontend headers (they come from PyPI's
// nvidia-cudnn-frontend wheel, fetched by scripts/fetch-cudnn-frontend.sh; compiled with
// -isystem): it is slow to compile (about 1.5 minutes), so nothing else includes it.
//
// Layout (no copies): Q, K and V are strided (B, heads, T, D) views of the packed qkv
// (B, T, (H + 2 Hkv) D): strides (T row, D, row, 1), K and V starting H D and (H + Hkv) D into
// each row; O (B, H, T, D) with strides (T H D, D, H D, 1) is out (B, T, H D); Stats (B, H, T, 1)
// fp32 is lse (B, H, T) — cuDNN's natural-log log-sum-exp of the scaled scores, as our lse.
// The backward writes dQ, dK, dV into the same strided views of dqkv, with cuDNN's deterministic
// algorithm (no atomics: same inputs, same bits).
#include <cudnn.h>
#include <cudnn_frontend.h>
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>

#include "backends/cuda/attention_lowp.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/sdpa_state.h"

namespace ft::cuda {

namespace fe = cudnn_frontend;

namespace {

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kdO, kdQ, kdK, kdV };

struct Shape {
  int64_t B, T, H, Hkv, D;
  LowPrecision type;
  bool backward;
  auto key() const { return std::make_tuple(B, T, H, Hkv, D, type, backward); }
};

// A built graph, or why cuDNN refused the shape.
struct Built {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
  std::string refusal;
};

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

TensorPtr packed_view(fe::graph::Graph& g, const char* name, Uid uid, const Shape& s, int64_t heads) {
  const int64_t row = (s.H + 2 * s.Hkv) * s.D;
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({s.B, heads, s.T, s.D})
                      .set_stride({s.T * row, s.D, row, 1}));
}

void set_packed_output(const TensorPtr& t, Uid uid, const Shape& s, int64_t heads) {
  const int64_t row = (s.H + 2 * s.Hkv) * s.D;
  t->set_output(true).set_uid(uid).set_dim({s.B, heads, s.T, s.D}).set_stride({s.T * row, s.D, row, 1});
}

std::vector<int64_t> out_strides(const Shape& s) {
  return {s.T * s.H * s.D, s.D, s.H * s.D, 1};
}

Built build_graph(cudnnHandle_t handle, const Shape& s) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(s.type == LowPrecision::kBF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.D)));
  auto Q = packed_view(*g, "Q", kQ, s, s.H);
  auto K = packed_view(*g, "K", kK, s, s.Hkv);
  auto V = packed_view(*g, "V", kV, s, s.Hkv);
  if (!s.backward) {
    auto options = fe::graph::SDPA_attributes()
                       .set_name("sdpa_forward")
                       .set_generate_stats(true)
                       .set_causal_mask(true)
                       .set_attn_scale(scale);
    auto [O, Stats] = g->sdpa(Q, K, V, options);
    O->set_output(true).set_uid(kO).set_dim({s.B, s.H, s.T, s.D}).set_stride(out_strides(s));
    Stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim({s.B, s.H, s.T, 1})
        .set_stride({s.H * s.T, s.T, 1, 1});
  } else {
    auto O = g->tensor(fe::graph::Tensor_attributes()
                           .set_name("O")
                           .set_uid(kO)
                           .set_dim({s.B, s.H, s.T, s.D})
                           .set_stride(out_strides(s)));
    auto dO = g->tensor(fe::graph::Tensor_attributes()
                            .set_name("dO")
                            .set_uid(kdO)
                            .set_dim({s.B, s.H, s.T, s.D})
                            .set_stride(out_strides(s)));
    auto Stats = g->tensor(fe::graph::Tensor_attributes()
                               .set_name("Stats")
                               .set_uid(kStats)
                               .set_data_type(fe::DataType_t::FLOAT)
                               .set_dim({s.B, s.H, s.T, 1})
                               .set_stride({s.H * s.T, s.T, 1, 1}));
    auto options = fe::graph::SDPA_backward_attributes()
                       .set_name("sdpa_backward")
                       .set_causal_mask(true)
                       .set_attn_scale(scale)
                       .set_deterministic_algorithm(true);
    auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, Stats, options);
    set_packed_output(dQ, kdQ, s, s.H);
    set_packed_output(dK, kdK, s, s.Hkv);
    set_packed_output(dV, kdV, s, s.Hkv);
  }
  Built b;
  auto status = g->build(handle, {fe::HeurMode_t::A});
  if (status.is_bad()) {
    b.refusal = status.get_message();
    return b;
  }
  status = g->get_workspace_size(b.workspace);
  if (status.is_bad()) {
    b.refusal = status.get_message();
    return b;
  }
  b.graph = std::move(g);
  return b;
}

// The frontend reports most refusals as error values, some as exceptions: both are a refusal here.
Built build(cudnnHandle_t handle, const Shape& s) {
  try {
    return build_graph(handle, s);
  } catch (const std::exception& e) {
    Built b;
    b.refusal = e.what();
    return b;
  }
}

}  // namespace

struct SdpaState::Impl {
  cudnnHandle_t handle = nullptr;
  std::map<decltype(Shape{}.key()), Built> graphs;
  std::string last_refusal;

  // The graph of a shape (built on first use), or null with last_refusal set.
  const Built& get(const Shape& s) {
    auto it = graphs.find(s.key());
    if (it == graphs.end()) it = graphs.emplace(s.key(), build(handle, s)).first;
    if (!it->second.graph)
      last_refusal =
          fmt::format("cuDNN SDPA {} refused B={} T={} H={} Hkv={} D={} ({}): {}", s.backward ? "backward" : "forward",
                      s.B, s.T, s.H, s.Hkv, s.D, s.type == LowPrecision::kBF16 ? "bf16" : "fp16", it->second.refusal);
    return it->second;
  }
};

SdpaState::SdpaState(CudaContext& ctx) : impl_(std::make_unique<Impl>()) {
  FT_CUDNN_CHECK(cudnnCreate(&impl_->handle), "attention_lowp", {"device", ctx.device()});
  FT_CUDNN_CHECK(cudnnSetStream(impl_->handle, ctx.stream()), "attention_lowp", {"device", ctx.device()});
}

SdpaState::~SdpaState() {
  impl_->graphs.clear();
  if (impl_->handle) cudnnDestroy(impl_->handle);
}

void* SdpaState::handle() const {
  return impl_->handle;
}

bool have_cudnn_sdpa() {
  return true;
}
const char* cudnn_sdpa_missing_reason() {
  return "";
}
const std::string& sdpa_refusal(CudaContext& ctx) {
  return ctx.sdpa().impl().last_refusal;
}

namespace {

void execute(CudaContext& ctx, const char* op, const Built& b, std::unordered_map<int64_t, void*>& pack,
             const Shape& s) {
  void* workspace = b.workspace > 0 ? ctx.scratch(static_cast<size_t>(b.workspace), op) : nullptr;
  auto status = b.graph->execute(ctx.sdpa().impl().handle, pack, workspace);
  if (status.is_bad())
    require(false, op, fmt::format("cuDNN execute failed: {}", status.get_message()).c_str(),
            {{"B", s.B}, {"T", s.T}, {"H", s.H}, {"Hkv", s.Hkv}, {"D", s.D}});
  FT_CUDA_CHECK_QUEUED(ctx, op, {"B", s.B}, {"T", s.T}, {"H", s.H}, {"Hkv", s.Hkv}, {"D", s.D});
}

void* mut(const void* p) {
  return const_cast<void*>(p);
}

// cuDNN's SDPA needs head dimensions in multiples of 8 and 16-byte aligned operands (K and V
// start H D and (H + Hkv) D elements into each qkv row); it is not asked otherwise.
bool operands_fit(const Shape& s, std::initializer_list<const void*> pointers) {
  if (s.D % 8 != 0) return false;
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

void note_refusal(CudaContext& ctx, const Shape& s, const char* why) {
  ctx.sdpa().impl().last_refusal =
      fmt::format("cuDNN SDPA not used for B={} T={} H={} Hkv={} D={}: {}", s.B, s.T, s.H, s.Hkv, s.D, why);
}

}  // namespace

AttentionPath attention_forward_lowp(CudaContext& ctx, uint16_t* out, float* lse, const uint16_t* qkv, int64_t B,
                                     int64_t T, int64_t H, int64_t Hkv, int64_t D, LowPrecision type) {
  check_attention("attention_forward_lowp", B, T, H, Hkv, D);
  if (B == 0 || T == 0) return AttentionPath::kCudnn;
  const Shape s{B, T, H, Hkv, D, type, false};
  if (!operands_fit(s, {qkv, qkv + H * D, qkv + (H + Hkv) * D, out, lse})) {
    note_refusal(ctx, s, "head dimension not a multiple of 8, or operands not 16-byte aligned");
    attention_forward_fallback(ctx, out, lse, qkv, B, T, H, Hkv, D, type);
    return AttentionPath::kFp32Fallback;
  }
  const Built& b = ctx.sdpa().impl().get(s);
  if (!b.graph) {
    attention_forward_fallback(ctx, out, lse, qkv, B, T, H, Hkv, D, type);
    return AttentionPath::kFp32Fallback;
  }
  std::unordered_map<int64_t, void*> pack{
      {kQ, mut(qkv)}, {kK, mut(qkv + H * D)}, {kV, mut(qkv + (H + Hkv) * D)}, {kO, out}, {kStats, lse}};
  execute(ctx, "attention_forward_lowp", b, pack, s);
  return AttentionPath::kCudnn;
}

AttentionPath attention_backward_lowp(CudaContext& ctx, uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv,
                                      const uint16_t* out, const float* lse, int64_t B, int64_t T, int64_t H,
                                      int64_t Hkv, int64_t D, LowPrecision type) {
  check_attention("attention_backward_lowp", B, T, H, Hkv, D);
  if (B == 0 || T == 0) return AttentionPath::kCudnn;
  const Shape s{B, T, H, Hkv, D, type, true};
  if (!operands_fit(
          s, {qkv, qkv + H * D, qkv + (H + Hkv) * D, out, dout, lse, dqkv, dqkv + H * D, dqkv + (H + Hkv) * D})) {
    note_refusal(ctx, s, "head dimension not a multiple of 8, or operands not 16-byte aligned");
    attention_backward_fallback(ctx, dqkv, dout, qkv, out, lse, B, T, H, Hkv, D, type);
    return AttentionPath::kFp32Fallback;
  }
  const Built& b = ctx.sdpa().impl().get(s);
  if (!b.graph) {
    attention_backward_fallback(ctx, dqkv, dout, qkv, out, lse, B, T, H, Hkv, D, type);
    return AttentionPath::kFp32Fallback;
  }
  std::unordered_map<int64_t, void*> pack{{kQ, mut(qkv)}, {kK, mut(qkv + H * D)}, {kV, mut(qkv + (H + Hkv) * D)},
                                          {kO, mut(out)}, {kdO, mut(dout)},       {kStats, mut(lse)},
                                          {kdQ, dqkv},    {kdK, dqkv + H * D},    {kdV, dqkv + (H + Hkv) * D}};
  execute(ctx, "attention_backward_lowp", b, pack, s);
  return AttentionPath::kCudnn;
}

}  // namespace ft::cuda
