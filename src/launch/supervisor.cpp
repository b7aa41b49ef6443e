#include "launch/supervisor.h"

#include <fmt/ranges.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "ckpt/probe.h"
#include "dryrun/memory_check.h"
#include "fault/exit_codes.h"
#include "fault/heartbeat.h"
#include "fault/inject.h"
#include "fault/stop_file.h"
#include "launch/earlier_launch.h"
#include "launch/gpu_env.h"
#include "launch/process.h"
#include "launch/rank_blame.h"
#include "launch/slow_hosts.h"
#include "launch/stacks.h"
#include "obs/badput.h"
#include "obs/metrics_reader.h"
#include "parallel/mesh.h"
#include "train/run_dir.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/shell_quote.h"

extern char** environ;

namespace ft {
namespace {

// SIGINT / SIGTERM / SIGUSR1 to the supervisor (Ctrl-C, scancel, Kubernetes eviction): the ranks
// checkpoint and exit (SIGUSR1 to them), the supervisor does not restart. A second SIGINT stops the
// job at once.
volatile sig_atomic_t g_interrupt = 0;
volatile sig_atomic_t g_interrupts = 0;
void on_signal(int sig) {
  g_interrupt = sig;
  g_interrupts = g_interrupts + 1;
}

const char* signal_name(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGUSR1 ? "SIGUSR1" : "a signal";
}

// The attempt's stop file (fault/stop_file.h), beside the heartbeats: emptied at every attempt.
std::string stop_file_of(const std::string& hb_dir) {
  return (std::filesystem::absolute(hb_dir) / "stop").string();
}

constexpr double kPollS = 0.05;
constexpr double kLauncherGraceS = 2;  // after a rank vanished: time for the launcher to report
constexpr double kReportGraceS = 1.5;  // a rank reported a failure: time for the others to report
constexpr double kStackTimeoutS = 30;  // bound on reading one rank's stacks
constexpr double kProbeTimeoutS = 3;   // bound on asking a remote host about its ranks' processes

}  // namespace

struct Supervisor::Failure {
  // rank_died, hang, comm_failure, exit, startup_timeout, interrupted, host_lost (the launcher
  // lost a host's daemon), host_unreachable (the launcher could not start one over ssh),
  // gpu_fault (a rank's GPU reported an uncorrectable error or a fatal XID: its host is excluded)
  std::string kind;
  std::vector<int> ranks;  // the ranks held responsible (empty: unknown)
  std::string detail;      // one line for the log
  double detected_at = 0;  // Unix seconds
  int exit_code = -1;
  bool restartable = true;
  int host = -1;                    // the host the launcher itself named (host_lost, host_unreachable), else -1
  std::string error_line;           // the most telling error line of the output (diagnose)
  std::vector<RankSeen> seen;       // every rank at detection (launch/rank_blame.h); empty: not looked at
  std::map<int, std::string> died;  // ranks the launcher saw die on a signal, with its words (diagnose)
};

Supervisor::Failure Supervisor::make_failure(std::string kind, std::vector<int> ranks, std::string detail,
                                             double detected_at, int exit_code, bool restartable) {
  Supervisor::Failure f;
  f.kind = std::move(kind);
  f.ranks = std::move(ranks);
  f.detail = std::move(detail);
  f.detected_at = detected_at;
  f.exit_code = exit_code;
  f.restartable = restartable;
  return f;
}

struct Supervisor::Attempt {
  int number = 0;
  int64_t dp = 1;
  int world = 1;
  std::unique_ptr<ChildProcess> proc;
  double started = 0;  // Unix seconds
  std::vector<std::optional<HeartbeatRecord>> beats;
  double last_change = 0;   // last time any heartbeat changed
  double all_ready_at = 0;  // every rank ready (0: not yet)
  bool ranks_written = false;
  std::optional<double> recover_from;  // failure detection time of the previous attempt
  std::string recover_kind;
  int64_t expect_step = -1;  // the checkpoint step the restart should resume from
};

Supervisor::Supervisor(LaunchOptions o) : opt_(std::move(o)) {
  cfg_ = load_config(opt_.config_path, opt_.sets);  // bad config: an error before anything starts
  // NCCL's interface and InfiniBand settings name devices of the hosts the ranks run on: checked
  // when that includes this host (this machine, or the batch host of a Slurm allocation).
  if (opt_.hosts_file.empty()) check_nccl_env(current_environment());
  run_dir_ = cfg_.train.run_dir;
  claim_run_dir(cfg_, opt_.force, RunDirUser::kSupervisor);  // an earlier run there is not overwritten
  hb_dir_ = run_dir_ + "/heartbeat";
  const int world = static_cast<int>(cfg_.parallel.world_size());
  if (opt_.nproc > 0 && opt_.nproc != world) {
    throw Error(fmt::format("--nproc {} but {}", opt_.nproc, cfg_.parallel.degrees_product()),
                fmt::format("set the layout in the config, e.g. --set parallel.dp={}",
                            opt_.nproc / std::max<int64_t>(1, cfg_.parallel.cp * cfg_.parallel.tp * cfg_.parallel.pp)));
  }
  if (!opt_.hosts_file.empty()) {
    hosts_ = read_host_file(opt_.hosts_file);
    check_hosts_reachable(hosts_, "hosts file " + opt_.hosts_file);
    bool all_local = std::all_of(hosts_.begin(), hosts_.end(), [](const Host& h) { return h.local; });
    launcher_ = all_local ? Launcher::kMpirunLocal : Launcher::kMpirunHosts;
  } else if (inside_slurm()) {
    hosts_ = slurm_hosts();
    launcher_ = Launcher::kSrun;
    if (const char* n = std::getenv("SLURM_NTASKS"); n && std::atoi(n) < world) {
      throw Error(fmt::format("the Slurm allocation has {} task(s) but the job needs {} ranks", n, world),
                  fmt::format("sbatch --ntasks={} (or change parallel.dp)", world));
    }
  } else {
    hosts_ = {Host{this_host(), world, true}};
  }
  if (hosts_.empty()) hosts_ = {Host{this_host(), world, true}};
  // Every rank on this machine: their memory is checked here, before anything starts.
  if (launcher_ == Launcher::kMpirunLocal && hosts_.size() == 1)
    check_memory_fits(cfg_, world, FaultInjector::memory_limit());
  int slots = 0;
  for (const Host& h : hosts_) slots += h.slots;
  if (launcher_ == Launcher::kMpirunHosts && slots < world) {
    throw Error(fmt::format("hosts file {}: {} slot(s) for {} ranks", opt_.hosts_file, slots, world),
                "add slots=N to the hosts or more hosts");
  }
  // Hosts that are all this machine run under mpirun --oversubscribe: they start, but more ranks
  // than the file's slots share its CPUs, which the user should hear about.
  if (launcher_ == Launcher::kMpirunLocal && !opt_.hosts_file.empty() && slots < world)
    log_warn(
        "hosts file {}: {} slot(s) for {} ranks: this machine runs them oversubscribed (add slots=N to the "
        "hosts)",
        opt_.hosts_file, slots, world);
  bad_.assign(hosts_.size(), false);
  bad_why_.assign(hosts_.size(), "");
  host_failures_.assign(hosts_.size(), 0);
  if (cfg_.ckpt.interval <= 0 && cfg_.fault.max_restarts > 0)
    log_warn(
        "supervisor: checkpoints are off, so a failure cannot be recovered from (set "
        "ckpt.interval)");
}

Supervisor::~Supervisor() = default;

void Supervisor::event(nlohmann::json e) {
  e["time"] = unix_seconds();
  std::filesystem::create_directories(run_dir_);
  std::FILE* f = std::fopen((run_dir_ + "/supervisor.jsonl").c_str(), "a");
  if (!f) return;
  std::string line = e.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), f);
  std::fclose(f);
}

