// ParamLayout: every parameter of the model described once — Hugging Face name, full logical
// shape, how it is split, and where it lives in the flat arenas. Checkpoints, resharding, HF
// export, data-parallel buckets and ZeRO shards all read this one description; a bucket or a
// shard is an (offset, count) range of the arena.
//
// Arena order is by "unit", the granularity of hooks (ZeRO-3 gathers, gradient-ready events):
//   unit 0          model.embed_tokens.weight
//   unit 1 + i      model.layers.i.{input_layernorm, self_attn.{q,k,v,o}_proj,
//                   post_attention_layernorm, mlp.{gate,up,down}_proj}
//   unit L + 1      model.norm.weight, lm_head.weight (absent when embeddings are tied)
// Within a block q_proj, k_proj, v_proj are adjacent, so [Wq; Wk; Wv] is one (qkv_dim, C)
// matrix; gate_proj, up_proj likewise form [W1; W3] (2F, C).
//
// A pipeline stage holds a subset of the units (`units`, the global unit numbers above): its
// arena has only those, numbered 0, 1, ... in order (ParamSpec::unit is this local number);
// global_unit()/local_unit() translate. The whole model is the default.
//
// Under tensor parallelism (TpShard::size > 1) the layout lists only what tensor-parallel rank
// TpShard::rank holds (Megatron's split): q/k/v and gate/up by output rows (column-parallel; k/v
// by kv heads, or one kv head replicated on the ranks whose query heads read it when the tp size
// is a multiple of n_kv_heads), o_proj and down_proj by input columns (row-parallel), the
// embedding and LM head by vocabulary rows; norm weights are replicated. Each spec keeps its
// global shape and says where its piece sits (split_dim, split_offset). The two compose: a
// pipeline stage's tensor-parallel rank holds its shard of its stage's units.
//
//   ParamLayout l = ParamLayout::llama(cfg);
//   const ParamSpec& p = l.at("model.layers.0.mlp.up_proj.weight");   // p.offset, p.shape
//   ParamLayout stage1 = ParamLayout::llama(cfg, dp, {3, 4, 5});       // layers 2, 3 and the head
//   ParamLayout r1 = ParamLayout::llama(cfg, dp, {}, {.rank = 1, .size = 2});   // tp rank 1's half
//   ParamLayout s1r1 = ParamLayout::llama(cfg, dp, {3, 4, 5}, {.rank = 1, .size = 2});  // both
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/model_config.h"
#include "tensor/tensor.h"

namespace ft {

struct ParamSpec {
  std::string name;          // Hugging Face name
  Shape global_shape;        // the full logical shape
  Shape shape;               // what this rank holds (== global_shape without tensor parallelism)
  int split_dim = -1;        // tensor-parallel split dimension, -1 = replicated
  int64_t split_offset = 0;  // first index along split_dim that this rank holds
  int64_t offset = 0;        // element offset in the arena
  int unit = 0;              // local unit: index among this layout's units
  bool decay = true;         // AdamW weight decay applies (matrices yes, norm weights no)
  double init_std = 0;       // 0: initialised to ones (norm weights)
  // Tensor-parallel ranks holding this same piece: 1 when split (or without tensor
  // parallelism), tp for norm weights, tp / n_kv_heads for replicated kv heads. Consecutive
  // tp ranks share a piece; the first of them counts it once (gradient norm, checkpoints).
  int tp_replicas = 1;
  // Each holder computes only part of the gradient (replicated kv heads; norm weights under
  // sequence parallelism): the gradient is the sum over the holders.
  bool tp_partial_grad = false;

  int64_t numel() const { return shape_numel(shape); }
};

// Which tensor-parallel shard a layout describes: rank `rank` of `size`; sequence_parallel marks
// norm-weight gradients partial (each rank normalises only its share of the tokens).
struct TpShard {
  int64_t rank = 0;
  int64_t size = 1;
  bool sequence_parallel = false;
};

class ParamLayout {
 public:
  // unit_align: each unit's range is padded to a multiple of it (data-parallel sharding splits
  // every unit into equal pieces, one per rank). Padding holds no parameter and stays zero.
  // units: the global units to hold, ascending (empty: all of them). tp: this rank's
  // tensor-parallel shard (see above).
  static ParamLayout llama(const ModelConfig& cfg, int64_t unit_align = 1, const std::vector<int>& units = {},
                           const TpShard& tp = {});
  // Throws ft::Error when the model cannot be split over tp_size ranks (heads, kv heads, ffn,
  // hidden size or vocabulary not divisible), naming the degrees that would work.
  static void check_tp(const ModelConfig& cfg, int64_t tp_size);
  // Tensor-parallel degrees (up to n_heads) the model splits over.
  static std::vector<int64_t> tp_degrees(const ModelConfig& cfg);
  // Whether tensor-parallel rank tp_rank counts spec p (replicated pieces count once).
  static bool tp_counts(const ParamSpec& p, int64_t tp_rank) { return tp_rank % p.tp_replicas == 0; }

  const std::vector<ParamSpec>& specs() const { return specs_; }
  int64_t total() const { return total_; }  // elements in the arena
  int num_units() const { return static_cast<int>(unit_begin_.size()); }
  int64_t unit_begin(int u) const { return unit_begin_[static_cast<size_t>(u)]; }
  int64_t unit_end(int u) const { return unit_end_[static_cast<size_t>(u)]; }  // incl. padding
  int64_t unit_size(int u) const { return unit_end(u) - unit_begin(u); }
  // Global unit number of local unit u (0 = embedding, 1 + i = layer i, n_layers + 1 = head), and
  // the local number of a global unit (-1 when this layout does not hold it).
  int global_unit(int u) const { return global_[static_cast<size_t>(u)]; }
  int local_unit(int global) const;
  const ParamSpec& at(const std::string& name) const;
  bool has(const std::string& name) const { return index_.count(name) != 0; }

  // Deterministic initialisation of the arena: element i of parameter p is
  // init_std(p) · normal(hash(seed, p.name), global index of i) — the same value whatever the
  // layout (threads, ranks, shards).
  void init(float* arena, uint64_t seed) const;

 private:
  void add(ParamSpec p);
  void end_unit(int unit, int64_t align);
  std::vector<ParamSpec> specs_;
  std::unordered_map<std::string, size_t> index_;
  std::vector<int64_t> unit_begin_, unit_end_;
  std::vector<int> global_, local_;  // local unit -> global unit, global -> local (-1: absent)
  int64_t total_ = 0;
};

}  // namespace ft
