// cuBLASLt on the virtual GPU (shim/cublasLt.h), written from NVIDIA's cuBLASLt documentation: the
// descriptors hold the documented attributes with their documented defaults and sizes, the checks
// return the documented status codes, and cublasLtMatmul computes D = alpha · op(A) · op(B) + beta · C
// on column-major operands with leading dimensions as a kernel of the SIMT executor (vgpu/lt_gemm.h).
//
// The emulated "algorithm" needs each operand aligned to the smaller of 16 bytes and the preference's
// minimum alignment for it (never less than its element): a cached algorithm run on less aligned
// pointers is a misaligned-address fault, as a vectorised kernel's would be.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>
#include <string>

#include "cublasLt.h"
#include "vgpu/faults.h"
#include "vgpu/lt_gemm.h"

struct cublasLtContext {
  int unused = 0;
};
struct cublasLtMatmulDescOpaque_t {
  int32_t compute = CUBLAS_COMPUTE_32F, scale = CUDA_R_32F, pointer_mode = CUBLASLT_POINTER_MODE_HOST;
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N, transc = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int32_t bias_type = CUDA_R_32F;
};
struct cublasLtMatrixLayoutOpaque_t {
  uint32_t type = CUDA_R_32F;
  int32_t order = CUBLASLT_ORDER_COL;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t batch_stride = 0;
};
struct cublasLtMatmulPreferenceOpaque_t {
  uint32_t search = 0;
  uint64_t max_workspace = 0;                // documented default: no workspace allowed
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D; documented default 256
};

