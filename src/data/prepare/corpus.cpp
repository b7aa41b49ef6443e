#include "data/prepare/corpus.h"

#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "data/prepare/text_normalize.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"

extern char** environ;

namespace ft {
namespace fs = std::filesystem;
namespace {

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

bool is_man_page_name(const std::string& name) {
  static const std::regex re(R"(.+\.([1-9n]|[1-9][a-zA-Z]+)(\.gz)?)");
  return std::regex_match(name, re);
}

// nullopt-like: returns false when the file is not something we read from a directory walk.
bool classify(const fs::path& p, InputKind* kind) {
  std::string name = p.filename().string();
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  if (ext == ".txt" || ext == ".text")
    *kind = InputKind::kText;
  else if (ext == ".md" || ext == ".markdown")
    *kind = InputKind::kMarkdown;
  else if (ext == ".jsonl")
    *kind = InputKind::kJsonl;
  else if (is_man_page_name(name))
    *kind = InputKind::kManPage;
  else
    return false;
  return true;
}

void add_file(const fs::path& p, bool explicit_file, ExpandResult* out) {
  InputKind kind = InputKind::kText;
  if (!classify(p, &kind)) {
    if (!explicit_file) {
      if (out->skipped_names.size() < ExpandResult::kSkippedNamed) out->skipped_names.push_back(p.string());
      ++out->skipped;
      return;
    }
    kind = InputKind::kText;
  }
  std::error_code ec;
  uint64_t bytes = fs::file_size(p, ec);
  out->files.push_back({p.string(), kind, ec ? 0 : bytes});
}

void add_path(const std::string& input, const fs::path& p, ExpandResult* out) {
  std::error_code ec;
  auto st = fs::status(p, ec);
  if (ec || !fs::exists(st)) {
    throw Error(fmt::format("input {}: no such file or directory", input), "check the --input path");
  }
  if (fs::is_directory(st)) {
    std::vector<fs::path> found;
    for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_regular_file(ec)) {
        found.push_back(it->path());
      } else if (it->is_directory(ec) && ::access(it->path().c_str(), R_OK | X_OK) != 0) {
        // skip_permission_denied would pass over it without a word: name it.
        out->unreadable.push_back(it->path().string());
        log_warn("input {}: cannot read the sub-directory {} ({}): skipped", input, it->path().string(),
                 std::strerror(errno));
        it.disable_recursion_pending();
      }
    }
    if (ec) throw Error(fmt::format("input {}: cannot walk the directory: {}", input, ec.message()));
    std::sort(found.begin(), found.end());
    for (auto& f : found) add_file(f, false, out);
  } else if (fs::is_regular_file(st)) {
    add_file(p, true, out);
  } else {
    throw Error(fmt::format("input {}: not a regular file or directory", input));
  }
}

