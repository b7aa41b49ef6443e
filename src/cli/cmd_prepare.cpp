// fluxtrain prepare — text (files, directories, globs, s3:// and gs:// prefixes; default: the
// built-in Debian man-page corpus) → a tokenized, sharded dataset directory for data.path.
// Under mpirun (or --nproc N) the ranks share the encoding and shard writing; the dataset is the
// same, byte for byte, for any number of ranks (data/prepare/prepare.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cli/command.h"
#include "data/prepare/prepare.h"
#include "data/url_scheme.h"
#include "parallel/comm/mpi_comm.h"
#include "parallel/ranks.h"
#include "util/error.h"
#include "util/log.h"

namespace {

int run_prepare(int argc, char** argv) {
  CLI::App app{"Prepare a dataset: normalise, de-duplicate, train the tokenizer, tokenize and shard"};
  ft::PrepareOptions o;
  int nproc = 0;
  app.add_option("--input", o.inputs,
                 "file, directory, glob, s3://bucket/prefix or gs://bucket/prefix (repeatable); default: Debian's "
                 "English and Russian manual pages (manpages, manpages-dev, manpages-ru)");
  app.add_option("--out", o.out_dir, "dataset directory to create")->required();
  app.add_option("--shards", o.shards, "training shards (nearly equal token counts; at least one per language)")
      ->capture_default_str();
  app.add_option("--val-shards", o.val_shards, "validation shards (at least one per language)")->capture_default_str();
  app.add_option("--val-fraction", o.val_fraction, "fraction of documents held out for validation")
      ->capture_default_str();
  app.add_option("--vocab-size", o.vocab_size, "tokenizer vocabulary when training one")->capture_default_str();
  app.add_option("--tokenizer", o.tokenizer, "use this SentencePiece model instead of training one");
  app.add_option("--seed", o.seed, "seed of the validation split and tokenizer sampling")->capture_default_str();
  app.add_option("--s3-endpoint", o.store.s3_endpoint, "S3-compatible endpoint URL (MinIO); default AWS_ENDPOINT_URL");
  app.add_option("--gcs-endpoint", o.store.gcs_endpoint,
                 "Google Cloud Storage endpoint; default STORAGE_EMULATOR_HOST or https://storage.googleapis.com");
  app.add_flag("--force", o.force, "replace an existing dataset at --out");
  app.add_option("--near-dup-threshold", o.near_dup_threshold,
                 "drop documents whose 5-word shingles overlap an earlier document's by at least this Jaccard "
                 "similarity (MinHash-LSH); 0 = keep near-duplicates")
      ->capture_default_str();
  app.add_option("--nproc", nproc, "start N ranks on this machine with mpirun (they share encoding and shards)")
      ->check(ft::cli::at_least(1));
  FT_PARSE(app, argc, argv);
  for (const std::string& in : o.inputs) ft::check_url_scheme(in, "--input");
  ft::check_url_scheme(o.out_dir, "--out");

  if (nproc > 0) {
    std::vector<std::string> args = {std::filesystem::canonical("/proc/self/exe").string()};
    for (int i = 0; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--nproc") {
        ++i;
        continue;
      }
      if (a.rfind("--nproc=", 0) == 0) continue;
      args.push_back(a);
    }
    return ft::exec_under_mpirun(nproc, args);
  }
  if (!ft::MpiRuntime::launched_by_mpi()) {
    ft::PrepareReport r = ft::prepare_dataset(o);
    std::fputs(ft::format_report(r).c_str(), stdout);
    return 0;
  }
  // Under mpirun: one data-parallel group over every rank; waits are long (rank 0 trains the
  // tokenizer while the others wait), so the collective timeout is a day.
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  ft::ParallelConfig p;
  p.dp = size ? std::max(1, std::atoi(size)) : 1;
  p.collective_timeout_s = 86400;
  const std::string comm_dir = o.out_dir + ".prepare-comm";
  ft::Ranks ranks(p, comm_dir);
  ft::Communicator& world = ranks.mesh().world();
  o.rank = ranks.mesh().world_rank();
  o.world = ranks.mesh().world_size();
  o.sync = [&](std::vector<int64_t>& v) {
    double status = static_cast<double>(v[0]);
    world.all_reduce(&status, 1, ft::ReduceOp::kMax);
    world.broadcast(v.data(), static_cast<int64_t>(v.size() * sizeof(int64_t)), 0);
    v[0] = static_cast<int64_t>(status);
  };
  try {
    ft::PrepareReport r = ft::prepare_dataset(o);
    world.barrier();
    if (o.rank == 0) {
      std::error_code ec;
      std::filesystem::remove_all(comm_dir, ec);
      std::fputs(ft::format_report(r).c_str(), stdout);
    }
  } catch (const ft::Error& e) {
    // Rank 0 has the reason; the others only learnt that some rank failed.
    if (o.rank == 0 || std::string(e.what()).find("another rank failed") == std::string::npos)
      ft::log_error("{}{}{}", e.what(), e.hint().empty() ? "" : "\nhint: ", e.hint());
    std::error_code ec;
    if (o.rank == 0) std::filesystem::remove_all(comm_dir, ec);
    ranks.abort(2);
  }
  return 0;
}

ft::cli::Register register_prepare("prepare",
                                   "turn text into a tokenized, sharded dataset (data.path; --nproc N ranks)",
                                   run_prepare);

}  // namespace
