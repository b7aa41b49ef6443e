// The cuDNN sub-plugin libfluxtrain_cudnn.so: causal GQA attention on bf16/fp16 through cuDNN's
// SDPA (the cuDNN frontend graph API), behind the C table of cudnn_plugin_api.h. The CUDA plugin
// opens it on the first SDPA call (cudnn_load.cpp) and falls back to the fp32 kernels where cuDNN
// refuses a shape or the sub-plugin cannot be loaded (attention_sdpa.cpp).
//
// The only translation unit that includes the cuDNN frontend headers (they come from PyPI's
// nvidia-cudnn-frontend wheel, fetched by scripts/fetch-cudnn-frontend.sh; compiled with
// -isystem): it is slow to compile (about 1.5 minutes), so nothing else includes it. It uses no ft
// symbol (the sub-plugin is loaded by binaries that do not export theirs): errors come back as text.
//
// Layout (no copies): Q, K and V are strided (B, heads, T, D) views of the packed qkv
// (B, T, (H + 2 Hkv) D): strides (T row, D, row, 1), K and V starting H D and (H + Hkv) D into
// each row; O (B, H, T, D) with strides (T H D, D, H D, 1) is out (B, T, H D); Stats (B, H, T, 1)
// fp32 is lse (B, H, T) — cuDNN's natural-log log-sum-exp of the scaled scores, as our lse.
// The backward writes dQ, dK, dV into the same strided views of dqkv, with cuDNN's deterministic
// algorithm (no atomics: same inputs, same bits).
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>

#include "backends/cuda/cudnn_plugin_api.h"

namespace ft::cuda {

namespace fe = cudnn_frontend;

namespace {

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kdO, kdQ, kdK, kdV };

struct Shape {
  int64_t B, T, H, Hkv, D;
  bool fp16;
  bool backward;
  auto key() const { return std::make_tuple(B, T, H, Hkv, D, fp16, backward); }
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
  g->set_io_data_type(s.fp16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16)
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

// One line into the caller's buffer (cut to fit).
int fail(char* error, size_t error_bytes, const std::string& why) {
  if (error && error_bytes > 0) {
    const size_t n = std::min(why.size(), error_bytes - 1);
    for (size_t i = 0; i < n; ++i) error[i] = why[i] == '\n' || why[i] == '\r' ? ' ' : why[i];
    error[n] = '\0';
  }
  return 1;
}

std::string cudnn_error(const char* call, cudnnStatus_t status) {
  return std::string(call) + " failed: " + cudnnGetErrorString(status) + " (cudnnStatus_t " +
         std::to_string(static_cast<int>(status)) + ")";
}

// A CudaContext's cuDNN state (FtCudnnApi::create).
struct State {
  cudnnHandle_t handle = nullptr;
  std::map<decltype(Shape{}.key()), Built> graphs;

  // The graph of a shape, built on first use (a refusal is cached too).
  const Built& get(const Shape& s) {
    auto it = graphs.find(s.key());
    if (it == graphs.end()) it = graphs.emplace(s.key(), build(handle, s)).first;
    return it->second;
  }
};

Shape shape_of(const FtSdpaShape& s) {
  return Shape{s.B, s.T, s.H, s.Hkv, s.D, s.fp16 != 0, s.backward != 0};
}

size_t api_cudnn_version() {
  return cudnnGetVersion();
}

void* api_create(void* stream, char* error, size_t error_bytes) {
  auto state = std::make_unique<State>();
  if (cudnnStatus_t e = cudnnCreate(&state->handle); e != CUDNN_STATUS_SUCCESS) {
    fail(error, error_bytes, cudnn_error("cudnnCreate", e));
    return nullptr;
  }
  if (cudnnStatus_t e = cudnnSetStream(state->handle, static_cast<cudaStream_t>(stream)); e != CUDNN_STATUS_SUCCESS) {
    fail(error, error_bytes, cudnn_error("cudnnSetStream", e));
    cudnnDestroy(state->handle);
    return nullptr;
  }
  return state.release();
}

void api_destroy(void* p) {
  auto* state = static_cast<State*>(p);
  if (!state) return;
  state->graphs.clear();
  if (state->handle) cudnnDestroy(state->handle);
  delete state;
}

int api_prepare(void* p, const FtSdpaShape* shape, int64_t* workspace_bytes, char* error, size_t error_bytes) {
  try {
    const Built& b = static_cast<State*>(p)->get(shape_of(*shape));
    if (!b.graph) return fail(error, error_bytes, b.refusal);
    *workspace_bytes = b.workspace;
    return 0;
  } catch (const std::exception& e) {  // out of memory: no exception crosses the C table
    return fail(error, error_bytes, e.what());
  }
}

int api_execute(void* p, const FtSdpaShape* shape, void* const* operands, void* workspace, char* error,
                size_t error_bytes) {
  try {
    auto* state = static_cast<State*>(p);
    const Built& b = state->get(shape_of(*shape));
    if (!b.graph) return fail(error, error_bytes, "not prepared: " + b.refusal);
    std::unordered_map<int64_t, void*> pack;
    const Uid forward[] = {kQ, kK, kV, kO, kStats};
    const Uid backward[] = {kQ, kK, kV, kO, kStats, kdO, kdQ, kdK, kdV};
    const FtSdpaOperand forward_at[] = {kFtSdpaQ, kFtSdpaK, kFtSdpaV, kFtSdpaO, kFtSdpaStats};
    const FtSdpaOperand backward_at[] = {kFtSdpaQ,  kFtSdpaK,  kFtSdpaV,  kFtSdpaO, kFtSdpaStats,
                                         kFtSdpaDO, kFtSdpaDQ, kFtSdpaDK, kFtSdpaDV};
    const size_t n = shape->backward ? std::size(backward) : std::size(forward);
    for (size_t i = 0; i < n; ++i)
      pack.emplace(shape->backward ? backward[i] : forward[i],
                   operands[shape->backward ? backward_at[i] : forward_at[i]]);
    auto status = b.graph->execute(state->handle, pack, workspace);
    if (status.is_bad()) return fail(error, error_bytes, "cuDNN execute failed: " + status.get_message());
    return 0;
  } catch (const std::exception& e) {
    return fail(error, error_bytes, e.what());
  }
}

}  // namespace

void fill_cudnn_api(FtCudnnApi& api) {
  api.cudnn_version = api_cudnn_version;
  api.create = api_create;
  api.destroy = api_destroy;
  api.prepare = api_prepare;
  api.execute = api_execute;
}

}  // namespace ft::cuda
