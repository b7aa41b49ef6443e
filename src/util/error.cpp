#include "util/error.h"

namespace ft {

void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  throw Error(fmt::format("internal check failed at {}:{}: {}{}{}", file, line, cond, msg.empty() ? "" : ": ", msg),
              "this is a bug in fluxtrain; please report it with the command that triggered it");
}

}  // namespace ft
