#include "tensor/stream_timer.h"

#include "tensor/device_runtime.h"
#include "util/clock.h"

namespace ft {

StreamTimer::StreamTimer(const ExecContext& ctx) : ctx_(ctx), device_marks_(stream_mark_runtime(ctx) != nullptr) {}

StreamTimer::~StreamTimer() {
  if (const DeviceRuntime* rt = stream_mark_runtime(ctx_))
    for (void* m : marks_) rt->free_mark(m);
}

void* StreamTimer::mark() {
  const DeviceRuntime* rt = stream_mark_runtime(ctx_);
  if (used_ < marks_.size()) return rt->record_mark(ctx_, marks_[used_++]);
  marks_.push_back(rt->record_mark(ctx_, nullptr));
  ++used_;
  return marks_.back();
}

void StreamTimer::begin() {
  if (device_marks_)
    mark();
  else
    host_.push_back(now_seconds());
}

void StreamTimer::end() {
  begin();  // the same: a mark (or a reading) closing the pair
}

double StreamTimer::seconds() const {
  double s = 0;
  if (!device_marks_) {
    for (size_t i = 0; i + 1 < host_.size(); i += 2) s += host_[i + 1] - host_[i];
    return s;
  }
  const DeviceRuntime* rt = stream_mark_runtime(ctx_);
  for (size_t i = 0; i + 1 < used_; i += 2) {
    const double d = rt->mark_seconds(marks_[i], marks_[i + 1]);
    if (d > 0) s += d;
  }
  return s;
}

void StreamTimer::restart() {
  host_.clear();
  used_ = 0;
}

}  // namespace ft
