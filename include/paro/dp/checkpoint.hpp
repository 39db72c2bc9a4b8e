#pragma once
// PaRO-DP checkpoints on a filesystem every rank can read (one host, or a shared one): the file format of
// one rank's shard of the training state, and the directory protocol that makes a checkpoint atomic.
//
// A checkpoint directory holds one folder per saved step and a pointer to the newest complete one:
//   ROOT/step-00000040/engine-rank-00003.bin    each rank's pieces of the parameters and Adam's states
//   ROOT/step-00000040/...                      whatever else the trainer saves (SEPARATE's state, ...)
//   ROOT/latest                                 "step-00000040": written last, by rank 0, after every rank
//                                               has written its files (write to a temporary, then rename)
// A run killed while saving leaves a folder that `latest` does not name; resuming ignores it.
//
// A shard file ("PARODP01", native little-endian):
//   0  char[8]  magic            24 u64 params (all parameters, trainable first)
//   8  u32 ranks                 32 u64 trainable
//   12 u32 group (ranks per group)  40 i64 step (optimizer steps taken)
//   16 u32 rank                  48 char[4] strategy ("NIG" and a zero)
//   20 u32 pieces (<= 4)         52 u32 zero
//   56 per piece: u32 vector (0 trainable params, 1 frozen params, 2 Adam m, 3 Adam v), u32 zero,
//      u64 begin, u64 count: elements [begin, begin + count) of that vector, padded to a multiple of ranks
//   then every piece's count floats, in order.
// Pieces are positions in the full vectors, so a checkpoint loads onto any strategy, rank count and
// group size (dp/engine.hpp). Errors name the file and the field that is wrong.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "paro/core/error.hpp"
#include "paro/core/file.hpp"
#include "paro/dp/model.hpp"
#include "paro/dp/strategy.hpp"

namespace paro::dp {

enum class StateVector : std::uint32_t { trainable = 0, frozen = 1, adam_m = 2, adam_v = 3 };

inline const char* name_of(StateVector v) {
  switch (v) {
    case StateVector::trainable: return "trainable parameters";
    case StateVector::frozen: return "frozen parameters";
    case StateVector::adam_m: return "Adam's m";
    case StateVector::adam_v: return "Adam's v";
  }
  return "invalid";
}

struct ShardPiece {
  StateVector vector = StateVector::trainable;
  std::uint64_t begin = 0, count = 0;
  std::uint64_t data_offset = 0;  // in the file
};

struct ShardHeader {
  int ranks = 1, group = 1, rank = 0;
  std::uint64_t params = 0, trainable = 0;
  long step = 0;
  Strategy strategy;
  std::vector<ShardPiece> pieces;

  static constexpr char magic[8] = {'P', 'A', 'R', 'O', 'D', 'P', '0', '1'};
  static constexpr std::size_t fixed_bytes = 56, piece_bytes = 24, max_pieces = 4;

  // Elements of a vector in a checkpoint of `ranks` ranks: its real length, padded.
  std::uint64_t padded_length(StateVector v) const { return padded(static_cast<std::size_t>(real_length(v)), ranks); }
  std::uint64_t real_length(StateVector v) const { return v == StateVector::frozen ? params - trainable : trainable; }

