// fluxtrain data verify|pull — check a dataset directory; download from S3-compatible storage.
//
//   fluxtrain data verify data/manpages
//   fluxtrain data pull s3://bucket/datasets/manpages data/manpages --s3-endpoint http://127.0.0.1:9000
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli/command.h"
#include "data/s3.h"
#include "data/verify.h"
#include "util/error.h"
#include "util/strings.h"

namespace {

int run_data(int argc, char** argv) {
  CLI::App app{"Dataset tools: verify checksums, pull from S3"};
  app.require_subcommand(1);
  std::string dir, url;
  ft::S3Options s3;
  auto* verify = app.add_subcommand("verify", "check the manifest, tokenizer hash and every shard's checksum");
  verify->add_option("DIR", dir, "dataset directory")->required();
  auto* pull = app.add_subcommand("pull", "download s3://bucket/prefix into DIR (resumes partial files)");
  pull->add_option("URL", url, "s3://bucket/prefix")->required();
  pull->add_option("DIR", dir, "local directory")->required();
  pull->add_option("--s3-endpoint", s3.endpoint, "S3-compatible endpoint URL; default AWS_ENDPOINT_URL or AWS");
  pull->add_option("--retries", s3.retries, "extra attempts per request after network errors or HTTP 5xx")
      ->capture_default_str();
  pull->add_option("--list-page-size", s3.list_page_size, "objects per listing page (default: the server's, 1000)");
  FT_PARSE(app, argc, argv);

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
  ft::PullReport r = ft::s3_pull(url, dir, s3);
  std::printf("pull: %s -> %s: %llu objects fetched (%s, %s resumed from partial files), %llu already present\n",
              url.c_str(), dir.c_str(), static_cast<unsigned long long>(r.objects),
              ft::human_bytes(static_cast<double>(r.bytes)).c_str(),
              ft::human_bytes(static_cast<double>(r.resumed_bytes)).c_str(), static_cast<unsigned long long>(r.skipped));
  return 0;
}

ft::cli::Register reg("data", "dataset tools: verify a dataset, pull one from S3", run_data);

}  // namespace
