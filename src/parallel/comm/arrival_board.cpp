#include "parallel/comm/arrival_board.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>

namespace ft {

ArrivalBoard::ArrivalBoard(const std::string& dir, const std::string& group, int size, int index)
    : size_(size), index_(index) {
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string path = dir + "/arrivals-" + group;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  size_t bytes = static_cast<size_t>(2 * size) * sizeof(int64_t);  // entered, finished
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    ::close(fd);
    return;
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return;
  slots_ = static_cast<volatile int64_t*>(p);
  slots_[2 * index_] = 0;
  slots_[2 * index_ + 1] = 0;
}

ArrivalBoard::~ArrivalBoard() {
  if (slots_) ::munmap(const_cast<int64_t*>(slots_), static_cast<size_t>(2 * size_) * sizeof(int64_t));
}

void ArrivalBoard::arrive(int64_t seq) {
  if (slots_) slots_[2 * index_] = seq;
}

void ArrivalBoard::finish(int64_t seq) {
  if (slots_) slots_[2 * index_ + 1] = seq;
}

int64_t ArrivalBoard::seq_of(int index) const {
  return slots_ ? slots_[2 * index] : -1;
}

std::vector<int> ArrivalBoard::laggards(int64_t seq) const {
  std::vector<int> out;
  if (!slots_) return out;
  for (int i = 0; i < size_; ++i)
    if (slots_[2 * i] < seq) out.push_back(i);
  return out;
}

std::vector<int> ArrivalBoard::stuck_inside(int64_t seq) const {
  std::vector<int> out;
  if (!slots_) return out;
  for (int i = 0; i < size_; ++i)
    if (i != index_ && slots_[2 * i] >= seq && slots_[2 * i + 1] < seq) out.push_back(i);
  return out;
}

std::vector<int> ArrivalBoard::ahead_inside(int64_t seq) const {
  std::vector<int> out;
  if (!slots_) return out;
  for (int i = 0; i < size_; ++i)
    if (i != index_ && slots_[2 * i] > seq && slots_[2 * i + 1] < slots_[2 * i]) out.push_back(i);
  return out;
}

std::string ArrivalBoard::holding_up(int64_t seq, int waiting_for, const std::vector<int>& world_ranks) const {
  std::vector<int> late = laggards(seq);
  const char* how = "never arrived";
  if (late.empty()) {
    late = stuck_inside(seq);
    how = "entered it, never finished";
  }
  if (late.empty() && waiting_for >= 0) {
    late = {waiting_for};
    how = "the peer this rank waits for";
  }
  if (late.empty()) {
    for (int i : laggards(seq + 1))
      if (i != index_) late.push_back(i);
    how = "left it, never reached the next";
  }
  if (late.empty()) {  // they left it and are inside a later one (where a stopped peer stays)
    late = ahead_inside(seq);
    how = "left it, inside a later one";
  }
  if (late.empty()) return "unknown";
  std::string who;
  for (int i : late) who += (who.empty() ? "" : ", ") + std::to_string(world_ranks[static_cast<size_t>(i)]);
  return fmt::format("{} ({})", who, how);
}

CommError collective_timeout_error(int world_rank, CollKind kind, int64_t seq, const std::string& group,
                                   const std::vector<int>& world_ranks, const std::string& transport, double timeout_s,
                                   const std::string& holding_up) {
  return CommError(fmt::format("rank {}: {} #{} on group {} (world ranks {}..{}){} timed out after {:.0f} s; "
                               "ranks holding it up: {}",
                               world_rank, coll_kind_name(kind), seq, group, world_ranks.front(), world_ranks.back(),
                               transport, timeout_s, holding_up),
                   "a rank died or hangs; see its log. The bound is parallel.collective_timeout_s");
}

}  // namespace ft
