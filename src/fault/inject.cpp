#include "fault/inject.h"

#include <cmath>
#include <cstdlib>

#include "util/error.h"
#include "util/log.h"
#include "util/strings.h"

namespace ft {
namespace {

int64_t parse_int(const std::string& s, const std::string& item) {
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < 0)
    throw Error(fmt::format("FLUXTRAIN_FAULT_INJECT: '{}': '{}' is not a non-negative integer", item, s),
                "items look like nan@5, gradnan@7:1, spike@30*20");
  return v;
}

}  // namespace

FaultInjector::FaultInjector(const std::string& spec) {
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    if (item.empty()) continue;
    size_t at = item.find('@');
    if (at == std::string::npos)
      throw Error(fmt::format("FLUXTRAIN_FAULT_INJECT: '{}' has no '@STEP'", item),
                  "items look like nan@5, spike@30*20");
    std::string kind = item.substr(0, at), rest = item.substr(at + 1);
    Item it{Kind::kNan, 0, -1, 20.0};
    if (kind == "nan")
      it.kind = Kind::kNan;
    else if (kind == "inf")
      it.kind = Kind::kInf;
    else if (kind == "gradnan")
      it.kind = Kind::kGradNan;
    else if (kind == "gradinf")
      it.kind = Kind::kGradInf;
    else if (kind == "spike")
      it.kind = Kind::kSpike;
    else
      throw Error(fmt::format("FLUXTRAIN_FAULT_INJECT: '{}': unknown kind '{}'", item, kind),
                  "use nan, inf, gradnan, gradinf or spike");
    if (size_t star = rest.find('*'); star != std::string::npos) {
      char* end = nullptr;
      it.factor = std::strtod(rest.c_str() + star + 1, &end);
      if (*end != '\0' || !(it.factor > 0))
        throw Error(fmt::format("FLUXTRAIN_FAULT_INJECT: '{}': bad factor", item), "spike@30*20 multiplies by 20");
      rest = rest.substr(0, star);
    }
    if (size_t colon = rest.find(':'); colon != std::string::npos) {
      it.rank = static_cast<int>(parse_int(rest.substr(colon + 1), item));
      rest = rest.substr(0, colon);
    }
    it.step = parse_int(rest, item);
    if (it.step < 1) throw Error(fmt::format("FLUXTRAIN_FAULT_INJECT: '{}': steps count from 1", item));
    items_.push_back(it);
  }
}

FaultInjector FaultInjector::from_env() {
  const char* s = std::getenv("FLUXTRAIN_FAULT_INJECT");
  return s ? FaultInjector(s) : FaultInjector();
}

InjectedDelays FaultInjector::delays() {
  InjectedDelays d;
  if (const char* v = std::getenv("FLUXTRAIN_CKPT_TEST_DELAY_MS")) d.ckpt_write_ms = std::atoi(v);
  if (const char* v = std::getenv("FLUXTRAIN_CKPT_TEST_COPY_DELAY_MS")) d.ckpt_copy_ms = std::atoi(v);
  if (const char* v = std::getenv("FLUXTRAIN_STEP_TEST_DELAY_MS")) d.step_ms = std::atoi(v);
  if (const char* v = std::getenv("FLUXTRAIN_START_TEST_DELAY_MS")) d.start_ms = std::atoi(v);
  if (const char* v = std::getenv("FLUXTRAIN_EVAL_TEST_DELAY_MS")) d.eval_batch_ms = std::atoi(v);
  return d;
}

std::optional<MemoryLimit> FaultInjector::memory_limit() {
  const char* t = std::getenv("FLUXTRAIN_TEST_MEMORY_LIMIT");
  if (!t) return std::nullopt;
  log_warn("memory: the limit is FLUXTRAIN_TEST_MEMORY_LIMIT = {} bytes (tests only)", t);
  return MemoryLimit{.bytes = std::strtod(t, nullptr),
                     .source = "FLUXTRAIN_TEST_MEMORY_LIMIT, a test's stand-in for a cgroup limit"};
}

InjectedFault FaultInjector::at(int64_t batch_step, int rank) const {
  InjectedFault f;
  for (const Item& it : items_) {
    if (it.step != batch_step || (it.rank >= 0 && it.rank != rank)) continue;
    switch (it.kind) {
      case Kind::kNan:
        f.loss_factor = NAN;
        f.grad_factor = NAN;
        break;
      case Kind::kInf:
        f.loss_factor = INFINITY;
        f.grad_factor = INFINITY;
        break;
      case Kind::kGradNan:
        f.grad_factor = NAN;
        break;
      case Kind::kGradInf:
        f.grad_factor = INFINITY;
        break;
      case Kind::kSpike:
        f.loss_factor *= it.factor;
        f.grad_factor *= static_cast<float>(it.factor);
        break;
    }
  }
  return f;
}

}  // namespace ft
