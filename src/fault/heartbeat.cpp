#include "fault/heartbeat.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace ft {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string this_host() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

std::string heartbeat_path(const std::string& dir, int rank) {
  return fmt::format("{}/rank-{:05d}.json", dir, rank);
}

Heartbeat::Heartbeat(std::string dir, int rank, int64_t attempt)
    : dir_(std::move(dir)), path_(heartbeat_path(dir_, rank)), host_(this_host()), rank_(rank), attempt_(attempt) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
}

std::unique_ptr<Heartbeat> Heartbeat::from_env(int rank) {
  const char* dir = std::getenv("FLUXTRAIN_HEARTBEAT_DIR");
  if (!dir || !*dir) return nullptr;
  const char* attempt = std::getenv("FLUXTRAIN_ATTEMPT");
  return std::make_unique<Heartbeat>(dir, rank, attempt ? std::atoll(attempt) : 0);
}

void Heartbeat::beat(const std::string& phase, int64_t step, const std::string& detail) {
  nlohmann::json j = {{"rank", rank_},
                      {"host", host_},
                      {"pid", static_cast<int64_t>(::getpid())},
                      {"attempt", attempt_},
                      {"phase", phase},
                      {"step", step},
                      {"start_step", start_step_},
                      {"time", unix_seconds()}};
  if (!detail.empty()) j["detail"] = detail;
  std::string text = j.dump() + "\n";
  // Not fsync'ed: a heartbeat only matters while the machine is up; rename keeps it whole.
  std::string tmp = path_ + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;  // a missing heartbeat is the supervisor's signal; never fail training for it
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (ok) std::rename(tmp.c_str(), path_.c_str());
}

std::optional<HeartbeatRecord> read_heartbeat(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  try {
    HeartbeatRecord r;
    r.rank = j.at("rank").get<int>();
    r.host = j.at("host").get<std::string>();
    r.pid = j.at("pid").get<int64_t>();
    r.attempt = j.at("attempt").get<int64_t>();
    r.phase = j.at("phase").get<std::string>();
    r.step = j.at("step").get<int64_t>();
    r.start_step = j.value("start_step", int64_t{0});
    r.time = j.at("time").get<double>();
    r.detail = j.value("detail", std::string());
    return r;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

void report_failure_to_supervisor(int rank, const std::string& message, double wait_s, const std::string& phase) {
  std::unique_ptr<Heartbeat> hb = Heartbeat::from_env(rank);
  if (!hb || !(wait_s > 0)) return;
  int64_t step = 0;  // keep the last step this rank reported
  if (auto last = read_heartbeat(heartbeat_path(std::getenv("FLUXTRAIN_HEARTBEAT_DIR"), rank))) {
    step = last->step;
    hb->set_start_step(last->start_step);
  }
  hb->beat(phase, step, message);
  // The supervisor ends the job (SIGTERM through the launcher) once it has what it needs. A
  // launcher gone (our parent changed: the supervisor was killed and its mpirun with it, or
  // mpirun's daemon here lost it) ends nothing and reads no stacks: no reason to wait.
  const pid_t parent = ::getppid();
  const double until = unix_seconds() + wait_s;
  while (unix_seconds() < until && ::getppid() == parent) ::usleep(50000);
}

}  // namespace ft
