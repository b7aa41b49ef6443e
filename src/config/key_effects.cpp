#include "config/key_effects.h"

#include <fmt/format.h>

#include <filesystem>

#include "data/dataset_manifest.h"
#include "data/loader/shard_cache.h"
#include "util/error.h"
#include "util/strings.h"

namespace ft {
namespace {

bool remote(const std::string& path) {
  return starts_with(path, "s3://") || starts_with(path, "gs://");
}

const char* source_name(DataSource s) {
  return s == DataSource::kDataset ? "dataset" : s == DataSource::kTokenFile ? "tokens" : "synthetic";
}

// The directory or URL of data.mixture's first entry ("ds_man#en=0.5, ..." -> "ds_man"); "" when
// it names a language of data.path (parse_mixture's rule, data/loader/mixture.h).
std::string first_mixture_dataset(const std::string& mixture) {
  std::string what(trim(std::string_view(mixture).substr(0, mixture.find(','))));
  what = what.substr(0, what.rfind('='));
  std::error_code ec;  // a name too long for the file system is no directory, not an exception
  const bool is_path = what.find('/') != std::string::npos || what.find("://") != std::string::npos ||
                       starts_with(what, ".") || what.find('#') != std::string::npos ||
                       std::filesystem::is_directory(what, ec);
  return is_path ? std::string(trim(what.substr(0, what.find('#')))) : "";
}

class Effects {
 public:
  Effects(Config& cfg, const std::set<std::string>& set) : cfg_(cfg), set_(set) {}
  bool is_set(const std::string& key) const { return set_.count(key) != 0; }
  // key does nothing unless `active`; `because` says which key gates it and how.
  void gated(const std::string& key, bool active, const std::string& because) {
    if (is_set(key) && !active) cfg_.config_warnings.push_back(fmt::format("{} has no effect: {}", key, because));
  }
  void note(std::string s) { cfg_.config_notes.push_back(std::move(s)); }

