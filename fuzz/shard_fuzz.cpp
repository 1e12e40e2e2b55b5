// Arbitrary bytes -> ShardReader::open, twice: as given, and "repaired" (magic, version and
// both checksums made right) so that mutations reach the checks behind the checksums.
// Properties: no crash or sanitizer report; an accepted shard's every token can be read and
// is < vocab_size, and its header's counts match the file.
#include <cstring>
#include <vector>

#include "core/checksum.h"
#include "data/shard.h"
#include "fuzz_util.h"

namespace {

using sparq::data::kShardHeaderBytes;

void open_and_check(const std::vector<std::uint8_t>& bytes) {
  const std::string& path = sparq::fuzz::scratch_path(".shard");
  sparq::fuzz::write_scratch(path, bytes.data(), bytes.size());
  auto reader = sparq::data::ShardReader::open(path);
  if (!reader.is_ok()) return;
  const auto& h = reader->header();
  if (h.token_count != (bytes.size() - kShardHeaderBytes) / h.token_width) {
    sparq::fuzz::property_failed("accepted a shard whose size does not match its header");
  }
  std::vector<std::uint32_t> tokens(reader->size());
  reader->read(0, tokens.size(), tokens.data());
  for (std::uint32_t id : tokens) {
    if (id >= h.vocab_size) sparq::fuzz::property_failed("accepted a token id >= vocab_size");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::uint8_t> bytes(data, data + size);
  open_and_check(bytes);
  if (size < kShardHeaderBytes) return 0;
  // Repaired: the layout of shard.h (magic 0, version 8, payload checksum 32, header 120).
  std::memcpy(bytes.data(), sparq::data::kShardMagic, 8);
  const std::uint32_t version = sparq::data::kShardVersion;
  std::memcpy(bytes.data() + 8, &version, 4);
  const std::uint64_t payload =
      sparq::checksum64(bytes.data() + kShardHeaderBytes, size - kShardHeaderBytes);
  std::memcpy(bytes.data() + 32, &payload, 8);
  const std::uint64_t header = sparq::checksum64(bytes.data(), 120);
  std::memcpy(bytes.data() + 120, &header, 8);
  open_and_check(bytes);
  return 0;
}
