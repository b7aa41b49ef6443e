// ArrivalBoard: who a timed-out collective names, for each way a peer can hold it up. Two boards
// of one group in one process share the memory-mapped file, as two ranks of a node do.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "parallel/comm/arrival_board.h"

namespace ft {
namespace {

namespace fs = std::filesystem;

class Board : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("ft_board_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
  const std::vector<int> world_{4, 5};  // the group's world ranks
};

TEST_F(Board, NamesThePeerThatHoldsTheCollectiveUp) {
  ArrivalBoard me(dir_, "dp-4", 2, 0), peer(dir_, "dp-4", 2, 1);
  ASSERT_TRUE(me.enabled() && peer.enabled());
  me.arrive(50);
  EXPECT_EQ(me.holding_up(50, -1, world_), "5 (never arrived)");
  peer.arrive(50);
  EXPECT_EQ(me.holding_up(50, -1, world_), "5 (entered it, never finished)");
  peer.finish(50);
  EXPECT_EQ(me.holding_up(50, 1, world_), "5 (the peer this rank waits for)");
  EXPECT_EQ(me.holding_up(50, -1, world_), "5 (left it, never reached the next)");
  // The peer left #50 (MPI's part of it done on its side), entered #51 and stopped there: on a
  // slow machine this rank's part of #50 can still need it. It was "unknown".
  peer.arrive(51);
  EXPECT_EQ(me.holding_up(50, -1, world_), "5 (left it, inside a later one)");
  peer.finish(51);
  EXPECT_EQ(me.holding_up(50, -1, world_), "unknown");
}

TEST_F(Board, DisabledWithoutADirectory) {
  ArrivalBoard b("", "dp-4", 2, 0);
  EXPECT_FALSE(b.enabled());
  EXPECT_EQ(b.holding_up(3, -1, world_), "unknown");
}

}  // namespace
}  // namespace ft