std::vector<std::string> Supervisor::launcher_argv(const Attempt& a, const std::vector<std::string>& train_argv,
                                                   const std::vector<std::string>& env_names) const {
  std::vector<std::string> cmd;
  const std::string np = std::to_string(a.world);
  if (launcher_ == Launcher::kSrun) {
    cmd = {"srun", "--ntasks=" + np, "--kill-on-bad-exit=1", "--mpi=pmix", "--export=ALL"};
    std::vector<std::string> excluded;
    for (size_t h = 0; h < hosts_.size(); ++h)
      if (bad_[h]) excluded.push_back(hosts_[h].name);
    if (!excluded.empty()) cmd.push_back(fmt::format("--exclude={}", fmt::join(excluded, ",")));
  } else {
    cmd = {"mpirun", "-np", np, "--bind-to", "none"};
    if (::geteuid() == 0) cmd.push_back("--allow-run-as-root");
    if (launcher_ == Launcher::kMpirunLocal) {
      cmd.push_back("--oversubscribe");
    } else {
      std::vector<std::string> hs;
      for (size_t h = 0; h < hosts_.size(); ++h)
        if (!bad_[h]) hs.push_back(fmt::format("{}:{}", hosts_[h].name, hosts_[h].slots));
      cmd.insert(cmd.end(), {"--host", fmt::format("{}", fmt::join(hs, ",")), "--map-by", "slot"});
    }
    for (const std::string& n : env_names) cmd.insert(cmd.end(), {"-x", n});
  }
  cmd.insert(cmd.end(), train_argv.begin(), train_argv.end());
  return cmd;
}

std::unique_ptr<Supervisor::Attempt> Supervisor::start_attempt(int64_t dp, const std::string& resume,
                                                               const std::optional<Failure>& after) {
  auto a = std::make_unique<Attempt>();
  a->number = ++attempts_;
  a->dp = dp;
  a->world = static_cast<int>(dp * cfg_.parallel.tp * cfg_.parallel.pp);
  a->beats.assign(static_cast<size_t>(a->world), std::nullopt);
  std::filesystem::create_directories(hb_dir_);
  for (const auto& e : std::filesystem::directory_iterator(hb_dir_)) std::filesystem::remove(e.path());
  std::filesystem::create_directories(run_dir_ + "/logs");

  std::vector<std::string> train = {opt_.binary, "train"};
  if (!opt_.config_path.empty()) train.insert(train.end(), {"--config", opt_.config_path});
  for (const std::string& s : opt_.sets) train.insert(train.end(), {"--set", s});
  if (dp != cfg_.parallel.dp) train.insert(train.end(), {"--set", fmt::format("parallel.dp={}", dp)});
  if (!resume.empty()) train.insert(train.end(), {"--set", fmt::format("ckpt.resume=\"{}\"", resume)});

  std::vector<std::string> env = {"FLUXTRAIN_HEARTBEAT_DIR=" + std::filesystem::absolute(hb_dir_).string(),
                                  std::string(kStopFileEnv) + "=" + stop_file_of(hb_dir_),
                                  fmt::format("FLUXTRAIN_ATTEMPT={}", a->number),
                                  fmt::format("FLUXTRAIN_RESTARTS={}", a->number - 1),
                                  fmt::format("FLUXTRAIN_JOB_STARTED_AT={:.6f}", job_started_)};
  // A restart, or the first attempt of a relaunch (continue_earlier_launch): the job's badput so far.
  if (badput_before_) env.push_back("FLUXTRAIN_BADPUT_BEFORE=" + badput_before_->to_json().dump());
  if (after) {
    env.push_back(fmt::format("FLUXTRAIN_FAILURE_DETECTED_AT={:.6f}", after->detected_at));
    a->recover_from = after->detected_at;
    a->recover_kind = after->kind;
  }
  // GPUs and NCCL (launch/gpu_env.h): CUDA's device order, NCCL's log level, and the cluster's
  // NCCL_*, CUDA_*, FI_*, UCX_* settings passed on to every rank.
  const GpuLaunchEnv gpu = gpu_launch_env(current_environment());
  env.insert(env.end(), gpu.set.begin(), gpu.set.end());
  std::vector<std::string> names = gpu.forward;
  for (const std::string& kv : env) names.push_back(kv.substr(0, kv.find('=')));
  // mpirun forwards only what -x names: our own variables (the checkpoint key, test knobs) and
  // the thread count. srun forwards everything (--export=ALL).
  for (char** e = environ; *e; ++e) {
    std::string kv = *e, name = kv.substr(0, kv.find('='));
    if ((name.rfind("FLUXTRAIN_", 0) == 0 || name == "OMP_NUM_THREADS") &&
        std::find(names.begin(), names.end(), name) == names.end())
      names.push_back(name);
  }
  std::vector<std::string> argv = launcher_argv(*a, train, names);
  std::string log_path = fmt::format("{}/logs/attempt-{}.log", run_dir_, a->number);
  std::string cmdline;
  for (const auto& s : argv) cmdline += (cmdline.empty() ? "" : " ") + shell_quote(s);
  log_info("supervisor: attempt {} ({} ranks, dp {}{}): {}", a->number, a->world, dp,
           resume.empty() ? "" : ", resuming from " + resume, cmdline);
  event({{"event", "start"},
         {"attempt", a->number},
         {"world_size", a->world},
         {"dp", dp},
         {"resume", resume},
         {"command", cmdline},
         {"log", log_path}});
  a->started = unix_seconds();
  a->last_change = a->started;
  a->proc = std::make_unique<ChildProcess>(argv, env, log_path, opt_.echo);
  return a;
}

void Supervisor::read_heartbeats(Attempt& a) {
  for (int r = 0; r < a.world; ++r) {
    auto rec = read_heartbeat(heartbeat_path(hb_dir_, r));
    if (!rec || rec->attempt != a.number) continue;
    auto& old = a.beats[static_cast<size_t>(r)];
    if (!old || old->time != rec->time || old->step != rec->step || old->phase != rec->phase)
      a.last_change = unix_seconds();
    old = rec;
  }
}