// Runs argv with `input` on stdin; returns stdout. Throws naming `what` on failure.
std::string run_filter(const std::vector<std::string>& argv, const std::string& input, const std::string& what) {
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw Error(fmt::format("{}: pipe: {}", what, std::strerror(errno)));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(in_pipe[1]);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    throw Error(fmt::format("{}: cannot run {}: {}", what, argv[0], std::strerror(rc)),
                "install groff-base (scripts/install-deps.sh)");
  }
  // Our end of the child's stdin must not block: poll's POLLOUT only promises PIPE_BUF bytes,
  // and a blocked write while the child waits for us to drain its stderr would deadlock.
  ::fcntl(in_pipe[1], F_SETFL, ::fcntl(in_pipe[1], F_GETFL) | O_NONBLOCK);
  std::string out, err;
  size_t written = 0;
  pollfd fds[3] = {{in_pipe[1], POLLOUT, 0}, {out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  if (input.empty()) {
    ::close(in_pipe[1]);
    fds[0].fd = -1;
  }
  char buf[65536];
  while (fds[0].fd >= 0 || fds[1].fd >= 0 || fds[2].fd >= 0) {
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].fd >= 0 && (fds[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t n = ::write(fds[0].fd, input.data() + written, std::min<size_t>(input.size() - written, 65536));
      if (n > 0) written += static_cast<size_t>(n);
      if ((n < 0 && errno != EAGAIN && errno != EINTR) || written == input.size()) {
        ::close(fds[0].fd);
        fds[0].fd = -1;
      }
    }
    for (int k = 1; k < 3; ++k) {
      if (fds[k].fd >= 0 && (fds[k].revents & (POLLIN | POLLERR | POLLHUP))) {
        ssize_t n = ::read(fds[k].fd, buf, sizeof buf);
        if (n > 0)
          (k == 1 ? out : err).append(buf, static_cast<size_t>(n));
        else {
          ::close(fds[k].fd);
          fds[k].fd = -1;
        }
      }
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw Error(fmt::format("{}: {} failed (status {}): {}", what, argv[0], status, err.substr(0, 300)));
  }
  return out;
}

}  // namespace

std::string ExpandResult::skipped_summary() const {
  std::string s = fmt::format("{} other files skipped", skipped);
  if (skipped_names.empty()) return s;
  s += ": ";
  for (size_t i = 0; i < skipped_names.size(); ++i) s += (i ? ", " : "") + skipped_names[i];
  if (skipped > skipped_names.size()) s += fmt::format(" and {} more", skipped - skipped_names.size());
  return s;
}

std::string read_maybe_gz(const std::string& path) {
  if (!ends_with(path, ".gz")) return read_file(path);
  gzFile gz = gzopen(path.c_str(), "rb");
  if (!gz) throw Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::string out;
  char buf[65536];
  int n;
  while ((n = gzread(gz, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  int errnum = 0;
  const char* msg = gzerror(gz, &errnum);
  std::string err = (n < 0 && msg) ? msg : "";
  gzclose(gz);
  if (n < 0) throw Error(fmt::format("{}: corrupt gzip data: {}", path, err), "re-install or remove the file");
  return out;
}

ExpandResult expand_inputs(const std::vector<std::string>& inputs) {
  if (inputs.empty()) throw Error("no inputs given", "pass --input PATH (file, directory or glob)");
  ExpandResult out;
  for (const std::string& in : inputs) {
    if (in.find_first_of("*?[") != std::string::npos && !fs::exists(in)) {
      glob_t g{};
      int rc = ::glob(in.c_str(), 0, nullptr, &g);
      if (rc != 0 || g.gl_pathc == 0) {
        globfree(&g);
        throw Error(fmt::format("input {}: the pattern matches no file", in), "check the --input glob");
      }
      for (size_t i = 0; i < g.gl_pathc; ++i) add_path(in, g.gl_pathv[i], &out);
      globfree(&g);
    } else {
      add_path(in, in, &out);
    }
  }
  return out;
}

std::vector<std::string> default_corpus_inputs() {
  std::vector<std::string> pages;
  for (const char* pkg : {"manpages", "manpages-dev", "manpages-ru"}) {
    std::string listing;
    try {
      listing = run_filter({"dpkg-query", "-L", pkg}, "", fmt::format("listing package {}", pkg));
    } catch (const Error&) {
      continue;  // not installed
    }
    size_t pos = 0;
    while (pos < listing.size()) {
      size_t eol = listing.find('\n', pos);
      if (eol == std::string::npos) eol = listing.size();
      std::string line = listing.substr(pos, eol - pos);
      pos = eol + 1;
      if (line.find("/share/man/") == std::string::npos) continue;
      fs::path p(line);
      std::error_code ec;
      if (!fs::is_regular_file(fs::symlink_status(p, ec))) continue;  // symlinks are aliases
      if (is_man_page_name(p.filename().string())) pages.push_back(line);
    }
  }
  if (pages.empty()) {
    throw Error("the built-in corpus needs Debian's manpages, manpages-dev and manpages-ru packages",
                "run scripts/install-deps.sh, or pass --input PATH");
  }
  std::sort(pages.begin(), pages.end());
  return pages;
}

std::string render_man_page(const std::string& path) {
  std::string roff = read_maybe_gz(path);
  // An alias page only sources another page (".so man3/foo.3"); skip it.
  {
    size_t pos = 0;
    bool only_so = false, other = false;
    while (pos < roff.size()) {
      size_t eol = roff.find('\n', pos);
      if (eol == std::string::npos) eol = roff.size();
      std::string_view line(roff.data() + pos, eol - pos);
      pos = eol + 1;
      if (line.empty() || line.substr(0, 3) == ".\\\"" || line.substr(0, 3) == "'\\\"") continue;
      if (line.substr(0, 4) == ".so ")
        only_so = true;
      else
        other = true;
    }
    if (only_so && !other) return "";
  }
  // -k: preconv (input encoding from the coding: line), -t: tbl; -P-cbou: no SGR escapes or
  // overstrikes; LL=2000n: paragraphs stay on one line; HY=0: no hyphenation; AD=l: no justification.
  std::string text = run_filter(
      {"groff", "-k", "-t", "-man", "-Tutf8", "-P-cbou", "-rLL=2000n", "-rHY=0", "-dAD=l", "-Wall"}, roff, path);
  // Drop the running header (first non-empty line) and footer (last non-empty line), and the
  // man macros' 7-column base indentation.
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    lines.emplace_back(text.data() + pos, eol - pos);
    pos = eol + 1;
  }
  auto blank = [](std::string_view l) { return l.find_first_not_of(' ') == std::string_view::npos; };
  size_t first = 0, last = lines.size();
  while (first < last && blank(lines[first])) ++first;
  while (last > first && blank(lines[last - 1])) --last;
  if (last - first >= 2) {
    ++first;
    --last;
  }
  std::string out;
  out.reserve(text.size());
  for (size_t i = first; i < last; ++i) {
    std::string_view l = lines[i];
    size_t strip = 0;
    while (strip < 7 && strip < l.size() && l[strip] == ' ') ++strip;
    out.append(l.substr(strip));
    out.push_back('\n');
  }
  return out;
}

void for_each_document(const InputFile& f, const EmitDocument& emit) {
  switch (f.kind) {
    case InputKind::kText:
    case InputKind::kMarkdown:
      emit(f.path, read_maybe_gz(f.path), 0);
      return;
    case InputKind::kManPage:
      emit(f.path, render_man_page(f.path), 0);
      return;
    case InputKind::kJsonl: {
      std::ifstream in(f.path, std::ios::binary);
      if (!in) throw Error(fmt::format("{}: cannot open: {}", f.path, std::strerror(errno)));
      std::string line;
      int64_t lineno = 0;
      while (std::getline(in, line)) {
        ++lineno;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        // JSON must be valid UTF-8: repair first so bad bytes are replaced and counted, not fatal.
        uint64_t replaced = 0;
        std::string clean = sanitize_utf8(line, &replaced);
        nlohmann::json j;
        try {
          j = nlohmann::json::parse(clean);
        } catch (const nlohmann::json::exception& e) {
          throw Error(fmt::format("{}:{}: not valid JSON: {}", f.path, lineno, e.what()),
                      "each line of a .jsonl file must be one JSON object with a \"text\" string");
        }
        auto it = j.is_object() ? j.find("text") : j.end();
        if (!j.is_object() || it == j.end() || !it->is_string()) {
          throw Error(fmt::format("{}:{}: no \"text\" string field", f.path, lineno),
                      "each line of a .jsonl file must be one JSON object with a \"text\" string");
        }
        emit(fmt::format("{}:{}", f.path, lineno), it->get<std::string>(), replaced);
      }
      return;
    }
  }
}

bool mostly_binary(uint64_t not_text_bytes, uint64_t file_bytes) {
  return file_bytes > 0 && not_text_bytes * 10 > file_bytes;
}

uint64_t count_nul_bytes(const std::string& s) {
  return static_cast<uint64_t>(std::count(s.begin(), s.end(), '\0'));
}

}  // namespace ft
