#pragma once
// MpiBootstrap: the all-gather of bytes over an MPI communicator (MPI_Allgather of the sizes, then
// MPI_Allgatherv), for programs started by mpirun or srun with MPI. Needs <mpi.h>: include it only in
// targets that link the paro::mpi CMake component.

#include <mpi.h>

#include <climits>
#include <cstddef>
#include <string>
#include <vector>

#include "paro/bootstrap/bootstrap.hpp"
#include "paro/core/error.hpp"

namespace paro::bootstrap {

class MpiBootstrap : public Bootstrap {
 public:
  // Collectives on `comm` itself (they never match the application's point-to-point messages); MPI must
  // stay initialized while this is used.
  explicit MpiBootstrap(MPI_Comm comm) : comm_(comm) {
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::vector<Bytes> all_gather(const Bytes& mine) override {
    paro::detail::require(mine.size() <= static_cast<std::size_t>(INT_MAX), "MpiBootstrap: a contribution of ",
                          mine.size(), " bytes; allowed: up to ", INT_MAX);
    const int my_size = static_cast<int>(mine.size());
    std::vector<int> sizes(static_cast<std::size_t>(size_));
    check(MPI_Allgather(&my_size, 1, MPI_INT, sizes.data(), 1, MPI_INT, comm_), "MPI_Allgather");
    std::vector<int> offsets(sizes.size());
    long long total = 0;
    for (std::size_t r = 0; r < sizes.size(); ++r) {
      offsets[r] = static_cast<int>(total);
      total += sizes[r];
      paro::detail::require(total <= INT_MAX, "MpiBootstrap: the contributions add up to more than ", INT_MAX,
                            " bytes");
    }
    Bytes all(static_cast<std::size_t>(total));
    check(MPI_Allgatherv(mine.data(), my_size, MPI_BYTE, all.data(), sizes.data(), offsets.data(), MPI_BYTE, comm_),
          "MPI_Allgatherv");
    std::vector<Bytes> out(sizes.size());
    for (std::size_t r = 0; r < sizes.size(); ++r)
      out[r].assign(all.begin() + offsets[r], all.begin() + offsets[r] + sizes[r]);
    return out;
  }

 private:
  static void check(int rc, const char* call) {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(rc, text, &length);
    throw BackendError(paro::detail::concat("MpiBootstrap: ", call, " failed: ", std::string(text, length)));
  }

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 0;
};

}  // namespace paro::bootstrap
