// Data-parallel step time over given links: the planner held to a real cluster. Given the links
// between hosts (bandwidth, latency), the compute time of one step measured on one host, and the
// trainer's data-parallel configuration, it predicts the step time of that configuration across
// hosts by replaying what the trainer does (parallel/data_parallel/): gradient buckets in backward
// order, each summed by our ring all-reduce (2(p-1) messages of n/p elements) on the
// communication thread as soon as backward has finished its units — or, with one bucket (overlap
// off), after the whole backward; bf16 halves the bytes; PowerSGD sums per unit a packed vector
// all-reduce and its P and Q factors synchronously on the training thread.
//
//   LinkSpec link{.bandwidth = 1e9 / 8, .latency = 50e-6};            // 1 Gbit/s, 50 µs
//   LinkStep p = predict_step_over_links(cfg, find_gpu("cpu"), link, /*compute_s=*/1.73);
//   p.step;  p.exposed;  p.comm;  p.buckets.size();
//
// ZeRO 0 (DDP) with tp = pp = 1 only: the layouts the measurement covers. docs/planner.md, "Links".
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "plan/catalog.h"

namespace ft::plan {

struct LinkSpec {
  double bandwidth = 0;  // bytes/s each host's link carries in each direction (line rate)
  double latency = 0;    // seconds a message takes one way before its first byte arrives
  // Share of the line rate that carries data: TCP/IPv4 over Ethernet sends 1448 bytes of payload
  // (MSS with timestamps) in a 1514-byte frame as the link counts it.
  double payload = 1448.0 / 1514.0;
};

// Seconds of our ring all-reduce of `bytes` (on the wire) over p ranks.
double ring_all_reduce_s(double bytes, int64_t p, const LinkSpec& link);

struct LinkStep {
  struct Bucket {
    double elements = 0;        // fp32 gradient elements in the bucket (padding included)
    double ready = 0;           // seconds into the step when backward has finished its units
    double start = 0, end = 0;  // its all-reduce on the communication thread
  };
  std::vector<Bucket> buckets;
  double compute = 0;                               // the measured compute time (forward, backward, optimizer)
  double forward = 0, backward = 0, optimizer = 0;  // its split (the planner's own model)
  double comm = 0;                                  // all gradient communication, hidden or not
  double exposed = 0;                               // the part of it the step waits for
  double control = 0;                               // small per-step collectives (loss, norm, guards, per-rank metrics)
  double step = 0;                                  // compute + exposed + control
  std::string compression;                          // none, bf16, fp16, powersgd
  bool overlap = true;                              // more than one bucket: communication starts during backward
};

// cfg: the trainer's configuration (model, seq_len, batch, parallel.*). compute_s: the step's
// measured compute on one host (metrics.jsonl compute_s of the same configuration, no links).
// Throws ft::Error for layouts it does not cover.
LinkStep predict_step_over_links(const Config& cfg, const GpuSpec& device, const LinkSpec& link, double compute_s);

nlohmann::json to_json(const LinkStep& s, const LinkSpec& link);
std::string format_link_step(const LinkStep& s, const LinkSpec& link, int64_t dp);

}  // namespace ft::plan
