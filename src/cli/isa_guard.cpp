// Runs before main() and before every other static initialiser, compiled for baseline x86-64
// (src/cli/CMakeLists.txt): a binary built with -march=native on one CPU and started on another
// that lacks one of its instruction sets stops with one clear line instead of SIGILL somewhere.
#include <unistd.h>

#include <cstring>

extern "C" const char ft_compiled_isa[];  // util/cpu_info.cpp: " avx2 fma avx512f ..."

namespace {

bool cpu_has(const char* name) {
  // __builtin_cpu_supports needs literal names.
  if (!std::strcmp(name, "avx2")) return __builtin_cpu_supports("avx2");
  if (!std::strcmp(name, "fma")) return __builtin_cpu_supports("fma");
  if (!std::strcmp(name, "f16c")) return __builtin_cpu_supports("f16c");
  if (!std::strcmp(name, "avx512f")) return __builtin_cpu_supports("avx512f");
  if (!std::strcmp(name, "avx512bw")) return __builtin_cpu_supports("avx512bw");
  if (!std::strcmp(name, "avx512vl")) return __builtin_cpu_supports("avx512vl");
  if (!std::strcmp(name, "avx512bf16")) return __builtin_cpu_supports("avx512bf16");
  if (!std::strcmp(name, "avx512fp16")) return __builtin_cpu_supports("avx512fp16");
  if (!std::strcmp(name, "amx-bf16")) return __builtin_cpu_supports("amx-bf16");
  return true;  // a name this check does not know: let it run
}

void say(const char* s) {
  ssize_t r = ::write(2, s, std::strlen(s));
  (void)r;
}

__attribute__((constructor(101))) void refuse_missing_isa() {
  __builtin_cpu_init();
  char missing[256] = "";
  const char* p = ft_compiled_isa;
  while (*p) {
    while (*p == ' ') ++p;
    char name[32];
    size_t n = 0;
    while (p[n] && p[n] != ' ' && n + 1 < sizeof name) {
      name[n] = p[n];
      ++n;
    }
    name[n] = '\0';
    p += n;
    if (n > 0 && !cpu_has(name) && std::strlen(missing) + n + 2 < sizeof missing) {
      std::strcat(missing, " ");
      std::strcat(missing, name);
    }
  }
  if (!missing[0]) return;
  say("error: this fluxtrain binary was built for instructions this CPU lacks:");
  say(missing);
  say("\nhint: build on this machine (make build), or build a portable binary with "
      "cmake -DFT_ARCH=x86-64-v3 (any AVX2 CPU)\n");
  ::_exit(2);
}

}  // namespace
