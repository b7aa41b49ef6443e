// OpTrace: what one training step asked of a GPU, op by op — every op call with its shapes, the
// bytes it moves, the FLOPs it executes and how many kernels it launches, plus every memory fill
// and copy. A recording backend (backends/trace) writes it while the real step runs on it
// (dryrun/step_trace.h); the roofline (plan/roofline.h) prices it. Plain data, header only: the
// planner reads it without linking the trainer.
//
//   plan::OpTrace t = trace_training_step(cfg);        // dryrun/step_trace.h
//   for (const plan::OpRecord& r : t.ops) r.op, r.shape, r.flops, r.bytes();
//   plan::StepPrice p = plan::price_step(t, plan::h200_roofline());
//   for (const plan::CollRecord& c : t.collectives) c.group, c.op, c.count;  // what the rank sent
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/precision.h"

namespace ft::plan {

// How an op is priced (plan/roofline.cpp).
enum class OpKind : uint8_t {
  kGemm,         // cuBLASLt: GemmShape
  kFlashFp32,    // the fp32 CUDA-core flash attention kernels (backends/cuda/attention.cu)
  kSdpa,         // cuDNN SDPA (bf16/fp16 attention): AttentionShape
  kElementwise,  // everything else on the device: max(bytes / HBM, FLOPs / fp32 peak)
  kSerial,       // one thread adding `serial` elements in order (sum_in_order)
  kFill,         // cudaMemsetAsync
  kCopyD2D,      // device to device
  kCopyH2D,      // host to device (over PCIe)
  kCopyD2H,      // device to host (over PCIe)
};

// C(M, N) = op(A)(M, K) · op(B)(K, N) + beta · C, as kernels/op_decls.inc's matmul.
struct GemmShape {
  int64_t M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false;
  float beta = 0;
  Precision precision = Precision::kF32;  // what the tensor cores (or CUDA cores: kF32) multiply in
};

// Causal grouped-query attention of B sequences of T tokens, H query heads, Hkv key/value heads
// of dimension D.
struct AttentionShape {
  int64_t B = 0, T = 0, H = 0, Hkv = 0, D = 0;
  bool backward = false;
};

struct OpRecord {
  std::string op;     // the op's name (kernels/op_decls.inc), or "memset", "memcpy_d2d", ...
  std::string shape;  // "M=16384 N=2560 K=2048 tA=0 tB=1 beta=0 bf16", "n=33554432", ...
  OpKind kind = OpKind::kElementwise;
  double bytes_read = 0, bytes_written = 0;  // device memory (host memory for the host's side of a copy: not counted)
  double flops = 0;                          // executed (causal attention: the half it computes)
  int kernels = 1;                           // launches (priced a launch cost each)
  // Helper kernels of the op beside its main one (matmul's fp32 -> bf16 rounding of its operands):
  // their bytes, priced at the HBM rate, and their launches.
  double side_bytes = 0;
  int side_kernels = 0;
  int64_t serial = 0;          // kSerial: elements added in order by one thread
  GemmShape gemm{};            // kGemm
  AttentionShape attention{};  // kFlashFp32, kSdpa
  double seconds = 0;  // measured time of the call (a timed step, backends/timing: CPU time at 1 thread); 0 if not
  // A transfer the op runs beside (context parallelism's ring: the next key/value block, sent while
  // this block's attention computes): hidden up to the op's own time (plan/roofline.h).
  double overlapped_send_bytes = 0;

  double bytes() const { return bytes_read + bytes_written; }
};

// One collective call of the traced rank, as the step's code made it on a communicator of its
// mesh (dryrun/fake_comm.h records them): the arguments, not the bytes — the bytes depend on the
// rank's place in its group and on the algorithm, so whoever reads the trace replays the call
// (FakeCommunicator::bytes_sent) for each rank it stands for.
enum class CollOp : uint8_t { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kSend, kRecv, kBarrier };
struct CollRecord {
  std::string group;  // the mesh axis: "dp", "tp", "pp", "cp", "dp_cp" or "world"
  CollOp op = CollOp::kAllReduce;
  // all-reduce, reduce-scatter: elements (of `element_bytes` on the wire; a reduce-scatter's
  // count is the output shard's); all-gather, broadcast, send, recv: bytes (an all-gather's are
  // the rank's own piece)
  int64_t count = 0;
  int element_bytes = 4;    // 8: an all-reduce of doubles (host scalars); 2: a bf16 or fp16 wire
  bool reduce_max = false;  // all-reduce with max instead of sum (sent in fp32)
  int root = 0;             // broadcast: the root's index in the group
  int peer = 0;             // send, recv: the peer's index in the group
  auto operator<=>(const CollRecord&) const = default;
};

struct OpTrace {
  std::vector<OpRecord> ops;               // in call order
  std::vector<CollRecord> collectives;     // in call order
  std::string device;                      // what the recording backend called the GPU ("NVIDIA H200")
  int64_t tokens = 0;                      // tokens of the traced rank's step (its share of batch × seq_len)
  Precision precision = Precision::kBF16;  // train.precision of the step (MFU's peak is that precision's)
  // The step's model FLOPs (MFU's numerator): ModelConfig::train_flops_per_token × tokens —
  // 6 × matmul parameters + 12 × layers × dim × seq_len per token (attention without the causal
  // saving: the PaLM convention the trainer and the planner use).
  double model_flops = 0;
  double peak_device_bytes = 0;  // the most device memory live at once during the traced step
  // With parallel.cp > 1: the bytes the rank sends on its cp group in the step, counted from the
  // cp collectives as the dry run counts them (the ring's or the all-to-all's transfers, the sums).
  double cp_bytes = 0;
  // A step timed on the host (dryrun/step_trace.h, timed_on_host): the whole step's time measured
  // as its ops are (the process's CPU time at 1 thread, at most the wall clock) and the same
  // step's op seconds summed, the median over the timed steps of each. Their difference is the
  // step's CPU work outside the timed ops (memory fills and copies, allocation, the host's
  // bookkeeping between the ops); 0 when not timed.
  double step_seconds = 0, step_ops_seconds = 0;
};

}  // namespace ft::plan