  // The header and piece table (the file's first fixed_bytes + pieces * piece_bytes bytes, or all of a
  // shorter file); `file_bytes` is the whole file's size, which the pieces must account for exactly.
  static ShardHeader parse(std::string_view bytes, std::uint64_t file_bytes, const std::string& path) {
    auto fail = [&](const std::string& field, const std::string& why) {
      throw UsageError(detail::concat("checkpoint '", path, "': ", field, ": ", why));
    };
    if (bytes.size() < fixed_bytes || std::memcmp(bytes.data(), magic, sizeof magic) != 0)
      fail("header", "not a PaRO-DP shard file (magic PARODP01)");
    auto u32 = [&](std::size_t at) {
      std::uint32_t v;
      std::memcpy(&v, bytes.data() + at, sizeof v);
      return v;
    };
    auto u64 = [&](std::size_t at) {
      std::uint64_t v;
      std::memcpy(&v, bytes.data() + at, sizeof v);
      return v;
    };
    ShardHeader h;
    const std::uint32_t ranks = u32(8), group = u32(12), rank = u32(16), pieces = u32(20);
    if (ranks < 1 || ranks > (1u << 24)) fail("ranks", detail::concat(ranks, " is not in [1, 2^24]"));
    if (group < 1 || ranks % group != 0) fail("group", detail::concat(group, " does not divide ", ranks, " ranks"));
    if (rank >= ranks) fail("rank", detail::concat(rank, " is not below ", ranks, " ranks"));
    if (pieces > max_pieces) fail("pieces", detail::concat(pieces, " is more than ", max_pieces));
    h.ranks = static_cast<int>(ranks);
    h.group = static_cast<int>(group);
    h.rank = static_cast<int>(rank);
    h.params = u64(24);
    h.trainable = u64(32);
    const std::uint64_t step = u64(40);
    if (h.params > (std::uint64_t{1} << 44)) fail("params", detail::concat(h.params, " is more than 2^44"));
    if (h.trainable > h.params) fail("trainable", detail::concat(h.trainable, " is more than params ", h.params));
    if (step > (std::uint64_t{1} << 40)) fail("step", detail::concat(step, " is not a step count"));
    h.step = static_cast<long>(step);
    const std::string letters(bytes.data() + 48, 3);
    if (bytes[51] != '\0' || u32(52) != 0) fail("strategy", "not three letters and a zero");
    try {
      h.strategy = Strategy::parse(letters);
    } catch (const Error& e) {
      fail("strategy", e.message());
    }
    if (letters != h.strategy.name()) fail("strategy", "'" + letters + "' is not as written: upper-case N, I, G");
    const std::uint64_t table_end = fixed_bytes + std::uint64_t{pieces} * piece_bytes;
    if (bytes.size() < table_end)
      fail("pieces", detail::concat("the file ends inside the table of ", pieces, " pieces"));
    std::uint64_t data = table_end;
    for (std::uint32_t i = 0; i < pieces; ++i) {
      const std::size_t at = fixed_bytes + i * piece_bytes;
      const std::string where = detail::concat("piece ", i);
      const std::uint32_t vector = u32(at);
      if (vector > 3) fail(where, detail::concat("vector ", vector, " is not 0..3"));
      if (u32(at + 4) != 0) fail(where, "the reserved field after the vector is not zero");
      ShardPiece p{static_cast<StateVector>(vector), u64(at + 8), u64(at + 16), data};
      const std::uint64_t length = h.padded_length(p.vector);
      if (p.begin > length || p.count > length - p.begin)
        fail(where, detail::concat(name_of(p.vector), " [", p.begin, ", +", p.count, ") is outside their ", length,
                                   " elements"));
      data += p.count * sizeof(float);
      h.pieces.push_back(p);
    }
    if (data != file_bytes)
      fail("size", detail::concat("the pieces need ", data, " bytes, the file has ", file_bytes,
                                  data > file_bytes ? " (truncated?)" : ""));
    return h;
  }

  std::string encode() const {
    std::string out(fixed_bytes + pieces.size() * piece_bytes, '\0');
    auto put = [&](std::size_t at, auto v) { std::memcpy(&out[at], &v, sizeof v); };
    std::memcpy(&out[0], magic, sizeof magic);
    put(8, static_cast<std::uint32_t>(ranks));
    put(12, static_cast<std::uint32_t>(group));
    put(16, static_cast<std::uint32_t>(rank));
    put(20, static_cast<std::uint32_t>(pieces.size()));
    put(24, params);
    put(32, trainable);
    put(40, static_cast<std::uint64_t>(step));
    const std::string letters = strategy.name();
    std::memcpy(&out[48], letters.data(), 3);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      const std::size_t at = fixed_bytes + i * piece_bytes;
      put(at, static_cast<std::uint32_t>(pieces[i].vector));
      put(at + 8, pieces[i].begin);
      put(at + 16, pieces[i].count);
    }
    return out;
  }

  // The header of the shard file at `path`.
  static ShardHeader read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    detail::require(static_cast<bool>(in), "checkpoint '", path, "': cannot read it (", std::strerror(errno), ")");
    in.seekg(0, std::ios::end);
    const auto size = static_cast<std::uint64_t>(in.tellg());
    in.seekg(0);
    std::string head(static_cast<std::size_t>(std::min<std::uint64_t>(size, fixed_bytes + max_pieces * piece_bytes)),
                     '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    detail::require(static_cast<bool>(in), "checkpoint '", path, "': reading its header failed");
    return parse(head, size, path);
  }
};

// Elements [from, from + n) of a piece (inside it) of the shard file at `path`.
inline void read_piece(const std::string& path, const ShardPiece& p, std::uint64_t from, std::uint64_t n, float* out) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(p.data_offset + (from - p.begin) * sizeof(float)));
  in.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(n * sizeof(float)));
  detail::require(static_cast<bool>(in), "checkpoint '", path, "': reading ", name_of(p.vector), " failed");
}

