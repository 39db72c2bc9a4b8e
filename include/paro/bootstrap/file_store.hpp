#pragma once
// FileStore: a Store over a directory that every rank can see (one host's /tmp, or a shared filesystem
// such as NFS or Lustre). One file per key; set writes a temporary file and renames it over the key's
// file, so a reader sees the old value or the new one, never half of one. add holds an flock on a lock
// file across its read-modify-write.

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "paro/bootstrap/bootstrap.hpp"
#include "paro/bootstrap/posix.hpp"
#include "paro/core/env.hpp"
#include "paro/core/error.hpp"

namespace paro::bootstrap {

class FileStore : public Store {
 public:
  // Creates the directory (and its parents) if it does not exist yet.
  explicit FileStore(std::string directory, double timeout_seconds = env::timeout_seconds())
      : directory_(std::move(directory)), timeout_(timeout_seconds) {
    paro::detail::require(!directory_.empty(), "FileStore: the directory is empty; give a path every rank can see");
    paro::detail::require(timeout_ > 0, "FileStore: timeout ", timeout_, " s; allowed: a positive number of seconds");
    std::error_code error;  // several ranks may create it at once: existing is fine
    std::filesystem::create_directories(directory_, error);
    if (error)
      throw UsageError(
          paro::detail::concat("FileStore: cannot create directory '", directory_, "': ", error.message()));
    paro::detail::require(std::filesystem::is_directory(directory_, error), "FileStore: '", directory_,
                          "' is not a directory");
  }

  const std::string& directory() const { return directory_; }

  void set(const std::string& key, const Bytes& value) override { write_atomically(key_path(key), value); }

  Bytes get(const std::string& key) override {
    const std::string path = key_path(key);
    auto value = detail::poll_until(detail::deadline_after(timeout_), [&] { return read_if_present(path); });
    if (!value) throw TimeoutError(detail::missing_key("FileStore", key, timeout_, " in '" + directory_ + "'"));
    return std::move(*value);
  }

  std::int64_t add(const std::string& key, std::int64_t delta) override {
    detail::Fd lock(::open((directory_ + "/add.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!lock) fail("open the lock file", directory_ + "/add.lock");
    // Non-blocking attempts, so that a holder that hangs becomes a TimeoutError rather than a hang.
    const bool locked = detail::poll_until(detail::deadline_after(timeout_), [&]() -> std::optional<bool> {
                          if (::flock(lock.get(), LOCK_EX | LOCK_NB) == 0) return true;
                          return std::nullopt;
                        }).has_value();
    if (!locked)
      throw TimeoutError(paro::detail::concat("FileStore: add on key '", key, "' could not lock '", directory_,
                                              "/add.lock' within ", timeout_, " s (PARO_TIMEOUT sets the limit)"));
    const std::string path = key_path(key);
    const auto current = read_if_present(path);
    const std::int64_t value = (current ? detail::counter_value("FileStore", key, *current) : 0) + delta;
    write_atomically(path, detail::counter_bytes(value));
    return value;  // the lock is released when `lock` closes
  }

 private:
  // File names: "k." + the key with every byte outside [A-Za-z0-9_-] written as %XX. The encoding has no
  // '/' and no '.', so no key can leave the directory or meet the temporary and lock files.
  std::string key_path(const std::string& key) const {
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string name = "k.";
    for (unsigned char c : key) {
      if (std::isalnum(c) || c == '_' || c == '-') {
        name += static_cast<char>(c);
      } else {
        name += '%';
        name += hex[c >> 4];
        name += hex[c & 15];
      }
    }
    paro::detail::require(name.size() <= max_name_bytes, "FileStore: key '", key.substr(0, 64),
                          "...' is too long: its file name takes ", name.size(), " bytes; allowed: ", max_name_bytes,
                          " (each byte outside [A-Za-z0-9_-] takes 3)");
    return directory_ + "/" + name;
  }

  void write_atomically(const std::string& path, const Bytes& value) const {
    // Unique per host, process and call (hosts may share the directory), and on the key file's filesystem,
    // so that rename replaces it atomically.
    static std::atomic<std::uint64_t> counter{0};
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    const std::string temporary =
        paro::detail::concat(directory_, "/t.", host, ".", ::getpid(), ".", counter.fetch_add(1));
    {
      detail::Fd file(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
      if (!file) fail("create", temporary);
      std::size_t written = 0;
      while (written < value.size()) {
        const ssize_t n = ::write(file.get(), value.data() + written, value.size() - written);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          const int error = errno;
          ::unlink(temporary.c_str());
          fail("write", temporary, error);
        }
        written += static_cast<std::size_t>(n);
      }
    }
    if (::rename(temporary.c_str(), path.c_str()) != 0) {
      const int error = errno;
      ::unlink(temporary.c_str());
      fail("rename into", path, error);
    }
  }

  static std::optional<Bytes> read_if_present(const std::string& path) {
    detail::Fd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!file) {
      if (errno == ENOENT) return std::nullopt;
      fail("open", path);
    }
    Bytes value;
    std::uint8_t chunk[65536];
    for (;;) {
      const ssize_t n = ::read(file.get(), chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("read", path);
      if (n == 0) return value;
      value.insert(value.end(), chunk, chunk + n);
    }
  }

  [[noreturn]] static void fail(const char* what, const std::string& path, int error = errno) {
    throw BackendError(paro::detail::concat("FileStore: cannot ", what, " '", path, "': ", detail::errno_text(error)));
  }

  static constexpr std::size_t max_name_bytes = 240;  // most filesystems allow 255 bytes per name
  std::string directory_;
  double timeout_;
};

}  // namespace paro::bootstrap
