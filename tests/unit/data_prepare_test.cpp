// `fluxtrain prepare` end to end on a small mixed corpus: every input kind, duplicates, empty
// and invalid-UTF-8 documents, language stats, equal shards, decode(shards) == normalised text,
// determinism, and the bad-input errors (nothing half-written left behind).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "data/prepare/corpus.h"
#include "data/prepare/prepare.h"
#include "data/prepare/text_normalize.h"
#include "data/prepare/verify.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "data_test_util.h"
#include "util/error.h"

namespace ft {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> fixture_lines() {
  std::ifstream in(std::string(FT_SOURCE_DIR) + "/tests/data/bilingual.txt");
  std::vector<std::string> lines;
  std::string l;
  while (std::getline(in, l)) lines.push_back(l);
  return lines;
}

const char* kManPage = R"(.TH FROB 1 2024-01-01 "fluxtrain tests" "User Commands"
.SH NAME
frob \- frobnicate the widgets
.SH DESCRIPTION
.B frob
reads widgets from standard input and writes them back
.I frobnicated .
It never fails.
.SH OPTIONS
.TP
.B \-v
Be verbose.
)";

// A corpus of every input kind. Returns the set of normalised texts we expect to find.
std::set<std::string> make_corpus(const std::string& dir) {
  auto lines = fixture_lines();
  std::set<std::string> expected;
  fs::create_directories(dir + "/txt");
  for (int d = 0; d < 30; ++d) {  // 30 distinct documents of 3–5 lines, English and Russian mixed
    std::string text;
    for (int k = 0; k < 3 + d % 3; ++k) text += lines[static_cast<size_t>((d * 7 + k * 3) % 20)] + "  \n";
    text += "Document " + std::to_string(d) + ".\n";
    std::ofstream(fmt::format("{}/txt/doc{:02d}.{}", dir, d, d % 2 ? "txt" : "md")) << text;
    expected.insert(normalize_document(text).text);
  }
  std::ofstream(dir + "/txt/dup.txt") << "  \n"
                                      << lines[0] + "  \n" + lines[3] + "  \n" + lines[6] + "  \n"
                                      << "Document 0.\n";
  std::ofstream(dir + "/txt/empty.txt") << "   \n\n";
  std::ofstream(dir + "/txt/ignored.bin") << "binary";
  std::ofstream(dir + "/corpus.jsonl") << R"({"text": "Первая запись JSONL: файловый дескриптор."})"
                                       << "\n\n"
                                       << R"({"text": "bad bytes: )"
                                       << "\xC3\x28 and \xF0\x9F"
                                       << R"( end", "id": 7})"
                                       << "\n";
  expected.insert("Первая запись JSONL: файловый дескриптор.");
  expected.insert("bad bytes: \xEF\xBF\xBD( and \xEF\xBF\xBD end");
  fs::create_directories(dir + "/man/man1");
  std::ofstream(dir + "/man/man1/frob.1") << kManPage;
  std::ofstream(dir + "/man/man1/frobalias.1") << ".so man1/frob.1\n";
  return expected;
}

PrepareOptions small_options(const std::string& in, const std::string& out) {
  PrepareOptions o;
  o.inputs = {in};
  o.out_dir = out;
  o.shards = 3;
  o.val_fraction = 0.2;
  o.vocab_size = 400;
  return o;
}

std::vector<std::string> decode_split(const std::string& dir, const DatasetManifest& m, const SplitInfo& s) {
  Tokenizer tok = Tokenizer::load(dir + "/" + m.tokenizer_file);
  std::vector<std::string> docs;
  for (const ShardInfo& info : s.shards) {
    Shard sh(dir + "/" + info.file);
    const ShardView& v = sh.view();
    for (uint64_t d = 0; d < v.num_docs(); ++d) {
      std::vector<int32_t> ids(v.doc_offset(d + 1) - v.doc_offset(d));
      v.copy_tokens(v.doc_offset(d), ids.size(), ids.data());
      EXPECT_EQ(ids.back(), m.eos_id);
      ids.pop_back();
      docs.push_back(tok.decode(ids));
    }
  }
  return docs;
}

