#include "parallel/comm/host_staged_comm.h"

#include <functional>
#include <utility>

#include "tensor/device_runtime.h"
#include "tensor/memory.h"

namespace ft {
namespace {

class DoneWork final : public Work {
 public:
  void wait() override {}
  bool done() override { return true; }
};

// Host memory a collective reads or writes in place of a device buffer.
class HostBuffer {
 public:
  HostBuffer(Device dev, size_t bytes)
      : dev_(dev), bytes_(bytes), p_(mem_alloc_host(dev, bytes, MemCategory::kCommunication)) {}
  ~HostBuffer() { mem_free_host(dev_, p_, bytes_, MemCategory::kCommunication); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  void* get() const { return p_; }

 private:
  Device dev_;
  size_t bytes_;
  void* p_;
};

// The transport's work, then the copies back to the device (once, at the first wait or done).
class StagedWork final : public Work {
 public:
  StagedWork(WorkPtr inner, std::function<void()> after) : inner_(std::move(inner)), after_(std::move(after)) {}
  void wait() override {
    inner_->wait();
    finish();
  }
  bool done() override {
    if (!inner_->done()) return false;
    finish();
    return true;
  }

 private:
  void finish() {
    if (after_) std::exchange(after_, nullptr)();
  }
  WorkPtr inner_;
  std::function<void()> after_;
};

class HostStagedComm final : public Communicator {
 public:
  HostStagedComm(std::shared_ptr<Communicator> t, const ExecContext& ctx) : t_(std::move(t)), ctx_(ctx) {}
  int rank() const override { return t_->rank(); }
  int size() const override { return t_->size(); }
  const std::string& name() const override { return t_->name(); }
  int world_rank_of(int i) const override { return t_->world_rank_of(i); }
  CommStats stats() const override { return t_->stats(); }
  void barrier() override { t_->barrier(); }

  WorkPtr all_reduce_async(float* data, int64_t n, ReduceOp op, Wire wire) override {
    if (!on_device(data)) return t_->all_reduce_async(data, n, op, wire);
    if (size() == 1) return done();
    auto h = down(data, bytes(n, 4));
    return up(t_->all_reduce_async(static_cast<float*>(h->get()), n, op, wire), data, h, bytes(n, 4));
  }
  WorkPtr all_reduce_async(double* data, int64_t n, ReduceOp op) override {
    if (!on_device(data)) return t_->all_reduce_async(data, n, op);
    if (size() == 1) return done();
    auto h = down(data, bytes(n, 8));
    return up(t_->all_reduce_async(static_cast<double*>(h->get()), n, op), data, h, bytes(n, 8));
  }
  WorkPtr reduce_scatter_async(float* out, const float* in, int64_t n, Wire wire) override {
    if (!on_device(out) && !on_device(in)) return t_->reduce_scatter_async(out, in, n, wire);
    if (size() == 1) return local_copy(out, in, bytes(n, 4));
    auto hin = stage_in(in, bytes(n * size(), 4));
    auto hout = stage_out(out, bytes(n, 4));
    WorkPtr w = t_->reduce_scatter_async(ptr<float>(hout, out), ptr<const float>(hin, in), n, wire);
    return hout ? up(w, out, hout, bytes(n, 4), hin) : keep(w, hin);
  }
  WorkPtr all_gather_async(void* out, const void* in, int64_t n) override {
    if (!on_device(out) && !on_device(in)) return t_->all_gather_async(out, in, n);
    if (size() == 1) return local_copy(out, in, static_cast<size_t>(n));
    auto hin = stage_in(in, static_cast<size_t>(n));
    auto hout = stage_out(out, static_cast<size_t>(n) * static_cast<size_t>(size()));
    WorkPtr w = t_->all_gather_async(ptr<void>(hout, out), ptr<const void>(hin, in), n);
    return hout ? up(w, out, hout, static_cast<size_t>(n) * static_cast<size_t>(size()), hin) : keep(w, hin);
  }
  WorkPtr broadcast_async(void* data, int64_t n, int root) override {
    if (!on_device(data)) return t_->broadcast_async(data, n, root);
    if (size() == 1) return done();
    auto h = down(data, static_cast<size_t>(n));
    return up(t_->broadcast_async(h->get(), n, root), data, h, static_cast<size_t>(n));
  }
  WorkPtr send_async(const void* data, int64_t n, int peer, int tag) override {
    if (!on_device(data)) return t_->send_async(data, n, peer, tag);
    auto h = down(data, static_cast<size_t>(n));
    return keep(t_->send_async(h->get(), n, peer, tag), h);
  }
  WorkPtr recv_async(void* data, int64_t n, int peer, int tag) override {
    if (!on_device(data)) return t_->recv_async(data, n, peer, tag);
    auto h = std::make_shared<HostBuffer>(ctx_.device, static_cast<size_t>(n));
    return up(t_->recv_async(h->get(), n, peer, tag), data, h, static_cast<size_t>(n));
  }

 private:
  using Staged = std::shared_ptr<HostBuffer>;
  static size_t bytes(int64_t n, size_t elem) { return static_cast<size_t>(n) * elem; }
  static WorkPtr done() { return std::make_shared<DoneWork>(); }
  bool on_device(const void* p) const { return mem_on_device(ctx_.device, p); }
  Device dev_of(const void* p) const { return on_device(p) ? ctx_.device : Device::kCPU; }

  // A host copy of device bytes at src, complete when this returns (the transport reads it next).
  Staged down(const void* src, size_t n) {
    auto h = std::make_shared<HostBuffer>(ctx_.device, n);
    mem_copy(ctx_, h->get(), Device::kCPU, src, ctx_.device, n);
    synchronize(ctx_);
    return h;
  }
  // An input: staged when it is device memory, else null (the transport reads it in place).
  Staged stage_in(const void* src, size_t n) { return on_device(src) ? down(src, n) : nullptr; }
  // An output: a host buffer when it is device memory, else null.
  Staged stage_out(const void* dst, size_t n) {
    return on_device(dst) ? std::make_shared<HostBuffer>(ctx_.device, n) : nullptr;
  }
  template <typename T, typename P>
  static T* ptr(const Staged& h, P* p) {
    return static_cast<T*>(h ? h->get() : const_cast<std::remove_const_t<P>*>(p));
  }
  // When w completes: the host result back to dst on the device (ordered on the rank's stream).
  WorkPtr up(WorkPtr w, void* dst, Staged h, size_t n, Staged also = nullptr) {
    return std::make_shared<StagedWork>(
        std::move(w), [this, dst, h, n, also] { mem_copy(ctx_, dst, ctx_.device, h->get(), Device::kCPU, n); });
  }
  // Keeps h alive until w completes.
  static WorkPtr keep(WorkPtr w, Staged h) {
    return std::make_shared<StagedWork>(std::move(w), [h] {});
  }
  WorkPtr local_copy(void* out, const void* in, size_t n) {
    if (out != in) mem_copy(ctx_, out, dev_of(out), in, dev_of(in), n);
    return done();
  }

  std::shared_ptr<Communicator> t_;
  ExecContext ctx_;
};

}  // namespace

std::shared_ptr<Communicator> make_host_staged_comm(std::shared_ptr<Communicator> transport, const ExecContext& ctx) {
  if (ctx.on_host()) return transport;
  return std::make_shared<HostStagedComm>(std::move(transport), ctx);
}

}  // namespace ft
