// The stop file: how a launcher (`train --nproc`, `launch`) asks ranks to stop when some of them may
// not have their signal handlers yet. A SIGUSR1 sent then would be lost, or kill the rank (its
// default action), so the launcher instead creates the file named by FLUXTRAIN_STOP_FILE, and sends
// SIGUSR1 only once every rank said it is ready. A rank says so by creating "ready.<pid>" in the
// same directory once its handlers are in (StopRequest::install), and takes the stop file, seen at
// any step boundary, as a SIGUSR1 (so the file reaches a rank whatever its stage of start-up).
//
//   launcher:  setenv(kStopFileEnv, dir + "/stop");  ...start the ranks...
//              on SIGTERM: touch(dir + "/stop"); then, once count_ready_ranks(dir + "/stop") == n,
//              SIGUSR1 to mpirun
//   rank:      StopRequest::install() -> ready.<pid>; StopRequest::agreed() checks the file
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>

namespace ft {

inline constexpr const char* kStopFileEnv = "FLUXTRAIN_STOP_FILE";

// The marker a rank of process id `pid` creates beside `stop_file` once its handlers are in.
inline std::string ready_marker(const std::string& stop_file, long pid) {
  return (std::filesystem::path(stop_file).parent_path() / ("ready." + std::to_string(pid))).string();
}

// How many ranks have created their ready marker beside `stop_file`.
inline int count_ready_ranks(const std::string& stop_file) {
  std::error_code ec;
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(stop_file).parent_path(), ec))
    if (e.path().filename().string().rfind("ready.", 0) == 0) ++n;
  return n;
}

}  // namespace ft