TEST(Prepare, MixedCorpusEndToEnd) {
  std::string root = testing::scratch_dir("prepare");
  std::set<std::string> expected = make_corpus(root + "/in");
  PrepareReport r = prepare_dataset(small_options(root + "/in", root + "/out"));
  const DatasetManifest& m = r.manifest;
  EXPECT_EQ(r.skipped_files, 1u);                                              // ignored.bin
  EXPECT_EQ(m.duplicates, 1u);                                                 // dup.txt
  EXPECT_EQ(m.empty, 2u);                                                      // empty.txt and the .so alias page
  EXPECT_EQ(m.invalid_utf8, 2u);                                               // two bad sequences in the JSONL line
  EXPECT_EQ(m.train.documents + m.validation.documents, expected.size() + 1);  // + the man page
  EXPECT_GT(m.validation.documents, 0u);
  EXPECT_GT(m.train.documents, m.validation.documents);
  EXPECT_TRUE(m.languages.count("en") && m.languages.count("ru"));
  uint64_t lang_docs = 0, lang_tokens = 0;
  for (auto& [l, st] : m.languages) lang_docs += st.documents, lang_tokens += st.tokens;
  EXPECT_EQ(lang_docs, m.train.documents + m.validation.documents);
  EXPECT_EQ(lang_tokens, m.train.tokens + m.validation.tokens);
  EXPECT_GT(m.train.chars_per_token(), 1.0);
  EXPECT_GE(m.train.bytes_per_token(), m.train.chars_per_token());

  // Shards are cut per language (each holds one language's documents, English first, with their
  // character counts); within a language they hold nearly equal token counts, and they decode to
  // our documents.
  ASSERT_EQ(m.train.shards.size(), 3u);
  std::map<std::string, std::vector<uint64_t>> by_lang;
  std::string last_lang;
  for (auto& s : m.train.shards) {
    EXPECT_TRUE(s.language == "en" || s.language == "ru") << s.file << " " << s.language;
    EXPECT_GE(s.language, last_lang) << "languages are runs of whole shards";
    last_lang = s.language;
    EXPECT_GT(s.characters, 0u);
    by_lang[s.language].push_back(s.tokens);
  }
  EXPECT_EQ(by_lang.size(), 2u);
  for (auto& [lang, sizes] : by_lang) {
    uint64_t lo = *std::min_element(sizes.begin(), sizes.end()), hi = *std::max_element(sizes.begin(), sizes.end());
    uint64_t total = 0;
    for (uint64_t t : sizes) total += t;
    EXPECT_LE(hi - lo, total / sizes.size()) << lang << ": " << lo << " " << hi;
  }
  uint64_t chars = 0;
  for (auto& s : m.train.shards) chars += s.characters;
  EXPECT_EQ(chars, m.train.characters);
  std::string out = root + "/out";
  std::vector<std::string> docs = decode_split(out, m, m.train);
  auto val = decode_split(out, m, m.validation);
  docs.insert(docs.end(), val.begin(), val.end());
  int man = 0;
  for (auto& d : docs) {
    if (d.find("frobnicate the widgets") != std::string::npos) {
      ++man;
      EXPECT_NE(d.find("DESCRIPTION"), std::string::npos) << d;
      EXPECT_EQ(d.find('\b'), std::string::npos);
      EXPECT_EQ(d.find('\x1b'), std::string::npos);
      continue;
    }
    EXPECT_TRUE(expected.count(d)) << "unexpected document: " << d;
  }
  EXPECT_EQ(man, 1);
  EXPECT_TRUE(verify_dataset(out).problems.empty());
  EXPECT_FALSE(format_report(r).empty());

  // Deterministic: a second preparation writes the same bytes.
  PrepareReport r2 = prepare_dataset(small_options(root + "/in", root + "/out2"));
  EXPECT_EQ(r2.manifest.to_json_text(), m.to_json_text());
  for (auto& s : m.train.shards) {
    EXPECT_EQ(read_file(out + "/" + s.file), read_file(root + "/out2/" + s.file)) << s.file;
  }
  // Only the dataset's own files are left, no spills or temporaries.
  std::set<std::string> names;
  for (auto& e : fs::directory_iterator(out)) names.insert(e.path().filename().string());
  std::set<std::string> want = {"manifest.json", "tokenizer.model", "train-00000.ftshard", "train-00001.ftshard",
                                "train-00002.ftshard"};
  for (auto& s : m.validation.shards) want.insert(s.file);  // one per language present in it
  EXPECT_EQ(names, want);

  // A given tokenizer is used as is.
  PrepareOptions o = small_options(root + "/in", root + "/out3");
  o.tokenizer = out + "/tokenizer.model";
  EXPECT_EQ(prepare_dataset(o).manifest.tokenizer_hash, m.tokenizer_hash);
}