 private:
  Config& cfg_;
  const std::set<std::string>& set_;
};

void data_effects(Config& cfg, Effects& e) {
  DataConfig& d = cfg.data;
  // An empty data.path is named as such (it read as the dataset "": ": no manifest.json").
  if (d.path.empty() && d.source != DataSource::kSynthetic && d.mixture.empty()) {
    throw Error(fmt::format("data.path is empty: data.source = \"{}\" reads {}", source_name(d.source),
                            d.source == DataSource::kTokenFile ? "a token file" : "a dataset directory or URL"),
                d.source == DataSource::kTokenFile
                    ? "set data.path = \"FILE\" (a file of uint16/uint32 token ids)"
                    : "set data.path = \"DIR\" (made by `fluxtrain prepare --out DIR`), or data.mixture alone");
  }
  if (e.is_set("data.path") && !d.path.empty()) {
    if (e.is_set("data.source") && d.source == DataSource::kSynthetic) {
      throw Error(fmt::format("data.path = \"{}\" is set but data.source = \"synthetic\" ignores it", d.path),
                  "set data.source = \"dataset\" (a prepared directory) or \"tokens\" (a flat token file), "
                  "or remove data.path");
    }
    if (!e.is_set("data.source")) {
      namespace fs = std::filesystem;
      if (remote(d.path) || fs::is_directory(d.path)) {
        d.source = DataSource::kDataset;
      } else if (fs::is_regular_file(d.path)) {
        d.source = DataSource::kTokenFile;
      } else {
        throw Error(fmt::format("data.path = \"{}\" does not exist", d.path),
                    "point it at a dataset directory (fluxtrain prepare --out DIR) or a token file");
      }
      e.note(fmt::format("data.source = \"{}\" (implied by data.path = \"{}\")", source_name(d.source), d.path));
    }
  }
  const bool tokens = d.source == DataSource::kTokenFile, dataset = d.source == DataSource::kDataset;
  // A directory cannot be mapped as a token file (mmap says only "No such device").
  if (tokens && std::filesystem::is_directory(d.path)) {
    if (is_dataset_dir(d.path)) {
      throw Error(fmt::format("data.path = \"{}\" is a directory holding a dataset, but data.source = \"tokens\" "
                              "reads a flat token file",
                              d.path),
                  "set data.source = \"dataset\" (or leave data.source out: a directory implies it)");
    }
    throw Error(
        fmt::format("data.path = \"{}\" is a directory, but data.source = \"tokens\" reads a flat token file", d.path),
        "point data.path at a file of uint16/uint32 token ids, or at a dataset made by `fluxtrain prepare` "
        "with data.source = \"dataset\"");
  }
  const std::string src = fmt::format("data.source is \"{}\"", source_name(d.source));
  e.gated("data.token_dtype", tokens, src + ", not \"tokens\"");
  e.gated("data.val_fraction", tokens, src + ", not \"tokens\" (a dataset has its own validation split)");
  e.gated("data.prefetch", dataset, src + ", not \"dataset\"");
  e.gated("data.verify", dataset, src + ", not \"dataset\"");
  // The object-store keys only matter when something is streamed from s3:// or gs://.
  const bool streamed = dataset && (remote(d.path) || d.mixture.find("s3://") != std::string::npos ||
                                    d.mixture.find("gs://") != std::string::npos);
  const std::string local = dataset
                                ? "data.path and data.mixture are local (only s3:// and gs:// datasets are streamed)"
                                : src + ", not \"dataset\" (nothing is streamed)";
  // data.endpoint is also the endpoint of checkpoints in a bucket (ckpt.dir = "s3://..." or "gs://...").
  const bool ckpt_in_store = cfg.ckpt.dir.rfind("s3://", 0) == 0 || cfg.ckpt.dir.rfind("gs://", 0) == 0;
  e.gated("data.endpoint", streamed || ckpt_in_store, local + " and ckpt.dir is not in a bucket (s3:// or gs://)");
  for (const char* key : {"data.cache_dir", "data.cache_bytes"}) e.gated(key, streamed, local);
  // The model's vocabulary follows the dataset's tokenizer unless the user chose one.
  // A dataset in a bucket alike: its manifest is fetched (data.endpoint), as the loader would.
  // Without data.path, a mixture of datasets: the first one's (the loader checks they share one).
  const std::string vocab_from = d.path.empty() ? first_mixture_dataset(d.mixture) : d.path;
  if (dataset && !vocab_from.empty() && !e.is_set("model.vocab_size")) {
    ObjectStoreOptions store;
    store.s3_endpoint = store.gcs_endpoint = d.endpoint;
    DatasetManifest m = load_dataset_manifest(vocab_from, store);
    if (m.vocab_size > 0 && m.vocab_size != cfg.model.vocab_size) {
      e.note(fmt::format("model.vocab_size = {} (the tokenizer of {}; the preset had {})", m.vocab_size, vocab_from,
                         cfg.model.vocab_size));
      cfg.model.vocab_size = m.vocab_size;
    }
  }
}

void metrics_effects(Config& cfg, Effects& e) {
  MetricsConfig& m = cfg.metrics;
  if (!m.enabled && !e.is_set("metrics.enabled")) {
    for (const char* key : {"metrics.port", "metrics.bind_address"}) {
      if (e.is_set(key)) {
        m.enabled = true;
        e.note(fmt::format("metrics.enabled = true (implied by {})", key));
        break;
      }
    }
  }
  const std::string off = "metrics.enabled = false (no /metrics endpoint)";
  for (const char* key : {"metrics.port", "metrics.bind_address", "metrics.port_fallback",
                          "metrics.port_fallback_tries", "metrics.run_name"})
    e.gated(key, m.enabled, off);
  e.gated("metrics.port_fallback_tries", m.port_fallback, "metrics.port_fallback = false");
  e.gated("metrics.gpu_temp_alert_c", m.gpu_interval_s > 0, "metrics.gpu_interval_s = 0 (no GPU sampling)");
}

void ckpt_effects(Config& cfg, Effects& e) {
  const CkptConfig& c = cfg.ckpt;
  const bool saves = c.interval > 0, loads = !c.resume.empty();
  const std::string never = "ckpt.interval = 0 (no checkpoints are saved)";
  e.gated("ckpt.keep", saves, never);
  e.gated("ckpt.async", saves, never);
  e.gated("ckpt.chunk_mb", saves && c.encrypt,
          saves ? "ckpt.encrypt = false (chunks are the unit of encryption)" : never);
  e.gated("ckpt.part_mb", saves && (c.dir.rfind("s3://", 0) == 0 || c.dir.rfind("gs://", 0) == 0),
          saves ? "ckpt.dir is not in a bucket (parts and chunks are the units of S3 and GCS uploads)" : never);
  e.gated("ckpt.encrypt", saves || loads, never + " and ckpt.resume is empty");
  e.gated("ckpt.dir", saves || loads, never + " and ckpt.resume is empty");
  e.gated("ckpt.key_file", c.encrypt || loads, "ckpt.encrypt = false and ckpt.resume is empty");
}

void train_effects(Config& cfg, Effects& e) {
  const TrainConfig& t = cfg.train;
  e.gated("train.eval_batches", t.eval_interval > 0, "train.eval_interval = 0 (no validation)");
  // Validation also runs after the last step, so an interval beyond it only turns that one on.
  e.gated("train.eval_interval", t.eval_interval <= t.steps,
          fmt::format("train.eval_interval = {} is beyond train.steps = {} (validation runs only after the last step)",
                      t.eval_interval, t.steps));
  const std::string not_fp16 = fmt::format("train.precision is \"{}\", not \"fp16\"", precision_label(t.precision));
  e.gated("optim.loss_scale_init", t.precision == Precision::kF16, not_fp16);
  e.gated("optim.loss_scale_window", t.precision == Precision::kF16, not_fp16);
  e.gated("optim.decay_steps", cfg.optim.min_lr_ratio < 1, "optim.min_lr_ratio = 1 (no decay)");
}

void parallel_effects(Config& cfg, Effects& e) {
  const ParallelConfig& p = cfg.parallel;
  // Gradients are reduced (and ZeRO shards) over dp x cp: the cp ranks of a replica share its weights.
  const bool reduced = p.dp * p.cp > 1;
  const std::string dp1 = "parallel.dp = 1 (no data parallelism)";
  e.gated("parallel.zero", reduced, dp1);
  e.gated("parallel.grad_compression", reduced, dp1);
  e.gated("parallel.bucket_mb", reduced && p.zero == 0,
          reduced ? fmt::format("parallel.zero = {} (buckets are ZeRO 0's all-reduce)", p.zero) : dp1);
  const bool powersgd = reduced && p.grad_compression == GradCompression::kPowerSGD;
  e.gated("parallel.powersgd_rank", powersgd, reduced ? "parallel.grad_compression is not \"powersgd\"" : dp1);
  e.gated("parallel.powersgd_warmup_steps", powersgd, reduced ? "parallel.grad_compression is not \"powersgd\"" : dp1);
  e.gated("parallel.cp_attention", p.cp > 1, "parallel.cp = 1 (no context parallelism)");
  e.gated("parallel.sequence_parallel", p.tp > 1 || !p.sequence_parallel, "parallel.tp = 1 (no tensor parallelism)");
  e.gated("parallel.pp_schedule", p.pp > 1, "parallel.pp = 1 (no pipeline)");
  e.gated("parallel.collective_timeout_s", p.world_size() > 1, "one rank (no collectives to wait for)");
  e.gated("fault.collective_timeout_s", p.world_size() > 1, "one rank (no collectives to wait for)");
  for (const char* key : {"metrics.straggler_factor", "metrics.straggler_window", "metrics.straggler_min_steps"})
    e.gated(key, p.world_size() > 1, "one rank (no peers to compare its compute time with)");
}

void fault_effects(Config& cfg, Effects& e) {
  const FaultConfig& f = cfg.fault;
  const std::string off = "fault.spike_zscore = 0 (spike detection off)";
  for (const char* key : {"fault.spike_window", "fault.spike_min_history", "fault.spike_rollback_after"})
    e.gated(key, f.spike_zscore > 0, off);
  e.gated("fault.spike_rollback_after", cfg.ckpt.interval > 0 || f.spike_zscore <= 0,
          "ckpt.interval = 0 (no checkpoint to roll back to: spikes are only skipped)");
}

}  // namespace

void apply_key_effects(Config& cfg, const std::set<std::string>& set_keys) {
  Effects e(cfg, set_keys);
  data_effects(cfg, e);
  metrics_effects(cfg, e);
  ckpt_effects(cfg, e);
  train_effects(cfg, e);
  parallel_effects(cfg, e);
  fault_effects(cfg, e);
}

}  // namespace ft
