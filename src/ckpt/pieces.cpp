#include "ckpt/pieces.h"

#include <algorithm>

#include "util/error.h"

namespace ft {

std::pair<int64_t, int64_t> matrix_shape(const Shape& s) {
  if (s.size() == 1) return {1, s[0]};
  FT_CHECK(s.size() == 2, "checkpoint tensors are vectors or matrices");
  return {s[0], s[1]};
}

Block Block::of(const Shape& global, int split_dim, int64_t offset, const Shape& local) {
  auto [gr, gc] = matrix_shape(global);
  auto [lr, lc] = matrix_shape(local);
  Block b{0, 0, lr, lc};
  if (split_dim >= 0) {
    bool cols = global.size() == 1 || split_dim == 1;
    (cols ? b.c0 : b.r0) = offset;
  }
  (void)gr, (void)gc;
  return b;
}

std::vector<Rect> piece_rects(const Block& b, int64_t begin, int64_t end) {
  std::vector<Rect> out;
  if (begin >= end || b.cols == 0) return out;
  const int64_t fr = begin / b.cols, lr = (end - 1) / b.cols;
  const int64_t fc = begin % b.cols, lc = (end - 1) % b.cols + 1;
  if (fr == lr) {
    out.push_back({b.r0 + fr, b.r0 + fr + 1, b.c0 + fc, b.c0 + lc});
    return out;
  }
  out.push_back({b.r0 + fr, b.r0 + fr + 1, b.c0 + fc, b.c0 + b.cols});
  if (lr > fr + 1) out.push_back({b.r0 + fr + 1, b.r0 + lr, b.c0, b.c0 + b.cols});
  out.push_back({b.r0 + lr, b.r0 + lr + 1, b.c0, b.c0 + lc});
  return out;
}

bool rects_overlap(const Rect& a, const Rect& b) {
  return std::max(a.r0, b.r0) < std::min(a.r1, b.r1) && std::max(a.c0, b.c0) < std::min(a.c1, b.c1);
}

int64_t for_each_overlap(const Block& d, int64_t db, int64_t de, const Block& s, int64_t sb, int64_t se,
                         const std::function<void(int64_t, int64_t, int64_t)>& copy) {
  if (db >= de || sb >= se || d.cols == 0 || s.cols == 0) return 0;
  // Global rows the two ranges can share.
  const int64_t d_first = d.r0 + db / d.cols, d_last = d.r0 + (de - 1) / d.cols;
  const int64_t s_first = s.r0 + sb / s.cols, s_last = s.r0 + (se - 1) / s.cols;
  const int64_t r_begin = std::max(d_first, s_first), r_end = std::min(d_last, s_last) + 1;
  const int64_t c_lo = std::max(d.c0, s.c0), c_hi = std::min(d.c0 + d.cols, s.c0 + s.cols);
  if (c_lo >= c_hi) return 0;
  int64_t copied = 0;
  for (int64_t g = r_begin; g < r_end; ++g) {
    // Columns [c_lo, c_hi) of global row g, as flat indices of each block, clipped to its range.
    int64_t df = (g - d.r0) * d.cols + (c_lo - d.c0), sf = (g - s.r0) * s.cols + (c_lo - s.c0);
    int64_t n = c_hi - c_lo;
    int64_t lo = std::max({int64_t{0}, db - df, sb - sf});
    int64_t hi = std::min({n, de - df, se - sf});
    if (lo >= hi) continue;
    copy(df + lo - db, sf + lo - sb, hi - lo);
    copied += hi - lo;
  }
  return copied;
}

std::string StatePiece::key() const {
  std::string k = spec->name + "|" + std::to_string(spec->split_dim) + "|" + std::to_string(spec->split_offset);
  for (int64_t d : spec->shape) k += "|" + std::to_string(d);
  return k + "|" + std::to_string(begin) + "|" + std::to_string(end);
}

std::vector<StatePiece> state_pieces(const ParamLayout& layout,
                                     const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  std::vector<StatePiece> out;
  int64_t compact = 0;
  for (auto [begin, end] : ranges) {
    for (const ParamSpec& p : layout.specs()) {
      int64_t b = std::max(begin, p.offset), e = std::min(end, p.offset + p.numel());
      if (b < e) out.push_back({&p, b - p.offset, e - p.offset, compact + (b - begin)});
    }
    compact += end - begin;
  }
  return out;
}

int64_t ranges_size(const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  int64_t n = 0;
  for (auto [b, e] : ranges) n += e - b;
  return n;
}

}  // namespace ft