int Supervisor::host_of(const Attempt& a, int rank) const {
  // The host the rank itself reported (its host name), when it is one of ours; else where the
  // launcher placed it (slots in order over the good hosts, as mpirun --map-by slot does).
  // (Several local entries stand for one machine and share its host name: then only the slots say.)
  if (rank >= 0 && rank < a.world && a.beats[static_cast<size_t>(rank)]) {
    int h = host_index(a.beats[static_cast<size_t>(rank)]->host);
    const auto locals = std::count_if(hosts_.begin(), hosts_.end(), [](const Host& x) { return x.local; });
    if (h >= 0 && (launcher_ == Launcher::kSrun || !hosts_[static_cast<size_t>(h)].local || locals == 1)) return h;
  }
  std::vector<Host> good;
  std::vector<int> index;
  for (size_t h = 0; h < hosts_.size(); ++h)
    if (!bad_[h]) good.push_back(hosts_[h]), index.push_back(static_cast<int>(h));
  if (good.empty() || rank < 0) return -1;
  return index[static_cast<size_t>(ranks_to_hosts(good, a.world)[static_cast<size_t>(std::min(rank, a.world - 1))])];
}

void Supervisor::write_ranks_json(const Attempt& a) {
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < a.world; ++r) {
    const auto& b = a.beats[static_cast<size_t>(r)];
    int h = host_of(a, r);
    ranks.push_back({{"rank", r},
                     {"host", b->host},
                     {"pid", b->pid},
                     {"slot_host", h >= 0 ? hosts_[static_cast<size_t>(h)].name : ""}});
  }
  const char* names[] = {"mpirun", "mpirun", "srun"};
  nlohmann::json j = {{"attempt", a.number},    {"launcher", names[static_cast<int>(launcher_)]},
                      {"world_size", a.world},  {"dp", a.dp},
                      {"tp", cfg_.parallel.tp}, {"pp", cfg_.parallel.pp},
                      {"ranks", ranks}};
  write_file_atomic(run_dir_ + "/ranks.json", j.dump(2) + "\n");
}

std::optional<Supervisor::Failure> Supervisor::gpu_fault(const Attempt& a) const {
  for (const auto& b : a.beats)
    if (b && b->phase == "gpu_fault")
      return make_failure("gpu_fault", {b->rank}, b->detail, unix_seconds(), kExitGpuFault, true);
  return std::nullopt;
}

std::optional<Supervisor::Failure> Supervisor::reported_failure(Attempt& a) {
  auto failed = [&] {
    std::vector<const HeartbeatRecord*> out;
    for (const auto& b : a.beats)
      if (b && b->phase == "failed") out.push_back(&*b);
    return out;
  };
  if (failed().empty()) return std::nullopt;
  const double first = unix_seconds();
  // Every rank waiting on the same dead or stuck peer times out within moments: let them report,
  // so the peer that stays silent is the one to blame.
  while (unix_seconds() - first < kReportGraceS && failed().size() < a.beats.size()) {
    ::usleep(100000);
    read_heartbeats(a);
  }
  std::vector<std::string> reports;
  for (const HeartbeatRecord* b : failed()) reports.push_back(b->detail);
  Failure f = diagnose(a, reports);
  f.detected_at = first;
  f.exit_code = kExitCommFailure;
  f.seen = seen(a);  // before the stacks: a debugger attached changes what a process looks like
  blame_silent(f, reports.front());
  if (f.kind == "exit") {
    f.kind = "comm_failure";
    f.detail = reports.front();
  }
  dump_stacks_of(a, f.kind);
  return f;
}

void Supervisor::dump_stacks_of(const Attempt& a, const std::string& why) {
  std::vector<RankProcess> ranks;
  const std::string me = this_host();
  for (const auto& b : a.beats)
    if (b) ranks.push_back({.rank = b->rank, .host = b->host, .pid = b->pid, .local = b->host == me});
  if (ranks.empty()) return;
  const std::string dir = fmt::format("{}/stacks/attempt-{}", run_dir_, a.number);
  log_info("supervisor: reading the stacks of {} rank(s) before stopping the job ({}) into {}", ranks.size(), why, dir);
  const double t0 = unix_seconds();
  std::vector<std::string> lines = dump_stacks(ranks, dir, kStackTimeoutS);
  for (const std::string& l : lines) log_info("supervisor: stacks: {}", l);
  event({{"event", "stacks"}, {"attempt", a.number}, {"dir", dir}, {"why", why}, {"seconds", unix_seconds() - t0}});
}

std::string Supervisor::goodput_summary(nlohmann::json& e) const {
  // The last attempt's totals at its end (badput.json), else at its last row; the time since is
  // the supervisor's own shutdown ("other").
  std::optional<obs::BadputTotals> t;
  try {
    const std::string path = run_dir_ + "/badput.json";
    if (std::filesystem::exists(path))
      t = obs::BadputTotals::from_json(nlohmann::json::parse(read_file(path)), path);
    else
      t = obs::last_badput_row(run_dir_ + "/metrics.jsonl");
  } catch (const std::exception&) {
  }
  if (!t) return "goodput unknown (no badput.json or metrics.jsonl row with badput)";
  const double now = unix_seconds();
  if (now > t->at) t->seconds[static_cast<size_t>(obs::BadputKind::kOther)] += now - t->at, t->at = now;
  e["goodput"] = t->goodput();
  e["productive_s"] = t->productive_s;
  e["wall_s"] = t->wall_s();
  e["badput"] = t->to_json();
  return fmt::format("goodput {:.3f}: {:.1f} s of productive training in {:.1f} s since the job began; {}",
                     t->goodput(), t->productive_s, t->wall_s(), obs::badput_summary(*t));
}

int Supervisor::host_index(const std::string& name) const {
  for (size_t h = 0; h < hosts_.size(); ++h)
    if (hosts_[h].name == name) return static_cast<int>(h);
  return -1;
}

int Supervisor::failed_host(const Attempt& a, const Failure& f) const {
  if (f.host >= 0) return f.host;
  return f.ranks.empty() ? -1 : host_of(a, f.ranks.front());
}

std::vector<RankSeen> Supervisor::seen(const Attempt& a) const {
  const std::string me = this_host();
  ParallelConfig layout = cfg_.parallel;
  layout.dp = a.dp;  // an elastic attempt's
  std::vector<RankSeen> out;
  for (int r = 0; r < a.world; ++r) {
    RankSeen s;
    s.rank = r;
    s.coord = Mesh::coord_of(layout, r);
    const int h = host_of(a, r);
    const auto& b = a.beats[static_cast<size_t>(r)];
    s.host = h >= 0 ? hosts_[static_cast<size_t>(h)].name : b ? b->host : "";
    if (b) {
      s.pid = b->pid, s.local = b->host == me;
      s.phase = b->phase, s.step = b->step, s.beat_at = b->time;
    }
    out.push_back(std::move(s));
  }
  probe_processes(out, kProbeTimeoutS);
  return out;
}

void Supervisor::blame_silent(Failure& f, const std::string& first_report) const {
  if (!f.ranks.empty() || (f.kind != "exit" && f.kind != "hang" && f.kind != "comm_failure")) return;
  std::vector<int> gone, stopped;
  for (size_t i : silent_casualties(f.seen))
    (f.seen[i].state == ProcState::kGone ? gone : stopped).push_back(f.seen[i].rank);
  if (gone.empty() && stopped.empty()) return;
  const bool died = !gone.empty();
  f.kind = died ? "rank_died" : "hang";
  f.ranks = died ? gone : stopped;
  f.detail = fmt::format("rank(s) {} {} without reporting the failure the others reported (the first: {})",
                         fmt::join(f.ranks, ", "), died ? "died" : "stopped (not running)", first_report);
}

