#include "arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace ft::devemu {
namespace {

constexpr size_t kAlign = 256;  // cudaMalloc's alignment is at least this
constexpr size_t kDefaultBytes = size_t{2} << 30;

size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

size_t round_up(size_t n, size_t a) {
  return (n + a - 1) / a * a;
}

// FT_DEVEMU_BYTES: the emulated GPU's memory (a plain byte count; K/M/G suffixes accepted).
size_t capacity_from_env() {
  const char* s = std::getenv("FT_DEVEMU_BYTES");
  if (!s || !*s) return kDefaultBytes;
  char* end = nullptr;
  double v = std::strtod(s, &end);
  const std::string unit = end ? end : "";
  if (unit == "K" || unit == "k") v *= 1024.0;
  if (unit == "M" || unit == "m") v *= 1024.0 * 1024.0;
  if (unit == "G" || unit == "g") v *= 1024.0 * 1024.0 * 1024.0;
  if (!(v >= static_cast<double>(kAlign))) {
    std::fprintf(stderr, "error: FT_DEVEMU_BYTES = \"%s\" is not a size of at least %zu bytes\n", s, kAlign);
    std::exit(2);
  }
  return round_up(static_cast<size_t>(v), page_size());
}

}  // namespace

GuardedArena& GuardedArena::instance() {
  static GuardedArena* a = new GuardedArena();  // never destroyed: frees may run at exit
  return *a;
}

GuardedArena::GuardedArena() : capacity_(capacity_from_env()) {
  void* p = mmap(nullptr, capacity_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "error: devemu: cannot reserve %zu bytes of address space for the emulated GPU\n", capacity_);
    std::exit(2);
  }
  base_ = static_cast<char*>(p);
}

void GuardedArena::protect(int prot) {
  if (top_ == 0) return;
  if (mprotect(base_, round_up(top_, page_size()), prot) != 0) {
    std::perror("devemu: mprotect");
    std::abort();
  }
}

GuardedArena::Access::Access() {
  GuardedArena& a = instance();
  a.mu_.lock();
  if (a.depth_++ == 0) a.protect(PROT_READ | PROT_WRITE);
}

GuardedArena::Access::~Access() {
  GuardedArena& a = instance();
  if (--a.depth_ == 0) a.protect(PROT_NONE);
  a.mu_.unlock();
}

void* GuardedArena::alloc(size_t bytes) {
  const size_t n = round_up(bytes == 0 ? 1 : bytes, kAlign);
  std::lock_guard<std::recursive_mutex> lock(mu_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {  // first fit
    if (it->second < n) continue;
    const size_t off = it->first, left = it->second - n;
    free_.erase(it);
    if (left > 0) free_[off + n] = left;
    return base_ + off;
  }
  if (capacity_ - top_ < n) return nullptr;
  const size_t off = top_;
  top_ += n;
  // The new pages take the arena's current protection (open when an Access scope is active).
  if (depth_ > 0) protect(PROT_READ | PROT_WRITE);
  return base_ + off;
}

void GuardedArena::free(void* p, size_t bytes) {
  if (!p) return;
  const size_t n = round_up(bytes == 0 ? 1 : bytes, kAlign);
  std::lock_guard<std::recursive_mutex> lock(mu_);
  size_t off = static_cast<size_t>(static_cast<char*>(p) - base_), len = n;
  auto next = free_.lower_bound(off);
  if (next != free_.end() && off + len == next->first) {  // merge with the block after
    len += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {  // and the block before
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      off = prev->first;
      len += prev->second;
      free_.erase(prev);
    }
  }
  free_[off] = len;
}

bool GuardedArena::contains(const void* p, size_t bytes) const {
  const char* c = static_cast<const char*>(p);
  return c >= base_ && c + bytes <= base_ + capacity_ && c + bytes >= c;
}

}  // namespace ft::devemu
