#include "parallel/pipeline_parallel/partition.h"

#include <algorithm>
#include <limits>

#include "util/error.h"

namespace ft {

double StagePartition::unit_cost(const ModelConfig& m, int64_t seq_len, int u) {
  const double C = static_cast<double>(m.dim);
  if (u == 0) return 0;  // the embedding is a lookup
  if (u == m.n_layers + 1) return 6.0 * static_cast<double>(m.vocab_size) * C;
  const double passes = m.recompute == Recompute::kFull ? 8.0 : 6.0;  // recompute: forward twice
  const double matmul = static_cast<double>(m.params_per_layer() - 2 * m.dim);
  return passes * matmul + passes * 2.0 * C * static_cast<double>(seq_len);  // 12 · C · T without recompute
}

double StagePartition::unit_forward_cost(const ModelConfig& m, int64_t seq_len, int u) {
  if (u == m.n_layers + 1) return unit_cost(m, seq_len, u);  // the head's backward is fused into its forward
  if (u == 0) return 0;
  const double matmul = static_cast<double>(m.params_per_layer() - 2 * m.dim);
  return 2.0 * matmul + 4.0 * static_cast<double>(m.dim) * static_cast<double>(seq_len);
}

StagePartition StagePartition::balanced(const ModelConfig& m, int64_t seq_len, int stages, int virtual_stages) {
  const int K = stages * virtual_stages, L = static_cast<int>(m.n_layers);
  if (stages <= 0 || virtual_stages <= 0)
    throw Error(fmt::format("pipeline: {} stage(s) × {} virtual stage(s) must be positive", stages, virtual_stages));
  if (K > L) {
    throw Error(virtual_stages == 1
                    ? fmt::format("parallel.pp = {} is greater than the number of layers, model.n_layers = {}: "
                                  "every pipeline stage needs at least one layer",
                                  stages, L)
                    : fmt::format("parallel.pp × parallel.virtual_stages = {} × {} = {} model chunks but "
                                  "model.n_layers = {}: every chunk needs at least one layer",
                                  stages, virtual_stages, K, L),
                fmt::format("use at most {} pipeline chunks in all (parallel.pp × parallel.virtual_stages)", L));
  }
  std::vector<double> prefix(static_cast<size_t>(L) + 1, 0);
  for (int i = 0; i < L; ++i)
    prefix[static_cast<size_t>(i) + 1] = prefix[static_cast<size_t>(i)] + unit_cost(m, seq_len, i + 1);
  const double embed = unit_cost(m, seq_len, 0), head = unit_cost(m, seq_len, L + 1);
  // Cost of the chunk holding layers [i, j), the k-th of K (1-based).
  auto cost = [&](int i, int j, int k) {
    return prefix[static_cast<size_t>(j)] - prefix[static_cast<size_t>(i)] + (i == 0 ? embed : 0) + (k == K ? head : 0);
  };
  // best[k][j]: smallest largest-chunk cost of the first j layers in k chunks; cut[k][j]: where
  // the k-th chunk starts.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(static_cast<size_t>(K) + 1,
                                        std::vector<double>(static_cast<size_t>(L) + 1, inf));
  std::vector<std::vector<int>> cut(static_cast<size_t>(K) + 1, std::vector<int>(static_cast<size_t>(L) + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= K; ++k) {
    for (int j = k; j <= L; ++j) {
      if (k == K && j != L) continue;
      for (int i = k - 1; i < j; ++i) {
        double c = std::max(best[static_cast<size_t>(k) - 1][static_cast<size_t>(i)], cost(i, j, k));
        if (c < best[static_cast<size_t>(k)][static_cast<size_t>(j)]) {
          best[static_cast<size_t>(k)][static_cast<size_t>(j)] = c;
          cut[static_cast<size_t>(k)][static_cast<size_t>(j)] = i;
        }
      }
    }
  }
  StagePartition p;
  p.stages_ = stages;
  p.virtual_ = virtual_stages;
  p.n_layers_ = L;
  p.chunks_.resize(static_cast<size_t>(K));
  for (int k = K, j = L; k >= 1; --k) {
    int i = cut[static_cast<size_t>(k)][static_cast<size_t>(j)];
    // Layers [i, j) are units [i + 1, j + 1); the first chunk adds the embedding, the last the head.
    ChunkUnits& c = p.chunks_[static_cast<size_t>(k) - 1];
    c.begin = k == 1 ? 0 : i + 1;
    c.end = k == K ? L + 2 : j + 1;
    c.cost = cost(i, j, k);
    for (int u = c.begin; u < c.end; ++u) c.forward += unit_forward_cost(m, seq_len, u);
    j = i;
  }
  return p;
}

std::vector<int> StagePartition::stage_units(int stage) const {
  std::vector<int> units;
  for (int k = stage; k < chunks(); k += stages_)
    for (int u = chunk(k).begin; u < chunk(k).end; ++u) units.push_back(u);
  return units;
}

LayerSpan StagePartition::span(int k) const {
  const ChunkUnits& c = chunk(k);
  int first = std::max(c.begin, 1) - 1, end = std::min(c.end, n_layers_ + 1) - 1;  // layers [first, end)
  return LayerSpan{first, end - first, has_head(k)};
}

std::string StagePartition::describe() const {
  std::string out;
  for (int k = 0; k < chunks(); ++k) {
    LayerSpan s = span(k);
    std::string what = has_embedding(k) ? "embedding, " : "";
    what +=
        s.count == 1 ? fmt::format("layer {}", s.first) : fmt::format("layers {}-{}", s.first, s.first + s.count - 1);
    if (s.head) what += ", head";
    out += fmt::format("{}{} {}: {}", out.empty() ? "" : " | ", virtual_ > 1 ? "chunk" : "stage", k, what);
    if (virtual_ > 1) out += fmt::format(" (stage {})", k % stages_);
  }
  return out;
}

}  // namespace ft
