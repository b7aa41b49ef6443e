// Piece geometry: moving values between the pieces of two layouts equals moving them element by
// element through global coordinates (random blocks, splits along either dimension, ranges).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "ckpt/pieces.h"

namespace ft {
namespace {

// Global (row, col) of flat index i of block b.
std::pair<int64_t, int64_t> global_of(const Block& b, int64_t i) {
  return {b.r0 + i / b.cols, b.c0 + i % b.cols};
}

struct Random {
  std::mt19937_64 g{42};
  int64_t in(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); }
};

// A random local shard of a (R, C) tensor split along `dim` (-1: whole) and a flat range of it.
void random_piece(Random& r, const Shape& global, int dim, Block* b, int64_t* begin, int64_t* end) {
  Shape local = global;
  int64_t off = 0;
  if (dim >= 0) {
    local[static_cast<size_t>(dim)] = r.in(1, global[static_cast<size_t>(dim)]);
    off = r.in(0, global[static_cast<size_t>(dim)] - local[static_cast<size_t>(dim)]);
  }
  *b = Block::of(global, dim, off, local);
  const int64_t n = shape_numel(local);
  *begin = r.in(0, n - 1);
  *end = r.in(*begin + 1, n);
}

TEST(CkptPieces, OverlapMatchesElementwiseMapping) {
  Random r;
  for (int trial = 0; trial < 3000; ++trial) {
    Shape g = trial % 3 == 0 ? Shape{r.in(1, 40)} : Shape{r.in(1, 9), r.in(1, 9)};
    int dd = static_cast<int>(r.in(-1, static_cast<int64_t>(g.size()) - 1));
    int sd = static_cast<int>(r.in(-1, static_cast<int64_t>(g.size()) - 1));
    Block db, sb;
    int64_t d0, d1, s0, s1;
    random_piece(r, g, dd, &db, &d0, &d1);
    random_piece(r, g, sd, &sb, &s0, &s1);
    // Expected: every destination element whose global position the source range holds.
    std::map<std::pair<int64_t, int64_t>, int64_t> src_at;
    for (int64_t i = s0; i < s1; ++i) src_at[global_of(sb, i)] = i - s0;
    std::vector<int64_t> want(static_cast<size_t>(d1 - d0), -1), got(want.size(), -1);
    int64_t expected = 0;
    for (int64_t i = d0; i < d1; ++i) {
      auto it = src_at.find(global_of(db, i));
      if (it != src_at.end()) want[static_cast<size_t>(i - d0)] = it->second, ++expected;
    }
    int64_t n = for_each_overlap(db, d0, d1, sb, s0, s1, [&](int64_t di, int64_t si, int64_t c) {
      for (int64_t k = 0; k < c; ++k) {
        ASSERT_EQ(got[static_cast<size_t>(di + k)], -1) << "element copied twice";
        got[static_cast<size_t>(di + k)] = si + k;
      }
    });
    ASSERT_EQ(n, expected);
    ASSERT_EQ(got, want) << "trial " << trial;
  }
}

TEST(CkptPieces, RectsCoverExactlyTheRange) {
  Random r;
  for (int trial = 0; trial < 1000; ++trial) {
    Shape g{r.in(1, 8), r.in(1, 8)};
    Block b;
    int64_t s, e;
    random_piece(r, g, static_cast<int>(r.in(-1, 1)), &b, &s, &e);
    std::set<std::pair<int64_t, int64_t>> want, got;
    for (int64_t i = s; i < e; ++i) want.insert(global_of(b, i));
    auto rects = piece_rects(b, s, e);
    ASSERT_LE(rects.size(), 3u);
    for (size_t i = 0; i < rects.size(); ++i)
      for (size_t j = i + 1; j < rects.size(); ++j) ASSERT_FALSE(rects_overlap(rects[i], rects[j]));
    for (const Rect& q : rects)
      for (int64_t y = q.r0; y < q.r1; ++y)
        for (int64_t x = q.c0; x < q.c1; ++x) got.insert({y, x});
    ASSERT_EQ(got, want);
  }
}

TEST(CkptPieces, StatePiecesFollowTheRanges) {
  ModelConfig m;  // tiny
  ParamLayout l = ParamLayout::llama(m, 4);
  // Rank 1 of 4's piece of every unit.
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int u = 0; u < l.num_units(); ++u) {
    int64_t p = l.unit_size(u) / 4;
    ranges.emplace_back(l.unit_begin(u) + p, l.unit_begin(u) + 2 * p);
  }
  auto pieces = state_pieces(l, ranges);
  int64_t covered = 0;
  for (const StatePiece& p : pieces) {
    EXPECT_GE(p.spec->offset + p.begin, ranges[static_cast<size_t>(p.spec->unit)].first);
    EXPECT_LE(p.spec->offset + p.end, ranges[static_cast<size_t>(p.spec->unit)].second);
    covered += p.count();
  }
  // Every parameter element of the ranges is in exactly one piece (padding is not).
  int64_t params = 0;
  for (auto [b, e] : ranges)
    for (const ParamSpec& s : l.specs())
      params += std::max<int64_t>(0, std::min(e, s.offset + s.numel()) - std::max(b, s.offset));
  EXPECT_EQ(covered, params);
}

}  // namespace
}  // namespace ft
