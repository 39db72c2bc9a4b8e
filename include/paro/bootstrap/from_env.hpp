#pragma once
// Starting from the launcher's environment (docs/launching.md):
//   launch_from_env()      this process's rank, size and place on its node, from the launcher's variables
//   store_from_env(info)   the Store that PARO_STORE names (file:DIR or tcp://HOST:PORT)
//   bootstrap_from_env()   both, as a Bootstrap that owns its store

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "paro/bootstrap/bootstrap.hpp"
#include "paro/bootstrap/file_store.hpp"
#include "paro/bootstrap/tcp_store.hpp"
#include "paro/core/env.hpp"
#include "paro/core/error.hpp"

namespace paro::bootstrap {

struct LaunchInfo {
  int rank = 0;
  int size = 1;
  int local_rank = -1;  // -1: the launcher does not say
  int local_size = -1;
  std::string source;  // the launcher whose variables were read: torchrun, openmpi, pmi or slurm
};

namespace detail {

struct LauncherVariables {
  const char* source;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;  // nullptr: derived otherwise (Slurm)
};

// In order of preference: a launcher started inside another's allocation (mpirun in a Slurm job) sets
// its own variables while the outer ones describe the outer launch, so the outer launcher comes last.
inline constexpr LauncherVariables launchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
};

inline int int_from_env(const char* name, int lo) {
  const auto text = env::get(name);
  paro::detail::require(text.has_value(), name, " is not set");
  return static_cast<int>(env::parse_integer(*text, name, lo, 1 << 30));
}

// Slurm's tasks per node: SLURM_STEP_TASKS_PER_NODE (or SLURM_TASKS_PER_NODE) such as "2(x3),1" lists the
// count of every node in SLURM_NODEID order.
inline int slurm_local_size() {
  const char* name = env::get("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
  const auto text = env::get(name);
  const auto node = env::get("SLURM_NODEID");
  if (!text || !node) return -1;
  long index = env::parse_integer(*node, "SLURM_NODEID", 0, 1 << 30);
  std::size_t pos = 0;
  while (pos < text->size()) {
    const std::size_t comma = std::min(text->find(',', pos), text->size());
    const std::string item = text->substr(pos, comma - pos);
    const std::size_t paren = item.find("(x");
    const bool repeated = paren != std::string::npos && item.back() == ')';
    const std::string what = paro::detail::concat(name, " item '", item, "' (allowed: N or N(xM))");
    const long count = env::parse_integer(item.substr(0, repeated ? paren : item.size()), what, 1, 1 << 30);
    const long times =
        repeated ? env::parse_integer(item.substr(paren + 2, item.size() - paren - 3), what, 1, 1 << 30) : 1;
    if (index < times) return static_cast<int>(count);
    index -= times;
    pos = comma + 1;
  }
  throw UsageError(paro::detail::concat(name, "='", *text, "' lists fewer nodes than SLURM_NODEID=", *node));
}

}  // namespace detail

// The first launcher whose rank variable is set; UsageError when none is, or when its values are not
// numbers in range.
inline LaunchInfo launch_from_env() {
  for (const auto& l : detail::launchers) {
    if (!env::get(l.rank)) continue;
    LaunchInfo info;
    info.source = l.source;
    info.rank = detail::int_from_env(l.rank, 0);
    paro::detail::require(env::get(l.size).has_value(), l.rank, " is set (", l.source, ") but ", l.size,
                          " is not; the launcher sets both");
    info.size = detail::int_from_env(l.size, 1);
    paro::detail::require(info.rank < info.size, l.rank, "=", info.rank, " is not below ", l.size, "=", info.size);
    if (env::get(l.local_rank)) info.local_rank = detail::int_from_env(l.local_rank, 0);
    if (l.local_size == nullptr)
      info.local_size = detail::slurm_local_size();
    else if (env::get(l.local_size))
      info.local_size = detail::int_from_env(l.local_size, 1);
    if (info.local_rank >= 0 && info.local_size > 0)
      paro::detail::require(info.local_rank < info.local_size && info.local_size <= info.size, l.local_rank, "=",
                            info.local_rank, " and a local size of ", info.local_size,
                            " do not fit; allowed: local rank < local size <= ", l.size, "=", info.size);
    return info;
  }
  std::string looked;
  for (const auto& l : detail::launchers) looked += paro::detail::concat(" ", l.rank, "/", l.size, " (", l.source, ")");
  throw UsageError("no launcher variables found; looked for" + looked +
                   "; start the job with paro-run, torchrun, srun or mpirun (docs/launching.md)");
}

namespace detail {

// The store server lives as long as rank 0's client of it.
class ServedTcpStore : public Store {
 public:
  ServedTcpStore(const std::string& host, int port, double timeout_seconds)
      : server_(host, port), client_(host, server_.port(), timeout_seconds) {}
  void set(const std::string& key, const Bytes& value) override { client_.set(key, value); }
  Bytes get(const std::string& key) override { return client_.get(key); }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return client_.add(key, delta); }

