// The bootstrap layer: the stores (one body for every store), the all-gather over them, the TCP server
// against broken clients, the launcher's variables and PARO_STORE. BootstrapEnv.* runs only under a
// launcher that sets PARO_STORE (ctest runs it under paro-run).

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "paro/bootstrap/bootstrap.hpp"
#include "paro/bootstrap/file_store.hpp"
#include "paro/bootstrap/from_env.hpp"
#include "paro/bootstrap/tcp_store.hpp"

namespace {

using paro::bootstrap::Bytes;
using paro::bootstrap::Store;

Bytes bytes_of(const std::string& s) { return Bytes(s.begin(), s.end()); }

// Runs f and expects it to throw E with `part` in its message.
template <class E, class F>
void expect_error(F f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one with '" << part << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "paro-bootstrap-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One client of a store that a test owns.
class StoreRef : public Store {
 public:
  explicit StoreRef(Store& store) : store_(store) {}
  void set(const std::string& key, const Bytes& value) override { store_.set(key, value); }
  Bytes get(const std::string& key) override { return store_.get(key); }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return store_.add(key, delta); }

 private:
  Store& store_;
};

// Where a store's data lives; client() is what one rank opens.
class MemoryPlace {
 public:
  explicit MemoryPlace(double timeout) : store_(timeout) {}
  std::unique_ptr<Store> client() { return std::make_unique<StoreRef>(store_); }

 private:
  paro::bootstrap::MemoryStore store_;
};

class FilePlace {
 public:
  explicit FilePlace(double timeout) : timeout_(timeout) {}
  std::unique_ptr<Store> client() { return std::make_unique<paro::bootstrap::FileStore>(dir_.path(), timeout_); }

 private:
  TempDir dir_;
  double timeout_;
};

class TcpPlace {
 public:
  explicit TcpPlace(double timeout) : timeout_(timeout) {}
  std::unique_ptr<Store> client() {
    return std::make_unique<paro::bootstrap::TcpStore>("127.0.0.1", server_.port(), timeout_);
  }

 private:
  paro::bootstrap::TcpStoreServer server_;
  double timeout_;
};

template <class Place>
class StoreTest : public ::testing::Test {};
using Places = ::testing::Types<MemoryPlace, FilePlace, TcpPlace>;
class PlaceNames {
 public:
  template <class T>
  static std::string GetName(int) {
    if (std::is_same_v<T, MemoryPlace>) return "memory";
    if (std::is_same_v<T, FilePlace>) return "file";
    return "tcp";
  }
};
TYPED_TEST_SUITE(StoreTest, Places, PlaceNames);

TYPED_TEST(StoreTest, SetGetAdd) {
  TypeParam place(10);
  auto store = place.client();
  store->set("a", bytes_of("first"));
  EXPECT_EQ(store->get("a"), bytes_of("first"));
  store->set("a", bytes_of("second"));
  EXPECT_EQ(store->get("a"), bytes_of("second"));
  const Bytes binary = {0, 255, 0, 10, 13, '/', '.'};
  store->set("binary", binary);
  EXPECT_EQ(store->get("binary"), binary);
  store->set("empty", Bytes{});
  EXPECT_EQ(store->get("empty"), Bytes{});
  // Keys are any strings: separators and dots stay inside the store.
  for (const std::string key : {"../../escape", "/abs/path", ".", "..", "k%41", "kA", "spaces and\nnewline"})
    store->set(key, bytes_of("value of " + key));
  for (const std::string key : {"../../escape", "/abs/path", ".", "..", "k%41", "kA", "spaces and\nnewline"})
    EXPECT_EQ(store->get(key), bytes_of("value of " + key)) << key;
  EXPECT_EQ(store->add("counter", 5), 5);
  EXPECT_EQ(store->add("counter", -7), -2);
  EXPECT_EQ(store->get("counter"), bytes_of("-2"));
  expect_error<paro::UsageError>([&] { store->add("a", 1); }, "not a decimal integer");
  EXPECT_EQ(store->add("counter", 2), 0);  // the store still works after a refused add
}

TYPED_TEST(StoreTest, MissingKeyTimesOut) {
  TypeParam place(0.5);
  auto store = place.client();
  const auto start = std::chrono::steady_clock::now();
  expect_error<paro::TimeoutError>([&] { store->get("never/set"); }, "key 'never/set' did not appear within 0.5 s");
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.45);
  EXPECT_LT(waited, 2.5);
  store->set("later", bytes_of("x"));  // usable after a timeout
  EXPECT_EQ(store->get("later"), bytes_of("x"));
}

