// fluxtrain data verify|pull — check a dataset directory; download from S3-compatible storage or GCS.
//
//   fluxtrain data verify data/manpages
//   fluxtrain data inspect --config configs/demo.toml --set data.mixture=\"ru=0.5,en=0.5\"
//   fluxtrain data pull s3://bucket/datasets/manpages data/manpages --s3-endpoint http://127.0.0.1:9000
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/command.h"
#include "config/config.h"
#include "data/dataset_manifest.h"
#include "data/loader/mixture.h"
#include "data/loader/shard_cache.h"
#include "data/objstore/object_store.h"
#include "data/prepare/verify.h"
#include "data/url_scheme.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/output_path.h"
#include "util/strings.h"

namespace {

namespace fs = std::filesystem;

// Left in DIR by `data pull`: the URL it pulls from, so that a second pull of the same URL resumes
// (present files skipped, .part files continued) instead of being refused as an existing output.
constexpr const char* kPullMarker = ft::kPullMarkerFile;

// Where `data pull URL DIR` may write: the output rules of `prepare --out` (util/output_path.h). A new
// or empty DIR, or one an earlier pull of the same URL began; with --force a dataset, which is
// emptied first (its manifest, tokenizer and shards would otherwise mix with the pulled ones).
// Never a directory of other files.
void claim_pull_dir(const std::string& url, const std::string& dir, bool force) {
  const ft::ObjectUrl u = ft::ObjectUrl::parse(url);
  const std::string source = u.scheme + "://" + u.bucket + "/" + u.dir_prefix();  // s3://b/p and s3://b/p/ alike
  const std::string marker = (fs::path(dir) / kPullMarker).string();
  std::error_code ec;
  const bool same_pull = fs::is_regular_file(marker, ec) && ft::trim(ft::read_file(marker)) == source;
  if (!same_pull) {
    ft::OutputRule rule;
    rule.flag = "DIR";
    rule.kind = "dataset";
    rule.force = force;
    rule.is_ours = [](const std::string& d) { return ft::is_dataset_dir(d); };
    const bool replacing = ft::check_output_path(dir, rule);
    if (replacing) {
      ft::check_replaceable_dataset(dir, "DIR");
      for (const auto& e : fs::directory_iterator(dir)) fs::remove_all(e.path());
    }
  }
  fs::create_directories(dir, ec);
  ft::write_file_atomic(marker, source + "\n");
}

// `data inspect`: what the configured run will read — per source its weight, share of every
// batch_size x 100 samples, sequences, and over train.steps the tokens it contributes and the
// epochs over it.
int inspect(const std::string& config, const std::vector<std::string>& sets) {
  ft::Config cfg = ft::load_config(config, sets);
  const ft::DataConfig& d = cfg.data;
  if (d.source != ft::DataSource::kDataset) {
    throw ft::Error(fmt::format("{}: data.source is not \"dataset\": nothing to inspect", config),
                    "data inspect describes prepared datasets and mixtures");
  }
  ft::ObjectStoreOptions store;
  store.s3_endpoint = store.gcs_endpoint = d.endpoint;
  std::vector<ft::MixtureSource> sources = d.mixture.empty() ? std::vector<ft::MixtureSource>{{"all", d.path, "", 1.0}}
                                                             : ft::parse_mixture(d.mixture, d.path);
  const int64_t B = cfg.train.batch_size, T = cfg.train.seq_len, steps = cfg.train.steps;
  std::vector<std::string> names;
  std::vector<const ft::SequencePlan*> none;
  ft::MixtureSegment seg;
  for (auto& s : sources) names.push_back(s.name), none.push_back(nullptr), seg.weights[s.name] = s.weight;
  ft::MixturePlan plan(names, none, B, cfg.train.seed, {seg});
  std::printf(
      "data inspect: %s: %lld steps x %lld sequences x %lld tokens = %s tokens; mixture period %lld samples "
      "(train.batch_size x 100)\n",
      config.c_str(), static_cast<long long>(steps), static_cast<long long>(B), static_cast<long long>(T),
      fmt::format("{:L}", steps * B * T).c_str(), static_cast<long long>(plan.period()));
  std::printf("  %-12s %-8s %7s %13s %10s %14s %10s %14s %8s\n", "source", "language", "weight", "share", "sequences",
              "train tokens", "samples", "tokens seen", "epochs");
  for (size_t i = 0; i < sources.size(); ++i) {
    const ft::MixtureSource& s = sources[i];
    ft::DatasetManifest m = ft::load_dataset_manifest(s.path, store);
    uint64_t seqs = 0, tokens = 0;
    bool any = false;
    for (const ft::ShardInfo& sh : m.train.shards) {
      if (!s.language.empty() && sh.language != s.language) continue;
      any = true;
      tokens += sh.tokens;
      seqs += sh.tokens > static_cast<uint64_t>(T) ? (sh.tokens - 1) / static_cast<uint64_t>(T) : 0;
    }
    if (!any) {
      throw ft::Error(fmt::format("{}: no training shards of language \"{}\"", s.path, s.language),
                      "the languages of a dataset are listed in its manifest.json (stats.languages)");
    }
    const int64_t samples = plan.samples_of(static_cast<int>(i), steps * B);
    const int64_t quota = plan.quota(0, static_cast<int>(i));
    std::printf(
        "  %-12s %-8s %7.3f %13s %10llu %14llu %10lld %14lld %8.3f\n", s.name.c_str(),
        s.language.empty() ? "all" : s.language.c_str(), s.weight, fmt::format("{}/{}", quota, plan.period()).c_str(),
        static_cast<unsigned long long>(seqs), static_cast<unsigned long long>(tokens), static_cast<long long>(samples),
        static_cast<long long>(samples * T), seqs ? static_cast<double>(samples) / static_cast<double>(seqs) : 0.0);
    if (seqs < static_cast<uint64_t>(B)) {
      std::printf("  warning: %s holds %llu sequences, fewer than train.batch_size = %lld: training will refuse it\n",
                  s.name.c_str(), static_cast<unsigned long long>(seqs), static_cast<long long>(B));
    }
  }
  return 0;
}

int run_data(int argc, char** argv) {
  CLI::App app{"Dataset tools: verify checksums, pull from S3 or GCS"};
  app.require_subcommand(1);
  std::string dir, url;
  ft::ObjectStoreOptions store;
  auto* verify = app.add_subcommand("verify", "check the manifest, tokenizer hash and every shard's checksum");
  verify->add_option("DIR", dir, "dataset directory")->required();
  auto* pull =
      app.add_subcommand("pull", "download s3://bucket/prefix or gs://bucket/prefix into DIR (resumes partial files)");
  pull->add_option("URL", url, "s3://bucket/prefix or gs://bucket/prefix")->required();
  pull->add_option("DIR", dir, "local directory")->required();
  pull->add_option("--s3-endpoint", store.s3_endpoint, "S3-compatible endpoint URL; default AWS_ENDPOINT_URL or AWS");
  pull->add_option("--gcs-endpoint", store.gcs_endpoint,
                   "Google Cloud Storage endpoint; default STORAGE_EMULATOR_HOST or https://storage.googleapis.com");
  pull->add_option("--retries", store.retries, "extra attempts per request after network errors or HTTP 5xx")
      ->capture_default_str();
  pull->add_option("--list-page-size", store.list_page_size, "objects per listing page (default: the server's, 1000)");
  bool force = false;
  pull->add_flag("--force", force, "replace a dataset already in DIR (never a directory of other files)");
  std::string config;
  std::vector<std::string> sets;
  auto* insp = app.add_subcommand("inspect", "what a config's run reads: tokens and epochs per data source");
  insp->add_option("--config", config, "TOML config")->required();
  insp->add_option("--set", sets, "override a config key, KEY=VALUE (repeatable)");
  FT_PARSE(app, argc, argv);

  if (*insp) return inspect(config, sets);
  ft::check_url_scheme(dir, "DIR");
  if (*verify) {
    ft::VerifyReport r = ft::verify_dataset(dir);
    for (const std::string& p : r.problems) std::fprintf(stderr, "BAD %s\n", p.c_str());
    std::printf("verify: %s: %llu shards, %llu tokens, %s checked in %.2fs (%.1f GB/s): %s\n", dir.c_str(),
                static_cast<unsigned long long>(r.shards), static_cast<unsigned long long>(r.tokens),
                ft::human_bytes(static_cast<double>(r.bytes)).c_str(), r.seconds,
                r.seconds > 0 ? static_cast<double>(r.bytes) / r.seconds / 1e9 : 0.0,
                r.problems.empty() ? "OK" : fmt::format("{} problems", r.problems.size()).c_str());
    return r.problems.empty() ? 0 : 1;
  }
  claim_pull_dir(url, dir, force);
  ft::PullReport r = ft::object_pull(url, dir, store);
  std::printf(
      "pull: %s -> %s: %llu objects fetched (%s, %s resumed from partial files), %llu already present\n", url.c_str(),
      dir.c_str(), static_cast<unsigned long long>(r.objects), ft::human_bytes(static_cast<double>(r.bytes)).c_str(),
      ft::human_bytes(static_cast<double>(r.resumed_bytes)).c_str(), static_cast<unsigned long long>(r.skipped));
  return 0;
}

ft::cli::Register register_data("data", "dataset tools: verify, inspect, pull from S3 or GCS", run_data);

}  // namespace
