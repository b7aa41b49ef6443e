// How a rank's share of the global batch is cut into micro-batches — one rule for every layout:
//   per-rank batch  = train.batch_size / parallel.dp
//   parallel.micro_batches > 0   fixes the number of micro-batches (their size is the quotient);
//   otherwise train.micro_batch_size fixes their size (0 = the whole per-rank batch, one
//   micro-batch). Setting both is allowed when they agree. Each must divide the per-rank batch.
// A pipeline runs these micro-batches through its stages; data parallelism accumulates them.
//
// It lives beside ParallelConfig (in ft_parallel_config, which links only ft_util) so that the
// config loader, the checkpoint tools, the dry run and the trainer all read the one rule.
//
//   MicroBatching mb = split_batch(cfg.train.batch_size, cfg.train.micro_batch_size, cfg.parallel);
//   // throws ft::Error naming the keys
//   for (int64_t i = 0; i < mb.count; ++i) model.forward_backward(..., batch.sequence(i * mb.size), ...);
#pragma once

#include <cstdint>

#include "parallel/parallel_config.h"

namespace ft {

struct MicroBatching {
  int64_t local_batch = 0;  // sequences per rank and step
  int64_t size = 0;         // sequences per micro-batch
  int64_t count = 0;        // micro-batches per step
};

// batch_size: train.batch_size (sequences per step over all ranks); micro_batch_size:
// train.micro_batch_size (0: unset).
MicroBatching split_batch(int64_t batch_size, int64_t micro_batch_size, const ParallelConfig& p);

}  // namespace ft
