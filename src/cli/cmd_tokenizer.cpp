// fluxtrain tokenizer train|encode|decode — the SentencePiece tokenizer on its own.
//
//   fluxtrain tokenizer train --input docs/ --vocab-size 8192 --out tok.model
//   echo "Привет, world" | fluxtrain tokenizer encode --model tok.model        # ids, one line per input line
//   echo "412 9 77" | fluxtrain tokenizer decode --model tok.model
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "cli/command.h"
#include "data/prepare/corpus.h"
#include "data/prepare/text_normalize.h"
#include "data/tokenizer.h"
#include "util/checksum.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/output_path.h"

namespace {

int run_tokenizer(int argc, char** argv) {
  CLI::App app{"Train, apply or invert the SentencePiece tokenizer"};
  app.require_subcommand(1);
  std::vector<std::string> inputs;
  std::string out, model;
  ft::TokenizerTrainOptions to;
  auto* train = app.add_subcommand("train", "train a BPE tokenizer (byte fallback) on text files");
  train->add_option("--input", inputs, "file, directory or glob (repeatable); default: the built-in corpus");
  train->add_option("--out", out, "model file to write")->required();
  train->add_option("--vocab-size", to.vocab_size, "vocabulary size")->capture_default_str();
  train->add_option("--seed", to.seed, "sampling seed")->capture_default_str();
  train
      ->add_option("--threads", to.threads,
                   "SentencePiece's training threads: part of the result (prepare always uses the default)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  bool force = false;
  train->add_flag("--force", force, "replace an existing tokenizer model at --out (nothing else)");
  auto* enc = app.add_subcommand("encode", "stdin text → token ids (one line of ids per input line)");
  enc->add_option("--model", model, "tokenizer model")->required();
  auto* dec = app.add_subcommand("decode", "stdin token ids → text (one line per input line)");
  dec->add_option("--model", model, "tokenizer model")->required();
  FT_PARSE(app, argc, argv);

  if (*train) {
    if (inputs.empty()) inputs = ft::default_corpus_inputs();
    ft::check_output_path(out, ft::OutputRule{.flag = "--out",
                                              .kind = "tokenizer model",
                                              .inputs = inputs,
                                              .force = force,
                                              .is_ours = [](const std::string& p) {
                                                try {
                                                  ft::Tokenizer::load(p);
                                                  return true;
                                                } catch (const ft::Error&) {
                                                  return false;
                                                }
                                              }});
    ft::ExpandResult files = ft::expand_inputs(inputs);
    // Documents are read one file at a time; lines are what SentencePiece trains on.
    size_t next_file = 0;
    std::vector<std::string> pending;
    size_t pending_pos = 0;
    std::string model_bytes = ft::train_tokenizer(to, [&](std::string* line) {
      while (pending_pos >= pending.size()) {
        if (next_file >= files.files.size()) return false;
        pending.clear();
        pending_pos = 0;
        const ft::InputFile& f = files.files[next_file++];
        uint64_t not_text = 0;
        ft::for_each_document(f, [&](const std::string&, std::string&& raw, uint64_t bad) {
          ft::NormalizeResult r = ft::normalize_document(raw);
          not_text += bad + ft::count_nul_bytes(raw) + r.invalid_utf8;
          std::istringstream ss(r.text);
          std::string l;
          while (std::getline(ss, l))
            if (!l.empty()) pending.push_back(l);
        });
        if (f.kind != ft::InputKind::kManPage && ft::mostly_binary(not_text, f.bytes)) {
          ft::log_warn("tokenizer: skipping {}: {} of its {} bytes are invalid UTF-8 or NUL: not text", f.path,
                       not_text, f.bytes);
          pending.clear();
        }
      }
      *line = std::move(pending[pending_pos++]);
      return true;
    });
    ft::Tokenizer tok = ft::Tokenizer::from_bytes(model_bytes, out);
    ft::write_file_atomic(out, model_bytes);
    std::printf("tokenizer: wrote %s (%lld pieces, eos %d, xxh3 %s)\n", out.c_str(),
                static_cast<long long>(tok.vocab_size()), tok.eos_id(), ft::hex64(tok.hash()).c_str());
    return 0;
  }
  ft::Tokenizer tok = ft::Tokenizer::load(model);
  std::string line;
  int64_t lineno = 0;
  while (std::getline(std::cin, line)) {
    ++lineno;
    if (*enc) {
      std::vector<int32_t> ids = tok.encode(ft::normalize_document(line).text);
      std::string s;
      for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
      std::printf("%s\n", s.c_str());
    } else {
      std::istringstream ss(line);
      std::vector<int32_t> ids;
      std::string w;
      while (ss >> w) {
        char* end = nullptr;
        long v = std::strtol(w.c_str(), &end, 10);
        if (*end != '\0' || w.empty()) {
          throw ft::Error(fmt::format("stdin:{}: \"{}\" is not a token id", lineno, w),
                          "give whitespace-separated integers");
        }
        ids.push_back(static_cast<int32_t>(v));
      }
      std::printf("%s\n", tok.decode(ids).c_str());
    }
  }
  return 0;
}

ft::cli::Register register_tokenizer("tokenizer", "train, encode with or decode with the SentencePiece tokenizer",
                                     run_tokenizer);

}  // namespace
