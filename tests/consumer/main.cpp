// A ten-line user of paro: all-reduce and a SEPARATE compressed all-reduce on 4 thread ranks, and an
// all-reduce on an MPI singleton and (where paro::ucx is linked) on a UCX singleton.
#include <paro/compression/separate.hpp>
#include <paro/paro.hpp>
#include <paro/transport/mpi.hpp>
#ifdef PARO_HAVE_UCX
#include <paro/transport/ucx.hpp>
#endif

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  int wrong = 0;
  paro::threads::run(4, [&](paro::threads::Transport t) {
    paro::Communicator comm(std::move(t));
    std::vector<float> grad(1000, static_cast<float>(comm.rank()));
    comm.all_reduce(grad.data(), grad.data(), grad.size(), paro::ReduceOp::sum);
    if (grad[999] != 0 + 1 + 2 + 3) wrong = 1;
    paro::compression::Separate separate;  // ratio 32, error feedback
    const auto id = separate.add("layer", 256, 512, paro::DataType::f32);
    std::vector<float> g(256 * 512, 1.0f), estimate(g.size());
    separate.all_reduce(comm, id, g.data(), estimate.data());
    if (separate.last_call().wire_bytes != 256 * 16 * sizeof(float)) wrong = 1;
  });
  paro::mpi::Environment env(&argc, &argv);
  paro::Communicator world(paro::mpi::Transport::world());
  double x = 2.5, y = 0;
  world.all_reduce(&x, &y, 1, paro::ReduceOp::max, {paro::Algorithm::native});
  if (y != 2.5) wrong = 1;
#ifdef PARO_HAVE_UCX
  paro::bootstrap::MemoryStore store;
  paro::bootstrap::StoreBootstrap boot(store, 0, 1);
  paro::Communicator ucx(paro::ucx::Transport{boot});
  ucx.all_reduce(&x, &y, 1, paro::ReduceOp::sum);
  if (y != 2.5) wrong = 1;
#endif
  std::printf("paro consumer: %s\n", wrong ? "WRONG" : "ok");
  return wrong;
}
