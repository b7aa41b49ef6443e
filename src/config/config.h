// Config: everything one TOML file (plus --set overrides) describes about a run. Each section
// is a small component config with defaults, bind() and validate(); this file only gathers them.
//
//   Config cfg = load_config("configs/tiny.toml", {"train.steps=50", "parallel.dp=2"});
//
// Order of application: the model preset (model.preset, from --set or the file), then every
// key of the file, then every --set override; finally each section validates itself.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "ckpt/ckpt_config.h"
#include "data/data_config.h"
#include "fault/fault_config.h"
#include "model/model_config.h"
#include "obs/metrics_config.h"
#include "obs/sniff_config.h"
#include "optim/optim_config.h"
#include "parallel/parallel_config.h"
#include "train/train_config.h"

namespace ft {

class ConfigBinder;

struct Config {
  ModelConfig model;
  TrainConfig train;
  OptimConfig optim;
  DataConfig data;
  ParallelConfig parallel;
  MetricsConfig metrics;
  SniffConfig sniff;  // obs.sniff_*
  FaultConfig fault;
  CkptConfig ckpt;
  // What loading decided about keys the user set (config/key_effects.h): settings they implied
  // ("data.source = \"dataset\" (implied by data.path = ...)") and keys that do nothing here.
  std::vector<std::string> config_notes, config_warnings;

  void bind(ConfigBinder& b);
  void validate() const;
  nlohmann::json to_json();
};

// path may be empty (defaults + overrides only). Throws ft::Error naming the file/key.
Config load_config(const std::string& path, const std::vector<std::string>& overrides);
// The same for TOML text already in memory; `name` stands for the file in messages (the fuzzer,
// tests/fuzz/fuzz_config.cpp).
Config load_config_text(const std::string& toml_text, const std::string& name,
                        const std::vector<std::string>& overrides);

// Every key with its type-free current default and documentation, one per line.
std::string describe_config_keys();

// The config a checkpoint was saved with (its manifest's "config"), as a Config; keys this build
// does not know are ignored with a warning.
Config config_from_json(const nlohmann::json& j);

}  // namespace ft