TYPED_TEST(StoreTest, GetWaitsForALaterSet) {
  TypeParam place(10);
  auto reader = place.client();
  auto writer = place.client();
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    writer->set("late", bytes_of("arrived"));
  });
  EXPECT_EQ(reader->get("late"), bytes_of("arrived"));
  late.join();
}

TYPED_TEST(StoreTest, ConcurrentAddsAreAtomic) {
  TypeParam place(20);
  constexpr int threads = 4, adds = 40;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      auto store = place.client();
      for (int i = 0; i < adds; ++i) store->add("sum", 1);
    });
  for (auto& t : pool) t.join();
  EXPECT_EQ(place.client()->add("sum", 0), threads * adds);
}

TYPED_TEST(StoreTest, AllGatherAmongThreads) {
  TypeParam place(30);
  for (int n : {1, 2, 3, 5, 8}) {
    std::vector<std::vector<std::vector<Bytes>>> seen(static_cast<std::size_t>(n));
    std::vector<std::thread> ranks;
    for (int r = 0; r < n; ++r)
      ranks.emplace_back([&, r] {
        auto store = place.client();
        paro::bootstrap::StoreBootstrap bootstrap(*store, r, n, "gather" + std::to_string(n));
        for (int round = 0; round < 3; ++round)
          seen[static_cast<std::size_t>(r)].push_back(bootstrap.all_gather(
              Bytes(static_cast<std::size_t>(r * 7 + round), static_cast<std::uint8_t>(r + 10 * round))));
      });
    for (auto& t : ranks) t.join();
    for (int r = 0; r < n; ++r)
      for (int round = 0; round < 3; ++round) {
        const auto& all = seen[static_cast<std::size_t>(r)][static_cast<std::size_t>(round)];
        ASSERT_EQ(all.size(), static_cast<std::size_t>(n));
        for (int from = 0; from < n; ++from)
          EXPECT_EQ(all[static_cast<std::size_t>(from)],
                    Bytes(static_cast<std::size_t>(from * 7 + round), static_cast<std::uint8_t>(from + 10 * round)))
              << "n " << n << " rank " << r << " round " << round << " from " << from;
      }
  }
}

TEST(FileStore, RefusesKeysTooLongForAFileName) {
  TempDir dir;
  paro::bootstrap::FileStore store(dir.path(), 1);
  expect_error<paro::UsageError>([&] { store.set(std::string(100, '/'), Bytes{}); }, "is too long");
}

// A raw connection to the server, for sending what no client would.
class RawSocket {
 public:
  explicit RawSocket(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  }
  void send(const Bytes& bytes) {
    EXPECT_EQ(::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL), ssize_t(bytes.size()));
  }
  // Everything the server sends until it closes the connection (bounded by 5 s).
  std::string read_until_closed() {
    timeval limit{5, 0};
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    std::string all;
    char chunk[4096];
    for (ssize_t n; (n = ::recv(fd_.get(), chunk, sizeof chunk, 0)) > 0;)
      all.append(chunk, static_cast<std::size_t>(n));
    return all;
  }

 private:
  paro::bootstrap::detail::Fd fd_;
};

Bytes header(std::uint8_t op, std::uint64_t key_bytes, std::uint64_t value_bytes) {
  Bytes out(paro::bootstrap::detail::tcp::request_header_bytes);
  out[0] = op;
  paro::bootstrap::detail::tcp::put_be(&out[1], key_bytes, 4);
  paro::bootstrap::detail::tcp::put_be(&out[5], value_bytes, 8);
  return out;
}

