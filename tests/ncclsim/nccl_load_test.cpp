// The CUDA plugin's NCCL loader (src/backends/cuda/nccl_load.cpp): libnccl opened with dlopen and
// every function NcclComm calls resolved (the toolkit's real library: loading it and making a
// unique id need no GPU), and the one-line error with its hint when the library is absent.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "backends/cuda/nccl_api.h"
#include "parallel/comm/comm.h"

namespace ft {
namespace {

TEST(NcclLoad, ResolvesEveryFunctionOfTheRealLibrary) {
  const NcclApi a = load_nccl_library(FT_NCCL_LIBRARY_FILE);
  EXPECT_EQ(a.library.front(), '/') << a.library;  // where the loader found it
  int version = 0;
  ASSERT_EQ(a.GetVersion(&version), ncclSuccess);
  EXPECT_GE(version, 21400);  // ncclCommFinalize
  EXPECT_STREQ(a.GetErrorString(ncclSuccess), "no error");
  ncclUniqueId id{};
  EXPECT_EQ(a.GetUniqueId(&id), ncclSuccess);
  for (const void* f :
       {(const void*)a.GetLastError, (const void*)a.CommInitRankConfig, (const void*)a.CommGetAsyncError,
        (const void*)a.CommFinalize, (const void*)a.CommDestroy, (const void*)a.CommAbort, (const void*)a.AllReduce,
        (const void*)a.ReduceScatter, (const void*)a.AllGather, (const void*)a.Broadcast, (const void*)a.Send,
        (const void*)a.Recv, (const void*)a.GroupStart, (const void*)a.GroupEnd})
    EXPECT_NE(f, nullptr);
}

TEST(NcclLoad, AnAbsentLibraryIsOneLineNamingItWithAHint) {
  try {
    load_nccl_library("/nonexistent/libnccl.so.2");
    FAIL() << "loaded a library that does not exist";
  } catch (const CommError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find("cannot load the NCCL library /nonexistent/libnccl.so.2: "), 0u) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_NE(std::string(e.hint()).find("FT_NCCL_LIBRARY"), std::string::npos) << e.hint();
  }
}

TEST(NcclLoad, ALibraryWithoutNcclIsRefusedNamingTheFunction) {
  try {
    load_nccl_library("libm.so.6");
    FAIL() << "libm passed for NCCL";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL library libm.so.6 has no ncclGetVersion"), std::string::npos)
        << e.what();
  }
}

TEST(NcclLoad, TheProcessTableHonoursFtNcclLibrary) {
  setenv("FT_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  EXPECT_THROW(nccl_api(), CommError);
  setenv("FT_NCCL_LIBRARY", FT_NCCL_LIBRARY_FILE, 1);
  EXPECT_NE(nccl_api().AllReduce, nullptr);  // a failure is not remembered: the next call retries
  unsetenv("FT_NCCL_LIBRARY");
}

}  // namespace
}  // namespace ft
