// paro-run: starts N ranks of a command on this host, the way torchrun does, with a TCP store to bootstrap
// through (docs/launching.md).
//
//   paro-run -n 4 -- build/bin/my_program --its-args
//
// Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and PARO_STORE=tcp://127.0.0.1:PORT (a
// TcpStoreServer in this process), stdin from /dev/null and its own process group; its stdout and stderr
// come back line by line as "[rank R] ...". When a rank fails, the others get --grace seconds to finish on
// their own (and report what they saw), then SIGTERM, then SIGKILL 2 s later. Exit status: 0 when every
// rank exits 0; else the first failing rank's code (128 + signal if killed); 124 after --timeout; 128 +
// signal when paro-run itself got SIGINT or SIGTERM (passed on to the ranks); 2 for bad arguments.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "paro/bootstrap/tcp_store.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t max_line_bytes = 1 << 16;  // a longer "line" (a progress bar) is passed on in pieces

int signal_pipe[2] = {-1, -1};  // SIGINT/SIGTERM to paro-run: the handler writes the number here

void on_signal(int number) {
  const char byte = static_cast<char>(number);
  [[maybe_unused]] const ssize_t ignored = ::write(signal_pipe[1], &byte, 1);
}

// One of a rank's two output pipes, with the part of a line not yet passed on.
struct Stream {
  int fd = -1;
  std::FILE* to = nullptr;
  std::string pending;
};

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  Stream streams[2];
};

void emit(int rank, std::FILE* to, const char* begin, std::size_t size) {
  std::string line = "[rank " + std::to_string(rank) + "] ";
  line.append(begin, size);
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), to);
  std::fflush(to);
}

// Reads what the pipe has; passes on every complete line. False at end of file.
bool forward(int rank, Stream& s) {
  char chunk[65536];
  const ssize_t n = ::read(s.fd, chunk, sizeof chunk);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n > 0) {
    s.pending.append(chunk, static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (std::size_t newline; (newline = s.pending.find('\n', start)) != std::string::npos; start = newline + 1)
      emit(rank, s.to, s.pending.data() + start, newline - start);
    s.pending.erase(0, start);
    if (s.pending.size() >= max_line_bytes) {
      emit(rank, s.to, s.pending.data(), s.pending.size());
      s.pending.clear();
    }
    return true;
  }
  if (!s.pending.empty()) emit(rank, s.to, s.pending.data(), s.pending.size());  // a last line without '\n'
  s.pending.clear();
  ::close(s.fd);
  s.fd = -1;
  return false;
}

// The parent's environment without the variables paro-run sets, plus this rank's.
std::vector<std::string> environment_of(int rank, int n, const std::string& store) {
  static const char* const ours[] = {
      "RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=", "PARO_STORE=", "PARO_STORE_SERVE="};
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    bool replaced = false;
    for (const char* prefix : ours) replaced |= std::strncmp(*e, prefix, std::strlen(prefix)) == 0;
    if (!replaced) out.emplace_back(*e);
  }
  for (const std::string& v :
       {"RANK=" + std::to_string(rank), "WORLD_SIZE=" + std::to_string(n), "LOCAL_RANK=" + std::to_string(rank),
        "LOCAL_WORLD_SIZE=" + std::to_string(n), "PARO_STORE=" + store})
    out.push_back(v);
  return out;
}

