// ArrivalBoard: which collective each rank of a group has entered and left, so that a rank that
// times out can name the ranks that never arrived, or entered and never left (rather than only
// its ring neighbour, which may be waiting itself). One small memory-mapped file per group under a directory all ranks
// of a node share; each rank stores its latest sequence number into its own slot.
//
//   ArrivalBoard board(dir, "dp.0", group_size, my_index);
//   board.arrive(seq);                       // entering collective #seq
//   board.finish(seq);                       // leaving it
//   board.laggards(seq)                      // group indices that have not entered #seq
//   board.stuck_inside(seq)                  // other indices that entered #seq and never left it
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ft {

class ArrivalBoard {
 public:
  // An empty dir disables the board (laggards() then returns nothing).
  ArrivalBoard(const std::string& dir, const std::string& group, int size, int index);
  ~ArrivalBoard();
  ArrivalBoard(const ArrivalBoard&) = delete;
  ArrivalBoard& operator=(const ArrivalBoard&) = delete;

  bool enabled() const { return slots_ != nullptr; }
  void arrive(int64_t seq);
  void finish(int64_t seq);
  std::vector<int> laggards(int64_t seq) const;
  std::vector<int> stuck_inside(int64_t seq) const;
  int64_t seq_of(int index) const;

 private:
  volatile int64_t* slots_ = nullptr;
  int size_ = 0, index_ = 0;
};

}  // namespace ft
