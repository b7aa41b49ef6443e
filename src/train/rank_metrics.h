// Per-rank figures for metrics.jsonl. Under pipeline (and tensor) parallelism ranks differ —
// stage s holds other layers, activations and traffic than stage s + 1 — so rank 0, which writes
// the file, needs everyone's values. Collective over the group: every rank calls it, in step.
//
//   nlohmann::json j = gather_per_rank(mesh.world(), {{"mem_activations_bytes", 1.5e6}, {"pp_send_bytes", 4096}});
//   // {"mem_activations_bytes": [rank 0's, rank 1's, ...], "pp_send_bytes": [...]}
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "parallel/comm/comm.h"

namespace ft {

// Values are doubles on the wire (byte counts stay exact below 2^53).
nlohmann::json gather_per_rank(Communicator& group, const std::vector<std::pair<std::string, double>>& values);

// Every rank's string (e.g. its host name; at most 255 bytes each, longer ones are cut), in group order.
std::vector<std::string> gather_strings(Communicator& group, const std::string& mine);

}  // namespace ft