TEST(TcpStore, ServerSurvivesBrokenClients) {
  paro::bootstrap::TcpStoreServer server;
  paro::bootstrap::TcpStore store("127.0.0.1", server.port(), 5);
  store.set("before", bytes_of("ok"));
  std::mt19937 random(42);
  Bytes garbage(4096);
  for (auto& b : garbage) b = static_cast<std::uint8_t>(random());
  garbage[0] = 0x00;  // not an operation, so the server must refuse at once
  const std::map<std::string, Bytes> closed_by_server = {
      {"random bytes", garbage},
      {"unknown operation", header(0x7f, 1, 0)},
      {"absurd value length", header(paro::bootstrap::detail::tcp::op_set, 1, std::uint64_t{1} << 62)},
      {"absurd key length", header(paro::bootstrap::detail::tcp::op_get, 0xffffffff, 0)},
      {"get with a value", header(paro::bootstrap::detail::tcp::op_get, 1, 5)},
  };
  // A client that stalls in the middle of a frame stays connected throughout and must not block the others.
  RawSocket stalled(server.port());
  const Bytes set_header = header(paro::bootstrap::detail::tcp::op_set, 10, 10);
  stalled.send(Bytes(set_header.begin(), set_header.begin() + 7));
  for (const auto& [what, bytes] : closed_by_server) {
    RawSocket raw(server.port());
    raw.send(bytes);
    const std::string answer = raw.read_until_closed();
    ASSERT_GE(answer.size(), paro::bootstrap::detail::tcp::reply_header_bytes) << what;
    EXPECT_EQ(answer[0], paro::bootstrap::detail::tcp::status_error) << what;
    EXPECT_EQ(store.get("before"), bytes_of("ok")) << "after " << what;
  }
  {  // a truncated frame, then the client leaves
    RawSocket raw(server.port());
    Bytes frame = header(paro::bootstrap::detail::tcp::op_set, 3, 100);
    frame.insert(frame.end(), {'k', 'e', 'y', 1, 2});
    raw.send(frame);
  }
  store.set("after", bytes_of("still serving"));
  EXPECT_EQ(paro::bootstrap::TcpStore("127.0.0.1", server.port(), 5).get("after"), bytes_of("still serving"));
}

TEST(TcpStore, OversizedRequestsAreRefusedAtTheClient) {
  paro::bootstrap::TcpStoreLimits limits;
  limits.max_key_bytes = 16;
  limits.max_value_bytes = 1024;
  paro::bootstrap::TcpStoreServer server("127.0.0.1", 0, limits);
  paro::bootstrap::TcpStore store("127.0.0.1", server.port(), 5);
  expect_error<paro::UsageError>([&] { store.set("big", Bytes(200000, 1)); }, "values up to 1024 bytes");
  expect_error<paro::UsageError>([&] { store.get(std::string(17, 'k')); }, "keys up to 16 bytes");
  store.set("small", Bytes(1024, 2));  // the client reconnects after a refusal
  EXPECT_EQ(store.get("small"), Bytes(1024, 2));
}

int free_port() { return paro::bootstrap::TcpStoreServer().port(); }

TEST(TcpStore, ClientStartedBeforeTheServerConnects) {
  const int port = free_port();
  std::optional<paro::bootstrap::TcpStoreServer> server;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    server.emplace("127.0.0.1", port);
  });
  paro::bootstrap::TcpStore store("127.0.0.1", port, 10);
  late.join();
  store.set("k", bytes_of("v"));
  EXPECT_EQ(store.get("k"), bytes_of("v"));
}

TEST(TcpStore, NoServerIsATimeoutAndALostServerAPeerFailure) {
  const int port = free_port();
  expect_error<paro::TimeoutError>([&] { paro::bootstrap::TcpStore("127.0.0.1", port, 0.3); },
                                   "cannot connect to the store server at tcp://127.0.0.1:" + std::to_string(port));
  auto server = std::make_unique<paro::bootstrap::TcpStoreServer>("127.0.0.1", port);
  paro::bootstrap::TcpStore store("127.0.0.1", port, 5);
  store.set("k", bytes_of("v"));
  server.reset();
  expect_error<paro::PeerFailure>([&] { store.get("k"); },
                                  "lost the connection to the store server at tcp://127.0.0.1:" + std::to_string(port));
}

// Sets and restores the launcher's variables; every test starts with none of them set.
class Environment {
 public:
  Environment() {
    for (const char* name : names) {
      if (const char* v = std::getenv(name)) saved_[name] = v;
      ::unsetenv(name);
    }
  }
  ~Environment() {
    for (const char* name : names) ::unsetenv(name);
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }
  Environment& set(const char* name, const std::string& value) {
    ::setenv(name, value.c_str(), 1);
    return *this;
  }