Supervisor::Failure Supervisor::vanished(Attempt& a, int r, Failure f) {
  // A rank torn down by the launcher after another rank died vanishes too: the ranks that went
  // silent while others reported say who died; else the launcher's own line, given time (it names
  // the rank whose process died on a signal once the remote daemons have told it).
  f.seen = seen(a);
  const auto& b = a.beats[static_cast<size_t>(r)];
  blame_silent(f, b && b->phase == "failed" ? b->detail : std::string("rank " + std::to_string(r) + " vanished"));
  if (!f.ranks.empty()) return f;
  int gone = 0;
  for (const RankSeen& s : f.seen) gone += s.state == ProcState::kGone;
  const double until = unix_seconds() + cfg_.fault.stop_grace_s;
  while (gone > 1 && unix_seconds() < until) {
    const int code = a.proc->wait_for(0.2);
    Failure g = code >= 0 ? *classify_exit(a, code) : diagnose(a);
    if (!g.ranks.empty() || g.host >= 0 || !g.restartable) {
      g.detected_at = f.detected_at;
      g.seen = std::move(f.seen);
      return g;
    }
    if (code >= 0) break;  // the launcher ended without naming anyone
  }
  f.kind = "rank_died";
  f.ranks = {r};
  f.detail = fmt::format("rank {} (pid {} on {}) is gone", r, b->pid, b->host);
  return f;
}

void Supervisor::died_not_hung(Failure& f) {
  if (f.kind != "hang" || f.ranks.empty()) return;
  std::string how;
  for (int r : f.ranks) {
    auto it = f.died.find(r);
    if (it == f.died.end()) return;
    how += (how.empty() ? "" : "; ") + it->second;
  }
  f.kind = "rank_died";
  f.detail = fmt::format("{} (its peers' collectives timed out waiting for it: {})", how, f.detail);
}

void Supervisor::await_death_report(Attempt& a, Failure& f) {
  if (f.kind != "hang" || f.ranks.empty()) return;
  for (int r : f.ranks)
    for (const RankSeen& s : f.seen)
      if (s.rank == r && s.state != ProcState::kGone) return;  // stopped or running: a hang indeed
  const double until = unix_seconds() + cfg_.fault.stop_grace_s;
  while (true) {
    const bool ended = a.proc->poll().has_value();  // then its output is complete
    for (auto& d : diagnose(a).died) f.died.insert(d);
    died_not_hung(f);
    if (f.kind != "hang" || ended || unix_seconds() >= until) return;
    a.proc->wait_for(0.2);
  }
}

Supervisor::Failure Supervisor::diagnose(const Attempt& a, const std::vector<std::string>& reports) const {
  Failure f;
  f.detected_at = unix_seconds();
  f.kind = "exit";
  static const std::regex never_arrived(R"(ranks holding it up: ([0-9][0-9, ]*))");
  // OpenMPI's words for a host gone (its daemon silent) and for one it could not start.
  static const std::regex daemon_lost(R"(Remote daemon:\s*\S+ on node (\S+))");
  static const std::regex ssh_failed(
      R"(ssh: (?:connect to host (\S+) port [0-9]+|Could not resolve hostname (\S+?)):? (.*))");
  static const std::regex mpi_died(R"(process rank ([0-9]+) with PID [0-9]+ on node (\S+) exited on signal ([0-9]+))");
  static const std::regex srun_died(R"(srun: error: (\S+): tasks? ([0-9]+)[^:]*: (Killed|Terminated|Exited.*))");
  static const std::regex reporter(R"(rank ([0-9]+): \S+ #[0-9]+ on group)");
  auto numbers = [](const std::string& t) {
    std::vector<int> out;
    std::string cur;
    for (char c : t + ",") {
      if (std::isdigit(static_cast<unsigned char>(c)))
        cur += c;
      else if (!cur.empty())
        out.push_back(std::atoi(cur.c_str())), cur.clear();
    }
    return out;
  };
  std::set<int> named, reporters;  // over every timeout line: ranks blamed, ranks that timed out
  std::string error_line;
  std::vector<std::string> lines = a.proc->recent_lines();
  lines.insert(lines.end(), reports.begin(), reports.end());
  for (const std::string& line : lines) {
    std::smatch m;
    if (std::regex_search(line, m, mpi_died))  // every rank the launcher saw die, whatever the diagnosis
      f.died.emplace(std::atoi(m[1].str().c_str()),
                     fmt::format("rank {} on {} was killed by signal {}", m[1].str(), m[2].str(), m[3].str()));
    if (std::regex_search(line, m, never_arrived)) {
      for (int r : numbers(m[1].str())) named.insert(r);
      if (std::smatch who; std::regex_search(line, who, reporter)) reporters.insert(std::atoi(who[1].str().c_str()));
    }
    // The first timeout is the diagnosis: a stopped rank woken by the launcher's teardown
    // (SIGCONT before SIGTERM) may time out in turn and blame the rank that already gave up.
    if (f.kind != "hang" && std::regex_search(line, m, never_arrived)) {
      f.kind = "hang";
      f.detail = line;
      f.ranks = numbers(m[1].str());
    } else if (std::regex_search(line, m, mpi_died) && f.kind != "hang" && f.kind != "host_lost" &&
               f.kind != "rank_died") {  // the first rank whose process died on a signal
      f.kind = "rank_died";
      f.ranks = {std::atoi(m[1].str().c_str())};
      f.detail = fmt::format("rank {} on {} was killed by signal {}", m[1].str(), m[2].str(), m[3].str());
    } else if (std::regex_search(line, m, srun_died) && f.kind == "exit") {
      f.kind = "rank_died";
      f.ranks = {std::atoi(m[2].str().c_str())};
      f.detail = line;
    } else if (std::regex_search(line, m, daemon_lost) && f.kind != "hang") {
      f.kind = "host_lost";
      f.ranks.clear();
      f.host = host_index(m[1].str());
      f.detail = fmt::format("the launcher lost contact with host {} (its daemon)", m[1].str());
    } else if (std::regex_search(line, m, ssh_failed) && f.kind != "hang" && f.kind != "host_lost") {
      const std::string name = m[1].matched ? m[1].str() : m[2].str();
      f.kind = "host_unreachable";
      f.ranks.clear();
      f.host = host_index(name);
      f.detail = fmt::format("the launcher could not reach host {} over ssh: {}", name, m[3].str());
    } else if (line.find("error") != std::string::npos && line.find("hint:") == std::string::npos) {
      if (error_line.empty() || line.find("rank") != std::string::npos) error_line = line;
    }
  }
  f.error_line = error_line;
  // Every rank waiting in a collective whose peer died "entered it and never finished": a rank
  // that reported its own timeout was alive and waiting, so the culprits are the ranks blamed that
  // did not report (the dead one), when the reports say that much.
  if (f.kind == "hang") {
    std::vector<int> silent;
    for (int r : named)
      if (!reporters.count(r)) silent.push_back(r);
    if (!silent.empty()) f.ranks = silent;
  }
  died_not_hung(f);
  return f;
}

