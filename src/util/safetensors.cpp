#include "util/safetensors.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/fs.h"

namespace ft {

size_t safetensors_dtype_size(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL") return 1;
  return 0;
}

void SafetensorsWriter::add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                            const void* data, size_t bytes) {
  Entry e{dtype, std::move(shape), std::vector<char>(bytes)};
  if (bytes) std::memcpy(e.bytes.data(), data, bytes);
  tensors_[name] = std::move(e);
}

void SafetensorsWriter::write(const std::string& path) const {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (auto& [name, e] : tensors_) {
    header[name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.bytes.size()}}};
    offset += e.bytes.size();
  }
  if (!meta_.empty()) header["__metadata__"] = meta_;
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0) h.push_back(' ');
  uint64_t n = h.size();
  AtomicFile f(path);
  f.write(&n, 8);
  f.write(h);
  for (auto& [name, e] : tensors_) f.write(e.bytes.data(), e.bytes.size());
  f.commit();
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path), bytes_(read_file(path)) {
  parse();
}

bool is_safetensors_file(const std::string& path) {
  try {
    SafetensorsFile f(path);
    return true;
  } catch (const Error&) {
    return false;
  }
}

SafetensorsFile SafetensorsFile::from_bytes(std::string bytes, const std::string& name) {
  SafetensorsFile f;
  f.path_ = name;
  f.bytes_ = std::move(bytes);
  f.parse();
  return f;
}

void SafetensorsFile::parse() {
  auto bad = [&](const std::string& what) {
    return Error(fmt::format("{}: not a valid safetensors file: {}", path_, what),
                 "the file is truncated or was not written as safetensors");
  };
  if (bytes_.size() < 8) throw bad(fmt::format("{} bytes is shorter than the 8-byte header length", bytes_.size()));
  uint64_t n = 0;
  std::memcpy(&n, bytes_.data(), 8);
  if (n > bytes_.size() - 8) throw bad(fmt::format("header length {} exceeds the file size {}", n, bytes_.size()));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes_.begin() + 8, bytes_.begin() + 8 + static_cast<int64_t>(n));
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("header is not JSON: ") + e.what());
  }
  if (!header.is_object()) throw bad("header is not a JSON object");
  const size_t data_begin = 8 + n, data_size = bytes_.size() - data_begin;
  for (auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) throw bad("__metadata__ is not an object");
      for (auto& [k, s] : v.items()) {
        if (!s.is_string()) throw bad(fmt::format("metadata '{}' is not a string", k));
        meta_[k] = s.get<std::string>();
      }
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets") ||
        !v["dtype"].is_string() || !v["shape"].is_array() || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2)
      throw bad(fmt::format("entry '{}' lacks dtype, shape or data_offsets", name));
    View view;
    view.dtype = v["dtype"].get<std::string>();
    size_t elem = safetensors_dtype_size(view.dtype);
    if (elem == 0) throw bad(fmt::format("entry '{}' has unknown dtype {}", name, view.dtype));
    uint64_t count = 1;
    for (auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) throw bad(fmt::format("entry '{}' has a bad shape", name));
      uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && count > (uint64_t{1} << 62) / dim) throw bad(fmt::format("entry '{}' shape overflows", name));
      count *= dim;
      view.shape.push_back(static_cast<int64_t>(dim));
    }
    auto& off = v["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw bad(fmt::format("entry '{}' has bad data_offsets", name));
    uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e || e > data_size)
      throw bad(fmt::format("entry '{}' data [{}, {}) outside the {} data bytes", name, b, e, data_size));
    if (e - b != count * elem)
      throw bad(fmt::format("entry '{}' holds {} bytes but its shape needs {}", name, e - b, count * elem));
    view.data = bytes_.data() + data_begin + b;
    view.bytes = e - b;
    index_[name] = std::move(view);
  }
}

SafetensorsFile::View SafetensorsFile::get(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) {
    throw Error(fmt::format("{}: no tensor named '{}'", path_, name), "the file was written for another model");
  }
  return it->second;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (auto& [k, v] : index_) out.push_back(k);
  return out;
}

}  // namespace ft
