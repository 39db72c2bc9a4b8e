#pragma once
// The c10d Store as paro's bootstrap Store (the group's ranks meet through it).

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <c10/util/Exception.h>

#include <cstdint>
#include <string>
#include <utility>

#include "paro/bootstrap/bootstrap.hpp"
#include "paro/core/error.hpp"

namespace paro::torch_backend {

// The c10d Store as paro's bootstrap Store. Its get waits with the store's own timeout.
class C10dStore final : public bootstrap::Store {
 public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const bootstrap::Bytes& value) override { store_->set(key, value); }
  bootstrap::Bytes get(const std::string& key) override {
    try {
      return store_->get(key);
    } catch (const c10::DistStoreError& e) {
      throw TimeoutError(detail::concat("c10d store: key '", key, "': ", e.what()));
    }
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return store_->add(key, delta); }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace paro::torch_backend