std::optional<Supervisor::Failure> Supervisor::classify_exit(Attempt& a, int code) {
  if (code == kExitStopped || code == kExitStoppedUnsaved) {  // stopped on purpose: never restarted
    Failure f;
    f.detected_at = unix_seconds();
    f.exit_code = code;
    f.kind = "stopped";
    f.restartable = false;
    f.detail = code == kExitStopped
                   ? "the job stopped on request (a signal to a rank, or train.stop_after_minutes) after "
                     "checkpointing its last step"
                   : "the job stopped on request without a checkpoint of its last step";
    return f;
  }
  if (code == kExitGpuFault) {  // the launcher ended before the rank's report was read
    read_heartbeats(a);
    if (auto f = gpu_fault(a)) return f;
  }
  Failure f = diagnose(a);
  f.exit_code = code;
  const std::string error_line = f.error_line;
  if (f.kind == "exit") f.detail = fmt::format("the launcher exited with code {}", code);
  if (f.kind == "exit" && code == kExitCommFailure) {
    f.kind = "comm_failure";
    f.detail = error_line.empty() ? f.detail : error_line;
  }
  if (f.kind == "exit" && code == kExitError) {
    f.restartable = false;
    f.detail = error_line.empty() ? "the job stopped with an error" : error_line;
  }
  return f;
}

std::optional<Supervisor::Failure> Supervisor::watch(Attempt& a) {
  const FaultConfig& fc = cfg_.fault;
  const std::string me = this_host();
  while (true) {
    ::usleep(static_cast<useconds_t>(kPollS * 1e6));
    if (g_interrupt) {
      Failure f = make_failure("interrupted", {},
                               fmt::format("the supervisor received signal {}", static_cast<int>(g_interrupt)),
                               unix_seconds(), 128 + g_interrupt, false);
      return f;
    }
    read_heartbeats(a);
    const double now = unix_seconds();
    bool all_reported = true, all_ready = true;
    for (const auto& b : a.beats) {
      all_reported &= b.has_value();
      all_ready &= b.has_value() && b->phase != "starting";
    }
    if (auto f = gpu_fault(a)) return f;
    if (auto f = reported_failure(a)) return f;
    if (all_reported && !a.ranks_written) {
      write_ranks_json(a);
      a.ranks_written = true;
    }
    if (all_ready && a.all_ready_at == 0) {
      a.all_ready_at = now;
      const int64_t resumed = a.beats[0]->start_step;
      if (a.expect_step > 0 && resumed == 0) {  // every checkpoint turned out unreadable: never retrain from 0
        return make_failure("no_checkpoint", {},
                            fmt::format("the restart resumed from no checkpoint (expected step {}); every checkpoint "
                                        "failed verification",
                                        a.expect_step),
                            now, -1, false);
      }
      if (a.expect_step > 0 && resumed != a.expect_step)
        log_warn(
            "supervisor: resumed from step {}, not {} (newer checkpoints failed verification; see "
            "the log)",
            resumed, a.expect_step);
    }
    if (a.recover_from) {  // the first completed step after a restart ends the recovery
      for (const auto& b : a.beats) {
        if (b && (b->phase == "train" || b->phase == "done") && b->step > b->start_step) {
          double s = b->time - *a.recover_from;
          recoveries_.push_back({a.recover_kind, s});
          log_info(
              "supervisor: recovered in {:.2f} s (failure detected → first training step after the "
              "restart, "
              "step {})",
              s, b->step);
          event({{"event", "recovered"},
                 {"attempt", a.number},
                 {"failure", a.recover_kind},
                 {"recovery_s", s},
                 {"step", b->step},
                 {"resumed_step", b->start_step}});
          a.recover_from.reset();
          break;
        }
      }
    }
    if (auto code = a.proc->poll()) {
      if (*code == 0) {
        // Finished only when every rank said so: a launcher can exit 0 for ranks that never
        // started (srun "task launch failed" after a requeue).
        std::vector<int> unfinished;
        for (int tries = 0; tries < 20; ++tries) {  // a shared filesystem may show the last beat late
          if (tries) ::usleep(100000);
          read_heartbeats(a);
          unfinished.clear();
          for (int r = 0; r < a.world; ++r) {
            const auto& b = a.beats[static_cast<size_t>(r)];
            if (!b || b->phase != "done") unfinished.push_back(r);
          }
          if (unfinished.empty()) return std::nullopt;
        }
        return make_failure("exit", unfinished,
                            fmt::format("the launcher exited 0 but rank(s) {} never reported finishing training",
                                        fmt::join(unfinished, ", ")),
                            now, 0, true);
      }
      return classify_exit(a, *code);
    }
    // A local rank process that vanished while the launcher still runs. The launcher gets a
    // moment to exit and say why (an error exit 2 must not pass for a crash).
    for (int r = 0; r < a.world; ++r) {
      const auto& b = a.beats[static_cast<size_t>(r)];
      if (!b || b->host != me || b->phase == "done" || b->phase == "stopped") continue;
      char st = process_state(static_cast<pid_t>(b->pid));
      if (st == 0 || st == 'Z' || st == 'X') {
        // A rank that gave up on a dead peer exits too: the output names whom it waited for. The
        // launcher may not exit soon (it can hang trying to reach a lost host), so its output is
        // read either way; only when it blames nobody is the vanished rank the culprit.
        int code = a.proc->wait_for(kLauncherGraceS);
        Failure f = code >= 0 ? *classify_exit(a, code) : diagnose(a);
        f.detected_at = now;
        if (f.kind == "exit" && f.restartable) f = vanished(a, r, std::move(f));
        return f;
      }
    }
    if (!all_ready && now - a.started > fc.startup_timeout_s) {
      std::vector<int> missing;
      for (int r = 0; r < a.world; ++r)
        if (!a.beats[static_cast<size_t>(r)] || a.beats[static_cast<size_t>(r)]->phase == "starting")
          missing.push_back(r);
      dump_stacks_of(a, "slow start");
      return make_failure("startup_timeout", missing,
                          fmt::format("rank(s) {} not ready {:.0f} s after the start (fault.startup_timeout_s)",
                                      fmt::join(missing, ", "), fc.startup_timeout_s),
                          now, -1, true);
    }
    if (all_ready && now - std::max(a.last_change, a.all_ready_at) > fc.heartbeat_timeout_s) {
      std::vector<RankSeen> ranks = seen(a);  // stopped processes, on this host or a remote one
      std::vector<int> culprits;
      for (const RankSeen& r : ranks)
        if (r.state == ProcState::kStopped) culprits.push_back(r.rank);
      dump_stacks_of(a, "no progress");
      int64_t min_step = INT64_MAX;
      for (const auto& b : a.beats) min_step = std::min(min_step, b->step);
      Failure f = make_failure(
          "hang", culprits,
          fmt::format("no rank made progress for {:.0f} s (fault.heartbeat_timeout_s) at step {}{}",
                      fc.heartbeat_timeout_s, min_step + 1,
                      culprits.empty() ? "" : fmt::format("; stopped rank(s): {}", fmt::join(culprits, ", "))),
          now, -1, true);
      f.seen = std::move(ranks);
      return f;
    }
  }
}

