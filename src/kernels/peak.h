// The GEMM peak of this machine: the denominator of MFU.
//
//   double peak = ft::gemm_peak_gflops(ft::Precision::kF32, omp_get_max_threads());
//   double mfu = model_flops_per_s / (peak * 1e9);
//
// The first call for a (CPU model, threads, precision) measures a large square GEMM through the
// op the model uses (ops::matmul for fp32 — dnnl_sgemm —, ops::matmul_bf16 for bf16; best of
// several runs, about a second) and records it in the peak file; later calls, in this and later processes,
// read the record. `fluxtrain bench-peak` re-measures, compares with OpenBLAS and rewrites it.
//
// Peak file: $FLUXTRAIN_PEAK_FILE, else $XDG_CACHE_HOME/fluxtrain/peak.json, else
// ~/.cache/fluxtrain/peak.json. JSON, format "fluxtrain-gemm-peak", version 1:
//   {"format": "fluxtrain-gemm-peak", "version": 1, "entries": [
//     {"cpu": "Intel(R) Xeon(R) Processor", "threads": 2, "precision": "bf16", "gflops": 2470.1,
//      "size": 2048, "library": "oneDNN 2.6.3", "impl": "brg:avx512_core_amx_bf16",
//      "measured_at": "2025-01-01T12:00:00Z"}, ...]}
// Written atomically (tmp + fsync + rename). Measure on an otherwise idle machine: ranks that
// measure at the same time on one node measure each other's contention.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

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
  int threads = 1;
  Precision precision = Precision::kF32;
  double gflops = 0;
  int64_t size = 0;
  std::string library;  // "oneDNN 2.6.3"
  std::string impl;     // oneDNN implementation, e.g. "brg:avx512_core_amx_bf16"
  std::string measured_at;
};

// The recorded peak, or a fresh measurement that is then recorded. threads <= 0: the OpenMP
// default. Thread-safe. Throws ft::Error when the peak file exists but is not a valid peak file.
double gemm_peak_gflops(Precision precision, int threads, const PeakOptions& options = {});

// Measures without reading or writing the file: GFLOP/s of the best run.
PeakRecord measure_gemm_peak(Precision precision, int threads, const PeakOptions& options = {});
// The same through oneDNN's fp32 matmul primitive, which ops::matmul does not use (comparison).
PeakRecord measure_matmul_primitive_f32(int threads, const PeakOptions& options = {});

std::string peak_file_path();
std::string cpu_model_name();  // "model name" of /proc/cpuinfo, or "unknown cpu"
const char* precision_name(Precision p);  // "f32", "bf16"

// The record for (cpu, threads, precision), if the file has one. A missing file is no record.
std::optional<PeakRecord> read_peak(const std::string& path, const std::string& cpu, int threads,
                                    Precision precision);
// Adds the record, replacing one with the same (cpu, threads, precision); creates directories.
void record_peak(const std::string& path, const PeakRecord& record);

// The peer: OpenBLAS, loaded with dlopen on first use so that OPENBLAS_CORETYPE (read by OpenBLAS
// when it is loaded) can be set first: to SkylakeX when unset and the CPU has AVX-512 (Debian's
// OpenBLAS otherwise picks a slow generic kernel on CPUs it does not know). Not linked: it would
// start its own thread pool in every process. Stays loaded (its threads idle) once loaded.
struct OpenBlas {
  // cblas_sgemm(order, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  // order 101 = row-major, trans 111 = no, 112 = yes. Null when OpenBLAS could not be loaded.
  void (*sgemm)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int) =
      nullptr;
  void (*set_num_threads)(int) = nullptr;
  std::string core;          // openblas_get_corename()
  std::string coretype_env;  // OPENBLAS_CORETYPE as OpenBLAS saw it ("" if unset)
  bool env_set_by_us = false;
  std::string note;          // why unavailable, or a caveat (the core type did not take effect)
};
const OpenBlas& openblas();  // thread-safe; loads once

struct BlasPeerResult {
  bool available = false;
  double gflops = 0;
  std::string core, coretype_env, note;
  bool env_set_by_us = false;
};
// OpenBLAS sgemm on the same square problem as measure_gemm_peak.
BlasPeerResult measure_openblas_sgemm(int threads, const PeakOptions& options = {});

}  // namespace ft
