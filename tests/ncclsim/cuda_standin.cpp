// The host stand-in of the CUDA runtime functions NcclComm calls — linked only into tests (the
// test binary fluxtrain-ncclsim and nccl_comm_test), never into fluxtrain. It runs what NcclComm
// enqueues in order, on the host, so that NcclComm's own logic (stream ordering, events, waits,
// timeouts, routing of host buffers) runs for real without a GPU. It is not evidence that CUDA or
// NCCL behave this way.
//
//   streams     one worker thread each, running its queue in order; the null stream (0, legacy,
//               per-thread) is the calling thread: the CPU kernels of a host context have finished
//               by the time a call is made, so work "on" it runs at once
//   events      a generation counter: record enqueues "complete generation g"; query and
//               cudaStreamWaitEvent look at the generation recorded when they were called. An
//               event made without cudaEventDisableTiming is stamped with the host clock when its
//               stream runs the record: cudaEventElapsedTime is the time between two stamps (the
//               time the stream's worker spent between them)
//   memory      "device" memory is host memory: cudaPointerGetAttributes calls every pointer device
//               memory except the calling thread's stack (host scalars, as on a GPU machine)
#include <cuda_runtime_api.h>
#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace {

struct EventState {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0, completed = 0;
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

void run_on(cudaStream_t s, std::function<void()> f) {
  if (is_host_stream(s))
    f();
  else
    s->push(std::move(f));
}

// The stack of the calling thread (cached): host memory NcclComm must give to MPI.
bool on_my_stack(const void* p) {
  thread_local uintptr_t lo = 0, hi = 0;
  if (hi == 0) {
    pthread_attr_t a;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
      void* addr = nullptr;
      size_t size = 0;
      pthread_attr_getstack(&a, &addr, &size);
      lo = reinterpret_cast<uintptr_t>(addr);
      hi = lo + size;
      pthread_attr_destroy(&a);
    }
  }
  const auto x = reinterpret_cast<uintptr_t>(p);
  return x >= lo && x < hi;
}

}  // namespace

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
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* s) {
  return cudaStreamCreateWithFlags(s, 0);
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (is_host_stream(s)) return ret(cudaErrorInvalidResourceHandle);
  delete s;  // runs what is queued, then stops its thread
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (!is_host_stream(s)) s->sync();
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
  {
    std::lock_guard<std::mutex> lock(st->mu);
    g = ++st->recorded;
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
  return e->state->completed >= e->state->recorded ? cudaSuccess : cudaErrorNotReady;
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
  uint64_t g;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    g = st->recorded;
  }
  auto wait = [st, g] {
    std::unique_lock<std::mutex> lock(st->mu);
    st->cv.wait(lock, [&] { return st->completed >= g; });
  };
  if (is_host_stream(s)) {
    wait();  // the host is the null stream
  } else {
    s->push(wait);
  }
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* p) {
  if (!a) return ret(cudaErrorInvalidValue);
  *a = cudaPointerAttributes{};
  a->type = on_my_stack(p) ? cudaMemoryTypeUnregistered : cudaMemoryTypeDevice;
  a->device = t_device;
  a->devicePointer = const_cast<void*>(p);
  a->hostPointer = const_cast<void*>(p);
  return cudaSuccess;
}

}  // extern "C"
