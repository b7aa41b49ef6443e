// Data pipeline throughput, each side by side with a peer in the same run (ratio printed last):
//
//   prepare:  normalise + tokenize, MB of text per second on one core,
//             vs SentencePiece's own `spm_encode` CLI (one process) on the same text;
//   verify:   shard checksum (chunked XXH3) GB/s vs memcpy of the same bytes (memory bound);
//   loader:   tokens/s one rank gets from DatasetLoader (seq 1024, 8 sequences per rank),
//             vs a nanoGPT-style NumPy memmap loader (random windows → int64 batch).
//
//   build/bench/data_bench [--pages 300] [--tokens 50000000]
#include <fmt/format.h>
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/dataset_manifest.h"
#include "data/loader/dataset_loader.h"
#include "data/prepare/corpus.h"
#include "data/prepare/text_normalize.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "util/checksum.h"
#include "util/fs.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

static double secs(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

static std::string run(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

int main(int argc, char** argv) {
  int pages = 300;
  int64_t total_tokens = 50'000'000;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--pages") pages = std::atoi(argv[++i]);
    if (std::string(argv[i]) == "--tokens") total_tokens = std::atoll(argv[++i]);
  }
  std::string work = fs::temp_directory_path() / ("ft_data_bench_" + std::to_string(::getpid()));
  fs::create_directories(work);
  omp_set_num_threads(1);

  // --- prepare: one core, ours vs spm_encode -----------------------------------------------
  std::vector<std::string> all = ft::default_corpus_inputs();
  std::vector<std::string> docs;
  size_t step = std::max<size_t>(1, all.size() / static_cast<size_t>(pages));
  for (size_t i = 0; i < all.size() && static_cast<int>(docs.size()) < pages; i += step) {
    std::string t = ft::render_man_page(all[i]);
    if (!t.empty()) docs.push_back(t);
  }
  size_t raw_bytes = 0;
  for (auto& d : docs) raw_bytes += d.size();
  // Tokenizer trained on these pages (training time is not part of the throughput).
  std::vector<std::string> lines;
  for (auto& d : docs) {
    std::string n = ft::normalize_document(d).text;
    size_t pos = 0;
    while (pos < n.size()) {
      size_t e = n.find('\n', pos);
      if (e == std::string::npos) e = n.size();
      if (e > pos) lines.push_back(n.substr(pos, e - pos));
      pos = e + 1;
    }
  }
  size_t li = 0;
  ft::TokenizerTrainOptions to;
  to.vocab_size = 8192;
  std::string model = ft::train_tokenizer(to, [&](std::string* l) {
    if (li >= lines.size()) return false;
    *l = lines[li++];
    return true;
  });
  ft::Tokenizer tok = ft::Tokenizer::from_bytes(model, "bench");
  ft::write_file_atomic(work + "/m.model", model);
  {
    std::ofstream f(work + "/lines.txt");
    for (auto& l : lines) f << l << "\n";
  }
  size_t line_bytes = 0;
  for (auto& l : lines) line_bytes += l.size() + 1;

  double best_ours = 1e30;
  size_t ntok = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    ntok = 0;
    for (auto& d : docs) ntok += tok.encode(ft::normalize_document(d).text).size();
    best_ours = std::min(best_ours, secs(t0));
  }
  double best_peer = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    run("spm_encode --model=" + work + "/m.model --output_format=id < " + work + "/lines.txt > /dev/null");
    best_peer = std::min(best_peer, secs(t0));
  }
  double ours_mbs = static_cast<double>(raw_bytes) / best_ours / 1e6;
  double peer_mbs = static_cast<double>(line_bytes) / best_peer / 1e6;
  std::printf("prepare  %zu man pages, %.1f MB rendered text, %zu tokens\n", docs.size(), raw_bytes / 1e6, ntok);
  std::printf("prepare  ours: normalise (UTF-8, NFC, whitespace) + encode, 1 core: %.2f MB/s\n", ours_mbs);
  std::printf("prepare  peer: spm_encode CLI (encode only, line by line), 1 process: %.2f MB/s\n", peer_mbs);

  // --- verify: chunked XXH3 vs memcpy -------------------------------------------------------
  omp_set_num_threads(2);
  std::vector<uint8_t> buf(size_t{512} << 20, 1), dst(buf.size());
  for (size_t i = 0; i < buf.size(); i += 4096) buf[i] = static_cast<uint8_t>(i >> 12);
  double best_hash = 1e30, best_copy = 1e30;
  volatile uint64_t sink = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    sink = sink + ft::chunked_hash(buf.data(), buf.size(), 7);
    best_hash = std::min(best_hash, secs(t0));
    t0 = Clock::now();
    std::memcpy(dst.data(), buf.data(), buf.size());
    best_copy = std::min(best_copy, secs(t0));
  }
  std::printf("verify   ours: chunked XXH3 checksum, %d threads: %.1f GB/s (100 GB in %.1f s)\n", omp_get_max_threads(),
              buf.size() / best_hash / 1e9, 100e9 / (buf.size() / best_hash));
  std::printf("verify   peer: memcpy of the same 512 MiB, 1 thread: %.1f GB/s\n", buf.size() / best_copy / 1e9);
  buf = {};
  dst = {};

  // --- loader: DatasetLoader vs NumPy memmap ------------------------------------------------
  const int64_t seq = 1024, batch = 8, shards = 8;
  std::string ds = work + "/ds";
  fs::create_directories(ds);
  ft::DatasetManifest m;
  ft::write_file_atomic(ds + "/tokenizer.model", model);
  m.tokenizer_hash = tok.hash();
  m.vocab_size = tok.vocab_size();
  m.eos_id = tok.eos_id();
  std::vector<int32_t> doc(4096);
  {
    std::ofstream flat(work + "/flat.u16", std::ios::binary);
    for (int64_t s = 0; s < shards; ++s) {
      ft::ShardWriter w(fmt::format("{}/train-{:05d}.ftshard", ds, s), 2);
      for (int64_t t = 0; t < total_tokens / shards; t += static_cast<int64_t>(doc.size())) {
        for (size_t i = 0; i < doc.size(); ++i)
          doc[i] = static_cast<int32_t>((t + static_cast<int64_t>(i) * 7 + s) % 8000 + 3);
        w.add_document(doc.data(), doc.size());
        std::vector<uint16_t> u(doc.begin(), doc.end());
        flat.write(reinterpret_cast<const char*>(u.data()), static_cast<std::streamsize>(u.size() * 2));
      }
      auto info = w.commit();
      m.train.shards.push_back(info);
      m.train.tokens += info.tokens;
      m.train.documents += info.documents;
    }
    ft::ShardWriter v(ds + "/validation-00000.ftshard", 2);
    v.add_document(doc.data(), doc.size());
    auto vi = v.commit();
    m.validation.shards.push_back(vi);
    m.validation.tokens = vi.tokens;
    m.validation.documents = vi.documents;
  }
  ft::write_file_atomic(ds + "/manifest.json", m.to_json_text());
  ft::DatasetLoaderOptions o;
  o.dir = ds;
  o.seq_len = seq;
  o.global_batch = batch;
  o.prefetch = 0;
  ft::DatasetLoader warm(o);  // also pages the shards in
  const int steps = 2000;
  double best_loader = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    ft::DatasetLoader l(o);
    auto t0 = Clock::now();
    for (int s = 0; s < steps; ++s) sink = sink + static_cast<uint64_t>(l.next().tokens[0]);
    best_loader = std::min(best_loader, secs(t0));
  }
  double ours_tps = static_cast<double>(steps) * batch * seq / best_loader;
  std::string py =
      run("/usr/bin/python3 -c '\n"
          "import numpy as np, time, sys\n"
          "d = np.memmap(sys.argv[1], dtype=np.uint16, mode=\"r\")\n"
          "B, T, steps = " +
          std::to_string(batch) + ", " + std::to_string(seq) + ", " + std::to_string(steps) +
          "\n"
          "rng = np.random.default_rng(0); best = 1e30\n"
          "for rep in range(3):\n"
          "  t0 = time.perf_counter()\n"
          "  for s in range(steps):\n"
          "    ix = rng.integers(0, len(d) - T - 1, B)\n"
          "    x = np.stack([d[i:i + T + 1].astype(np.int64) for i in ix])\n"
          "  best = min(best, time.perf_counter() - t0)\n"
          "print(steps * B * T / best)' " +
          work + "/flat.u16");
  double peer_tps = std::atof(py.c_str());
  std::printf("loader   ours: DatasetLoader, 1 rank, seq %lld x %lld sequences, no prefetch: %.1f M tokens/s\n",
              static_cast<long long>(seq), static_cast<long long>(batch), ours_tps / 1e6);
  std::printf("loader   peer: NumPy memmap random windows (nanoGPT get_batch): %.1f M tokens/s\n", peer_tps / 1e6);
  fs::remove_all(work);

  std::printf("ratio    prepare ours/spm_encode %.2fx, checksum/memcpy %.2fx, loader ours/numpy %.2fx\n",
              ours_mbs / peer_mbs, best_copy / best_hash, ours_tps / peer_tps);
  return 0;
}
