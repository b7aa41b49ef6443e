#include "parallel/micro_batches.h"

#include "util/error.h"

namespace ft {

MicroBatching split_batch(int64_t batch_size, int64_t micro_batch_size, const ParallelConfig& p) {
  if (batch_size % p.dp != 0) {
    throw Error(fmt::format("train.batch_size = {} is not divisible by parallel.dp = {}", batch_size, p.dp),
                fmt::format("use a global batch that is a multiple of {}", p.dp));
  }
  MicroBatching mb;
  mb.local_batch = batch_size / p.dp;
  const std::string per_rank = fmt::format("the per-rank batch of {} sequences (train.batch_size {} / parallel.dp {})",
                                           mb.local_batch, batch_size, p.dp);
  if (p.micro_batches > 0) {
    if (mb.local_batch % p.micro_batches != 0) {
      throw Error(fmt::format("parallel.micro_batches = {} does not divide {}", p.micro_batches, per_rank),
                  "pick a number of micro-batches that divides train.batch_size / parallel.dp");
    }
    mb.count = p.micro_batches;
    mb.size = mb.local_batch / mb.count;
    if (micro_batch_size > 0 && micro_batch_size != mb.size) {
      throw Error(
          fmt::format("train.micro_batch_size = {} disagrees with parallel.micro_batches = {}: {} micro-batches "
                      "of {} have {} sequences each",
                      micro_batch_size, p.micro_batches, per_rank, mb.count, mb.size),
          "set only one of train.micro_batch_size and parallel.micro_batches");
    }
    return mb;
  }
  mb.size = micro_batch_size > 0 ? micro_batch_size : mb.local_batch;
  if (mb.local_batch % mb.size != 0) {
    throw Error(fmt::format("train.micro_batch_size = {} does not divide {}", mb.size, per_rank),
                "pick a micro-batch size that divides train.batch_size / parallel.dp");
  }
  mb.count = mb.local_batch / mb.size;
  return mb;
}

}  // namespace ft
