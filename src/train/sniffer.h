// Sniffer: runs the sniff tests of obs.sniff_interval (obs/sniff.h judges them) — at start-up and
// every interval steps, between steps, on every rank at once:
//   - a fixed GEMM (384^3 on a CPU, 4096^3 on a device, at the run's precision) through the
//     backend's own matmul on the rank's device: the mean of 8 in a row after a warm-up;
//   - on every mesh axis of size > 1, a round trip of 256 KiB with each ring neighbour, one pair at
//     a time (a barrier of the axis group between pairs, so no link shares its time with another),
//     the fastest of 3; and an all-reduce of 256 KiB over the group (reported, not judged: the
//     group's slowest link sets it for every member);
//   - every rank's times gathered to rank 0; when it names anyone, every rank measures again and
//     the faster of each rank's two values is judged (a finding must hold twice), and only a time
//     above its peers by more than the host's scheduling noise (3 ms on CPU ranks, 0.5 ms on GPU
//     ranks) is named; rank 0 names the slow ones (log, Prometheus through
//     Telemetry::on_sniff, <run_dir>/sniff.json for the supervisor's fault.exclude_slow_hosts) and
//     returns the "sniff" object of metrics.jsonl.
// Nothing of the model, the optimizer or the data is touched, so the losses are those of a run
// without it; the per-step communication figures are taken inside step() and do not see it.
//
//   Sniffer sniff(cfg.sniff, mesh, ctx, cfg.train.precision, telemetry, run_dir);   // collective
//   if (sniff.due(step)) row["sniff"] = sniff.run(step);                          // collective
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "obs/sniff.h"
#include "obs/sniff_config.h"
#include "parallel/mesh.h"
#include "tensor/exec_context.h"
#include "tensor/precision.h"

namespace ft {

namespace obs {
class Telemetry;
}

class Sniffer {
 public:
  // Collective over the world (gathers the host names).
  Sniffer(const SniffConfig& cfg, Mesh& mesh, const ExecContext& ctx, Precision precision, obs::Telemetry& tel,
          std::string run_dir);
  bool due(int64_t step) const { return cfg_.interval > 0 && step % cfg_.interval == 0; }
  // Collective over the world. Rank 0: the "sniff" object for metrics.jsonl; the others: null.
  nlohmann::json run(int64_t step);
  // What this rank measured (collective over every axis group; the tests call it directly).
  obs::SniffSample measure();

 private:
  std::optional<obs::SniffReport> judge(int64_t step, const obs::SniffSample& mine);  // rank 0: the report
  double time_gemm();
  double time_links(Communicator& g);
  double time_all_reduce(Communicator& g);

  SniffConfig cfg_;
  Mesh& mesh_;
  ExecContext ctx_;
  Precision precision_;
  obs::Telemetry& tel_;
  std::string run_dir_;
  std::vector<obs::SniffRank> ranks_;
};

}  // namespace ft
