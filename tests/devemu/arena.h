// GuardedArena: the emulated GPU's memory — one mmap-reserved range of host address space that is
// PROT_NONE except while an emulated op, copy or fill runs. Host code that reads or writes device
// memory directly (what would be an illegal access on a real GPU, or a silent read of stale host
// data) therefore dies with SIGSEGV in the tests instead of passing.
//
//   GuardedArena& a = GuardedArena::instance();        // FT_DEVEMU_BYTES bytes (default 2 GiB)
//   void* p = a.alloc(bytes);                          // null when the arena is full
//   { GuardedArena::Access open;  std::memset(p, 0, bytes); }   // RW only inside the scope
//   a.contains(p);  a.free(p, bytes);
//
// One process-wide recursive lock serialises every access (emulated "streams" run one at a time,
// in call order); Access scopes nest. While one thread holds the arena open, another thread's
// stray access is not caught: the guard tests the host logic of the step, not thread races.
// This emulates a GPU's memory for testing fluxtrain's host code; it says nothing about CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace ft::devemu {

class GuardedArena {
 public:
  static GuardedArena& instance();

  // bytes rounded up to 256; null when no free block is large enough (out of device memory).
  void* alloc(size_t bytes);
  void free(void* p, size_t bytes);
  // Whether [p, p + bytes) lies inside the arena.
  bool contains(const void* p, size_t bytes = 1) const;
  size_t capacity() const { return capacity_; }

  // Opens the arena for reads and writes for the scope's lifetime (and holds the lock).
  class Access {
   public:
    Access();
    ~Access();
    Access(const Access&) = delete;
    Access& operator=(const Access&) = delete;
  };

 private:
  GuardedArena();
  void protect(int prot);  // on [base_, base_ + top_)

  char* base_ = nullptr;
  size_t capacity_ = 0;
  size_t top_ = 0;                 // bytes of the arena ever handed out (the range mprotect covers)
  std::map<size_t, size_t> free_;  // offset -> size of each free block below top_, coalesced
  std::recursive_mutex mu_;        // the one process-wide lock
  int depth_ = 0;                  // nested Access scopes of the holder
  friend class Access;
};

}  // namespace ft::devemu
