// StreamTimer: the host clock on the CPU; a runtime's timing marks on a device (here a runtime
// registered by the test, whose "stream" is a clock the test advances and whose marks are reached
// only when the test says so: what a CUDA stream does asynchronously).
#include <gtest/gtest.h>
#include <time.h>

#include <vector>

#include "tensor/backend.h"
#include "tensor/device_runtime.h"
#include "tensor/stream_timer.h"

namespace ft {
namespace {

TEST(StreamTimer, OnTheCpuSumsTheHostClockOverEachInterval) {
  StreamTimer t(cpu_context());
  EXPECT_EQ(t.seconds(), 0);
  for (int i = 0; i < 2; ++i) {
    t.begin();
    timespec ts{0, 20'000'000};
    nanosleep(&ts, nullptr);
    t.end();
  }
  EXPECT_GE(t.seconds(), 0.04);
  EXPECT_LT(t.seconds(), 10.0);
  t.restart();
  EXPECT_EQ(t.seconds(), 0);
}

// The test's device: a mark is the stream clock's value when it was recorded, reached once the
// test has "run" the stream up to it.
struct FakeStream {
  static inline double clock = 0;  // the stream's time at the work queued now
  static inline int reached = 0;   // marks recorded before this count have been reached
  static inline int recorded = 0, made = 0, freed = 0;
};
struct Mark {
  double at = 0;
  int order = 0;
};

void* record(const ExecContext&, void* m) {
  Mark* mark = m ? static_cast<Mark*>(m) : (++FakeStream::made, new Mark);
  mark->at = FakeStream::clock;
  mark->order = FakeStream::recorded++;
  return mark;
}
double seconds_between(void* a, void* b) {
  auto* x = static_cast<Mark*>(a);
  auto* y = static_cast<Mark*>(b);
  if (y->order >= FakeStream::reached) return -1;
  return y->at - x->at;
}
void free_mark(void* m) {
  ++FakeStream::freed;
  delete static_cast<Mark*>(m);
}

TEST(StreamTimer, OnADeviceSumsTheIntervalsTheStreamHasReachedAndReusesItsMarks) {
  if (device_runtime_registered(Device::kCUDA)) GTEST_SKIP() << "this binary has a CUDA runtime";
  DeviceRuntime rt;
  rt.device_count = [] { return 1; };
  rt.make_context = [](int) { return ExecContext{.device = Device::kCUDA, .owner = nullptr}; };
  rt.synchronize = [](const ExecContext&) { FakeStream::reached = FakeStream::recorded; };
  rt.record_mark = record;
  rt.mark_seconds = seconds_between;
  rt.free_mark = free_mark;
  register_backend(Backend{.device = Device::kCUDA, .runtime = rt});
  const ExecContext gpu = rt.make_context(0);  // what make_exec_context returns for a backend with ops
  {
    StreamTimer t(gpu);
    FakeStream::clock = 1.0;
    t.begin();
    FakeStream::clock = 1.5;  // it stalls 0.5 s (a stream wait)
    t.end();
    FakeStream::clock = 4.0;  // compute
    t.begin();
    FakeStream::clock = 4.25;
    t.end();
    EXPECT_EQ(t.seconds(), 0) << "the stream has reached no mark yet: the host did not wait";
    FakeStream::reached = 2;  // the first interval has run
    EXPECT_DOUBLE_EQ(t.seconds(), 0.5);
    synchronize(gpu);
    EXPECT_DOUBLE_EQ(t.seconds(), 0.75);
    EXPECT_EQ(FakeStream::made, 4);

    t.restart();
    EXPECT_EQ(t.seconds(), 0);
    t.begin();
    FakeStream::clock = 5.0;
    t.end();
    synchronize(gpu);
    EXPECT_DOUBLE_EQ(t.seconds(), 0.75);
    EXPECT_EQ(FakeStream::made, 4) << "marks are reused after restart()";
  }
  EXPECT_EQ(FakeStream::freed, 4);
}

}  // namespace
}  // namespace ft
