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
//   board.holding_up(seq, -1, world_ranks)   // "1 (never arrived)": for a timeout's message
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/comm/comm.h"

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
  // Peers past #seq that are inside their latest collective (entered, not finished).
  std::vector<int> ahead_inside(int64_t seq) const;
  int64_t seq_of(int index) const;
  // Who holds collective #seq up, as world ranks with how: the ranks that never entered it; else
  // those that entered it and never left; else `waiting_for` (the group index this rank's own
  // transfer waits for, -1 for none); else the peers that left it but never reached #seq + 1 (a
  // library collective needs its peers' progress after they leave); else the peers that left it
  // and are inside a later one (a peer stopped there: on a slow machine MPI's part of #seq can
  // still need it after it has reached #seq + 1). "unknown" when none.
  std::string holding_up(int64_t seq, int waiting_for, const std::vector<int>& world_ranks) const;

 private:
  volatile int64_t* slots_ = nullptr;
  int size_ = 0, index_ = 0;
};

// A collective's timeout, in the one format every transport uses ("transport" is "" for MPI, or
// e.g. " over NCCL"): "rank 0: all_reduce #12 on group dp (world ranks 0..1) timed out after 5 s;
// ranks holding it up: 1 (never arrived)", with the hint naming parallel.collective_timeout_s.
CommError collective_timeout_error(int world_rank, CollKind kind, int64_t seq, const std::string& group,
                                   const std::vector<int>& world_ranks, const std::string& transport, double timeout_s,
                                   const std::string& holding_up);

}  // namespace ft
