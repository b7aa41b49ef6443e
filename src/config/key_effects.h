// No silent no-ops: what a key the user set means under the other settings.
//
//   apply_key_effects(cfg, {"data.path", "metrics.port"});  // fills cfg.config_notes, config_warnings
//
// Three outcomes, decided once per key the user set (in the file or with --set):
//   - the key implies a setting the user left out, which is then made, with a note saying so:
//     data.path without data.source selects "dataset" (a directory, s3:// or gs://) or "tokens"
//     (a file); metrics.port or metrics.bind_address without metrics.enabled enables the
//     endpoint; an unset model.vocab_size takes the dataset tokenizer's size (cfg.config_notes);
//   - it contradicts another key: an ft::Error naming both (data.path with data.source =
//     "synthetic");
//   - it does nothing because another key gates it: a warning naming that key
//     ("optim.loss_scale_window has no effect: train.precision is \"bf16\", not \"fp16\"";
//     cfg.config_warnings).
// Keys that `fluxtrain launch` reads (fault.max_restarts, ...) are not warned about: the
// supervisor hands ranks the same config.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "config/config.h"

namespace ft {

void apply_key_effects(Config& cfg, const std::set<std::string>& set_keys);

}  // namespace ft