void Supervisor::stop(Attempt& a) {
  const std::string me = this_host();
  std::vector<pid_t> local;
  for (const auto& b : a.beats)
    if (b && b->host == me) local.push_back(static_cast<pid_t>(b->pid));
  auto alive = [&] {
    if (!a.proc->poll()) return true;
    for (pid_t p : local) {
      char st = process_state(p);
      if (st != 0 && st != 'Z' && st != 'X') return true;
    }
    return false;
  };
  if (!alive()) return;
  // A failed job: local ranks are killed outright (SIGTERM would ask them to checkpoint, which a
  // broken job cannot); the launcher tears down the rest.
  for (pid_t p : local) ::kill(p, SIGKILL);
  a.proc->signal_group(SIGTERM);
  double deadline = unix_seconds() + cfg_.fault.stop_grace_s;
  while (alive() && unix_seconds() < deadline) ::usleep(20000);
  if (alive()) {
    log_warn("supervisor: the job did not stop within {:.0f} s of SIGTERM; sending SIGKILL", cfg_.fault.stop_grace_s);
    for (pid_t p : local) ::kill(p, SIGKILL);
    a.proc->signal_group(SIGKILL);
    a.proc->wait_for(10);
  }
}

int Supervisor::preempt(Attempt& a) {
  const int sig = g_interrupt, seen = g_interrupts;
  const double grace = cfg_.fault.preempt_grace_s;
  log_warn(
      "supervisor: {} received: every rank finishes its step, checkpoints and exits (fault.preempt_grace_s = "
      "{:.0f} s); not restarting{}",
      signal_name(sig), grace, sig == SIGINT ? "; Ctrl-C again stops the job at once" : "");
  event({{"event", "preempt"},
         {"attempt", a.number},
         {"signal", signal_name(sig)},
         {"reason",
          fmt::format("{} to the supervisor: every rank checkpoints and exits; no restart", signal_name(sig))}});
  // The stop file first: it reaches the ranks that are still starting (fault/stop_file.h). SIGUSR1
  // goes to the launcher (mpirun and srun forward it to every rank) only once every rank is ready
  // for it, and at once to the local ranks that have reported (their handlers are in).
  const std::string stop_path = stop_file_of(hb_dir_);
  write_file_atomic(stop_path, std::string(signal_name(sig)) + "\n");
  bool forwarded = false;
  auto forward_when_ready = [&] {
    if (forwarded || count_ready_ranks(stop_path) < a.world) return;
    forwarded = true;
    ::kill(a.proc->pid(), SIGUSR1);
  };
  forward_when_ready();
  const std::string me = this_host();
  for (const auto& b : a.beats)
    if (b && b->host == me) ::kill(static_cast<pid_t>(b->pid), SIGUSR1);
  // The ranks' own watchdog ends them after the grace; the launcher then needs a moment.
  const double deadline = unix_seconds() + grace + kLauncherGraceS + 3;
  while (unix_seconds() < deadline) {
    forward_when_ready();
    if (auto code = a.proc->poll()) {
      const int rc = *code == 0 || *code == kExitStopped ? *code : kExitStoppedUnsaved;
      if (rc == kExitStopped)
        log_info(
            "supervisor: the job stopped after checkpointing its last step; `fluxtrain launch ... --resume auto` "
            "continues it (exit {})",
            rc);
      else if (rc != 0)
        log_error(
            "supervisor: the job stopped without a checkpoint of its last step (launcher exit {}); a resume "
            "starts from the newest committed checkpoint (exit {})",
            *code, rc);
      event({{"event", "stopped"},
             {"attempt", a.number},
             {"exit_code", rc},
             {"launcher_exit_code", *code},
             {"reason", rc == kExitStopped ? "stopped on a signal to the supervisor, its last step checkpointed"
                                           : "stopped on a signal to the supervisor"}});
      return rc;
    }
    if (g_interrupts > seen && g_interrupt == SIGINT) {
      log_warn("supervisor: second SIGINT: stopping the job at once");
      stop(a);
      event({{"event", "stopped"},
             {"attempt", a.number},
             {"exit_code", kExitInterrupted},
             {"reason", "a second SIGINT: stopped at once, without a checkpoint"}});
      return kExitInterrupted;
    }
    ::usleep(static_cast<useconds_t>(kPollS * 1e6));
  }
  log_error("supervisor: the job did not stop within {:.0f} s of {}; stopping it without a checkpoint", grace,
            signal_name(sig));
  stop(a);
  event({{"event", "stopped"},
         {"attempt", a.number},
         {"exit_code", kExitStoppedUnsaved},
         {"reason", "the job did not stop within fault.preempt_grace_s of the signal: stopped without a checkpoint"}});
  return kExitStoppedUnsaved;
}

void Supervisor::run_health_checks() {
  if (cfg_.fault.health_check.empty()) return;
  for (size_t h = 0; h < hosts_.size(); ++h) {
    if (bad_[h]) continue;
    std::string cmd = "FT_HOST=" + shell_quote(hosts_[h].name) + " sh -c " + shell_quote(cfg_.fault.health_check);
    if (!hosts_[h].local) cmd = "ssh -o BatchMode=yes " + shell_quote(hosts_[h].name) + " " + shell_quote(cmd);
    int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
    if (rc != 0) {
      bad_[h] = true;
      bad_why_[h] = "failed health check";
      log_warn("supervisor: host {} failed its health check (fault.health_check); marked bad", hosts_[h].name);
      event({{"event", "host_bad"}, {"host", hosts_[h].name}, {"reason", "health_check"}});
    }
  }
}

std::map<size_t, std::string> Supervisor::unreachable_hosts() const {
  std::map<size_t, std::string> out;
  for (size_t h = 0; h < hosts_.size(); ++h) {
    if (bad_[h] || hosts_[h].local) continue;
    if (std::string why = unreachable_reason(hosts_[h]); !why.empty()) out[h] = why;
  }
  return out;
}

bool Supervisor::await_hosts(const std::map<size_t, std::string>& unreachable) {
  const FaultConfig& fc = cfg_.fault;
  for (auto [h, why] : unreachable) {
    if (bad_[h]) continue;
    if (fc.elastic) {
      bad_[h] = true;
      bad_why_[h] = "unreachable";
      log_warn("supervisor: host {} is unreachable ({}); marked bad", hosts_[h].name, why);
      event({{"event", "host_bad"}, {"host", hosts_[h].name}, {"reason", "unreachable"}, {"detail", why}});
      continue;
    }
    // Without elastic the job needs every host: wait for this one to come back.
    log_warn(
        "supervisor: host {} is unreachable ({}); waiting up to {:.0f} s for it to return "
        "(fault.host_wait_s)",
        hosts_[h].name, why, fc.host_wait_s);
    event({{"event", "host_wait"},
           {"host", hosts_[h].name},
           {"detail", why},
           {"reason", fmt::format("host unreachable and fault.elastic = false: the layout needs it; waiting up to "
                                  "{:.0f} s (fault.host_wait_s)",
                                  fc.host_wait_s)}});
    const double t0 = unix_seconds();
    while (!why.empty()) {
      if (g_interrupt) return false;
      if (unix_seconds() - t0 > fc.host_wait_s) {
        event({{"event", "gave_up"}, {"reason", "host_unreachable"}, {"host", hosts_[h].name}});
        throw Error(fmt::format("supervisor: host {} did not come back within {:.0f} s "
                                "(fault.host_wait_s): {}",
                                hosts_[h].name, fc.host_wait_s, why),
                    "bring the host back and relaunch (the run resumes from its newest checkpoint), "
                    "or set fault.elastic = true to go on without it");
      }
      ::usleep(1000000);
      why = unreachable_reason(hosts_[h]);
    }
    const double waited = unix_seconds() - t0;
    log_info("supervisor: host {} is back after {:.1f} s", hosts_[h].name, waited);
    event({{"event", "host_back"}, {"host", hosts_[h].name}, {"waited_s", waited}});
  }
  return true;
}

