#include "tensor/stream_timer.h"

#include "tensor/device_runtime.h"
#include "util/clock.h"

namespace ft {

StreamTimer::StreamTimer(const ExecContext& ctx) : ctx_(ctx), rt_(stream_mark_runtime(ctx)) {}

StreamTimer::~StreamTimer() {
  for (void* m : marks_) rt_->free_mark(m);  // marks_ is empty without rt_
}

void* StreamTimer::mark() {
  if (used_ < marks_.size()) return rt_->record_mark(ctx_, marks_[used_++]);
  marks_.push_back(rt_->record_mark(ctx_, nullptr));
  ++used_;
  return marks_.back();
}

void StreamTimer::begin() {
  if (rt_)
    mark();
  else
    host_.push_back(now_seconds());
}

void StreamTimer::end() {
  begin();  // the same: a mark (or a reading) closing the pair
}

double StreamTimer::seconds() const {
  double s = 0;
  if (!rt_) {
    for (size_t i = 0; i + 1 < host_.size(); i += 2) s += host_[i + 1] - host_[i];
    return s;
  }
  for (size_t i = 0; i + 1 < used_; i += 2) {
    const double d = rt_->mark_seconds(marks_[i], marks_[i + 1]);
    if (d > 0) s += d;
  }
  return s;
}

void StreamTimer::restart() {
  host_.clear();
  used_ = 0;
}

}  // namespace ft