// The shard file of `rank` in the folder of one checkpoint.
inline std::string engine_shard_path(const std::string& folder, int rank) {
  char name[40];
  std::snprintf(name, sizeof name, "/engine-rank-%05d.bin", rank);
  return folder + name;
}

// Writes `bytes` to a temporary beside `path`, flushes it to the disk, renames it over `path` and flushes
// the folder: a reader sees the old file or the whole new one, never a part, also after a power loss.
inline void write_file_atomically(const std::string& path, std::string_view bytes) {
  const std::string temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  detail::require(fd >= 0, "checkpoint: cannot create '", temporary, "' (", std::strerror(errno), ")");
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      throw Error(detail::concat("checkpoint: writing '", temporary, "' failed (", std::strerror(e), ")"));
    }
    done += static_cast<std::size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  const int e = errno;
  ::close(fd);
  detail::require(synced, "checkpoint: flushing '", temporary, "' failed (", std::strerror(e), ")");
  detail::require(std::rename(temporary.c_str(), path.c_str()) == 0, "checkpoint: renaming '", temporary, "' to '",
                  path, "' failed (", std::strerror(errno), ")");
  // The rename itself reaches the disk with its folder.
  const std::string folder = std::filesystem::path(path).parent_path().string();
  const int dir = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

inline std::string read_whole_file(const std::string& path) {
  std::optional<std::string> text = detail::read_file(path);
  detail::require(text.has_value(), "checkpoint '", path, "': cannot read it (", std::strerror(errno), ")");
  return std::move(*text);
}

// The folders of one checkpoint root and its `latest` pointer.
class CheckpointDirectory {
 public:
  explicit CheckpointDirectory(std::string root) : root_(std::move(root)) {
    detail::require(!root_.empty(), "checkpoint directory: the path is empty");
  }

  const std::string& root() const { return root_; }

  static std::string folder_name(long step) {
    char name[32];
    std::snprintf(name, sizeof name, "step-%08ld", step);
    return name;
  }
  std::string step_path(long step) const { return root_ + "/" + folder_name(step); }

  // Creates the folder of `step` (every rank may call it).
  std::string create(long step) const {
    const std::string path = step_path(step);
    std::error_code made, checked;
    std::filesystem::create_directories(path, made);
    detail::require(std::filesystem::is_directory(path, checked), "checkpoint: cannot create '", path, "' (",
                    made.message(), ")");
    return path;
  }

  // The step of the newest complete checkpoint, if any.
  std::optional<long> latest() const {
    const std::string pointer = root_ + "/latest";
    std::error_code ec;
    if (!std::filesystem::exists(pointer, ec)) return std::nullopt;
    std::string text = read_whole_file(pointer);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    long step = -1;
    char tail = 0;
    detail::require(
        std::sscanf(text.c_str(), "step-%ld%c", &step, &tail) == 1 && step >= 0 && text == folder_name(step),
        "checkpoint '", pointer, "': '", text, "' does not name a step folder (step-NNNNNNNN)");
    detail::require(std::filesystem::is_directory(step_path(step), ec), "checkpoint '", pointer, "' names '", text,
                    "', which is not a folder of ", root_);
    return step;
  }

  // Makes `step` the latest (rank 0, once every rank has written its files). Then removes the folders of
  // saves killed since the previous latest, and of complete ones beyond the newest `keep` (at least 1).
  // Folders of later steps are left alone.
  void commit(long step, int keep = 2) const {
    detail::require(keep >= 1, "checkpoint: keep ", keep, " must be >= 1");
    std::optional<long> previous;
    try {
      previous = latest();
    } catch (const Error&) {  // a damaged pointer: replaced below
    }
    write_file_atomically(root_ + "/latest", folder_name(step) + "\n");
    std::vector<long> complete;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
      long s = -1;
      char tail = 0;
      const std::string name = it->path().filename().string();
      if (!it->is_directory(ec) || std::sscanf(name.c_str(), "step-%ld%c", &s, &tail) != 1 || name != folder_name(s) ||
          s >= step)
        continue;
      if (previous && s > *previous)
        remove(s);  // a save killed after the previous commit
      else
        complete.push_back(s);
    }
    detail::require(!ec, "checkpoint: cannot list '", root_, "' (", ec.message(), ")");
    std::sort(complete.rbegin(), complete.rend());
    for (std::size_t i = static_cast<std::size_t>(keep - 1); i < complete.size(); ++i) remove(complete[i]);
  }

 private:
  std::string root_;

  void remove(long step) const {
    std::error_code ec;
    std::filesystem::remove_all(step_path(step), ec);
    detail::require(!ec, "checkpoint: cannot remove '", step_path(step), "' (", ec.message(), ")");
  }
};

}  // namespace paro::dp
