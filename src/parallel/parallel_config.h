// ParallelConfig (parallel.*): the layout of ranks. dp × cp × tp × pp must equal the world size.
#pragma once

#include <cstdint>
#include <string>

namespace ft {

class ConfigBinder;

// Which transport moves the mesh axes' buffers (parallel.comm): NCCL for device buffers when the
// rank computes on a GPU and the build has NCCL, else MPI (auto); MPI always (a GPU rank's device
// buffers staged through host memory); or NCCL (device buffers; host buffers stay on MPI).
enum class CommBackend : uint8_t { kAuto = 0, kMpi = 1, kNccl = 2 };
const char* comm_backend_name(CommBackend c);  // "auto", "mpi", "nccl"

// What the data-parallel gradient reduction sends: fp32, bf16 or fp16 values (fp16: only for
// loss-scaled gradients, train.precision = "fp16"; Config::validate refuses it otherwise), or
// PowerSGD's low-rank factors.
enum class GradCompression : uint8_t { kNone = 0, kBF16 = 1, kPowerSGD = 2, kFP16 = 3 };

// Pipeline schedules (parallel/pipeline_parallel/schedule.h): all forwards then all backwards; one forward
// one backward; 1F1B over parallel.virtual_stages model chunks per stage (Megatron's interleaving).
enum class PipelineSchedule : uint8_t { kGPipe = 0, k1F1B = 1, kInterleaved = 2 };
const char* pipeline_schedule_name(PipelineSchedule s);  // "gpipe", "1f1b", "interleaved"

// How context parallelism (parallel.cp > 1) computes attention over the sequence split
// (parallel/context_parallel): key/value blocks passed around the cp ring, or Ulysses' all-to-all of
// heads against sequence.
enum class CpAttention : uint8_t { kRing = 0, kAllToAll = 1 };
const char* cp_attention_name(CpAttention a);  // "ring", "all_to_all"

struct ParallelConfig {
  int64_t dp = 1;                     // data-parallel replicas
  int64_t tp = 1;                     // tensor-parallel ranks (innermost axis)
  int64_t cp = 1;                     // context-parallel ranks: each sample's sequence split over them
  int64_t pp = 1;                     // pipeline stages (outermost axis)
  bool sequence_parallel = false;     // tp > 1: norms and residuals on N/tp-token shards
  double collective_timeout_s = 300;  // bound on every wait for a peer
  CommBackend comm = CommBackend::kAuto;
  int64_t zero = 0;       // ZeRO stage over the data-parallel group: 0, 1, 2, 3
  double bucket_mb = 25;  // gradient all-reduce bucket size (ZeRO 0)
  GradCompression grad_compression = GradCompression::kNone;
  int64_t powersgd_rank = 4;           // rank of PowerSGD's low-rank factors
  int64_t powersgd_warmup_steps = 10;  // uncompressed steps before PowerSGD starts
  int64_t micro_batches = 0;           // per step and rank; 0 = from train.micro_batch_size
  PipelineSchedule pp_schedule = PipelineSchedule::k1F1B;
  int64_t virtual_stages = 1;  // model chunks per pipeline stage (interleaved schedule)
  CpAttention cp_attention = CpAttention::kRing;

  void bind(ConfigBinder& b);
  void validate() const;
  int64_t world_size() const { return dp * cp * tp * pp; }
  // "parallel.dp × parallel.tp × parallel.pp = 2 × 1 × 1 = 2" (parallel.cp too when it is > 1).
  std::string degrees_product() const;
  // train.seq_len = T split over cp ranks: an ft::Error naming both unless T is a multiple of 2·cp
  // (the zig-zag split's 2·cp chunks).
  void check_seq_len(int64_t seq_len) const;
};

}  // namespace ft
