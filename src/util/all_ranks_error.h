// ft::AllRanksError: an error every rank raises at the same point, having agreed on it through a
// collective (a checkpoint that failed on some rank). The CLI prints it on rank 0 only and every
// rank ends normally with it: one line instead of one per rank, and no abort.
//
//   if (failed_somewhere) throw ft::AllRanksError("checkpoint step 8 failed: ...", "hint");
#pragma once

#include "util/error.h"

namespace ft {

class AllRanksError : public Error {
 public:
  using Error::Error;
};

}  // namespace ft
