// fluxtrain data verify|pull — check a dataset directory; download from S3-compatible storage or GCS.
//
//   fluxtrain data verify data/manpages
//   fluxtrain data pull s3://bucket/datasets/manpages data/manpages --s3-endpoint http://127.0.0.1:9000
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli/command.h"
#include "data/object_store.h"
#include "data/verify.h"
#include "util/error.h"
#include "util/strings.h"

namespace {

int run_data(int argc, char** argv) {
  CLI::App app{"Dataset tools: verify checksums, pull from S3 or GCS"};
  app.require_subcommand(1);
  std::string dir, url;
  ft::ObjectStoreOptions store;
  auto* verify = app.add_subcommand("verify", "check the manifest, tokenizer hash and every shard's checksum");
  verify->add_option("DIR", dir, "dataset directory")->required();
  auto* pull = app.add_subcommand("pull", "download s3://bucket/prefix or gs://bucket/prefix into DIR (resumes partial files)");
  pull->add_option("URL", url, "s3://bucket/prefix or gs://bucket/prefix")->required();
  pull->add_option("DIR", dir, "local directory")->required();
  pull->add_option("--s3-endpoint", store.s3_endpoint, "S3-compatible endpoint URL; default AWS_ENDPOINT_URL or AWS");
  pull->add_option("--gcs-endpoint", store.gcs_endpoint,
                   "Google Cloud Storage endpoint; default STORAGE_EMULATOR_HOST or https://storage.googleapis.com");
  pull->add_option("--retries", store.retries, "extra attempts per request after network errors or HTTP 5xx")
      ->capture_default_str();
  pull->add_option("--list-page-size", store.list_page_size, "objects per listing page (default: the server's, 1000)");
  CLI11_PARSE(app, argc, argv);

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
  ft::PullReport r = ft::object_pull(url, dir, store);
  std::printf("pull: %s -> %s: %llu objects fetched (%s, %s resumed from partial files), %llu already present\n",
              url.c_str(), dir.c_str(), static_cast<unsigned long long>(r.objects),
              ft::human_bytes(static_cast<double>(r.bytes)).c_str(),
              ft::human_bytes(static_cast<double>(r.resumed_bytes)).c_str(), static_cast<unsigned long long>(r.skipped));
  return 0;
}

ft::cli::Register reg("data", "dataset tools: verify, inspect, pull from S3 or GCS", run_data);

}  // namespace
