// StagePartition: which units of the model each pipeline chunk holds. Units are the embedding
// (0), the layers (1 + i) and the head (final norm, LM head and loss, L + 1); a chunk is a
// contiguous run of them holding at least one layer. The embedding goes with the first chunk
// and the head with the last. Chunk k runs on stage k % stages (schedule.h).
//
// Balanced by compute: the layers are split to minimise the largest chunk's cost (exact, by
// dynamic programming over the split points), where a unit's cost is its training FLOPs per
// token — a layer 6 × its matmul parameters + 12 · dim · seq_len (attention) (8 × with full
// recompute: the forward runs twice), the head 6 · vocab · dim (its vocabulary GEMM, often worth
// several layers), the embedding a lookup (0).
//
//   StagePartition part = StagePartition::balanced(cfg.model, seq_len, /*stages=*/2, /*virtual=*/1);
//   part.stage_units(1);     // {3, 4, 5}: layers 2 and 3, and the head
//   part.describe();         // "stage 0: embedding, layers 0-1 | stage 1: layers 2-3, head"
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/activation_sizes.h"
#include "model/model_config.h"

namespace ft {

struct ChunkUnits {
  int begin = 0, end = 0;  // global units [begin, end)
  double cost = 0;         // FLOPs per token of training (forward + backward)
  double forward = 0;      // of which the forward action (which also runs the head's backward:
                           // logits, loss gradient and the head's dx, dW are fused per chunk of tokens)
};

class StagePartition {
 public:
  // Throws ft::Error when stages · virtual_stages exceeds the number of layers.
  static StagePartition balanced(const ModelConfig& m, int64_t seq_len, int stages, int virtual_stages);

  int stages() const { return stages_; }
  int virtual_stages() const { return virtual_; }
  int chunks() const { return static_cast<int>(chunks_.size()); }
  const ChunkUnits& chunk(int k) const { return chunks_[static_cast<size_t>(k)]; }
  // The global units stage s holds (all its chunks), ascending.
  std::vector<int> stage_units(int stage) const;
  // The layers chunk k's activations cover.
  LayerSpan span(int k) const;
  bool has_embedding(int k) const { return chunk(k).begin == 0; }
  bool has_head(int k) const { return chunk(k).end == n_layers_ + 2; }
  std::string describe() const;

  // Training FLOPs per token of global unit u, and the part its forward action does.
  static double unit_cost(const ModelConfig& m, int64_t seq_len, int u);
  static double unit_forward_cost(const ModelConfig& m, int64_t seq_len, int u);

 private:
  int stages_ = 1, virtual_ = 1;
  int n_layers_ = 0;
  std::vector<ChunkUnits> chunks_;
};

}  // namespace ft
