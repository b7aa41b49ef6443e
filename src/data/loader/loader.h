// The trainer's view of data: a DataLoader hands this rank its share of each global batch.
//
// Sample addressing: the global batch of step k holds global samples [k·B, (k+1)·B) (B =
// train.batch_size); data-parallel rank r of R takes the contiguous slice
// [k·B + r·B/R, k·B + (r+1)·B/R). Each sample is seq_len + 1 tokens: inputs are tokens
// [0, seq_len), targets tokens [1, seq_len]. A loader's whole state is LoaderState, so resume
// (also under another R) continues the same global order.
//
//   auto loader = make_loader(cfg.data, cfg.train, cfg.model.vocab_size, rank, world, Split::kTrain);
//   Batch b = loader->next();                       // this rank's sequences of the next step
//
// Sources (data.source): "synthetic", "tokens" (a flat token file), "dataset" (a directory made
// by `fluxtrain prepare`; see data/loader/dataset_loader.h and docs/formats.md). For a validation loader
// pass Split::kValidation; it reads the dataset's validation split in a fixed order, so
// restore(LoaderState{}) before each evaluation gives the same validation batches every time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/data_config.h"
#include "data/loader/sample_chunks.h"

namespace ft {

enum class Split : uint8_t { kTrain = 0, kValidation = 1 };

// What a loader takes from the run's settings (train.batch_size, train.seq_len, train.seed,
// train.run_dir — TrainConfig::batch_spec()); the data layer does not include train/.
struct BatchSpec {
  int64_t batch_size = 0;  // global batch in sequences
  int64_t seq_len = 0;
  uint64_t seed = 0;
  std::string run_dir;  // the default shard cache lives under it
  // Context parallelism: the chunks of each sample this rank trains on (data/loader/sample_chunks.h);
  // the loader reads only those tokens and their targets. Empty: every token.
  SampleChunks chunks{};
};

struct Batch {
  int64_t batch = 0;  // sequences
  int64_t seq_len = 0;
  std::vector<int32_t> tokens;  // (batch, seq_len + 1); only read_ranges(chunks) filled, the rest 0
  SampleChunks chunks{};        // empty: whole samples
  const int32_t* sequence(int64_t i) const { return tokens.data() + i * (seq_len + 1); }
};

struct LoaderState {
  int64_t next_sample = 0;  // global index of the first sample of the next global batch
  int64_t epoch = 0;
  // data.mixture only: JSON of the weights in force and the sample each set took effect from
  // ([{"from_sample": 0, "weights": {"ru": 0.5, "en": 0.5}}, ...]); "" otherwise.
  std::string mixture{};
};

class DataLoader {
 public:
  virtual ~DataLoader() = default;
  // This rank's sequences of the next global batch.
  virtual Batch next() = 0;
  virtual LoaderState state() const = 0;
  virtual void restore(const LoaderState& s) = 0;
  // Characters and bytes of text per token (for bits per character); 0 when unknown.
  virtual double chars_per_token() const { return 0; }
  virtual double bytes_per_token() const { return 0; }
  // XXH3-64 of the tokenizer model the tokens came from (0 = no tokenizer, e.g. synthetic).
  // The trainer stores it in checkpoints and refuses to resume on a different one
  // (check_tokenizer_hash in data/dataset_manifest.h).
  virtual uint64_t tokenizer_hash() const { return 0; }
  // Seconds the last next() waited for its batch (0 when it was already prefetched).
  virtual double last_wait_s() const { return 0; }
  // Bytes this loader has read from the dataset's files so far: whole shards when it verified
  // them, then the tokens it copied — under context parallelism only its chunks' (0 for sources
  // without files). Across hosts it shows that each
  // rank reads only its own range (metrics.jsonl: per_rank.data_read_bytes).
  virtual int64_t bytes_read() const { return 0; }
  // Shard bytes this loader fetched from object storage so far (data.path = s3:// or gs://).
  virtual uint64_t fetched_bytes() const { return 0; }
  virtual std::string describe() const = 0;
};

// Validation metrics from a mean loss in nats per token (point 5 of the data issue):
//   val_bpc = bits_per_char(val_loss, val_loader->chars_per_token())   (0 when unknown)
inline double bits_per_token(double nats_per_token) {
  return nats_per_token / 0.6931471805599453;
}
inline double bits_per_char(double nats_per_token, double chars_per_token) {
  return chars_per_token > 0 ? bits_per_token(nats_per_token) / chars_per_token : 0;
}

// dp_rank/dp_size: this rank's place among data-parallel replicas. With data.mixture the
// training loader is a MixtureLoader and the validation loader is nullptr (validation is per
// source: make_validation_sources).
std::unique_ptr<DataLoader> make_loader(const DataConfig& data, const BatchSpec& train, int64_t vocab_size,
                                        int64_t dp_rank, int64_t dp_size, Split split);

// Validation reported per source (val_loss_<name>, val_bpc_<name>): each data.mixture source's
// validation split; without a mixture, each language of a dataset whose validation split holds
// several (the built-in corpus: "en", "ru"). weight: the source's mixture weight (the overall
// val_loss of a mixture is their weighted mean); 0 without a mixture (the overall validation
// is then the whole split, as before). A source whose validation split is smaller than one
// global batch is left out with a warning.
struct ValidationSource {
  std::string name;
  double weight = 0;
  std::unique_ptr<DataLoader> loader;
};
std::vector<ValidationSource> make_validation_sources(const DataConfig& data, const BatchSpec& train,
                                                      int64_t vocab_size, int64_t dp_rank, int64_t dp_size);

}  // namespace ft
