// The host stand-in of the CUDA runtime functions NcclComm calls — linked only into tests beside
// the host-emulated GPU, which owns the device memory (tests/ncclemu: fluxtrain-devemu-nccl,
// nccl_comm_test, nccl_watchdog_test), never into fluxtrain. It runs what NcclComm enqueues in
// order, on the host, so that NcclComm's own logic (stream ordering, events, waits, timeouts) runs
// for real without a GPU. It is not evidence that CUDA or NCCL behave this way.
//
//   streams     one worker thread each, running its queue in order; the null stream (0, legacy,
//               per-thread) is the calling thread, so work "on" it runs at once. So is a foreign
//               stream (a token the stand-in did not make: the host-emulated GPU's, whose ops have
//               finished when their call returns) until NCCL work is enqueued on it, which makes it
//               a worker (standin.h)
//   events      a generation counter: record enqueues "complete generation g"; query and
//               cudaStreamWaitEvent look at the generation recorded when they were called. An
//               event made without cudaEventDisableTiming is stamped with the host clock when its
//               stream runs the record: cudaEventElapsedTime is the time between two stamps (the
//               time the stream's worker spent between them)
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "standin.h"

namespace {

struct EventState {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0, completed = 0;
  uint64_t clock = 0;  // the allocation clock the last record's stream was ordered after (standin.h)
  bool timing = true;  // made without cudaEventDisableTiming
  double stamp = 0;    // host clock (seconds) when the latest completed record ran
};

double host_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

thread_local cudaError_t t_last = cudaSuccess;
thread_local int t_device = 0;

cudaError_t ret(cudaError_t e) {
  if (e != cudaSuccess) t_last = e;
  return e;
}

bool is_host_stream(cudaStream_t s) {
  return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

}  // namespace

struct CUstream_st {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool busy = false, stop = false;
  std::atomic<uint64_t> ordered{0};  // the allocation clock its queue is ordered after (standin.h)
  std::thread worker;

  CUstream_st() : worker([this] { loop(); }) {}
  ~CUstream_st() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }
  void push(std::function<void()> f) {
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(std::move(f));
    }
    cv.notify_all();
  }
  void sync() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return queue.empty() && !busy; });
  }
  void loop() {
    while (true) {
      std::function<void()> f;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || !queue.empty(); });
        if (queue.empty()) return;  // stop, drained
        f = std::move(queue.front());
        queue.pop_front();
        busy = true;
      }
      f();
      f = nullptr;  // what it holds is released before a sync() returns
      {
        std::lock_guard<std::mutex> lock(mu);
        busy = false;
      }
      cv.notify_all();
    }
  }
};

struct CUevent_st {
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
};

namespace {

// The worker streams: those cudaStreamCreate made, and foreign tokens adopted (standin.h). Never
// destroyed: streams may be released at exit.
struct Streams {
  std::mutex mu;
  std::unordered_set<CUstream_st*> own;
  std::unordered_map<const void*, CUstream_st*> adopted;
  std::unordered_map<const void*, uint64_t> foreign_ordered;  // waits of foreign streams not yet adopted
};
Streams& streams() {
  static auto* s = new Streams;
  return *s;
}

// The worker behind s, or null: the null stream, or a foreign stream whose work is done by the
// time a call returns.
CUstream_st* worker_of(const void* s) {
  if (is_host_stream(static_cast<cudaStream_t>(const_cast<void*>(s)))) return nullptr;
  Streams& all = streams();
  std::lock_guard<std::mutex> lock(all.mu);
  auto* own = static_cast<CUstream_st*>(const_cast<void*>(s));
  if (all.own.count(own)) return own;
  auto it = all.adopted.find(s);
  return it == all.adopted.end() ? nullptr : it->second;
}

void run_on(cudaStream_t s, std::function<void()> f) {
  if (CUstream_st* w = worker_of(s))
    w->push(std::move(f));
  else
    f();
}

void (*g_access)(const std::function<void()>&) = nullptr;
uint64_t (*g_clock)() = nullptr;
uint64_t (*g_allocated_at)(const void*) = nullptr;

// What a stream is ordered after, as an event recorded on it now carries it.
uint64_t clock_of(cudaStream_t s) {
  if (CUstream_st* w = worker_of(s)) return w->ordered;
  return g_clock ? g_clock() : 0;  // the host and a foreign stream: after everything so far
}

void order_after(cudaStream_t s, uint64_t clock) {
  if (CUstream_st* w = worker_of(s)) {
    uint64_t o = w->ordered;
    while (clock > o && !w->ordered.compare_exchange_weak(o, clock)) {
    }
    return;
  }
  if (is_host_stream(s)) return;
  std::lock_guard<std::mutex> lock(streams().mu);
  uint64_t& o = streams().foreign_ordered[s];
  if (clock > o) o = clock;
}

}  // namespace