 private:
  static constexpr const char* names[] = {"RANK",
                                          "WORLD_SIZE",
                                          "LOCAL_RANK",
                                          "LOCAL_WORLD_SIZE",
                                          "OMPI_COMM_WORLD_RANK",
                                          "OMPI_COMM_WORLD_SIZE",
                                          "OMPI_COMM_WORLD_LOCAL_RANK",
                                          "OMPI_COMM_WORLD_LOCAL_SIZE",
                                          "PMI_RANK",
                                          "PMI_SIZE",
                                          "MPI_LOCALRANKID",
                                          "MPI_LOCALNRANKS",
                                          "SLURM_PROCID",
                                          "SLURM_NTASKS",
                                          "SLURM_LOCALID",
                                          "SLURM_NODEID",
                                          "SLURM_TASKS_PER_NODE",
                                          "SLURM_STEP_TASKS_PER_NODE",
                                          "PARO_STORE",
                                          "PARO_STORE_SERVE"};
  std::map<std::string, std::string> saved_;
};

void expect_launch(const paro::bootstrap::LaunchInfo& info, int rank, int size, int local_rank, int local_size,
                   const std::string& source) {
  EXPECT_EQ(info.rank, rank);
  EXPECT_EQ(info.size, size);
  EXPECT_EQ(info.local_rank, local_rank);
  EXPECT_EQ(info.local_size, local_size);
  EXPECT_EQ(info.source, source);
}

