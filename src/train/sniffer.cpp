#include "train/sniffer.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "fault/heartbeat.h"
#include "kernels/ops.h"
#include "obs/telemetry.h"
#include "tensor/device_runtime.h"
#include "tensor/memory.h"
#include "train/rank_metrics.h"
#include "util/clock.h"
#include "util/fs.h"
#include "util/log.h"

namespace ft {
namespace {

constexpr int64_t kGemmSizeHost = 384;     // M = N = K: ~5 ms on one core
constexpr int64_t kGemmSizeDevice = 4096;  // ~0.1-1 ms on a data-centre GPU
constexpr int kGemmRuns = 8;
constexpr int64_t kLinkBytes = 256 * 1024;       // each way of a round trip
constexpr int64_t kAllReduceFloats = 64 * 1024;  // 256 KiB
constexpr int kRepeats = 3;
constexpr int kSniffTag = 29900;  // below the communicator's own tags (parallel/comm/mpi_comm.cpp)
// How far above its peers a time must be to be named, besides the margin: on CPU ranks a thread
// that another runnable thread displaces waits about a scheduler slice (Linux: 3 ms), so smaller
// differences there are the host's scheduling, not a slow core or link; a device's timings are not
// scheduled by the host.
constexpr double kHostNoiseFloorS = 3e-3;
constexpr double kDeviceNoiseFloorS = 5e-4;

// The fastest of kRepeats runs of f (after one not timed).
template <class F>
double fastest(F&& f) {
  f();
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < kRepeats; ++i) {
    const double t0 = now_seconds();
    f();
    best = std::min(best, now_seconds() - t0);
  }
  return best;
}

}  // namespace

Sniffer::Sniffer(const SniffConfig& cfg, Mesh& mesh, const ExecContext& ctx, Precision precision, obs::Telemetry& tel,
                 std::string run_dir)
    : cfg_(cfg),
      mesh_(mesh),
      ctx_(ctx),
      precision_(precision == Precision::kF8 ? Precision::kBF16 : precision),
      tel_(tel),
      run_dir_(std::move(run_dir)) {
  const std::vector<std::string> hosts = gather_strings(mesh_.world(), this_host());
  for (int r = 0; r < mesh_.world_size(); ++r) {
    const MeshCoord c = Mesh::coord_of(mesh_.degrees(), r);
    ranks_.push_back({.rank = r,
                      .host = hosts[static_cast<size_t>(r)],
                      .dp = static_cast<int>(c.dp),
                      .tp = static_cast<int>(c.tp),
                      .pp = static_cast<int>(c.pp),
                      .cp = static_cast<int>(c.cp)});
  }
}

// The mean of kGemmRuns GEMMs in a row (after one not timed): a throughput over tens of
// milliseconds, so that a device slowed in bursts (a CPU quota, a clock that drops under load) shows
// as it slows a step, where the fastest of a few short runs could fall between the bursts.
double Sniffer::time_gemm() {
  const int64_t n = ctx_.on_host() ? kGemmSizeHost : kGemmSizeDevice;
  const size_t bytes = sizeof(float) * static_cast<size_t>(n * n);
  float* a = static_cast<float*>(mem_alloc(ctx_, 3 * bytes, MemCategory::kWorkspace));
  float *b = a + n * n, *c = b + n * n;
  mem_fill(ctx_, a, ctx_.device, 0x3c, 2 * bytes);  // every element 0.0115 (bytes 3c3c3c3c)
  auto gemm = [&] { ops::matmul(ctx_, c, a, b, n, n, n, false, false, 0.f, precision_); };
  gemm();
  synchronize(ctx_);
  const double t0 = now_seconds();
  for (int i = 0; i < kGemmRuns; ++i) gemm();
  synchronize(ctx_);
  const double t = (now_seconds() - t0) / kGemmRuns;
  mem_free(ctx_.device, a, 3 * bytes, MemCategory::kWorkspace);
  return t;
}