namespace ncclsim {

bool queue_on_worker(const void* token, std::function<void()> f) {
  CUstream_st* w = worker_of(token);
  if (w) w->push(std::move(f));
  return w != nullptr;
}

void drain(const void* token) {
  if (CUstream_st* w = worker_of(token)) w->sync();
}

void adopt_stream(const void* token) {
  if (is_host_stream(static_cast<cudaStream_t>(const_cast<void*>(token)))) return;
  Streams& all = streams();
  std::lock_guard<std::mutex> lock(all.mu);
  if (all.own.count(static_cast<CUstream_st*>(const_cast<void*>(token))) || all.adopted.count(token)) return;
  auto* w = new CUstream_st;
  auto it = all.foreign_ordered.find(token);  // the waits it made while it was synchronous
  if (it != all.foreign_ordered.end()) {
    w->ordered = it->second;
    all.foreign_ordered.erase(it);
  }
  all.adopted[token] = w;
}

void forget_stream(const void* token) {
  CUstream_st* w = nullptr;
  {
    Streams& all = streams();
    std::lock_guard<std::mutex> lock(all.mu);
    all.foreign_ordered.erase(token);
    auto it = all.adopted.find(token);
    if (it == all.adopted.end()) return;
    w = it->second;
    all.adopted.erase(it);
  }
  if (w->worker.get_id() == std::this_thread::get_id()) {
    // Dropped by its own worker (the last work item held the token's owner): it cannot join itself.
    {
      std::lock_guard<std::mutex> lock(w->mu);
      w->stop = true;
    }
    w->worker.detach();  // the thread ends after this item; the object is left
    return;
  }
  delete w;  // runs what is queued, then stops its thread
}

void set_memory_access(void (*access)(const std::function<void()>& f)) {
  g_access = access;
}

void set_allocation_clock(uint64_t (*clock)(), uint64_t (*allocated_at)(const void*)) {
  g_clock = clock;
  g_allocated_at = allocated_at;
}

void check_ordered(const void* stream, const void* p, const char* call, bool /*write*/, size_t /*bytes*/) {
  if (!g_allocated_at || !p) return;
  CUstream_st* w = worker_of(stream);
  if (!w) return;
  const uint64_t made = g_allocated_at(p), ordered = w->ordered;
  if (made <= ordered) return;
  std::fprintf(stderr,
               "ncclsim: %s on a communication stream uses device memory %p allocated (allocation %llu) after the "
               "stream last waited for the compute stream (allocation %llu): a stream-ordered allocator "
               "(cudaMallocAsync on the compute stream) may still be using that memory for what was freed there\n",
               call, p, static_cast<unsigned long long>(made), static_cast<unsigned long long>(ordered));
  std::fflush(stderr);
  std::abort();
}

void touch_memory(const std::function<void()>& f) {
  if (g_access)
    g_access(f);
  else
    f();
}

}  // namespace ncclsim

extern "C" {

cudaError_t cudaGetLastError() {
  cudaError_t e = t_last;
  t_last = cudaSuccess;
  return e;
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error (host stand-in)";
    case cudaErrorNotReady:
      return "device not ready (host stand-in)";
    case cudaErrorInvalidValue:
      return "invalid argument (host stand-in)";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle (host stand-in)";
    default:
      return "error (host stand-in)";
  }
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0) return ret(cudaErrorInvalidValue);
  t_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = t_device;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) {
  *s = new CUstream_st;
  std::lock_guard<std::mutex> lock(streams().mu);
  streams().own.insert(*s);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* s) {
  return cudaStreamCreateWithFlags(s, 0);
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  {
    std::lock_guard<std::mutex> lock(streams().mu);
    if (!streams().own.erase(s)) return ret(cudaErrorInvalidResourceHandle);
  }
  delete s;  // runs what is queued, then stops its thread
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (CUstream_st* w = worker_of(s)) w->sync();
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* user) {
  run_on(s, [fn, user] { fn(user); });
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
  *e = new CUevent_st;
  (*e)->state->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* e) {
  return cudaEventCreateWithFlags(e, 0);
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;  // its state lives on while queued work refers to it
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (!e) return ret(cudaErrorInvalidResourceHandle);
  std::shared_ptr<EventState> st = e->state;
  uint64_t g;
  const uint64_t clock = clock_of(s);
  {
    std::lock_guard<std::mutex> lock(st->mu);
    g = ++st->recorded;
    st->clock = clock;
  }
  run_on(s, [st, g] {
    {
      std::lock_guard<std::mutex> lock(st->mu);
      if (g > st->completed) {
        st->completed = g;
        st->stamp = host_seconds();
      }
    }
    st->cv.notify_all();
  });
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (!e) return ret(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(e->state->mu);
  // Not ready is also left as the thread's last error (the CUDA runtime may: callers clear it).
  return e->state->completed >= e->state->recorded ? cudaSuccess : ret(cudaErrorNotReady);
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (!e) return ret(cudaErrorInvalidResourceHandle);
  std::unique_lock<std::mutex> lock(e->state->mu);
  const uint64_t g = e->state->recorded;
  e->state->cv.wait(lock, [&] { return e->state->completed >= g; });
  return cudaSuccess;
}

// Milliseconds between the two records' stamps; both must have completed (else cudaErrorNotReady)
// and both be timing events (else, as CUDA says, an invalid handle).
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms || !start || !end) return ret(cudaErrorInvalidValue);
  double t[2];
  int k = 0;
  for (cudaEvent_t e : {start, end}) {
    std::lock_guard<std::mutex> lock(e->state->mu);
    if (!e->state->timing || e->state->recorded == 0) return ret(cudaErrorInvalidResourceHandle);
    if (e->state->completed < e->state->recorded) return ret(cudaErrorNotReady);
    t[k++] = e->state->stamp;
  }
  *ms = static_cast<float>((t[1] - t[0]) * 1e3);
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
  if (!e) return ret(cudaErrorInvalidResourceHandle);
  std::shared_ptr<EventState> st = e->state;
  uint64_t g, clock;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    g = st->recorded;
    clock = st->clock;
  }
  order_after(s, clock);
  auto wait = [st, g] {
    std::unique_lock<std::mutex> lock(st->mu);
    st->cv.wait(lock, [&] { return st->completed >= g; });
  };
  if (CUstream_st* w = worker_of(s)) {
    w->push(wait);
  } else {
    wait();  // the host is the null stream (and a foreign stream's)
  }
  return cudaSuccess;
}

}  // extern "C"