// Forks one rank. Everything the child needs is prepared here: between fork and exec a multithreaded
// process (the store server runs a thread) may only make async-signal-safe calls.
Rank start(int rank, int n, const std::string& store, const std::vector<std::string>& command) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    std::perror("paro-run: pipe");
    std::exit(1);
  }
  const auto env_strings = environment_of(rank, n, store);
  std::vector<char*> envp, argv;
  for (const auto& s : env_strings) envp.push_back(const_cast<char*>(s.c_str()));
  for (const auto& s : command) argv.push_back(const_cast<char*>(s.c_str()));
  envp.push_back(nullptr);
  argv.push_back(nullptr);
  const std::string failed = "paro-run: rank " + std::to_string(rank) + ": cannot execute '" + command[0] + "': ";
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("paro-run: fork");
    std::exit(1);
  }
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group: a signal for the job reaches the rank's children too
    const int null = ::open("/dev/null", O_RDONLY);
    ::dup2(null, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::signal(SIGPIPE, SIG_DFL);
    ::execvpe(argv[0], argv.data(), envp.data());
    const char* why = std::strerror(errno);
    [[maybe_unused]] ssize_t ignored = ::write(2, failed.data(), failed.size());
    ignored = ::write(2, why, std::strlen(why));
    ignored = ::write(2, "\n", 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so that no signal can race the child's own call
  ::close(out[1]);
  ::close(err[1]);
  Rank r;
  r.rank = rank;
  r.pid = pid;
  r.running = true;
  r.streams[0] = {out[0], stdout, {}};
  r.streams[1] = {err[0], stderr, {}};
  return r;
}

void signal_all(std::vector<Rank>& ranks, int number) {
  for (const Rank& r : ranks)
    if (r.running) ::kill(-r.pid, number);
}

// The exit status a rank's wait status stands for, and its description.
int code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

std::string describe(int status) {
  return WIFEXITED(status)
             ? "exited with code " + std::to_string(WEXITSTATUS(status))
             : "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
}

int run(int n, double grace, double timeout, const std::vector<std::string>& command) {
  paro::bootstrap::TcpStoreServer server("127.0.0.1", 0);
  const std::string store = server.url();
  if (::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    std::perror("paro-run: pipe");
    return 1;
  }
  struct sigaction action {};
  action.sa_handler = on_signal;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a reader of our output that goes away must not kill the job silently

  std::vector<Rank> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(start(r, n, store, command));
  const auto started = Clock::now();
  std::optional<int> failure;      // the exit status of the first rank that failed
  std::optional<int> interrupted;  // the signal that paro-run got
  std::optional<Clock::time_point> terminate_at, kill_at, last_exit;
  bool timed_out = false;
  auto seconds = [](double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); };
  auto stop_after = [&](double wait) {
    if (!terminate_at) terminate_at = Clock::now() + seconds(wait);
  };

  for (;;) {
    std::vector<pollfd> polled{{signal_pipe[0], POLLIN, 0}};
    std::vector<std::pair<Rank*, Stream*>> owners{{nullptr, nullptr}};
    for (Rank& r : ranks)
      for (Stream& s : r.streams)
        if (s.fd >= 0) {
          polled.push_back({s.fd, POLLIN, 0});
          owners.emplace_back(&r, &s);
        }
    ::poll(polled.data(), polled.size(), 50);  // also a tick for exits and deadlines
    if (polled[0].revents & POLLIN) {
      char number = 0;
      while (::read(signal_pipe[0], &number, 1) == 1) {
        std::fprintf(stderr, "paro-run: got signal %d; passing it to the ranks\n", number);
        signal_all(ranks, number);
        if (!interrupted) interrupted = number;
        stop_after(grace);
      }
    }
    for (std::size_t i = 1; i < polled.size(); ++i)
      if (polled[i].revents != 0) forward(owners[i].first->rank, *owners[i].second);

    int status = 0;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      for (Rank& r : ranks) {
        if (r.pid != pid) continue;
        r.running = false;
        if (status == 0) continue;
        std::fprintf(stderr, "paro-run: rank %d (pid %d) %s\n", r.rank, static_cast<int>(pid),
                     describe(status).c_str());
        if (!failure) {
          failure = code_of(status);
          if (n > 1 && !terminate_at)
            std::fprintf(stderr, "paro-run: waiting up to %g s for the other ranks before stopping them\n", grace);
          stop_after(grace);
        }
      }
    }

    const auto now = Clock::now();
    const bool any_running = std::any_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.running; });
    if (timeout > 0 && !timed_out && now - started >= seconds(timeout)) {
      std::fprintf(stderr, "paro-run: --timeout %g s reached; stopping the job\n", timeout);
      timed_out = true;
      terminate_at = now;
    }
    if (terminate_at && !kill_at && now >= *terminate_at && any_running) {
      signal_all(ranks, SIGTERM);
      kill_at = now + seconds(2);
    }
    if (kill_at && now >= *kill_at) signal_all(ranks, SIGKILL);
    if (!any_running) {
      // A rank's own children may hold its pipes open: read what is left for at most 1 s more.
      if (!last_exit) last_exit = now;
      const bool pipes_open = owners.size() > 1;
      if (!pipes_open || now - *last_exit >= seconds(1)) break;
    }
  }
  if (timed_out) return 124;
  if (failure) return *failure;
  return interrupted ? 128 + *interrupted : 0;  // an interrupted job did not succeed, however its ranks ended
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"paro-run: starts N ranks of a command on this host with a TCP store to bootstrap through"};
  int n = 0;
  double grace = 5;
  double timeout = 0;
  std::vector<std::string> command;
  app.add_option("-n,--np", n, "number of ranks (processes) to start")->required();
  app.add_option("--grace", grace, "seconds the other ranks get to finish after one fails (default 5)");
  app.add_option("--timeout", timeout, "stop the whole job after this many seconds; exit 124 (default: never)");
  app.add_option("command", command, "the program and its arguments, after --");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  auto usage = [](const std::string& message) {
    std::fprintf(stderr, "paro-run: %s\nusage: paro-run -n N [--grace SECONDS] [--timeout SECONDS] -- CMD ARGS...\n",
                 message.c_str());
    return 2;
  };
  if (n < 1) return usage("-n " + std::to_string(n) + ": the number of ranks must be at least 1");
  if (!(grace >= 0)) return usage("--grace must be a number of seconds >= 0");
  if (!(timeout >= 0)) return usage("--timeout must be a number of seconds >= 0 (0: no limit)");
  if (command.empty()) return usage("no command given; put it after --");
  try {
    return run(n, grace, timeout, command);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paro-run: %s\n", e.what());
    return 1;
  }
}
