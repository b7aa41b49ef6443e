// attention_forward_lowp / attention_backward_lowp (cuda_ops.h): cuDNN SDPA through the cuDNN
// sub-plugin (cudnn_load.h opens libfluxtrain_cudnn.so on the first call; the graphs themselves are
// cudnn_sdpa.cpp's), or the fp32 kernels (attention_lowp.h) where cuDNN refuses a shape or the
// sub-plugin cannot be loaded. No cuDNN header here: the CUDA plugin links no cuDNN.
#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "backends/cuda/attention_lowp.h"
#include "backends/cuda/context.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/cudnn_load.h"
#include "backends/cuda/sdpa_state.h"

namespace ft::cuda {

struct SdpaState::Impl {
  const FtCudnnApi* api = nullptr;  // null: the sub-plugin is not loaded (cudnn_plugin().error says why)
  void* state = nullptr;            // the sub-plugin's (cuDNN handle and graphs)
  std::string last_refusal;
};

SdpaState::SdpaState(CudaContext& ctx) : impl_(std::make_unique<Impl>()) {
  const CudnnPlugin& plugin = cudnn_plugin();
  if (!plugin.ok()) return;
  char error[512] = "";
  impl_->state = plugin.api.create(ctx.stream(), error, sizeof error);
  require(impl_->state != nullptr, "attention_lowp", error, {{"device", ctx.device()}});
  impl_->api = &plugin.api;
}

SdpaState::~SdpaState() {
  if (impl_->api && impl_->state) impl_->api->destroy(impl_->state);
}

bool SdpaState::loaded() const {
  return impl_->api != nullptr;
}

bool have_cudnn_sdpa() {
  return cudnn_plugin().ok();
}

const char* cudnn_sdpa_missing_reason() {
  return cudnn_plugin().error.c_str();
}

const std::string& sdpa_refusal(CudaContext& ctx) {
  return ctx.sdpa().impl().last_refusal;
}

namespace {

void* mut(const void* p) {
  return const_cast<void*>(p);
}

const char* type_name(LowPrecision type) {
  return type == LowPrecision::kBF16 ? "bf16" : "fp16";
}

// cuDNN's SDPA needs head dimensions in multiples of 8 and 16-byte aligned operands (K and V
// start H D and (H + Hkv) D elements into each qkv row); it is not asked otherwise.
bool operands_fit(int64_t D, std::initializer_list<const void*> pointers) {
  if (D % 8 != 0) return false;
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// Runs `shape` on cuDNN when the sub-plugin is loaded, the operands fit and cuDNN accepts the
// shape; false (with the context's last_refusal set) when the caller must fall back.
bool run_cudnn(CudaContext& ctx, const char* op, const FtSdpaShape& s, LowPrecision type, void* const* operands,
               bool fit) {
  SdpaState& sdpa = ctx.sdpa();
  std::string& refusal = sdpa.impl().last_refusal;
  if (!sdpa.loaded()) {
    refusal = cudnn_plugin().error;
    return false;
  }
  if (!fit) {
    refusal = fmt::format("cuDNN SDPA not used for B={} T={} H={} Hkv={} D={}: {}", s.B, s.T, s.H, s.Hkv, s.D,
                          "head dimension not a multiple of 8, or operands not 16-byte aligned");
    return false;
  }
  const FtCudnnApi& api = *sdpa.impl().api;
  char error[1024] = "";
  int64_t workspace_bytes = 0;
  if (api.prepare(sdpa.impl().state, &s, &workspace_bytes, error, sizeof error) != 0) {
    refusal = fmt::format("cuDNN SDPA {} refused B={} T={} H={} Hkv={} D={} ({}): {}",
                          s.backward ? "backward" : "forward", s.B, s.T, s.H, s.Hkv, s.D, type_name(type), error);
    return false;
  }
  void* workspace = workspace_bytes > 0 ? ctx.scratch(static_cast<size_t>(workspace_bytes), op) : nullptr;
  if (api.execute(sdpa.impl().state, &s, operands, workspace, error, sizeof error) != 0)
    require(false, op, error, {{"B", s.B}, {"T", s.T}, {"H", s.H}, {"Hkv", s.Hkv}, {"D", s.D}});
  FT_CUDA_CHECK_QUEUED(ctx, op, {"B", s.B}, {"T", s.T}, {"H", s.H}, {"Hkv", s.Hkv}, {"D", s.D});
  return true;
}

}  // namespace

AttentionPath attention_forward_lowp(CudaContext& ctx, uint16_t* out, float* lse, const uint16_t* qkv, int64_t B,
                                     int64_t T, int64_t H, int64_t Hkv, int64_t D, LowPrecision type) {
  check_attention("attention_forward_lowp", B, T, H, Hkv, D);
  if (B == 0 || T == 0) return AttentionPath::kCudnn;
  const FtSdpaShape s{B, T, H, Hkv, D, type == LowPrecision::kF16 ? 1 : 0, 0};
  void* operands[kFtSdpaOperands] = {};
  operands[kFtSdpaQ] = mut(qkv);
  operands[kFtSdpaK] = mut(qkv + H * D);
  operands[kFtSdpaV] = mut(qkv + (H + Hkv) * D);
  operands[kFtSdpaO] = out;
  operands[kFtSdpaStats] = lse;
  const bool fit = operands_fit(D, {qkv, qkv + H * D, qkv + (H + Hkv) * D, out, lse});
  if (run_cudnn(ctx, "attention_forward_lowp", s, type, operands, fit)) return AttentionPath::kCudnn;
  attention_forward_fallback(ctx, out, lse, qkv, B, T, H, Hkv, D, type);
  return AttentionPath::kFp32Fallback;
}

AttentionPath attention_backward_lowp(CudaContext& ctx, uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv,
                                      const uint16_t* out, const float* lse, int64_t B, int64_t T, int64_t H,
                                      int64_t Hkv, int64_t D, LowPrecision type) {
  check_attention("attention_backward_lowp", B, T, H, Hkv, D);
  if (B == 0 || T == 0) return AttentionPath::kCudnn;
  const FtSdpaShape s{B, T, H, Hkv, D, type == LowPrecision::kF16 ? 1 : 0, 1};
  void* operands[kFtSdpaOperands] = {};
  operands[kFtSdpaQ] = mut(qkv);
  operands[kFtSdpaK] = mut(qkv + H * D);
  operands[kFtSdpaV] = mut(qkv + (H + Hkv) * D);
  operands[kFtSdpaO] = mut(out);
  operands[kFtSdpaStats] = mut(lse);
  operands[kFtSdpaDO] = mut(dout);
  operands[kFtSdpaDQ] = dqkv;
  operands[kFtSdpaDK] = dqkv + H * D;
  operands[kFtSdpaDV] = dqkv + (H + Hkv) * D;
  const bool fit = operands_fit(
      D, {qkv, qkv + H * D, qkv + (H + Hkv) * D, out, dout, lse, dqkv, dqkv + H * D, dqkv + (H + Hkv) * D});
  if (run_cudnn(ctx, "attention_backward_lowp", s, type, operands, fit)) return AttentionPath::kCudnn;
  attention_backward_fallback(ctx, dqkv, dout, qkv, out, lse, B, T, H, Hkv, D, type);
  return AttentionPath::kFp32Fallback;
}

}  // namespace ft::cuda
