// Compiled as C++20 (see CMakeLists.txt): every public header, and a call of each verb on one rank.
#include "paro/bootstrap/from_env.hpp"
#include "paro/paro.hpp"
#ifdef PARO_HAVE_MPI
#include "paro/bootstrap/mpi.hpp"
#include "paro/transport/mpi.hpp"
#endif

int main() {
  int wrong = 0;
  paro::threads::run(1, [&](paro::threads::Transport t) {
    paro::Communicator comm(std::move(t));
    float x = 2.0f, y = 0.0f;
    comm.all_reduce(&x, &y, 1, paro::ReduceOp::sum);
    comm.all_gather(&x, &y, 1);
    comm.reduce_scatter(&x, &y, 1, paro::ReduceOp::max);
    wrong = y == 2.0f ? 0 : 1;
  });
  return wrong;
}
