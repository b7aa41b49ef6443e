// Near-duplicate removal (data/prepare/near_dedup.h, MinHash-LSH) on planted near-duplicates — copies
// with a few words changed, a version line added or a paragraph dropped, in English and Russian
// — which are all found, and on distinct documents (also ones sharing a third of their text),
// which are all kept; then through `prepare`, which counts the removals per language.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "data/prepare/near_dedup.h"
#include "data/prepare/prepare.h"
#include "data_test_util.h"

namespace ft {
namespace {

std::vector<std::string> vocabulary(bool russian) {
  std::vector<std::string> v;
  std::mt19937 rng(russian ? 7 : 3);
  const std::vector<std::string> letters =
      russian ? std::vector<std::string>{"а", "б", "в", "г", "д", "е", "ж", "з", "и", "к",
                                         "л", "м", "н", "о", "п", "р", "с", "т", "у", "ф"}
              : std::vector<std::string>{"a", "b", "c", "d", "e", "f", "g", "h", "i", "k",
                                         "l", "m", "n", "o", "p", "r", "s", "t", "u", "w"};
  for (int i = 0; i < 3000; ++i) {
    std::string w;
    int len = 3 + static_cast<int>(rng() % 6);
    for (int k = 0; k < len; ++k) w += letters[rng() % letters.size()];
    v.push_back(w);
  }
  return v;
}

std::vector<std::string> random_doc(std::mt19937& rng, const std::vector<std::string>& vocab, int words) {
  std::vector<std::string> d;
  for (int i = 0; i < words; ++i) d.push_back(vocab[rng() % vocab.size()]);
  return d;
}

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (size_t i = 0; i < words.size(); ++i) s += (i ? (i % 12 == 0 ? "\n" : " ") : "") + words[i];
  return s;
}

// A near-duplicate of `d`: one of three kinds of edit, none touching more than ~10% of the text.
std::vector<std::string> near_copy(std::mt19937& rng, std::vector<std::string> d, const std::vector<std::string>& vocab,
                                   int kind) {
  if (kind == 0) {  // a few words changed
    for (int k = 0; k < 3; ++k) d[rng() % d.size()] = vocab[rng() % vocab.size()];
  } else if (kind == 1) {  // a version line added at the top
    d.insert(d.begin(), {"version", "2." + std::to_string(rng() % 9), "released"});
  } else {  // a short paragraph dropped
    size_t at = rng() % (d.size() - 20);
    d.erase(d.begin() + static_cast<long>(at), d.begin() + static_cast<long>(at) + 12);
  }
  return d;
}

TEST(NearDedup, FindsPlantedNearDuplicatesAndKeepsDistinctDocuments) {
  for (bool russian : {false, true}) {
    auto vocab = vocabulary(russian);
    std::mt19937 rng(russian ? 11 : 5);
    NearDuplicates nd({.threshold = 0.8});
    EXPECT_EQ(nd.bands() * nd.rows(), 128);
    std::vector<std::vector<std::string>> originals;
    int kept = 0, found = 0;
    for (int i = 0; i < 300; ++i) {
      originals.push_back(random_doc(rng, vocab, 300));
      kept += !nd.is_duplicate_or_add(nd.signature(join(originals.back())));
    }
    // Distinct documents that share a third of their text with an earlier one are kept too.
    for (int i = 0; i < 50; ++i) {
      std::vector<std::string> d(originals[static_cast<size_t>(i)].begin(),
                                 originals[static_cast<size_t>(i)].begin() + 100);
      auto rest = random_doc(rng, vocab, 200);
      d.insert(d.end(), rest.begin(), rest.end());
      kept += !nd.is_duplicate_or_add(nd.signature(join(d)));
    }
    EXPECT_EQ(kept, 350) << (russian ? "ru" : "en") << ": a distinct document was taken for a near-duplicate";
    for (int i = 0; i < 60; ++i) {
      auto copy = near_copy(rng, originals[static_cast<size_t>(i * 5)], vocab, i % 3);
      found += nd.is_duplicate_or_add(nd.signature(join(copy)));
    }
    EXPECT_EQ(found, 60) << (russian ? "ru" : "en") << ": a planted near-duplicate was missed";
  }
}

TEST(NearDedup, SimilarityEstimatesJaccard) {
  auto vocab = vocabulary(false);
  std::mt19937 rng(1);
  NearDuplicates nd({.threshold = 0.8});
  auto a = random_doc(rng, vocab, 1000);
  EXPECT_EQ(NearDuplicates::similarity(nd.signature(join(a)), nd.signature(join(a))), 1.0);
  auto b = a;
  b.resize(500);  // shingles: ~496 shared of ~996 -> J ~ 0.5
  double s = NearDuplicates::similarity(nd.signature(join(a)), nd.signature(join(b)));
  EXPECT_GT(s, 0.35);
  EXPECT_LT(s, 0.65);
}

TEST(NearDedup, PrepareDropsThemAndCountsPerLanguage) {
  std::string root = testing::scratch_dir("near_dedup");
  std::filesystem::create_directories(root + "/in");
  int n = 0;
  for (bool russian : {false, true}) {
    auto vocab = vocabulary(russian);
    std::mt19937 rng(russian ? 21 : 22);
    for (int i = 0; i < 40; ++i) {
      auto d = random_doc(rng, vocab, 200);
      std::ofstream(fmt::format("{}/in/{:03d}.txt", root, n++)) << join(d) << "\n";
      if (i % 4 == 0)  // a planted near-duplicate (10 per language)
        std::ofstream(fmt::format("{}/in/{:03d}.txt", root, n++)) << join(near_copy(rng, d, vocab, i % 3)) << "\n";
    }
  }
  PrepareOptions o;
  o.inputs = {root + "/in"};
  o.out_dir = root + "/out";
  o.shards = 2;
  o.vocab_size = 400;
  o.val_fraction = 0.1;
  PrepareReport r = prepare_dataset(o);
  EXPECT_EQ(r.manifest.near_duplicates.at("en"), 10u);
  EXPECT_EQ(r.manifest.near_duplicates.at("ru"), 10u);
  EXPECT_EQ(r.manifest.train.documents + r.manifest.validation.documents, 80u);
  EXPECT_NE(format_report(r).find(
                "20 near-duplicates dropped (MinHash-LSH, Jaccard >= 0.8 over 5-word shingles): en 10, ru 10"),
            std::string::npos)
      << format_report(r);
  o.out_dir = root + "/off";
  o.near_dup_threshold = 0;
  PrepareReport off = prepare_dataset(o);
  EXPECT_EQ(off.manifest.train.documents + off.manifest.validation.documents, 100u);  // threshold 0: all kept
}

}  // namespace
}  // namespace ft
