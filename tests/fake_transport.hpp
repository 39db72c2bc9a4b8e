#pragma once
// A transport with every member of the concept, and the same with `wait` switched off (WithWait =
// false), for the compile-time checks of the concept.

#include <cstddef>
#include <type_traits>
#include <vector>

#include "paro/transport/transport.hpp"

namespace paro::testing {

template <bool WithWait>
struct FakeTransport : HostMemory {
  struct Request {};
  static constexpr const char* name = "fake";
  static constexpr bool has_native_collectives = false;
  int rank() const { return 0; }
  int size() const { return 1; }
  bool concurrent_use() const { return false; }
  Request isend(const void*, std::size_t, int, int) { return {}; }
  Request irecv(void*, std::size_t, int, int) { return {}; }
  template <bool Enabled = WithWait, class = std::enable_if_t<Enabled>>
  void wait(Request&) {}
  void wait_all(std::vector<Request>&) {}
  FakeTransport split(int, int) { return {}; }
};

}  // namespace paro::testing
