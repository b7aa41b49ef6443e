// `fluxtrain prepare`: text → normalised, de-duplicated documents → SentencePiece tokens →
// a dataset directory of shards and a manifest (docs/formats.md, "Dataset").
//
// Steps, each streaming with bounded memory through spill files in a staging directory
// "<out>.tmp-<pid>" next to <out>:
//   1. extract: inputs (files, directories, globs, s3:// and gs:// prefixes; default: the built-in
//      man-page corpus) → documents, normalised (text_normalize.h), exact duplicates dropped,
//      near-duplicates dropped (near_dedup.h, MinHash-LSH; counted per language),
//      split into train/validation by a hash of the text (deterministic, order-independent);
//   2. tokenizer: trained on the train split (or --tokenizer MODEL copied in);
//   3. encode: documents in parallel (OpenMP), each followed by EOS;
//   4. shard: N shards per split of nearly equal token counts, cut at document boundaries;
//   5. manifest.json written last, then the staging directory is renamed to <out>.
// An interrupted run leaves only the staging directory (removed by the next run), never a
// directory with a manifest.
//
//   PrepareOptions o;  o.out_dir = "data/manpages";
//   PrepareReport r = prepare_dataset(o);
//   std::fputs(format_report(r).c_str(), stdout);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/dataset_manifest.h"
#include "data/objstore/object_store.h"

namespace ft {

struct PrepareOptions {
  std::vector<std::string> inputs;  // empty = the built-in corpus (default_corpus_inputs())
  std::string out_dir;
  int64_t shards = 8;  // training shards
  int64_t val_shards = 1;
  double val_fraction = 0.05;  // of documents, chosen by hash
  int64_t vocab_size = 8192;
  std::string tokenizer;  // an existing SentencePiece model; empty = train one
  uint64_t seed = 1234;
  bool force = false;               // replace an existing dataset at out_dir (nothing else)
  double near_dup_threshold = 0.8;  // MinHash-LSH Jaccard threshold of near-duplicate removal; 0 = off
  // Several ranks (mpirun -np N fluxtrain prepare, or --nproc N): rank 0 extracts, de-duplicates
  // and trains the tokenizer; every rank then encodes a disjoint part of each (split, language)
  // and writes the shards k with k % world == rank; rank 0 writes the manifest last. The output
  // is the same, byte for byte, for any number of ranks. `sync` is a collective over the ranks:
  // values[0] (a status, 0 = ok) becomes the maximum over the ranks, values[1..] rank 0's.
  int rank = 0, world = 1;
  std::function<void(std::vector<int64_t>& values)> sync;
  ObjectStoreOptions store;  // for s3:// and gs:// inputs
};

struct PrepareReport {
  DatasetManifest manifest;
  std::string out_dir;
  uint64_t input_files = 0, skipped_files = 0, input_bytes = 0, failed_files = 0;
  std::string skipped_summary;  // "2 other files skipped: in/LICENSE, in/README"
  uint64_t binary_files = 0;    // named .txt etc. but mostly invalid UTF-8 or NUL bytes: skipped
  uint64_t raw_documents = 0;   // before dropping duplicates and empty documents
  bool trained_tokenizer = false;
  double seconds_extract = 0, seconds_tokenizer = 0, seconds_encode = 0, seconds_shard = 0, seconds_total = 0;
  int world = 1;  // ranks that encoded and wrote shards
};

PrepareReport prepare_dataset(const PrepareOptions& opt);
std::string format_report(const PrepareReport& r);

}  // namespace ft