std::string error_of(const PrepareOptions& o) {
  try {
    prepare_dataset(o);
  } catch (const Error& e) {
    return std::string(e.what()) + " | " + e.hint();
  }
  return "";
}

TEST(Prepare, BadInputLeavesNothingBehind) {
  std::string root = testing::scratch_dir("prepare_bad");
  make_corpus(root + "/in");
  auto leftovers = [&] {
    std::vector<std::string> v;
    for (auto& e : fs::directory_iterator(root))
      if (e.path().filename().string().rfind("out", 0) == 0) v.push_back(e.path().filename().string());
    return v;
  };
  EXPECT_NE(error_of(small_options(root + "/nope", root + "/out")).find("no such file"), std::string::npos);
  EXPECT_NE(error_of(small_options(root + "/in/*.xyz", root + "/out")).find("matches no file"), std::string::npos);
  fs::create_directories(root + "/only_bin");
  std::ofstream(root + "/only_bin/a.bin") << "x";
  EXPECT_NE(error_of(small_options(root + "/only_bin", root + "/out")).find("no input files"), std::string::npos);
  fs::create_directories(root + "/only_empty");
  std::ofstream(root + "/only_empty/a.txt") << " \n";
  EXPECT_NE(error_of(small_options(root + "/only_empty", root + "/out")).find("no non-empty"), std::string::npos);
  // Malformed JSONL fails mid-way through extraction: the error names file:line; no output.
  std::ofstream(root + "/in/broken.jsonl") << R"({"text": "ok"})"
                                           << "\n"
                                           << R"({"txt": 1})"
                                           << "\n";
  std::string e = error_of(small_options(root + "/in", root + "/out"));
  EXPECT_NE(e.find("broken.jsonl:2: no \"text\" string field"), std::string::npos) << e;
  EXPECT_TRUE(leftovers().empty());
  fs::remove(root + "/in/broken.jsonl");
  // Too many shards for the documents; a vocabulary the tokenizer cannot reach.
  PrepareOptions o = small_options(root + "/in", root + "/out");
  o.shards = 1000;
  EXPECT_NE(error_of(o).find("--shards 1000"), std::string::npos);
  EXPECT_TRUE(leftovers().empty());
  // A stale staging directory of a dead run is removed; an existing dataset needs --force.
  fs::create_directories(root + "/out.tmp-999999999/junk");
  prepare_dataset(small_options(root + "/in", root + "/out"));
  EXPECT_EQ(leftovers(), std::vector<std::string>{"out"});
  e = error_of(small_options(root + "/in", root + "/out"));
  EXPECT_NE(e.find("holds a dataset"), std::string::npos) << e;
  o = small_options(root + "/in", root + "/out");
  o.force = true;
  prepare_dataset(o);
  EXPECT_EQ(leftovers(), std::vector<std::string>{"out"});
}

TEST(Corpus, ExpandsKindsAndRendersManPages) {
  std::string root = testing::scratch_dir("corpus");
  make_corpus(root);
  ExpandResult r = expand_inputs({root});
  EXPECT_EQ(r.skipped, 1u);
  int man = 0, jsonl = 0, md = 0;
  for (auto& f : r.files) {
    man += f.kind == InputKind::kManPage;
    jsonl += f.kind == InputKind::kJsonl;
    md += f.kind == InputKind::kMarkdown;
  }
  EXPECT_EQ(man, 2);
  EXPECT_EQ(jsonl, 1);
  EXPECT_EQ(md, 15);
  std::string text = render_man_page(root + "/man/man1/frob.1");
  EXPECT_NE(text.find("NAME\nfrob - frobnicate the widgets"), std::string::npos) << text;
  EXPECT_NE(text.find("frob reads widgets from standard input and writes them back frobnicated ."), std::string::npos)
      << text;
  EXPECT_EQ(text.find("User Commands"), std::string::npos) << "running header kept: " << text;
  EXPECT_EQ(render_man_page(root + "/man/man1/frobalias.1"), "");
}

}  // namespace
}  // namespace ft
