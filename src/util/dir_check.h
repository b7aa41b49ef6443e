// A directory a command will write into, checked before any work: a file in its place, a parent
// that is a file, a symbolic-link loop, a path that cannot be created (/proc/x) or no write
// permission is one ft::Error naming the path and the cause — not a raw library error at the
// first write, after the work.
//
//   check_dir_writable(cfg.train.run_dir, "run directory", "choose another --run-dir");
#pragma once

#include <string>

namespace ft {

// `what` names the directory in the message ("run directory", "ckpt.dir", "--out-dir"); `hint`
// says what to do instead. A missing directory is created and removed again to prove it can be,
// so a start refused later leaves nothing behind.
void check_dir_writable(const std::string& dir, const std::string& what, const std::string& hint);

}  // namespace ft
