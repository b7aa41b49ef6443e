// The GEMM peak of this machine — the denominator of MFU — and the fp32 GEMM library chosen for
// it.
//
//   double peak = ft::gemm_peak_gflops(ft::Precision::kF32, omp_get_max_threads());
//   double mfu = model_flops_per_s / (peak * 1e9);
//
// The first call for a (CPU model, GEMM ISA, threads, precision) measures a large square GEMM
// through the op the model uses (ops::matmul for fp32 and fp16, ops::matmul_bf16 for bf16 —
// native or emulated, whichever runs; best of several runs, about a second) and records it in
// the peak file; later calls, in this and later processes, read the record. `fluxtrain
// bench-peak` re-measures everything, measures each fp32 library (oneDNN, OpenBLAS, BLIS) on the
// model's GEMM shapes, and records the fastest as the library ops::matmul uses (backends/cpu/gemm.h).
//
// Peak file: $FLUXTRAIN_PEAK_FILE, else $XDG_CACHE_HOME/fluxtrain/peak.json, else
// ~/.cache/fluxtrain/peak.json. JSON, format "fluxtrain-gemm-peak", version 2:
//   {"format": "fluxtrain-gemm-peak", "version": 2, "entries": [
//     {"cpu": "AMD EPYC", "isa": "avx2", "threads": 2, "precision": "f32", "gflops": 101.3,
//      "size": 2048, "library": "OpenBLAS 0.3.21 (OpenMP) Zen", "impl": "cblas_sgemm",
//      "gemm": "openblas", "shapes": "llama-125m, 2048 tokens",
//      "shape_gflops": {"onednn": 88.1, "openblas": 97.0, "blis": 95.2},
//      "measured_at": "2025-01-01T12:00:00Z"},
//     {"cpu": "AMD EPYC", "isa": "avx2", "threads": 2, "precision": "bf16", "emulated": true, ...}]}
// "isa" is oneDNN's effective ISA (onednn_isa_name(): ONEDNN_MAX_CPU_ISA lowers it, so the AVX2
// simulation on an AVX-512 machine has its own entries). "gemm" and "shape_gflops" are written by
// bench-peak on fp32 entries. Version 1 files (no "isa") are read; their entries count for the
// unlimited ISA (ONEDNN_MAX_CPU_ISA unset) and are kept when the file is rewritten as version 2.
// Written atomically (tmp + fsync + rename). Measure on an otherwise idle machine: ranks that
// measure at the same time on one node measure each other's contention.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/gemm.h"
#include "backends/cpu/native_precision.h"
#include "kernels/ops.h"

namespace ft {

struct PeakOptions {
  int64_t size = 2048;       // M = N = K
  double min_seconds = 1.0;  // keep repeating (at least 3 runs) until this much time has passed
  // Time runs by process CPU time / threads instead of wall time: robust to other processes on a
  // shared machine (exact for one thread; pessimistic for several, as waiting threads spin).
  bool cpu_clock = false;
};

struct PeakRecord {
  std::string cpu;
  std::string isa;  // onednn_isa_name() when measured; "" in version 1 files
  int threads = 1;
  Precision precision = Precision::kF32;
  double gflops = 0;
  int64_t size = 0;
  std::string library;                         // "oneDNN 2.6.3 sgemm (gemm:jit, avx2)", "OpenBLAS 0.3.21 (OpenMP) Zen"
  std::string impl;                            // e.g. "brg:avx512_core_amx_bf16", "bf16 widened, fp32 ..."
  bool emulated = false;                       // bf16 / fp16 through the fp32 GEMM
  std::string gemm;                            // f32, from bench-peak: the library ops::matmul uses ("onednn", ...)
  std::string shapes;                          // what shape_gflops measured ("llama-125m, 2048 tokens")
  std::map<std::string, double> shape_gflops;  // per fp32 library on the model's shapes
  std::string measured_at;
};

// The recorded peak, or a fresh measurement that is then recorded. threads <= 0: the OpenMP
// default. Thread-safe. Throws ft::Error when the peak file exists but is not a valid peak file.
double gemm_peak_gflops(Precision precision, int threads, const PeakOptions& options = {});

// Measures without reading or writing the file: GFLOP/s of the best run through what the model
// runs at this precision (fp32 on the current library choice).
PeakRecord measure_gemm_peak(Precision precision, int threads, const PeakOptions& options = {});
// The same problem through one fp32 library, or oneDNN's fp32 matmul primitive (comparisons).
PeakRecord measure_f32_library(cpu::GemmLibrary lib, int threads, const PeakOptions& options = {});
PeakRecord measure_matmul_primitive_f32(int threads, const PeakOptions& options = {});
// bf16 through oneDNN's own matmul primitive (on avx512_core oneDNN emulates bf16): throws
// ft::Error where oneDNN has no bf16 matmul.
PeakRecord measure_bf16_onednn(int threads, const PeakOptions& options = {});

// One GEMM of a training step: C(M, N) = op(A) op(B) + beta C.
struct GemmShape {
  std::string name;
  int64_t M, N, K;
  bool trans_a, trans_b;
  float beta;
};
// A LLaMA step's GEMMs on `tokens` rows (a micro-batch): per linear layer (qkv, o, gate_up, down)
// the forward y = x Wᵀ, dx = dy W and dW += dyᵀ x, and the LM head on `head_rows` rows.
std::vector<GemmShape> llama_gemm_shapes(int64_t dim, int64_t n_heads, int64_t n_kv_heads, int64_t ffn_dim,
                                         int64_t vocab, int64_t tokens, int64_t head_rows);
// FLOP-weighted GFLOP/s of one fp32 library over the shapes (total FLOPs / total best time).
double measure_shapes_gflops(cpu::GemmLibrary lib, const std::vector<GemmShape>& shapes, int threads,
                             const PeakOptions& options = {});

namespace cpu {
// train.precision = "auto" on this CPU at `threads`, decided by measurement: bf16 only where the
// CPU runs it natively and its GEMM peak (recorded in the peak file, measured once per machine)
// beats fp32's by kBf16Margin (choose_auto_precision, backends/cpu/native_precision.h).
PrecisionChoice auto_precision(int threads);

// MFU's denominator on this CPU: the fastest precision's GEMM peak at `threads` (fp32, or bf16
// where it runs natively), so that an MFU means the same on every CPU.
struct FastestPeak {
  Precision precision = Precision::kF32;
  double gflops = 0;
  std::string describe;  // "this CPU's fastest GEMM, fp32 at 151 GFLOP/s at 1 thread (bf16 81)"
};
FastestPeak fastest_gemm_peak(int threads);
}  // namespace cpu

std::string peak_file_path();
std::string cpu_model_name();             // "model name" of /proc/cpuinfo, or "unknown cpu"
const char* precision_name(Precision p);  // "f32", "bf16", "f16"

// The record for (cpu, isa, threads, precision), if the file has one. A missing file is no record.
std::optional<PeakRecord> read_peak(const std::string& path, const std::string& cpu, const std::string& isa,
                                    int threads, Precision precision);
// Adds the record, replacing one with the same (cpu, isa, threads, precision); creates directories.
void record_peak(const std::string& path, const PeakRecord& record);
// Reads the whole file (a bad file fails here, with the path and a hint).
void check_peak_file(const std::string& path);

// The fp32 library bench-peak recorded for this CPU, ISA and thread count in the peak file
// (what ops::matmul uses unless FLUXTRAIN_GEMM says otherwise).
std::optional<std::string> recorded_gemm_library(const std::string& isa, int threads);

}  // namespace ft
