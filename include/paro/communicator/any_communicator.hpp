#pragma once
// A Communicator whose backend is chosen at run time: one type for code that cannot be a template over the
// transport (a trainer reading --backend, a language binding). It owns a Communicator<T> of any backend
// and forwards every verb to it, one virtual call per verb; the collectives themselves run exactly as on
// Communicator<T>. tools/backends.hpp makes one from a backend's name.
//
//   paro::AnyCommunicator comm(paro::mpi::Transport{});            // or any other transport
//   comm.all_reduce(grad.data(), grad.data(), grad.size(), paro::ReduceOp::avg);
//   comm.backend();                                                 // "mpi"
//
// transport(scope) gives what a caller of a type-erased communicator may do with its transport: rank,
// size and memory in its space (allocate, upload, download), as buffers staged for a device backend need.

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "paro/algorithms/algorithm.hpp"
#include "paro/algorithms/registry.hpp"
#include "paro/communicator/blocks.hpp"
#include "paro/communicator/communicator.hpp"
#include "paro/communicator/jobs.hpp"
#include "paro/communicator/options.hpp"
#include "paro/communicator/progress.hpp"
#include "paro/communicator/scopes.hpp"
#include "paro/communicator/verbs.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/topology/grouping.hpp"
#include "paro/topology/topology.hpp"
#include "paro/transport/transport.hpp"

namespace paro {

// Scratch memory of a type-erased transport: owns the backend's buffer.
class AnyBuffer {
 public:
  AnyBuffer() = default;
  template <class Buffer>
  explicit AnyBuffer(Buffer b) : data_(b.data()), owner_(std::make_shared<Buffer>(std::move(b))) {}
  char* data() const { return data_; }

 private:
  char* data_ = nullptr;
  std::shared_ptr<void> owner_;
};

// The part of a transport that code above a type-erased communicator may use.
class AnyTransport {
 public:
  virtual ~AnyTransport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual AnyBuffer allocate(std::size_t bytes) = 0;
  virtual void upload(void* dst, const void* host, std::size_t bytes) = 0;
  virtual void download(void* host, const void* src, std::size_t bytes) = 0;
};

class AnyCommunicator : public Verbs<AnyCommunicator> {
  using Named = Verbs<AnyCommunicator>;

 public:
  // Builds a Communicator<Transport> over t (collective, as that constructor).
  template <class Transport, class = std::enable_if_t<!std::is_same_v<std::decay_t<Transport>, AnyCommunicator>>>
  explicit AnyCommunicator(Transport t, CommunicatorConfig config = {})
      : impl_(std::make_unique<Model<Transport>>(std::move(t), std::move(config))) {}

  int rank() const { return impl_->rank(); }
  int size() const { return impl_->size(); }
  const char* backend() const { return impl_->backend(); }
  const Topology& topology() const { return impl_->topology(); }
  const Groups& groups() const { return impl_->groups(); }
  const GroupSpec& grouping() const { return impl_->grouping(); }
  const Tuning& tuning() const { return impl_->tuning(); }
  AnyTransport& transport(Scope s = Scope::global) { return impl_->transport(s); }
  using Collectives = algorithms::BuiltinCollectives;
  static const char* name_of(Algorithm a) { return paro::name_of(a); }
  static const char* name_of(Collective c) { return paro::name_of(c); }

