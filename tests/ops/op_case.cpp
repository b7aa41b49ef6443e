#include "ops/op_case.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>

#include "ops/rows_util.h"
#include "tensor/dtype.h"

namespace ft::test {

Shape::Shape(std::initializer_list<std::pair<const char*, int64_t>> dims) {
  for (const auto& [name, v] : dims) dims_.emplace_back(name, v);
}

int64_t Shape::operator[](std::string_view name) const {
  for (const auto& [n, v] : dims_)
    if (n == name) return v;
  throw std::out_of_range("op case shape (" + str() + ") has no size '" + std::string(name) + "'");
}

int64_t Shape::get(std::string_view name, int64_t fallback) const {
  for (const auto& [n, v] : dims_)
    if (n == name) return v;
  return fallback;
}

std::string Shape::str() const {
  std::string s;
  for (const auto& [n, v] : dims_) s += (s.empty() ? "" : ", ") + n + " " + std::to_string(v);
  return s;
}

Shape Shape::with(const char* name, int64_t value) const {
  Shape s = *this;
  for (auto& [n, v] : s.dims_) {
    if (n == name) {
      v = value;
      return s;
    }
  }
  s.dims_.emplace_back(name, value);
  return s;
}

std::string Tol::str() const {
  std::ostringstream os;
  switch (kind) {
    case kExact:
      return "exact";
    case kBf16:
      return "within one bf16 step";
    case kRelMax:
      os << "max error <= " << rtol << " max|want|";
      return os.str();
    case kClose:
      os << "rtol " << rtol << ", atol " << atol << " + " << atol_of_max << " max|want|";
      return os.str();
  }
  return "?";
}

double Buffer::at(size_t i) const {
  switch (elem) {
    case Elem::kF32:
      return as<float>()[i];
    case Elem::kBF16:
      return bf16_to_f32(as<uint16_t>()[i]);
    case Elem::kI32:
      return as<int32_t>()[i];
    case Elem::kF64:
      return as<double>()[i];
    case Elem::kF16:
      return f16_to_f32(as<uint16_t>()[i]);
  }
  return 0;
}

namespace {

size_t elem_size(Elem e) {
  return e == Elem::kF64 ? 8 : e == Elem::kBF16 || e == Elem::kF16 ? 2 : 4;
}

const char* elem_name(Elem e) {
  return e == Elem::kF64    ? "f64"
         : e == Elem::kBF16 ? "bf16"
         : e == Elem::kF16  ? "f16"
         : e == Elem::kI32  ? "i32"
                            : "f32";
}

}  // namespace

Buffer& Case::add(const std::string& name, Elem elem, Role role, size_t count, Tol tol) {
  for (const Buffer& b : buffers_)
    if (b.name == name) throw std::logic_error("op case: buffer '" + name + "' made twice");
  Buffer b;
  b.name = name;
  b.elem = elem;
  b.role = role;
  b.tol = tol;
  b.count = count;
  b.data.resize(std::max<size_t>(count, 1) * elem_size(elem));  // never a null data()
  buffers_.push_back(std::move(b));
  return buffers_.back();
}

float* Case::in_f32(const std::string& name, int64_t n, uint64_t seed, float lo, float hi) {
  return in_f32(name, random_floats(n, seed, lo, hi));
}

float* Case::in_f32(const std::string& name, const std::vector<float>& values) {
  Buffer& b = add(name, Elem::kF32, Role::kIn, values.size(), {});
  std::copy(values.begin(), values.end(), b.as<float>());
  return b.as<float>();
}

int32_t* Case::in_i32(const std::string& name, const std::vector<int32_t>& values) {
  Buffer& b = add(name, Elem::kI32, Role::kIn, values.size(), {});
  std::copy(values.begin(), values.end(), b.as<int32_t>());
  return b.as<int32_t>();
}

uint16_t* Case::in_bf16(const std::string& name, const std::vector<float>& values) {
  Buffer& b = add(name, Elem::kBF16, Role::kIn, values.size(), {});
  for (size_t i = 0; i < values.size(); ++i) b.as<uint16_t>()[i] = f32_to_bf16(values[i]);
  return b.as<uint16_t>();
}

uint16_t* Case::in_f16(const std::string& name, const std::vector<float>& values) {
  Buffer& b = add(name, Elem::kF16, Role::kIn, values.size(), {});
  for (size_t i = 0; i < values.size(); ++i) b.as<uint16_t>()[i] = f32_to_f16(values[i]);
  return b.as<uint16_t>();
}

double* Case::in_f64(const std::string& name, const std::vector<double>& values) {
  Buffer& b = add(name, Elem::kF64, Role::kIn, values.size(), {});
  std::copy(values.begin(), values.end(), b.as<double>());
  return b.as<double>();
}

int32_t* Case::out_i32(const std::string& name, int64_t n, Tol tol) {
  Buffer& b = add(name, Elem::kI32, Role::kOut, static_cast<size_t>(n), tol);
  std::fill_n(b.as<int32_t>(), n, std::numeric_limits<int32_t>::min());
  return b.as<int32_t>();
}

double* Case::out_f64(const std::string& name, int64_t n, Tol tol) {
  Buffer& b = add(name, Elem::kF64, Role::kOut, static_cast<size_t>(n), tol);
  std::fill_n(b.as<double>(), n, std::numeric_limits<double>::quiet_NaN());
  return b.as<double>();
}

float* Case::out_f32(const std::string& name, int64_t n, Tol tol) {
  Buffer& b = add(name, Elem::kF32, Role::kOut, static_cast<size_t>(n), tol);
  std::fill_n(b.as<float>(), n, std::numeric_limits<float>::quiet_NaN());
  return b.as<float>();
}

uint16_t* Case::out_bf16(const std::string& name, int64_t n, Tol tol) {
  Buffer& b = add(name, Elem::kBF16, Role::kOut, static_cast<size_t>(n), tol);
  std::fill_n(b.as<uint16_t>(), n, uint16_t{0x7fc1});  // a NaN
  return b.as<uint16_t>();
}

uint16_t* Case::out_f16(const std::string& name, int64_t n, Tol tol) {
  Buffer& b = add(name, Elem::kF16, Role::kOut, static_cast<size_t>(n), tol);
  std::fill_n(b.as<uint16_t>(), n, uint16_t{0x7e01});  // a NaN
  return b.as<uint16_t>();
}

float* Case::inout_f32(const std::string& name, int64_t n, uint64_t seed, Tol tol, float lo, float hi) {
  return inout_f32(name, random_floats(n, seed, lo, hi), tol);
}

float* Case::inout_f32(const std::string& name, const std::vector<float>& values, Tol tol) {
  Buffer& b = add(name, Elem::kF32, Role::kInOut, values.size(), tol);
  std::copy(values.begin(), values.end(), b.as<float>());
  return b.as<float>();
}

uint16_t* Case::inout_bf16(const std::string& name, const std::vector<float>& values, Tol tol) {
  Buffer& b = add(name, Elem::kBF16, Role::kInOut, values.size(), tol);
  for (size_t i = 0; i < values.size(); ++i) b.as<uint16_t>()[i] = f32_to_bf16(values[i]);
  return b.as<uint16_t>();
}

double* Case::inout_f64(const std::string& name, const std::vector<double>& values, Tol tol) {
  Buffer& b = add(name, Elem::kF64, Role::kInOut, values.size(), tol);
  std::copy(values.begin(), values.end(), b.as<double>());
  return b.as<double>();
}

const Buffer& Case::buffer(std::string_view name) const {
  for (const Buffer& b : buffers_)
    if (b.name == name) return b;
  throw std::out_of_range("op case has no buffer '" + std::string(name) + "'");
}

Buffer& Case::buffer(std::string_view name, Elem elem) {
  return const_cast<Buffer&>(static_cast<const Case*>(this)->buffer(name, elem));
}

const Buffer& Case::buffer(std::string_view name, Elem elem) const {
  const Buffer& b = buffer(name);
  if (b.elem != elem)
    throw std::logic_error("op case buffer '" + b.name + "' holds " + elem_name(b.elem) + ", not " + elem_name(elem));
  return b;
}

std::vector<float> Case::f32_vec(std::string_view name) const {
  const Buffer& b = buffer(name, Elem::kF32);
  return std::vector<float>(b.as<float>(), b.as<float>() + b.count);
}

std::string compare_buffer(const Buffer& got, const Buffer& want) {
  if (got.count != want.count || got.elem != want.elem) return got.name + ": sizes or types differ";
  const size_t n = got.count;
  std::ostringstream os;
  os.precision(9);
  if (got.tol.kind == Tol::kExact) {
    if (std::memcmp(got.data.data(), want.data.data(), n * elem_size(got.elem)) == 0) return "";
    size_t bad = 0, first = n;
    for (size_t i = 0; i < n; ++i) {
      const bool same = std::memcmp(got.data.data() + i * elem_size(got.elem),
                                    want.data.data() + i * elem_size(got.elem), elem_size(got.elem)) == 0;
      if (!same && bad++ == 0) first = i;
    }
    os << got.name << ": " << bad << " of " << n << " elements differ (want bit-identical); first at [" << first
       << "]: got " << got.at(first) << ", want " << want.at(first);
    return os.str();
  }
  if (got.tol.kind == Tol::kBf16) {
    for (size_t i = 0; i < n; ++i) {
      const int g = got.as<uint16_t>()[i], w = want.as<uint16_t>()[i];
      if (std::abs(g - w) > 1 && got.at(i) != want.at(i)) {
        os << got.name << "[" << i << "]: bf16 " << got.at(i) << " (0x" << std::hex << g << ") vs reference "
           << std::dec << want.at(i) << " (0x" << std::hex << w << "): more than one bf16 step";
        return os.str();
      }
    }
    return "";
  }
  double max_want = 0;
  for (size_t i = 0; i < n; ++i) max_want = std::max(max_want, std::fabs(want.at(i)));
  if (got.tol.kind == Tol::kRelMax) {
    double worst = 0;
    size_t worst_i = 0;
    for (size_t i = 0; i < n; ++i) {
      double err = std::fabs(got.at(i) - want.at(i));
      if (std::isnan(err)) err = INFINITY;
      if (err > worst) worst = err, worst_i = i;
    }
    if (worst <= got.tol.rtol * std::max(max_want, 1e-30)) return "";
    os << got.name << ": max error " << worst << " at [" << worst_i << "] (got " << got.at(worst_i) << ", want "
       << want.at(worst_i) << ") exceeds " << got.tol.rtol << " x max|want| = " << got.tol.rtol * max_want;
    return os.str();
  }
  size_t bad = 0, worst_i = 0;
  double worst = -1;
  for (size_t i = 0; i < n; ++i) {
    const double g = got.at(i), w = want.at(i), err = std::fabs(g - w);
    const double allowed = got.tol.atol + got.tol.atol_of_max * max_want + got.tol.rtol * std::fabs(w);
    if (err <= allowed) continue;
    ++bad;
    const double excess = std::isnan(err) ? INFINITY : err / std::max(allowed, 1e-300);
    if (excess > worst) worst = excess, worst_i = i;
  }
  if (bad == 0) return "";
  os << got.name << ": " << bad << " of " << n << " elements differ; worst at [" << worst_i << "]: got "
     << got.at(worst_i) << ", want " << want.at(worst_i) << " (" << got.tol.str() << ", max|want| " << max_want << ")";
  return os.str();
}

std::string OpCase::compare(const Case& before, const Case& got, const Case& want) const {
  std::string errors;
  for (const Buffer& g : got.buffers()) {
    if (!g.is_output()) continue;
    std::string e = compare_buffer(g, want.buffer(g.name));
    if (!e.empty()) errors += (errors.empty() ? "" : "\n") + e;
  }
  return errors;
}

}  // namespace ft::test
