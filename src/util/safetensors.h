// safetensors files (the Hugging Face tensor container): an 8-byte little-endian header length,
// a JSON header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
// then the raw little-endian tensor bytes. Used for Hugging Face import/export and for the
// oracle's debug state.
//
//   SafetensorsWriter w;
//   w.add("model.norm.weight", "F32", {64}, data, 64 * 4);
//   w.metadata("step", "5");
//   w.write("out.safetensors");            // atomic
//
//   SafetensorsFile f("out.safetensors");  // validates the header against the file size
//   auto t = f.get("model.norm.weight");    // t.dtype, t.shape, t.data, t.bytes
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ft {

class SafetensorsWriter {
 public:
  // dtype: "F32", "F16", "BF16", "I32", "I64", "U16", ...
  void add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape, const void* data,
           size_t bytes);
  void metadata(const std::string& key, const std::string& value) { meta_[key] = value; }
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<char> bytes;
  };
  std::map<std::string, Entry> tensors_;
  std::map<std::string, std::string> meta_;
};

class SafetensorsFile {
 public:
  struct View {
    std::string dtype;
    std::vector<int64_t> shape;
    const char* data = nullptr;
    size_t bytes = 0;
  };
  // Throws ft::Error naming the file for a short file, a bad header or offsets out of range.
  explicit SafetensorsFile(const std::string& path);
  // Parses an in-memory image (fuzzing, tests).
  static SafetensorsFile from_bytes(std::string bytes, const std::string& name);

  bool has(const std::string& name) const { return index_.count(name) != 0; }
  View get(const std::string& name) const;  // throws when absent
  std::vector<std::string> names() const;
  const std::map<std::string, std::string>& metadata() const { return meta_; }

 private:
  SafetensorsFile() = default;
  void parse();
  std::string path_, bytes_;
  std::map<std::string, View> index_;
  std::map<std::string, std::string> meta_;
};

size_t safetensors_dtype_size(const std::string& dtype);  // 0 when unknown

// True when the file parses as safetensors (an output a command may regenerate in place).
bool is_safetensors_file(const std::string& path);

}  // namespace ft