  // As Communicator's verbs.
  void barrier(Scope s = Scope::global) { impl_->barrier(s); }
  void wait_all() { impl_->wait_all(); }
  Algorithm resolve(Collective c, std::size_t full_bytes, Algorithm requested = Algorithm::automatic,
                    Scope scope = Scope::global) const {
    return impl_->resolve(c, full_bytes, requested, scope);
  }
  double predict_us(Algorithm a, Collective c, std::size_t full_bytes, Scope s = Scope::global) const {
    return impl_->predict_us(a, c, full_bytes, s);
  }
  double lower_bound_us(Collective c, std::size_t full_bytes, Scope s = Scope::global) const {
    return impl_->lower_bound_us(c, full_bytes, s);
  }
  void collective(Collective c, const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op,
                  Options o = {}) {
    impl_->collective(c, send, recv, count, dt, op, std::move(o));
  }
  Request icollective(Collective c, const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op,
                      Options o = {}) {
    return impl_->icollective(c, send, recv, count, dt, op, std::move(o));
  }
  void broadcast(void* buf, std::size_t count, DataType dt, int root, Options o = {}) {
    impl_->broadcast(buf, count, dt, root, std::move(o));
  }
  Request ibroadcast(void* buf, std::size_t count, DataType dt, int root, Options o = {}) {
    return impl_->ibroadcast(buf, count, dt, root, std::move(o));
  }
  void gather(const void* send, void* recv, std::size_t count, DataType dt, int root, Options o = {}) {
    impl_->rooted(Rooted::gather, send, recv, count, dt, root, std::move(o)).wait();
  }
  Request igather(const void* send, void* recv, std::size_t count, DataType dt, int root, Options o = {}) {
    return impl_->rooted(Rooted::gather, send, recv, count, dt, root, std::move(o));
  }
  void scatter(const void* send, void* recv, std::size_t count, DataType dt, int root, Options o = {}) {
    impl_->rooted(Rooted::scatter, send, recv, count, dt, root, std::move(o)).wait();
  }
  Request iscatter(const void* send, void* recv, std::size_t count, DataType dt, int root, Options o = {}) {
    return impl_->rooted(Rooted::scatter, send, recv, count, dt, root, std::move(o));
  }
  void reduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op, int root, Options o = {}) {
    impl_->ireduce(send, recv, count, dt, op, root, std::move(o)).wait();
  }
  Request ireduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op, int root, Options o = {}) {
    return impl_->ireduce(send, recv, count, dt, op, root, std::move(o));
  }
  void all_to_allv(const void* send, const Blocks& send_blocks, void* recv, const Blocks& recv_blocks, DataType dt,
                   Options o = {}) {
    impl_->iall_to_allv(send, send_blocks, recv, recv_blocks, dt, std::move(o)).wait();
  }
  Request iall_to_allv(const void* send, const Blocks& send_blocks, void* recv, const Blocks& recv_blocks, DataType dt,
                       Options o = {}) {
    return impl_->iall_to_allv(send, send_blocks, recv, recv_blocks, dt, std::move(o));
  }
  void send(const void* buf, std::size_t count, DataType dt, int peer, int tag = 0, Scope s = Scope::global) {
    isend(buf, count, dt, peer, tag, s).wait();
  }
  void recv(void* buf, std::size_t count, DataType dt, int peer, int tag = 0, Scope s = Scope::global) {
    irecv(buf, count, dt, peer, tag, s).wait();
  }
  Request isend(const void* buf, std::size_t count, DataType dt, int peer, int tag = 0, Scope s = Scope::global) {
    return impl_->isend(buf, count, dt, peer, tag, s);
  }
  Request irecv(void* buf, std::size_t count, DataType dt, int peer, int tag = 0, Scope s = Scope::global) {
    return impl_->irecv(buf, count, dt, peer, tag, s);
  }
  bool messages_available() const { return impl_->messages_available(); }
  using Named::all_to_allv;
  using Named::broadcast;
  using Named::iall_to_allv;
  using Named::ibroadcast;

 private:
  struct Interface {
    virtual ~Interface() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual const char* backend() const = 0;
    virtual const Topology& topology() const = 0;
    virtual const Groups& groups() const = 0;
    virtual const GroupSpec& grouping() const = 0;
    virtual const Tuning& tuning() const = 0;
    virtual AnyTransport& transport(Scope s) = 0;
    virtual void barrier(Scope s) = 0;
    virtual void wait_all() = 0;
    virtual Algorithm resolve(Collective c, std::size_t full_bytes, Algorithm requested, Scope scope) const = 0;
    virtual double predict_us(Algorithm a, Collective c, std::size_t full_bytes, Scope s) const = 0;
    virtual double lower_bound_us(Collective c, std::size_t full_bytes, Scope s) const = 0;
    virtual void collective(Collective c, const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op,
                            Options o) = 0;
    virtual Request icollective(Collective c, const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op,
                                Options o) = 0;
    virtual void broadcast(void* buf, std::size_t count, DataType dt, int root, Options o) = 0;
    virtual Request ibroadcast(void* buf, std::size_t count, DataType dt, int root, Options o) = 0;
    virtual Request rooted(Rooted kind, const void* send, void* recv, std::size_t count, DataType dt, int root,
                           Options o) = 0;
    virtual Request ireduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op, int root,
                            Options o) = 0;
    virtual Request iall_to_allv(const void* send, const Blocks& send_blocks, void* recv, const Blocks& recv_blocks,
                                 DataType dt, Options o) = 0;
    virtual Request isend(const void* buf, std::size_t count, DataType dt, int peer, int tag, Scope s) = 0;
    virtual Request irecv(void* buf, std::size_t count, DataType dt, int peer, int tag, Scope s) = 0;
    virtual bool messages_available() const = 0;
  };

  template <class Transport>
  class Memory final : public AnyTransport {
   public:
    explicit Memory(Transport& t) : t_(t) {}
    int rank() const override { return t_.rank(); }
    int size() const override { return t_.size(); }
    AnyBuffer allocate(std::size_t bytes) override { return AnyBuffer(t_.allocate(bytes)); }
    void upload(void* dst, const void* host, std::size_t bytes) override { t_.upload(dst, host, bytes); }
    void download(void* host, const void* src, std::size_t bytes) override { t_.download(host, src, bytes); }

   private:
    Transport& t_;
  };

  template <class Transport>
  class Model final : public Interface {
   public:
    Model(Transport t, CommunicatorConfig config)
        : comm_(std::move(t), std::move(config)),
          scopes_{Memory<Transport>(comm_.transport(Scope::global)), Memory<Transport>(comm_.transport(Scope::intra)),
                  Memory<Transport>(comm_.transport(Scope::inter))} {}
    int rank() const override { return comm_.rank(); }
    int size() const override { return comm_.size(); }
    const char* backend() const override { return Transport::name; }
    const Topology& topology() const override { return comm_.topology(); }
    const Groups& groups() const override { return comm_.groups(); }
    const GroupSpec& grouping() const override { return comm_.grouping(); }
    const Tuning& tuning() const override { return comm_.tuning(); }
    AnyTransport& transport(Scope s) override {
      detail::require(s == Scope::global || s == Scope::intra || s == Scope::inter, "transport: invalid Scope value ",
                      static_cast<int>(s), "; allowed: global intra inter");
      return scopes_[static_cast<std::size_t>(s)];
    }
    void barrier(Scope s) override { comm_.barrier(s); }
    void wait_all() override { comm_.wait_all(); }
    Algorithm resolve(Collective c, std::size_t full_bytes, Algorithm requested, Scope scope) const override {
      return comm_.resolve(c, full_bytes, requested, scope);
    }
    double predict_us(Algorithm a, Collective c, std::size_t full_bytes, Scope s) const override {
      return comm_.predict_us(a, c, full_bytes, s);
    }
    double lower_bound_us(Collective c, std::size_t full_bytes, Scope s) const override {
      return comm_.lower_bound_us(c, full_bytes, s);
    }
    void collective(Collective c, const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op,
                    Options o) override {
      comm_.collective(c, send, recv, count, dt, op, std::move(o));
    }
    Request icollective(Collective c, const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op,
                        Options o) override {
      return comm_.icollective(c, send, recv, count, dt, op, std::move(o));
    }
    void broadcast(void* buf, std::size_t count, DataType dt, int root, Options o) override {
      comm_.broadcast(buf, count, dt, root, std::move(o));
    }
    Request ibroadcast(void* buf, std::size_t count, DataType dt, int root, Options o) override {
      return comm_.ibroadcast(buf, count, dt, root, std::move(o));
    }
    Request rooted(Rooted kind, const void* send, void* recv, std::size_t count, DataType dt, int root,
                   Options o) override {
      if (kind == Rooted::gather) return comm_.igather(send, recv, count, dt, root, std::move(o));
      return comm_.iscatter(send, recv, count, dt, root, std::move(o));
    }
    Request ireduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op, int root,
                    Options o) override {
      return comm_.ireduce(send, recv, count, dt, op, root, std::move(o));
    }
    Request iall_to_allv(const void* send, const Blocks& send_blocks, void* recv, const Blocks& recv_blocks,
                         DataType dt, Options o) override {
      return comm_.iall_to_allv(send, send_blocks, recv, recv_blocks, dt, std::move(o));
    }
    Request isend(const void* buf, std::size_t count, DataType dt, int peer, int tag, Scope s) override {
      return comm_.isend(buf, count, dt, peer, tag, s);
    }
    Request irecv(void* buf, std::size_t count, DataType dt, int peer, int tag, Scope s) override {
      return comm_.irecv(buf, count, dt, peer, tag, s);
    }
    bool messages_available() const override { return comm_.messages_available(); }

   private:
    Communicator<Transport> comm_;
    Memory<Transport> scopes_[3];  // global, intra, inter
  };

  std::unique_ptr<Interface> impl_;
};

}  // namespace paro