 private:
  TcpStoreServer server_;
  TcpStore client_;
};

// The owner of the store that a StoreBootstrap reads and writes.
class EnvBootstrap : public Bootstrap {
 public:
  EnvBootstrap(std::unique_ptr<Store> store, const LaunchInfo& info, std::string prefix)
      : store_(std::move(store)), bootstrap_(*store_, info.rank, info.size, std::move(prefix)) {}
  int rank() const override { return bootstrap_.rank(); }
  int size() const override { return bootstrap_.size(); }
  std::vector<Bytes> all_gather(const Bytes& mine) override { return bootstrap_.all_gather(mine); }

 private:
  std::unique_ptr<Store> store_;
  StoreBootstrap bootstrap_;
};

}  // namespace detail

// PARO_STORE=file:DIR      a FileStore in DIR (one host, or a filesystem every node mounts)
// PARO_STORE=tcp://HOST:PORT a TcpStore client of the server at HOST:PORT; with PARO_STORE_SERVE=1, rank 0
//                          also hosts that server in this process (it listens on HOST, so HOST must be
//                          one of rank 0's addresses) for as long as the returned store lives.
inline std::unique_ptr<Store> store_from_env(const LaunchInfo& info) {
  static constexpr const char* allowed = "allowed: file:DIR or tcp://HOST:PORT (docs/launching.md)";
  const auto spec = env::get("PARO_STORE");
  paro::detail::require(spec.has_value(), "PARO_STORE is not set; ", allowed);
  const double timeout = env::timeout_seconds();
  const std::string serve = env::get("PARO_STORE_SERVE").value_or("0");
  paro::detail::require(serve == "0" || serve == "1", "PARO_STORE_SERVE='", serve,
                        "'; allowed: 1 (rank 0 hosts the tcp:// store) or 0");
  if (spec->rfind("file:", 0) == 0) {
    paro::detail::require(spec->size() > 5, "PARO_STORE='", *spec, "' names no directory; ", allowed);
    paro::detail::require(serve == "0", "PARO_STORE_SERVE=1 needs a tcp:// PARO_STORE, not '", *spec, "'");
    return std::make_unique<FileStore>(spec->substr(5), timeout);
  }
  const std::string scheme = "tcp://";
  paro::detail::require(spec->rfind(scheme, 0) == 0, "PARO_STORE='", *spec, "'; ", allowed);
  const std::string address = spec->substr(scheme.size());
  const std::size_t colon = address.rfind(':');
  paro::detail::require(colon != std::string::npos && colon > 0, "PARO_STORE='", *spec, "' has no HOST:PORT; ",
                        allowed);
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);  // IPv6
  const int port = static_cast<int>(env::parse_integer(address.substr(colon + 1), "PARO_STORE's port", 1, 65535));
  if (serve == "1" && info.rank == 0) return std::make_unique<detail::ServedTcpStore>(host, port, timeout);
  return std::make_unique<TcpStore>(host, port, timeout);
}

// The launcher's rank and size, the store of PARO_STORE and an all-gather over it under `prefix`.
inline std::unique_ptr<Bootstrap> bootstrap_from_env(std::string prefix = "paro") {
  const LaunchInfo info = launch_from_env();
  return std::make_unique<detail::EnvBootstrap>(store_from_env(info), info, std::move(prefix));
}

}  // namespace paro::bootstrap
