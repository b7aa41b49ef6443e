// Where a piece of checkpoint state sits in its global tensor, and how to move values between
// pieces of different layouts.
//
// Every tensor is viewed as a matrix (rows, cols) — a vector of n elements as (1, n). A rank's
// tensor-parallel shard is a Block of it (rows [r0, r0 + rows), cols [c0, c0 + cols)); a
// checkpoint piece is the flat range [begin, end) of a block in row-major order. Moving values
// from the pieces of one layout to those of another is copying the runs where their global
// positions meet — the basis of resume, resharding and Hugging Face export.
//
//   std::vector<StatePiece> mine = state_pieces(engine.layout(), engine.state_ranges());
//   Block b = Block::of(spec.global_shape, spec.split_dim, spec.split_offset, spec.shape);
//   copy_overlap(dst_block, dst_begin, dst_end, dst, src_block, src_begin, src_end, src);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "model/param_layout.h"

namespace ft {

struct Block {
  int64_t r0 = 0, c0 = 0, rows = 0, cols = 0;  // in the global (rows, cols) matrix
  // The block of a local shard with `local` shape at `offset` along `split_dim` (-1: whole).
  // For a vector, dimension 0 is the column dimension.
  static Block of(const Shape& global, int split_dim, int64_t offset, const Shape& local);
};

// Global matrix shape of a tensor shape: (1, n) for a vector, (d0, d1) for a matrix.
std::pair<int64_t, int64_t> matrix_shape(const Shape& s);

// Rectangles (in global coordinates) covering the flat range [begin, end) of a block: at most
// three (a partial first row, whole middle rows, a partial last row).
struct Rect {
  int64_t r0, r1, c0, c1;  // [r0, r1) x [c0, c1)
};
std::vector<Rect> piece_rects(const Block& b, int64_t begin, int64_t end);
bool rects_overlap(const Rect& a, const Rect& b);

// Copies the elements that the flat range [sb, se) of block `sblk` (values src[0 .. se - sb))
// shares with the flat range [db, de) of block `dblk` into dst (dst[0 .. de - db)), calling
// `copy(dst_index, src_index, count)` for each contiguous run; returns the elements copied.
int64_t for_each_overlap(const Block& dblk, int64_t db, int64_t de, const Block& sblk, int64_t sb, int64_t se,
                         const std::function<void(int64_t dst_index, int64_t src_index, int64_t count)>& copy);

// One parameter's part of a rank's state ranges (arena [begin, end) ranges, stored compactly):
// the flat range [begin, end) of the parameter's local shard, at `compact` in the rank's state
// buffers.
struct StatePiece {
  const ParamSpec* spec;
  int64_t begin, end;  // flat range of the local shard
  int64_t compact;     // element offset in the rank's compact state buffers
  int64_t count() const { return end - begin; }
  Block block() const { return Block::of(spec->global_shape, spec->split_dim, spec->split_offset, spec->shape); }
  // Identity across ranks: replicated pieces (e.g. tensor-parallel replicas) compare equal.
  std::string key() const;
};

// The pieces of every parameter inside `ranges` (arena [begin, end), in compact order).
std::vector<StatePiece> state_pieces(const ParamLayout& layout, const std::vector<std::pair<int64_t, int64_t>>& ranges);
int64_t ranges_size(const std::vector<std::pair<int64_t, int64_t>>& ranges);

}  // namespace ft
