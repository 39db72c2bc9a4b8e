// libFuzzer target: the checkpoint files a training run reads back. The first byte picks the format, the
// rest is the file: a PaRO-DP engine shard (dp/checkpoint.hpp) or SEPARATE's state (compression/separate.hpp,
// loaded into two registered tensors, one compressed with error feedback). What is accepted must write
// back to the same bytes.
#include <cstdlib>
#include <sstream>

#include "fuzz_input.hpp"
#include "paro/compression/separate.hpp"
#include "paro/dp/checkpoint.hpp"

namespace {

void engine_shard(const std::string& bytes) {
  const auto header = paro::dp::ShardHeader::parse(bytes, bytes.size(), "fuzz.bin");
  if (bytes.compare(0, header.encode().size(), header.encode()) != 0) std::abort();
}

void separate_state(const std::string& bytes) {
  paro::compression::SeparateOptions o;
  o.min_elements = 64;
  o.ratio = 4;
  o.adaptive = (bytes.size() & 1) != 0;  // both width ranges
  paro::compression::Separate s(o);
  s.add("weight", 8, 16, paro::DataType::f32);
  s.add("bias", 1, 16, paro::DataType::bf16);
  std::istringstream in(bytes);
  s.load(in);
  std::ostringstream out;
  s.save(out);
  if (bytes.compare(0, out.str().size(), out.str()) != 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  return paro::fuzz::refusing_only_with_paro_errors(data + 1, size - 1, [&](const std::string& bytes) {
    if (data[0] % 2 == 0)
      engine_shard(bytes);
    else
      separate_state(bytes);
  });
}
