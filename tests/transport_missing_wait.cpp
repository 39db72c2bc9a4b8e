// Must not compile: the concept check names the member that is missing (see tests/CMakeLists.txt).
#include "fake_transport.hpp"

static_assert(paro::check_transport<paro::testing::FakeTransport<false>>());
