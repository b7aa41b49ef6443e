// Where `data pull URL DIR` writes each object it lists: the key's path below the URL's prefix,
// or nothing for a key outside it (s3://b/ds1 lists ds1_flip/ too, which is not below ds1/).
//
//   ObjectUrl u = ObjectUrl::parse("s3://b/ds1");
//   pull_relative_path(u, "ds1/train-00000.ftshard");  // "train-00000.ftshard"
//   pull_relative_path(u, "ds1_flip/manifest.json");   // nullopt
//   pull_relative_path(u, "ds1/../x");                 // ft::Error: the key escapes the directory
#pragma once

#include <optional>
#include <string>

#include "data/objstore/object_store.h"

namespace ft {

// The path relative to the pull directory (never absolute, never with "." or ".." pieces);
// nullopt when the key is not pulled; ft::Error naming the key when it would escape.
std::optional<std::string> pull_relative_path(const ObjectUrl& u, const std::string& key);

}  // namespace ft