void Supervisor::exclude_sniffed_hosts(const Attempt& a) {
  for (const SlowHost& slow : sniffed_slow_hosts(run_dir_, a.started)) {
    const int h = host_index(slow.name);
    if (h < 0 || bad_[static_cast<size_t>(h)]) continue;
    bad_[static_cast<size_t>(h)] = true;
    if (choose_dp(a.dp) == 0) {  // the others cannot hold a replica: keep it, slow as it is
      bad_[static_cast<size_t>(h)] = false;
      log_warn("supervisor: host {} was named slow ({}) but the other hosts cannot hold one replica; kept", slow.name,
               slow.why);
      continue;
    }
    log_warn(
        "supervisor: host {} named slow by the sniff test ({}); left out of the restart "
        "(fault.exclude_slow_hosts)",
        slow.name, slow.why);
    event({{"event", "host_bad"}, {"host", slow.name}, {"reason", "sniff"}, {"detail", slow.why}});
  }
}

int64_t Supervisor::choose_dp(int64_t current_dp) const {
  int slots = 0;
  for (size_t h = 0; h < hosts_.size(); ++h)
    if (!bad_[h]) slots += hosts_[h].slots;
  const int64_t per_replica = cfg_.parallel.tp * cfg_.parallel.pp;
  if (launcher_ == Launcher::kSrun || launcher_ == Launcher::kMpirunHosts || hosts_.size() > 1) {
    for (int64_t d = current_dp; d >= 1; --d) {
      if (d * per_replica > slots) continue;
      std::vector<std::string> sets = opt_.sets;
      sets.push_back(fmt::format("parallel.dp={}", d));
      try {
        load_config(opt_.config_path, sets);
        return d;
      } catch (const Error&) {
        continue;  // the batch does not split over d replicas, ...
      }
    }
    return 0;
  }
  return current_dp;
}

void Supervisor::continue_earlier_launch() {
  const EarlierLaunch e = read_earlier_launch(run_dir_, cfg_);
  if (e.attempts == 0 && !e.badput) return;
  attempts_ = e.attempts;
  if (e.badput) {
    badput_before_ = e.badput;
    job_started_ = e.badput->started_at;
  }
  const double gap = e.last_event_at > 0 ? unix_seconds() - e.last_event_at : 0;
  log_info(
      "supervisor: continuing the run of an earlier launch ({} attempt(s) before, resuming from step {}; the last "
      "event {:.1f} s ago){}",
      e.attempts, e.resume_step, gap,
      e.badput ? fmt::format("; badput counts from its start, {:.1f} s ago", unix_seconds() - job_started_) : "");
  event({{"event", "relaunch"},
         {"attempts_before", e.attempts},
         {"resume_step", e.resume_step},
         {"since_last_event_s", gap},
         {"job_started_at", job_started_},
         {"reason", fmt::format("ckpt.resume = \"{}\": continuing the earlier launch's run (its attempts, its "
                                "badput; the time since its last metrics row counts as restart)",
                                cfg_.ckpt.resume)}});
}

void Supervisor::take_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGUSR1, &sa, nullptr);
}

