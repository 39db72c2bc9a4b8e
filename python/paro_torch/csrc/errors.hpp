#pragma once
// Errors: paro's kinds become the c10 exceptions that torch.distributed raises for the same causes.

#include <c10/util/Exception.h>

#include <exception>
#include <string>

#include "paro/core/error.hpp"

namespace paro::torch_backend {

inline std::exception_ptr as_torch_error(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const UsageError& u) {
    return std::make_exception_ptr(c10::ValueError(std::string(u.what())));
  } catch (const TimeoutError& t) {
    return std::make_exception_ptr(c10::DistNetworkError(std::string(t.what())));
  } catch (const PeerFailure& p) {
    return std::make_exception_ptr(c10::DistNetworkError(std::string(p.what())));
  } catch (const Error& b) {
    return std::make_exception_ptr(c10::DistBackendError(std::string(b.what())));
  } catch (...) {
    return std::current_exception();
  }
}

// Runs f; a paro error it throws leaves as the torch exception of its kind.
template <class F>
auto translating(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error&) {
    std::rethrow_exception(as_torch_error(std::current_exception()));
  }
}

}  // namespace paro::torch_backend
