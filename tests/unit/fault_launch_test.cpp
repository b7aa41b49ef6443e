// The supervisor's building blocks: host files, reachability, rank placement, heartbeats, whom a
// failure names.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "fault/heartbeat.h"
#include "launch/hosts.h"
#include "launch/process.h"
#include "launch/rank_blame.h"
#include "util/error.h"

namespace ft {
namespace {

std::string temp_dir() {
  auto d = std::filesystem::temp_directory_path() / ("ft_launch_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d.string();
}

std::string write(const std::string& name, const std::string& text) {
  std::string p = temp_dir() + "/" + name;
  std::ofstream(p) << text;
  return p;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Hosts, ReadsNamesSlotsAndComments) {
  auto hosts = read_host_file(write("h1", "# cluster\nlocalhost slots=2\n127.0.0.2 slots=3  # second\n\n"));
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].name, "localhost");
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_TRUE(hosts[0].local);
  EXPECT_EQ(hosts[1].slots, 3);
  EXPECT_TRUE(hosts[1].local);
}

TEST(Hosts, BadFilesNameFileAndLine) {
  EXPECT_NE(error_of([] { read_host_file(write("h2", "a slots=0\n")); }).find("h2:1: slots must be a positive integer"),
            std::string::npos);
  EXPECT_NE(error_of([] { read_host_file(write("h3", "a\nb cores=2\n")); }).find("h3:2: unknown field 'cores=2'"),
            std::string::npos);
  EXPECT_NE(error_of([] { read_host_file(write("h4", "a\na\n")); }).find("host a is listed twice"), std::string::npos);
  EXPECT_NE(error_of([] { read_host_file(write("h5", "# none\n")); }).find("names no host"), std::string::npos);
  EXPECT_NE(error_of([] { read_host_file("/nonexistent/hosts"); }).find("does not exist"), std::string::npos);
}

TEST(Hosts, UnreachableHostsAreAllNamed) {
  std::vector<Host> hosts = {{"localhost", 2, true}, {"node-a.invalid", 1, false}, {"node-b.invalid", 1, false}};
  std::string e = error_of([&] { check_hosts_reachable(hosts, "hosts file x"); });
  EXPECT_NE(e.find("hosts file x: 2 unreachable host(s)"), std::string::npos) << e;
  EXPECT_NE(e.find("node-a.invalid (cannot resolve"), std::string::npos) << e;
  EXPECT_NE(e.find("node-b.invalid (cannot resolve"), std::string::npos) << e;
  EXPECT_EQ(error_of([&] { check_hosts_reachable({hosts[0]}, "x"); }), "");
}

TEST(Hosts, RanksFillHostsSlotBySlot) {
  std::vector<Host> hosts = {{"a", 2, false}, {"b", 3, false}};
  EXPECT_EQ(ranks_to_hosts(hosts, 5), (std::vector<int>{0, 0, 1, 1, 1}));
  EXPECT_EQ(ranks_to_hosts(hosts, 3), (std::vector<int>{0, 0, 1}));
}

TEST(Heartbeat, RoundTripsAndIgnoresGarbage) {
  std::string dir = temp_dir() + "/hb";
  Heartbeat hb(dir, 3, 2);
  hb.set_start_step(10);
  hb.beat("train", 12);
  auto r = read_heartbeat(heartbeat_path(dir, 3));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rank, 3);
  EXPECT_EQ(r->attempt, 2);
  EXPECT_EQ(r->phase, "train");
  EXPECT_EQ(r->step, 12);
  EXPECT_EQ(r->start_step, 10);
  EXPECT_EQ(r->pid, ::getpid());
  EXPECT_EQ(r->host, this_host());
  EXPECT_FALSE(read_heartbeat(dir + "/missing.json"));
  EXPECT_FALSE(read_heartbeat(write("half.json", "{\"rank\": 1, \"host\"")));
}

TEST(ChildProcess, CapturesOutputAndExitCode) {
  std::string log = temp_dir() + "/child.log";
  ChildProcess p({"sh", "-c", "echo one; echo two >&2; exit 7"}, {"FT_X=1"}, log, false);
  EXPECT_EQ(p.wait_for(30), 7);
  ChildProcess q({"sh", "-c", "echo $FT_X; kill -9 $$"}, {"FT_X=hello"}, log, false);
  EXPECT_EQ(q.wait_for(30), 128 + 9);
  auto lines = q.recent_lines();
  // Bounded (30 s) but ended by the first line: a loaded machine may schedule the reader late.
  for (int i = 0; i < 1500 && lines.empty(); ++i, ::usleep(20000)) lines = q.recent_lines();
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front(), "hello");
  EXPECT_NE(error_of([&] { ChildProcess r({"/nonexistent/launcher"}, {}, log, false); }).find("cannot start"),
            std::string::npos);
}

// Whom a failure names: real processes stand for ranks — one stopped (SIGSTOP), one killed, one
// that reported the failure (phase "failed"), one still running. The silent ones whose process is
// stopped or gone are named; the reporter and the running one are not; nobody reporting names nobody.
TEST(RankBlame, NamesTheSilentRanksWhoseProcessStoppedOrDied) {
  auto child = [] {
    pid_t p = ::fork();
    if (p == 0) {
      ::pause();
      ::_exit(0);
    }
    return p;
  };
  const pid_t stopped = child(), killed = child(), reporter = child(), running = child();
  ::kill(stopped, SIGSTOP);
  ::kill(killed, SIGKILL);
  ::waitpid(killed, nullptr, 0);
  for (int i = 0; i < 500 && process_state(stopped) != 'T'; ++i) ::usleep(10000);
  std::vector<RankSeen> ranks(4);
  const pid_t pids[] = {reporter, stopped, running, killed};
  for (int r = 0; r < 4; ++r) {
    ranks[r].rank = r;
    ranks[r].host = "here";
    ranks[r].pid = pids[r];
    ranks[r].local = true;
    ranks[r].coord = {.pp = 0, .dp = r, .cp = 0, .tp = 0};
    ranks[r].phase = r == 0 ? "failed" : "train";
    ranks[r].step = 12;
    ranks[r].beat_at = 100;
  }
  probe_processes(ranks, 5);
  EXPECT_EQ(ranks[0].state, ProcState::kRunning);
  EXPECT_EQ(ranks[1].state, ProcState::kStopped);
  EXPECT_EQ(ranks[2].state, ProcState::kRunning);
  EXPECT_EQ(ranks[3].state, ProcState::kGone);
  EXPECT_EQ(silent_casualties(ranks), (std::vector<size_t>{1, 3}));
  EXPECT_EQ(describe(ranks[1], 104.5),
            "rank 1 on here (dp 1, tp 0, pp 0, cp 0): phase train after step 12 (in step 13), its last heartbeat "
            "4.5 s before the failure was detected; process stopped");
  EXPECT_EQ(
      to_json(ranks[3], 104.5).dump(),
      R"({"beat_age_s":4.5,"cp":0,"dp":3,"host":"here","phase":"train","pp":0,"process":"gone","rank":3,"step":12,"tp":0})");
  ranks[0].phase = "train";  // nobody reported: silence says nothing
  EXPECT_TRUE(silent_casualties(ranks).empty());
  for (pid_t p : {stopped, reporter, running}) {
    ::kill(p, SIGKILL);
    ::waitpid(p, nullptr, 0);
  }
}

}  // namespace
}  // namespace ft
