#pragma once
// Bootstrap: a process group's communicator. A process group is handed a c10d Store (torchrun, init_method
// env:// or tcp://); the ucx transport exchanges its worker addresses through it. Under mpirun (transport
// "mpi", or "auto" when Open MPI's or a PMI's variables are set) the group's ranks form an MPI communicator
// instead. In a build with CUDA, connect_device makes the group's second communicator, over NCCL.

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <c10/util/Exception.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "paro/bootstrap/bootstrap.hpp"
#include "paro/communicator/any_communicator.hpp"
#include "paro/communicator/communicator.hpp"
#include "paro/tools/backends.hpp"
#include "paro/transport/paced.hpp"
#include "paro/transport/ucx.hpp"
#include "store.hpp"
#ifdef PARO_HAVE_MPI
#include "paro/transport/mpi.hpp"
#endif
#ifdef PARO_HAVE_CUDA
#include "paro/transport/nccl.hpp"
#endif

namespace paro::torch_backend {

// How a process group was asked to run (paro_torch.Options, else the environment).
struct GroupSettings {
  std::string algorithms;                  // PARO_ALGO's grammar; empty: the environment's
  std::string grouping;                    // PARO_GROUP's grammar; empty: the environment's
  std::string transport = "auto";          // auto, ucx, mpi
  std::vector<std::int64_t> global_ranks;  // the group's members as world ranks; empty: the default group
  int world_size = 0;                      // the default group's size (0 while it is being made)
};

// The default group's topology, where it runs on paro: a later group's is the world's restricted to its
// members, so that every group of a process sees the same cluster.
inline std::optional<Topology>& world_topology() {
  static std::optional<Topology> topology;
  return topology;
}

inline Topology restricted(const Topology& world, const std::vector<std::int64_t>& members) {
  Topology t = world;
  t.ranks.clear();
  std::map<std::string, int> next_local;
  for (std::int64_t g : members) {
    TORCH_CHECK_VALUE(g >= 0 && g < world.size(), "paro backend: group member ", g, " is not a rank of the ",
                      world.size(), "-rank world");
    RankPlace p = world.ranks[static_cast<std::size_t>(g)];
    p.local = next_local[p.node]++;
    t.ranks.push_back(p);
  }
  return t;
}

// The default group's emulated links (PARO_EMULATE with link keys), which a later group's messages book too;
// one per transport kind.
template <class Inner>
std::optional<typename paced::Transport<Inner>::Links>& world_links() {
  static std::optional<typename paced::Transport<Inner>::Links> links;
  return links;
}

// inner under PARO_EMULATE's link pacing, as paro-bench's host backends run (passing straight through
// without link keys): the default group makes the cluster's links, a later group joins them with its
// members' world ranks (without a default group on paro, its messages are not paced). PARO_TRACE=1 records
// every message for take_link_bytes (scoped.hpp).
template <class Inner>
paced::Transport<Inner> paced_over(Inner inner, const GroupSettings& settings) {
  using Paced = paced::Transport<Inner>;
  const std::optional<std::string> emulate = env::get("PARO_EMULATE");
  if (settings.global_ranks.empty()) {
    Paced t = Paced::wrap(std::move(inner), topology::EmulationSpec::parse(emulate.value_or("nodes=1")),
                          env::get("PARO_TRACE").value_or("0") == "1");
    world_links<Inner>() = t.links();
    return t;
  }
  if (world_links<Inner>()) {
    std::vector<int> members(settings.global_ranks.begin(), settings.global_ranks.end());
    return Paced::joined(std::move(inner), *world_links<Inner>(), std::move(members));
  }
  return Paced::wrap(std::move(inner), topology::EmulationSpec::parse("nodes=1"));
}

inline bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

inline std::unique_ptr<AnyCommunicator> connect(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                const GroupSettings& settings) {
  CommunicatorConfig config;
  if (!settings.algorithms.empty()) config.tuning.algorithms = settings.algorithms;
  if (!settings.grouping.empty()) config.group = GroupSpec::parse(settings.grouping);
  const bool default_group = settings.global_ranks.empty();
  TORCH_CHECK_VALUE(default_group || static_cast<int>(settings.global_ranks.size()) == size,
                    "paro backend: a group of ", size, " ranks with ", settings.global_ranks.size(), " global ranks");
  // Otherwise discovery runs over the group's own ranks: host identity and launcher variables describe each
  // rank wherever it is, but PARO_EMULATE describes the whole world.
  if (!default_group && world_topology())
    config.topology = restricted(*world_topology(), settings.global_ranks);
  else if (!default_group && config.discovery.emulate)
    config.topology = restricted(topology::EmulationSpec::parse(*config.discovery.emulate).place(settings.world_size),
                                 settings.global_ranks);
  const std::string& kind = settings.transport;
  // The host backends of paro's list (tools/backends.hpp); CUDA tensors take nccl (connect_device).
  using tools::MpiBackend;
  using tools::UcxBackend;
  TORCH_CHECK_VALUE(kind == "auto" || kind == UcxBackend::name || kind == MpiBackend::name, "paro backend: transport '",
                    kind, "'; allowed: auto ", UcxBackend::name, " ", MpiBackend::name);
  TORCH_CHECK_VALUE(kind != MpiBackend::name || MpiBackend::built,
                    "paro backend: transport mpi: ", MpiBackend::why_not);
  std::unique_ptr<AnyCommunicator> comm;
  if (kind == MpiBackend::name || (kind == "auto" && launched_by_mpi())) {
#ifdef PARO_HAVE_MPI
    static mpi::Environment environment;
    int world_rank = 0, world_size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    std::vector<int> members;
    for (std::int64_t g : settings.global_ranks) members.push_back(static_cast<int>(g));
    if (members.empty())
      for (int r = 0; r < size; ++r) members.push_back(r);
    TORCH_CHECK_VALUE(static_cast<int>(members.size()) == size && members[static_cast<std::size_t>(rank)] == world_rank,
                      "paro backend (mpi): torch's rank ", rank, " of ", size, " is MPI_COMM_WORLD rank ", world_rank,
                      " of ", world_size, "; under mpirun set RANK and WORLD_SIZE from the MPI ranks");
    MPI_Group world_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Group_incl(world_group, size, members.data(), &group);
    MPI_Comm created = MPI_COMM_NULL;
    MPI_Comm_create_group(MPI_COMM_WORLD, group, 0, &created);
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
    comm = std::make_unique<AnyCommunicator>(paced_over(mpi::Transport(created), settings), std::move(config));
    MPI_Comm_free(&created);
#endif
  }
  if (!comm) {
    C10dStore paro_store(store);
    bootstrap::StoreBootstrap boot(paro_store, rank, size, "paro-torch");
    comm = std::make_unique<AnyCommunicator>(paced_over(ucx::Transport(boot), settings), std::move(config));
  }
  if (default_group) world_topology() = comm->topology();
  return comm;
}

#ifdef PARO_HAVE_CUDA
// The group's collectives on CUDA tensors: a communicator over NCCL with the host one's ranks, topology and
// grouping, this rank on `device`. Collective: rank 0's ncclUniqueId travels through the group's store (a
// prefix store of its own, so one key per group).
inline std::unique_ptr<AnyCommunicator> connect_device(const c10::intrusive_ptr<c10d::Store>& store,
                                                       const AnyCommunicator& host, const GroupSettings& settings,
                                                       int device) {
  const std::string key = "paro-torch/nccl-unique-id";
  ncclUniqueId id{};
  if (host.rank() == 0) {
    id = nccl::Transport::unique_id();
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(&id);
    store->set(key, std::vector<std::uint8_t>(bytes, bytes + sizeof id));
  } else {
    const std::vector<std::uint8_t> bytes = C10dStore(store).get(key);
    TORCH_CHECK(bytes.size() == sizeof id, "paro backend: the store's NCCL id has ", bytes.size(), " bytes, not ",
                sizeof id);
    std::memcpy(&id, bytes.data(), sizeof id);
  }
  CommunicatorConfig config;
  config.topology = host.topology();
  config.group = host.grouping();
  if (!settings.algorithms.empty()) config.tuning.algorithms = settings.algorithms;
  return std::make_unique<AnyCommunicator>(nccl::Transport::join(id, host.rank(), host.size(), device),
                                           std::move(config));
}
#endif

}  // namespace paro::torch_backend
