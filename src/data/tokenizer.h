// The tokenizer: SentencePiece BPE (Debian libsentencepiece) with byte fallback, so any UTF-8
// text encodes without <unk>; ids 0 = <unk>, 1 = <s>, 2 = </s> (EOS, separates documents).
// Text is NFC-normalised by prepare before it gets here, so SentencePiece's own normaliser is
// "identity" and whitespace is kept: decode(encode(text)) == text.
//
//   TokenizerTrainOptions o;  o.vocab_size = 8192;
//   std::string model = train_tokenizer(o, [&](std::string* line) { return next_line(line); });
//   Tokenizer tok = Tokenizer::from_bytes(model, "tokenizer.model");
//   std::vector<int32_t> ids = tok.encode("Привет, world");
//   std::vector<std::vector<int32_t>> many = tok.encode_batch(texts);   // OpenMP threads
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace ft {

// SentencePiece's trainer gives the same model for the same text only at the same thread count,
// so the count is fixed, never taken from the machine or the rank layout: the same corpus gives
// the same tokenizer (and dataset) on any machine. The manifest records it (tokenizer.threads).
inline constexpr int kTokenizerTrainThreads = 8;

struct TokenizerTrainOptions {
  int64_t vocab_size = 8192;
  int64_t max_sentences = 2000000;  // lines sampled for training (bounded memory)
  double character_coverage = 0.9995;
  uint64_t seed = 1234;
  int threads = kTokenizerTrainThreads;  // SentencePiece's own threads (part of the result)
};

// Reads training lines from `next` (returns false at the end) and returns the serialized model.
// Throws ft::Error with SentencePiece's message (e.g. a vocabulary too large for the text).
using LineSource = std::function<bool(std::string* line)>;
std::string train_tokenizer(const TokenizerTrainOptions& opt, const LineSource& next);

class Tokenizer {
 public:
  static Tokenizer load(const std::string& path);  // throws naming the file
  static Tokenizer from_bytes(const std::string& model, const std::string& name);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  std::vector<int32_t> encode(std::string_view text) const;
  std::vector<std::vector<int32_t>> encode_batch(const std::vector<std::string>& texts) const;
  std::string decode(const std::vector<int32_t>& ids) const;
  int64_t vocab_size() const;
  int32_t eos_id() const;
  uint64_t hash() const { return hash_; }  // XXH3-64 of the serialized model
  const std::string& bytes() const { return bytes_; }

 private:
  Tokenizer() = default;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string bytes_, name_;
  uint64_t hash_ = 0;
};

}  // namespace ft
