#pragma once
// paro::Error: the one exception type of the library. Messages say what was wrong and what is allowed.

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace paro {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error("paro: " + what) {}
};

namespace detail {

template <class... Args>
std::string concat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

// Throws paro::Error with the concatenation of args when cond is false.
template <class... Args>
void require(bool cond, Args&&... args) {
  if (!cond) throw Error(concat(std::forward<Args>(args)...));
}

}  // namespace detail
}  // namespace paro
