// Names for what is moved aside (an earlier run's files under --force, checkpoints newer than a
// resume point). Such names carry a time stamp, and two moves in the same second must not share one:
// the second would overwrite the first's files, or fail half-way on a non-empty directory.
//
//   std::string to = unused_path(root + ".replaced-" + stamp);   // root.replaced-T, or -2, -3, ...
//   std::string dir = create_unused_dir(run_dir + "/replaced-" + stamp);
#pragma once

#include <string>

namespace ft {

// `base` when nothing is there, else the first free of `base-2`, `base-3`, ...
std::string unused_path(const std::string& base);

// Creates a new, empty directory at the first free of `base`, `base-2`, ... and returns its path.
// The creation claims the name, so two processes never get the same one. Throws ft::Error naming
// the path when it cannot be created.
std::string create_unused_dir(const std::string& base);

}  // namespace ft