TEST(LaunchFromEnv, EachLauncher) {
  using paro::bootstrap::launch_from_env;
  {
    Environment env;
    env.set("RANK", "2").set("WORLD_SIZE", "4").set("LOCAL_RANK", "0").set("LOCAL_WORLD_SIZE", "2");
    expect_launch(launch_from_env(), 2, 4, 0, 2, "torchrun");
  }
  {
    Environment env;
    env.set("OMPI_COMM_WORLD_RANK", "3").set("OMPI_COMM_WORLD_SIZE", "8");
    env.set("OMPI_COMM_WORLD_LOCAL_RANK", "3").set("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
    env.set("SLURM_PROCID", "0").set("SLURM_NTASKS", "1");  // mpirun inside a Slurm job: Open MPI's count
    expect_launch(launch_from_env(), 3, 8, 3, 4, "openmpi");
  }
  {
    Environment env;
    env.set("PMI_RANK", "1").set("PMI_SIZE", "2");
    expect_launch(launch_from_env(), 1, 2, -1, -1, "pmi");
  }
  {
    Environment env;
    env.set("SLURM_PROCID", "5").set("SLURM_NTASKS", "8").set("SLURM_LOCALID", "0").set("SLURM_NODEID", "2");
    env.set("SLURM_TASKS_PER_NODE", "9").set("SLURM_STEP_TASKS_PER_NODE", "2(x2),3,1");
    expect_launch(launch_from_env(), 5, 8, 0, 3, "slurm");
  }
}

TEST(LaunchFromEnv, BadValues) {
  using paro::bootstrap::launch_from_env;
  {
    Environment env;
    expect_error<paro::UsageError>(launch_from_env, "looked for RANK/WORLD_SIZE (torchrun) OMPI_COMM_WORLD_RANK");
    expect_error<paro::UsageError>(launch_from_env, "SLURM_PROCID/SLURM_NTASKS (slurm)");
  }
  const std::vector<std::pair<std::map<const char*, std::string>, std::string>> cases = {
      {{{"RANK", "4"}, {"WORLD_SIZE", "4"}}, "RANK=4 is not below WORLD_SIZE=4"},
      {{{"RANK", "x"}, {"WORLD_SIZE", "4"}}, "RANK: 'x' is not an integer"},
      {{{"RANK", "-1"}, {"WORLD_SIZE", "4"}}, "RANK: '-1' is not an integer in [0, "},
      {{{"RANK", "0"}}, "RANK is set (torchrun) but WORLD_SIZE is not"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE: '0' is not an integer in [1, "},
      {{{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}}, "do not fit"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NODEID", "0"}, {"SLURM_TASKS_PER_NODE", "2(y3)"}},
       "SLURM_TASKS_PER_NODE item '2(y3)'"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NODEID", "3"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}},
       "lists fewer nodes than SLURM_NODEID=3"},
  };
  for (const auto& [variables, message] : cases) {
    Environment env;
    for (const auto& [name, value] : variables) env.set(name, value);
    expect_error<paro::UsageError>(launch_from_env, message);
  }
}

TEST(StoreFromEnv, EachForm) {
  using paro::bootstrap::store_from_env;
  const paro::bootstrap::LaunchInfo rank0{0, 2, 0, 2, "test"}, rank1{1, 2, 1, 2, "test"};
  {
    TempDir dir;
    Environment env;
    env.set("PARO_STORE", "file:" + dir.path());
    auto store = store_from_env(rank1);
    EXPECT_NE(dynamic_cast<paro::bootstrap::FileStore*>(store.get()), nullptr);
    store->set("k", bytes_of("v"));
    EXPECT_EQ(paro::bootstrap::FileStore(dir.path(), 1).get("k"), bytes_of("v"));
  }
  {
    paro::bootstrap::TcpStoreServer server;
    Environment env;
    env.set("PARO_STORE", "tcp://127.0.0.1:" + std::to_string(server.port()));
    auto store = store_from_env(rank0);  // without PARO_STORE_SERVE rank 0 is a client too
    EXPECT_NE(dynamic_cast<paro::bootstrap::TcpStore*>(store.get()), nullptr);
    store->set("k", bytes_of("v"));
    EXPECT_EQ(store_from_env(rank1)->get("k"), bytes_of("v"));
  }
  {
    Environment env;
    env.set("PARO_STORE", "tcp://127.0.0.1:" + std::to_string(free_port())).set("PARO_STORE_SERVE", "1");
    auto served = store_from_env(rank0);  // hosts the server
    auto client = store_from_env(rank1);  // only rank 0 serves
    EXPECT_NE(dynamic_cast<paro::bootstrap::TcpStore*>(client.get()), nullptr);
    client->set("k", bytes_of("from rank 1"));
    EXPECT_EQ(served->get("k"), bytes_of("from rank 1"));
  }
  const std::vector<std::pair<std::map<const char*, std::string>, std::string>> bad = {
      {{}, "PARO_STORE is not set; allowed: file:DIR or tcp://HOST:PORT"},
      {{{"PARO_STORE", "redis://h:1"}}, "PARO_STORE='redis://h:1'; allowed: file:DIR or tcp://HOST:PORT"},
      {{{"PARO_STORE", "file:"}}, "names no directory"},
      {{{"PARO_STORE", "tcp://host"}}, "has no HOST:PORT"},
      {{{"PARO_STORE", "tcp://:80"}}, "has no HOST:PORT"},
      {{{"PARO_STORE", "tcp://h:99999"}}, "PARO_STORE's port: '99999' is not an integer in [1, 65535]"},
      {{{"PARO_STORE", "tcp://h:1"}, {"PARO_STORE_SERVE", "yes"}}, "PARO_STORE_SERVE='yes'; allowed: 1"},
      {{{"PARO_STORE", "file:/tmp"}, {"PARO_STORE_SERVE", "1"}}, "PARO_STORE_SERVE=1 needs a tcp:// PARO_STORE"},
  };
  for (const auto& [variables, message] : bad) {
    Environment env;
    for (const auto& [name, value] : variables) env.set(name, value);
    expect_error<paro::UsageError>([&] { store_from_env(rank0); }, message);
  }
}

// Under a launcher (ctest: paro-run -n 4): an all-gather among the processes over PARO_STORE.
TEST(BootstrapEnv, AllGatherAmongProcesses) {
  if (!paro::env::get("PARO_STORE")) GTEST_SKIP() << "PARO_STORE is not set: run under paro-run";
  auto bootstrap = paro::bootstrap::bootstrap_from_env("bootstrap-env-test");
  const int n = bootstrap->size();
  for (int round = 0; round < 3; ++round) {
    const auto all = bootstrap->all_gather(bytes_of(
        std::string(static_cast<std::size_t>(bootstrap->rank() + round), 'x') + std::to_string(bootstrap->rank())));
    ASSERT_EQ(all.size(), static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(all[static_cast<std::size_t>(r)],
                bytes_of(std::string(static_cast<std::size_t>(r + round), 'x') + std::to_string(r)));
  }
  std::printf("rank %d of %d: 3 all-gathers over %s agree\n", bootstrap->rank(), n, std::getenv("PARO_STORE"));
}

}  // namespace
