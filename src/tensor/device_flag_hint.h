// The device errors of a command that takes the device as a flag (`generate --device`): their
// hints advise train.device = "X", a key that command has no use for; this rewrites that advice
// for the flag.
//
//   try { ctx = make_exec_context(resolve_device(name, "--device")); }
//   catch (const Error& e) { throw device_error_for_flag(e, "--device"); }   // "pass --device cpu"
#pragma once

#include <string>

#include "util/error.h"

namespace ft {

// e with every `train.device = "X"` of its hint written as `FLAG X` ("set ..." as "pass ...").
Error device_error_for_flag(const Error& e, const std::string& flag);

}  // namespace ft