namespace {

constexpr uint64_t kAlgoTag = 0x76677075'4c74416cull;  // marks an algorithm this emulation returned

std::set<const cublasLtContext*>& live_handles() {
  static auto* s = new std::set<const cublasLtContext*>;  // leaked: see executor.cpp's S()
  return *s;
}

// Copies an attribute in or out: the buffer must be exactly the attribute's documented size.
template <typename T>
cublasStatus_t set_field(T& field, const void* buf, size_t bytes) {
  if (!buf || bytes != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}
template <typename T>
cublasStatus_t get_field(const T& field, void* buf, size_t bytes, size_t* written) {
  if (written) *written = sizeof(T);
  if (bytes == 0 && written) return CUBLAS_STATUS_SUCCESS;  // a size query
  if (!buf || bytes != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buf, &field, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

size_t element_bytes(uint32_t type) {
  return type == CUDA_R_32F ? 4 : 2;
}
const char* type_name(uint32_t type) {
  return type == CUDA_R_32F ? "32F" : type == CUDA_R_16F ? "16F" : type == CUDA_R_16BF ? "16BF" : "?";
}

// The problem of one matmul after the documented checks.
struct Problem {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
};

bool transpose_flag(int32_t op, bool& t) {
  if (op != CUBLAS_OP_N && op != CUBLAS_OP_T && op != CUBLAS_OP_C) return false;
  t = op != CUBLAS_OP_N;  // OP_C is OP_T for real types
  return true;
}

// The checks cublasLtMatmul and the heuristic share: what the emulation does not model is
// NOT_SUPPORTED; inconsistent shapes, a leading dimension below the rows, unknown values INVALID_VALUE.
cublasStatus_t check(const cublasLtMatmulDescOpaque_t* op, const cublasLtMatrixLayoutOpaque_t* a,
                     const cublasLtMatrixLayoutOpaque_t* b, const cublasLtMatrixLayoutOpaque_t* c,
                     const cublasLtMatrixLayoutOpaque_t* d, Problem& p) {
  if (!op || !a || !b || !c || !d) return CUBLAS_STATUS_INVALID_VALUE;
  if (!transpose_flag(op->transa, p.ta) || !transpose_flag(op->transb, p.tb)) return CUBLAS_STATUS_INVALID_VALUE;
  if (op->transc != CUBLAS_OP_N) return CUBLAS_STATUS_NOT_SUPPORTED;  // documented: only OP_N
  if (op->compute != CUBLAS_COMPUTE_32F || op->scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (op->pointer_mode != CUBLASLT_POINTER_MODE_HOST || op->epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  for (const auto* l : {a, b, c, d}) {
    if (l->order != CUBLASLT_ORDER_COL || l->batch != 1) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (l->rows > INT32_MAX || l->cols > INT32_MAX) return CUBLAS_STATUS_NOT_SUPPORTED;
    // Documented: the leading dimension keeps the columns from overlapping (>= rows, column-major).
    if (l->ld < 0 || static_cast<uint64_t>(l->ld) < l->rows) return CUBLAS_STATUS_INVALID_VALUE;
  }
  // The documented type combinations of CUBLAS_COMPUTE_32F with CUDA_R_32F scale that we model:
  // A = B in {32F, 16F, 16BF}, C = D in {32F} or A's 16-bit type.
  if (a->type != b->type || c->type != d->type) return CUBLAS_STATUS_NOT_SUPPORTED;
  const uint32_t ab = a->type, cd = c->type;
  const bool ab_ok = ab == CUDA_R_32F || ab == CUDA_R_16F || ab == CUDA_R_16BF;
  if (!ab_ok || (cd != CUDA_R_32F && cd != ab)) return CUBLAS_STATUS_NOT_SUPPORTED;
  p.m = static_cast<int64_t>(p.ta ? a->cols : a->rows);
  p.k = static_cast<int64_t>(p.ta ? a->rows : a->cols);
  const auto kb = static_cast<int64_t>(p.tb ? b->cols : b->rows);
  p.n = static_cast<int64_t>(p.tb ? b->rows : b->cols);
  if (kb != p.k) return CUBLAS_STATUS_INVALID_VALUE;
  for (const auto* l : {c, d})
    if (static_cast<int64_t>(l->rows) != p.m || static_cast<int64_t>(l->cols) != p.n)
      return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

uint32_t algo_alignment(uint32_t pref_align, uint32_t type) {
  return std::max<uint32_t>(std::min<uint32_t>(pref_align, 16), static_cast<uint32_t>(element_bytes(type)));
}

uint64_t alignment_of(const void* p) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  return u == 0 ? 256 : (u & (~u + 1));
}

std::string layout_str(const char* name, const cublasLtMatrixLayoutOpaque_t* l, bool t) {
  std::ostringstream o;
  o << name << " " << type_name(l->type) << " " << l->rows << "x" << l->cols << " ld " << l->ld;
  if (t) o << " op T";
  return o.str();
}

}  // namespace

const char* cublasLtGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasLtContext;
  live_handles().insert(*handle);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (!handle || live_handles().erase(handle) == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

// ---- the matmul descriptor ---------------------------------------------------------------------

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
  *desc = new cublasLtMatmulDescOpaque_t;
  (*desc)->compute = compute;
  (*desc)->scale = scale;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

namespace {
template <typename F>
cublasStatus_t desc_field(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, F&& f) {
  if (!d) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
      return f(d->compute);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
      return f(d->scale);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
      return f(d->pointer_mode);
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return f(d->transa);
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return f(d->transb);
    case CUBLASLT_MATMUL_DESC_TRANSC:
      return f(d->transc);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return f(d->epilogue);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return f(d->bias);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      return f(d->bias_type);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}
}  // namespace

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t bytes) {
  return desc_field(desc, attr, [&](auto& field) { return set_field(field, buf, bytes); });
}
cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, void* buf,
                                              size_t bytes, size_t* written) {
  return desc_field(desc, attr, [&](auto& field) { return get_field(field, buf, bytes, written); });
}

// ---- matrix layouts ----------------------------------------------------------------------------

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (!layout) return CUBLAS_STATUS_INVALID_VALUE;
  *layout = new cublasLtMatrixLayoutOpaque_t;
  (*layout)->type = static_cast<uint32_t>(type);
  (*layout)->rows = rows;
  (*layout)->cols = cols;
  (*layout)->ld = ld;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

namespace {
template <typename F>
cublasStatus_t layout_field(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr, F&& f) {
  if (!l) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE:
      return f(l->type);
    case CUBLASLT_MATRIX_LAYOUT_ORDER:
      return f(l->order);
    case CUBLASLT_MATRIX_LAYOUT_ROWS:
      return f(l->rows);
    case CUBLASLT_MATRIX_LAYOUT_COLS:
      return f(l->cols);
    case CUBLASLT_MATRIX_LAYOUT_LD:
      return f(l->ld);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
      return f(l->batch);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
      return f(l->batch_stride);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}
}  // namespace

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t bytes) {
  return layout_field(layout, attr, [&](auto& field) { return set_field(field, buf, bytes); });
}
cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                void* buf, size_t bytes, size_t* written) {
  return layout_field(layout, attr, [&](auto& field) { return get_field(field, buf, bytes, written); });
}

// ---- preference and heuristic ------------------------------------------------------------------

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = new cublasLtMatmulPreferenceOpaque_t;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t bytes) {
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE:
      return set_field(pref->search, buf, bytes);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return set_field(pref->max_workspace, buf, bytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return set_field(pref->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf, bytes);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t op,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* returned) {
  if (!handle || live_handles().count(handle) == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (requested <= 0 || !results || !returned || !pref) return CUBLAS_STATUS_INVALID_VALUE;
  *returned = 0;
  Problem p;
  if (const cublasStatus_t s = check(op, a, b, c, d, p); s != CUBLAS_STATUS_SUCCESS) return s;
  // One algorithm, no workspace; it needs every operand aligned to at least its element.
  const uint32_t types[4] = {a->type, b->type, c->type, d->type};
  cublasLtMatmulHeuristicResult_t r{};
  r.algo.data[0] = kAlgoTag;
  for (int i = 0; i < 4; ++i) {
    if (pref->align[i] < element_bytes(types[i])) return CUBLAS_STATUS_NOT_SUPPORTED;
    r.algo.data[1 + i] = algo_alignment(pref->align[i], types[i]);
  }
  r.workspaceSize = 0;
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  results[0] = r;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

// ---- the matmul --------------------------------------------------------------------------------

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t op, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b, const void* beta,
                              const void* C, cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes,
                              cudaStream_t stream) {
  (void)workspace;  // the emulated algorithm needs none
  (void)workspace_bytes;
  if (!handle || live_handles().count(handle) == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!alpha || !beta || !a || !op) return CUBLAS_STATUS_INVALID_VALUE;
  // Planted faults (tests/vgpu/gemm_test.cpp): the caller's layout of A with its leading dimension
  // off by the value, or its transpose flipped, as a wrong gemm_plan.h would pass them.
  cublasLtMatrixLayoutOpaque_t a_in = *a;
  a_in.ld += vgpu::fault_value("cublaslt_lda");
  cublasLtMatmulDescOpaque_t op_in = *op;
  if (vgpu::fault_enabled("cublaslt_transa_flip"))
    op_in.transa = op_in.transa == CUBLAS_OP_N ? CUBLAS_OP_T : CUBLAS_OP_N;
  a = &a_in;
  op = &op_in;
  Problem p;
  if (const cublasStatus_t s = check(op, a, b, c, d, p); s != CUBLAS_STATUS_SUCCESS) return s;
  // Documented: in place (C == D) needs C's layout to be D's.
  if (C == D && (c->ld != d->ld || c->type != d->type)) return CUBLAS_STATUS_INVALID_VALUE;
  cublasLtMatmulAlgo_t implicit{};  // documented: a null algo is an implicit heuristic query
  if (!algo) {
    implicit.data[0] = kAlgoTag;
    for (int i = 0; i < 4; ++i) implicit.data[1 + i] = 16;
    algo = &implicit;
  }
  if (algo->data[0] != kAlgoTag) return CUBLAS_STATUS_INVALID_VALUE;

  vgpu::LtGemm g{p.m,
                 p.n,
                 p.k,
                 A,
                 static_cast<int>(a->type),
                 a->ld,
                 p.ta,
                 B,
                 static_cast<int>(b->type),
                 b->ld,
                 p.tb,
                 C,
                 static_cast<int>(c->type),
                 c->ld,
                 D,
                 static_cast<int>(d->type),
                 d->ld,
                 0.0f,
                 0.0f};
  std::memcpy(&g.alpha, alpha, sizeof(float));
  std::memcpy(&g.beta, beta, sizeof(float));
  std::ostringstream name;
  name << "cublasLtMatmul(m=" << p.m << " n=" << p.n << " k=" << p.k << ", " << layout_str("A", a, p.ta) << ", "
       << layout_str("B", b, p.tb) << ", " << layout_str("C", c, false) << ", " << layout_str("D", d, false) << ")";
  // The algorithm was chosen for pointers at least this aligned: a vectorised kernel faults otherwise.
  const void* ptrs[4] = {A, B, g.beta != 0.0f ? C : nullptr, D};
  for (int i = 0; i < 4; ++i)
    if (alignment_of(ptrs[i]) < algo->data[1 + i])
      throw vgpu::Error("misaligned address: " + name.str() + ": its algorithm needs " + "ABCD"[i] + " aligned to " +
                        std::to_string(algo->data[1 + i]) + " bytes, the pointer is aligned to " +
                        std::to_string(alignment_of(ptrs[i])));
  if (p.m == 0 || p.n == 0) return CUBLAS_STATUS_SUCCESS;
  // The launch names the GEMM after this call returns (a stream runs it, and reports, later): the
  // names, one per shape and layout, are kept for the process.
  static std::mutex names_mu;
  static std::set<std::string> names;
  const char* kept = nullptr;
  {
    std::lock_guard<std::mutex> lock(names_mu);
    kept = names.insert(name.str()).first->c_str();
  }
  vgpu::lt_gemm_launch(g, kept, stream);
  return CUBLAS_STATUS_SUCCESS;
}