// Ring pairs (i, i + 1) of the group in turn, a barrier before each: the fastest round trip of this
// rank with either neighbour.
double Sniffer::time_links(Communicator& g) {
  const int n = g.size(), me = g.rank();
  std::vector<char> out(kLinkBytes, 1), in(kLinkBytes);
  double best = std::numeric_limits<double>::infinity();
  for (int p = 0; p < (n == 2 ? 1 : n); ++p) {
    const int a = p, b = (p + 1) % n;
    g.barrier();
    if (me == a)
      best = std::min(best, fastest([&] {
                        g.send(out.data(), kLinkBytes, b, kSniffTag);
                        g.recv(in.data(), kLinkBytes, b, kSniffTag);
                      }));
    else if (me == b)
      best = std::min(best, fastest([&] {
                        g.recv(in.data(), kLinkBytes, a, kSniffTag);
                        g.send(out.data(), kLinkBytes, a, kSniffTag);
                      }));
  }
  return best;
}

double Sniffer::time_all_reduce(Communicator& g) {
  std::vector<float> x(kAllReduceFloats, 1.f);
  g.barrier();
  return fastest([&] { g.all_reduce(x.data(), kAllReduceFloats); });
}

obs::SniffSample Sniffer::measure() {
  obs::SniffSample s;
  mesh_.world().barrier();  // every rank's GEMM at once: a shared host slows all of them alike
  s.gemm_s = time_gemm();
  Communicator* axes[] = {&mesh_.dp(), &mesh_.tp(), &mesh_.pp(), &mesh_.cp()};
  for (size_t a = 0; a < obs::kNumSniffAxes; ++a) {
    if (axes[a]->size() < 2) continue;
    s.link_s[a] = time_links(*axes[a]);
    s.all_reduce_s[a] = time_all_reduce(*axes[a]);
  }
  return s;
}

// Every rank's sample gathered to rank 0 and judged there; the other ranks get nothing.
std::optional<obs::SniffReport> Sniffer::judge(int64_t step, const obs::SniffSample& mine) {
  std::vector<std::pair<std::string, double>> values = {{"gemm_s", mine.gemm_s}};
  for (size_t a = 0; a < obs::kNumSniffAxes; ++a) {
    const std::string axis = obs::sniff_axis_name(static_cast<obs::SniffAxis>(a));
    values.push_back({"link_" + axis, mine.link_s[a]});
    values.push_back({"all_reduce_" + axis, mine.all_reduce_s[a]});
  }
  const nlohmann::json all = gather_per_rank(mesh_.world(), values);
  if (mesh_.world_rank() != 0) return std::nullopt;
  std::vector<obs::SniffSample> samples(static_cast<size_t>(mesh_.world_size()));
  for (size_t r = 0; r < samples.size(); ++r) {
    samples[r].gemm_s = all["gemm_s"][r].get<double>();
    for (size_t a = 0; a < obs::kNumSniffAxes; ++a) {
      const std::string axis = obs::sniff_axis_name(static_cast<obs::SniffAxis>(a));
      samples[r].link_s[a] = all["link_" + axis][r].get<double>();
      samples[r].all_reduce_s[a] = all["all_reduce_" + axis][r].get<double>();
    }
  }
  return obs::judge_sniff(step, ranks_, std::move(samples), cfg_.margin,
                          ctx_.on_host() ? kHostNoiseFloorS : kDeviceNoiseFloorS);
}

nlohmann::json Sniffer::run(int64_t step) {
  const double t0 = now_seconds();
  obs::SniffSample mine = measure();
  std::optional<obs::SniffReport> first = judge(step, mine);
  // A finding must hold on a second measurement (obs/sniff.h): rank 0 tells every rank.
  int32_t again = first && !first->slow.empty() ? 1 : 0;
  mesh_.world().broadcast(&again, sizeof again, 0);
  std::optional<obs::SniffReport> final_rep = again ? judge(step, obs::faster_of(mine, measure())) : std::move(first);
  if (!final_rep) return nullptr;
  const obs::SniffReport& rep = *final_rep;
  for (const obs::SniffSlow& s : rep.slow) log_warn("{}", obs::describe(s, step));
  tel_.on_sniff(rep);
  nlohmann::json j = obs::to_json(rep);
  j["seconds"] = now_seconds() - t0;
  j["measured_twice"] = again != 0;
  // What the supervisor reads at its next restart (fault.exclude_slow_hosts): the latest verdict.
  write_file_atomic(
      run_dir_ + "/sniff.json",
      nlohmann::json(
          {{"step", step}, {"at", unix_time_seconds()}, {"slow_hosts", rep.slow_hosts()}, {"slow", j["slow"]}})
              .dump(2) +
          "\n");
  return j;
}

}  // namespace ft
