#include "data/tokenizer.h"

#include <omp.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <unordered_map>

#include "util/checksum.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"

namespace sentencepiece {
void SetRandomGeneratorSeed(unsigned int seed);  // exported by libsentencepiece, not in its headers
namespace logging {
void SetMinLogLevel(int v);
}
}  // namespace sentencepiece

namespace ft {
namespace {

// SentencePiece skips every sentence longer than max_sentence_length bytes, and fails with an
// internal error when that leaves none: text written without line breaks (one paragraph, a minified
// file) would not train at all. Longer lines are cut into pieces of at most that many bytes, at the
// last space of the piece's second half, else at a UTF-8 character boundary.
constexpr size_t kMaxSentenceBytes = 16384;

size_t cut_point(const std::string& s, size_t from) {
  const size_t limit = from + kMaxSentenceBytes;
  const size_t space = s.rfind(' ', limit - 1);
  if (space != std::string::npos && space >= from + kMaxSentenceBytes / 2) return space + 1;
  size_t cut = limit;
  while (cut > from + 1 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // inside a character
  return cut;
}

class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const LineSource& next) : next_(next) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    if (pos_ >= line_.size()) {
      done_ = !next_(&line_);
      pos_ = 0;
      if (done_) return;
      if (line_.size() > kMaxSentenceBytes) ++long_lines_;
    }
    const size_t end = line_.size() - pos_ > kMaxSentenceBytes ? cut_point(line_, pos_) : line_.size();
    value_.assign(line_, pos_, end - pos_);
    pos_ = end;
  }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return {}; }
  uint64_t long_lines() const { return long_lines_; }

 private:
  const LineSource& next_;
  std::string line_, value_;
  size_t pos_ = 0;
  bool done_ = false;
  uint64_t long_lines_ = 0;
};

}  // namespace

std::string train_tokenizer(const TokenizerTrainOptions& opt, const LineSource& next) {
  if (opt.vocab_size < 300 || opt.vocab_size > (int64_t{1} << 24)) {
    throw Error(fmt::format("vocabulary size {} is out of range", opt.vocab_size),
                "use 300 .. 16M (byte fallback alone needs 256 ids + 3 special tokens)");
  }
  sentencepiece::logging::SetMinLogLevel(1);  // keep SentencePiece's INFO lines off stderr
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(opt.seed));
  if (opt.threads < 1) throw Error(fmt::format("tokenizer training threads = {} must be >= 1", opt.threads));
  const int threads = opt.threads;
  std::unordered_map<std::string, std::string> kw = {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(opt.vocab_size)},
      {"character_coverage", fmt::format("{}", opt.character_coverage)},
      {"byte_fallback", "true"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"split_digits", "true"},
      {"max_sentence_length", std::to_string(kMaxSentenceBytes)},
      {"input_sentence_size", std::to_string(opt.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(threads)},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"user_defined_symbols", "\n"},
      {"hard_vocab_limit", "false"},
      {"model_prefix", ""},
  };
  LineIterator it(next);
  std::string model;
  auto st = sentencepiece::SentencePieceTrainer::Train(kw, &it, &model);
  if (it.long_lines() > 0) {
    log_info(
        "tokenizer: {} lines longer than {} bytes (SentencePiece's sentence limit) were cut into pieces to "
        "train on",
        it.long_lines(), kMaxSentenceBytes);
  }
  if (!st.ok() && st.ToString().find("sentences_.empty()") != std::string::npos) {
    throw Error("tokenizer training failed: the text has no line to train on",
                "give --input files with text (.txt, .md, .jsonl or manual pages)");
  }
  if (!st.ok()) {
    throw Error(fmt::format("tokenizer training failed: {}", st.ToString()),
                "the vocabulary must exceed the text's distinct characters + 259 byte/special pieces, and a "
                "small text cannot fill a large one: adjust --vocab-size");
  }
  return model;
}

Tokenizer Tokenizer::from_bytes(const std::string& model, const std::string& name) {
  Tokenizer t;
  t.sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto st = t.sp_->LoadFromSerializedProto(model);
  if (!st.ok()) {
    throw Error(fmt::format("{}: not a SentencePiece model: {}", name, st.ToString()),
                "pass a model written by `fluxtrain tokenizer train` or SentencePiece's spm_train");
  }
  t.bytes_ = model;
  t.name_ = name;
  t.hash_ = xxh3_64(model.data(), model.size());
  if (t.sp_->eos_id() < 0) {
    throw Error(fmt::format("{}: the tokenizer has no end-of-sequence token", name),
                "train it with an eos id (fluxtrain tokenizer train does)");
  }
  return t;
}

Tokenizer Tokenizer::load(const std::string& path) {
  return from_bytes(read_file(path), path);
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  auto st = sp_->Encode(absl::string_view(text.data(), text.size()), &ids);
  if (!st.ok()) throw Error(fmt::format("{}: encoding failed: {}", name_, st.ToString()));
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::vector<std::vector<int32_t>> Tokenizer::encode_batch(const std::vector<std::string>& texts) const {
  std::vector<std::vector<int32_t>> out(texts.size());
  std::string first_error;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < static_cast<int64_t>(texts.size()); ++i) {
    std::vector<int> ids;
    auto st = sp_->Encode(texts[static_cast<size_t>(i)], &ids);
    if (!st.ok()) {
#pragma omp critical(ft_tokenizer_error)
      if (first_error.empty()) first_error = st.ToString();
      continue;
    }
    out[static_cast<size_t>(i)].assign(ids.begin(), ids.end());
  }
  if (!first_error.empty()) throw Error(fmt::format("{}: encoding failed: {}", name_, first_error));
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::vector<int> v(ids.begin(), ids.end());
  for (int id : v) {
    if (id < 0 || id >= sp_->GetPieceSize()) {
      throw Error(
          fmt::format("token id {} is outside the vocabulary of {} ({} pieces)", id, name_, sp_->GetPieceSize()));
    }
  }
  std::string text;
  auto st = sp_->Decode(v, &text);
  if (!st.ok()) throw Error(fmt::format("{}: decoding failed: {}", name_, st.ToString()));
  return text;
}

int64_t Tokenizer::vocab_size() const {
  return sp_->GetPieceSize();
}
int32_t Tokenizer::eos_id() const {
  return sp_->eos_id();
}

}  // namespace ft
