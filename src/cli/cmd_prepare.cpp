// fluxtrain prepare — text (files, directories, globs, s3:// and gs:// prefixes; default: the built-in
// Debian man-page corpus) → a tokenized, sharded dataset directory for data.path.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli/command.h"
#include "data/prepare.h"

namespace {

int run_prepare(int argc, char** argv) {
  CLI::App app{"Prepare a dataset: normalise, de-duplicate, train the tokenizer, tokenize and shard"};
  ft::PrepareOptions o;
  app.add_option("--input", o.inputs,
                 "file, directory, glob, s3://bucket/prefix or gs://bucket/prefix (repeatable); default: Debian's English and "
                 "Russian manual pages (manpages, manpages-dev, manpages-ru)");
  app.add_option("--out", o.out_dir, "dataset directory to create")->required();
  app.add_option("--shards", o.shards, "training shards (nearly equal token counts)")->capture_default_str();
  app.add_option("--val-shards", o.val_shards, "validation shards")->capture_default_str();
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
  CLI11_PARSE(app, argc, argv);
  ft::PrepareReport r = ft::prepare_dataset(o);
  std::fputs(ft::format_report(r).c_str(), stdout);
  return 0;
}

ft::cli::Register reg("prepare", "turn text into a tokenized, sharded dataset (data.path)", run_prepare);

}  // namespace