int Supervisor::run() {
  take_signals();
  std::filesystem::create_directories(run_dir_);
  job_started_ = obs::process_started_at();  // launch to first step: the supervisor's own start-up counts
  const FaultConfig& fc = cfg_.fault;
  int64_t dp = cfg_.parallel.dp;
  int restarts = 0;
  int64_t expect_step = -1;
  std::string resume_dir;
  std::optional<Failure> last;
  std::vector<std::string> host_names;
  for (const Host& h : hosts_) host_names.push_back(fmt::format("{}:{}", h.name, h.slots));
  log_info("supervisor: run {}; hosts {}; up to {} restart(s){}", run_dir_, fmt::join(host_names, ", "),
           fc.max_restarts, fc.elastic ? "; elastic" : "");
  if (!cfg_.ckpt.resume.empty()) continue_earlier_launch();
  while (true) {
    run_health_checks();
    if (std::all_of(bad_.begin(), bad_.end(), [](bool b) { return b; }))
      throw Error("supervisor: every host is marked bad; nothing left to run on",
                  "fix the hosts (see the log) and relaunch");
    if (std::any_of(bad_.begin(), bad_.end(), [](bool b) { return b; })) {
      if (!fc.elastic) {
        size_t h = 0;
        while (!bad_[h]) ++h;
        throw Error(fmt::format("supervisor: a host is marked bad ({}) and fault.elastic = false: host {}", bad_why_[h],
                                hosts_[h].name),
                    "replace the host, or set fault.elastic = true to go on with fewer data-parallel "
                    "ranks");
      }
      int64_t d = choose_dp(dp);
      if (d == 0) {
        throw Error(fmt::format("supervisor: the healthy hosts cannot hold one replica of tp {} × pp {}",
                                cfg_.parallel.tp, cfg_.parallel.pp),
                    "add hosts or slots");
      }
      if (d != dp) {
        log_warn("supervisor: elastic restart with dp {} instead of {} (a host is marked bad)", d, dp);
        std::vector<std::string> bad;
        for (size_t h = 0; h < hosts_.size(); ++h)
          if (bad_[h]) bad.push_back(hosts_[h].name);
        event({{"event", "shrink"},
               {"from_dp", dp},
               {"to_dp", d},
               {"reason", fmt::format("host(s) {} marked bad (fault.elastic): dp {} is the largest that fits the "
                                      "other hosts and divides the batch",
                                      fmt::join(bad, ", "), d)}});
        dp = d;
      }
    }
    auto attempt = start_attempt(dp, resume_dir, last);
    attempt->expect_step = expect_step;
    std::optional<Failure> f = watch(*attempt);
    if (!f) {
      log_info("supervisor: training finished after {} restart(s){}", restarts,
               recoveries_.empty() ? "" : fmt::format("; recovery times: {}", [&] {
                 std::vector<std::string> s;
                 for (const auto& r : recoveries_) s.push_back(fmt::format("{:.2f} s ({})", r.seconds, r.failure));
                 return fmt::format("{}", fmt::join(s, ", "));
               }()));
      nlohmann::json done = {{"event", "finished"}, {"attempt", attempt->number}, {"restarts", restarts}};
      log_info("supervisor: {}", goodput_summary(done));
      event(done);
      return 0;
    }
    if (f->kind == "interrupted") return preempt(*attempt);
    if (f->kind == "stopped") {
      log_info("supervisor: {} (exit {}); not restarting: `fluxtrain launch ... --resume auto` continues it", f->detail,
               f->exit_code);
      event({{"event", "stopped"},
             {"attempt", attempt->number},
             {"exit_code", f->exit_code},
             {"detail", f->detail},
             {"reason", "stopped on purpose (a drain or a time budget): not restarted; --resume auto continues"}});
      return f->exit_code;
    }
    int fh = failed_host(*attempt, *f);
    auto culprit = [&] {
      const std::string name = fh >= 0 ? hosts_[static_cast<size_t>(fh)].name : "";
      if (!f->ranks.empty())
        return fmt::format(" (rank {}{})", fmt::join(f->ranks, ", "), fh >= 0 ? " on host " + name : "");
      return fh >= 0 ? fmt::format(" (host {})", name) : std::string();
    };
    std::string who = culprit();
    // The ranks blamed as the supervisor saw them at detection: host, coordinates, phase, process.
    if (f->seen.empty() && !f->ranks.empty() && f->restartable) f->seen = seen(*attempt);
    // Named by a collective's timeout but its process is gone: the launcher's word on how it died.
    await_death_report(*attempt, *f);
    nlohmann::json culprits = nlohmann::json::array();
    std::string described;
    for (int r : f->ranks)
      for (const RankSeen& s : f->seen)
        if (s.rank == r) {
          culprits.push_back(to_json(s, f->detected_at));
          described += "; " + describe(s, f->detected_at);
        }
    log_warn("supervisor: attempt {} failed: {}{}: {}{}", attempt->number, f->kind, who, f->detail, described);
    stop(*attempt);
    // A host that no longer answers explains the failure better than the ranks' reports (to a
    // rank, every peer waiting on a dead one looks stuck too): the failure is attributed to it.
    std::map<size_t, std::string> unreachable;
    if (f->restartable && f->kind != "interrupted") unreachable = unreachable_hosts();
    if (!unreachable.empty() && (fh < 0 || !unreachable.count(static_cast<size_t>(fh)))) {
      fh = static_cast<int>(unreachable.begin()->first);
      who = culprit();
      log_warn("supervisor: host {} does not answer ({}); the failure is attributed to it",
               hosts_[static_cast<size_t>(fh)].name, unreachable.begin()->second);
    }
    const std::string host_name = fh >= 0 ? hosts_[static_cast<size_t>(fh)].name : "";
    nlohmann::json ev = {
        {"event", "failure"},        {"attempt", attempt->number},    {"kind", f->kind},
        {"ranks", f->ranks},         {"culprits", culprits},          {"detail", f->detail},
        {"exit_code", f->exit_code}, {"detected_at", f->detected_at}, {"stopped_s", unix_seconds() - f->detected_at}};
    if (fh >= 0) {
      const size_t h = static_cast<size_t>(fh);
      ev["host"] = host_name;
      if (f->kind == "gpu_fault" && !bad_[h]) {  // a broken GPU: never run on the host again in this job
        bad_[h] = true;
        bad_why_[h] = "GPU fault: " + f->detail;
        log_warn("supervisor: host {} excluded from the restart: its GPU failed ({})", host_name, f->detail);
        event({{"event", "host_bad"}, {"host", host_name}, {"reason", "gpu_fault"}, {"detail", f->detail}});
      } else if (fc.elastic && ++host_failures_[h] >= fc.host_max_failures && !bad_[h]) {
        bad_[h] = true;
        bad_why_[h] = "failures";
        log_warn("supervisor: host {} marked bad after {} failure(s) (fault.host_max_failures)", host_name,
                 host_failures_[h]);
        event({{"event", "host_bad"}, {"host", host_name}, {"reason", "failures"}});
      }
    }
    event(ev);
    if (fc.exclude_slow_hosts && f->restartable) exclude_sniffed_hosts(*attempt);
    if (f->kind == "no_checkpoint") {
      event({{"event", "gave_up"}, {"reason", "no_checkpoint"}});
      throw Error(fmt::format("supervisor: no valid checkpoint to restart from under {}: {}",
                              cfg_.ckpt.root(cfg_.train.run_dir), f->detail),
                  "the checkpoints are corrupt; see the attempt's log for each one's error");
    }
    if (!f->restartable) {
      throw Error(fmt::format("supervisor: the job stopped with an error that a restart would repeat (exit {}): {}",
                              f->exit_code, f->detail),
                  fmt::format("see {}/logs/attempt-{}.log", run_dir_, attempt->number));
    }
    if (restarts >= fc.max_restarts) {
      event({{"event", "gave_up"}, {"reason", "max_restarts"}, {"restarts", restarts}});
      throw Error(fmt::format("supervisor: restart budget exhausted: {} restart(s) done "
                              "(fault.max_restarts = {}); last "
                              "failure: {}{}: {}",
                              restarts, fc.max_restarts, f->kind, who, f->detail),
                  fmt::format("see {}/supervisor.jsonl and {}/logs/", run_dir_, run_dir_));
    }
    if (!await_hosts(unreachable)) {
      log_warn("supervisor: stopped by signal while waiting for a host; not restarting");
      return 128 + g_interrupt;
    }
    CheckpointProbe probe = probe_checkpoints(cfg_.ckpt, cfg_.train.run_dir, cfg_.data.endpoint);
    for (const std::string& why : probe.skipped) {
      log_warn("supervisor: not restarting from {}", why);
      event({{"event", "checkpoint_skipped"}, {"reason", why}});
    }
    if (!probe.newest) {
      event({{"event", "gave_up"}, {"reason", "no_checkpoint"}});
      throw Error(
          fmt::format("supervisor: no valid checkpoint to restart from under {}{} (last failure: {}{}: {})",
                      cfg_.ckpt.root(cfg_.train.run_dir),
                      probe.skipped.empty() ? "" : fmt::format("; {} invalid one(s) skipped", probe.skipped.size()),
                      f->kind, who, f->detail),
          cfg_.ckpt.interval > 0 ? "the failure came before the first checkpoint was committed, or every "
                                   "checkpoint is corrupt (see the warnings above)"
                                 : "set ckpt.interval so that checkpoints are written and failures can be "
                                   "recovered from");
    }
    const ProbedCheckpoint* ckpt = &*probe.newest;
    badput_before_.reset();  // the steps up to the checkpoint count; those after it are lost work
    try {
      const std::string metrics = run_dir_ + "/metrics.jsonl";
      if (auto last = obs::last_badput_row(metrics))
        badput_before_ = obs::carry_over_restart(*last, obs::read_metrics_jsonl(metrics), ckpt->step);
    } catch (const Error&) {
    }
    ++restarts;
    resume_dir = ckpt->dir;
    expect_step = ckpt->step;
    log_info("supervisor: restart {} of at most {} from {} (step {})", restarts, fc.max_restarts, ckpt->dir,
             ckpt->step);
    event({{"event", "restart"},
           {"restart", restarts},
           {"checkpoint", ckpt->dir},
           {"step", ckpt->step},
           {"reason", fmt::format("{}{}: {}; newest valid checkpoint step {}{}", f->kind, who, f->detail, ckpt->step,
                                  probe.skipped.empty()
                                      ? ""
                                      : fmt::format(" ({} newer one(s) failed verification)", probe.skipped.size()))}});
    last = f;
  }
}

}  // namespace ft
