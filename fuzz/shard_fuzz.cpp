// Arbitrary bytes -> ShardReader::from_bytes, on an exactly-sized heap copy (a read past the
// shard's end is an ASan report; ShardReader::open's memory map would hide it up to the end
// of its last page), twice: as given, and "repaired" (magic, version and both checksums made
// right) so that mutations reach the checks behind the checksums. The input as given also
// goes through ShardReader::open (a scratch file) and without payload verification.
// Properties: no crash or sanitizer report; open() and from_bytes() agree (both accept, or
// both fail with the same message); an accepted shard's header counts match its size, and
// every token reads back (read() and token() agree); with the payload verified, every id is
// < vocab_size; whatever is accepted verified is accepted unverified, with the same tokens.
#include <cstring>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "data/shard.h"
#include "fuzz_util.h"

namespace {

using sparq::data::kShardHeaderBytes;
using sparq::data::ShardReader;

// The tokens of an accepted shard of `size` bytes, after the properties above.
std::vector<std::uint32_t> check_accepted(const ShardReader& reader, std::size_t size,
                                          bool verified) {
  const auto& h = reader.header();
  if (h.token_count != (size - kShardHeaderBytes) / h.token_width ||
      (size - kShardHeaderBytes) % h.token_width != 0) {
    sparq::fuzz::property_failed("accepted a shard whose size does not match its header");
  }
  std::vector<std::uint32_t> tokens(reader.size());
  reader.read(0, tokens.size(), tokens.data());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (reader.token(i) != tokens[i]) sparq::fuzz::property_failed("token() and read() disagree");
    if (verified && tokens[i] >= h.vocab_size) {
      sparq::fuzz::property_failed("accepted a token id >= vocab_size");
    }
  }
  if (!tokens.empty()) {  // a range in the middle
    const std::size_t begin = tokens.size() / 3, count = tokens.size() - begin;
    std::vector<std::uint32_t> part(count);
    reader.read(begin, count, part.data());
    if (std::memcmp(part.data(), tokens.data() + begin, 4 * count) != 0) {
      sparq::fuzz::property_failed("read() of a sub-range disagrees");
    }
  }
  return tokens;
}

// from_bytes, verified and not; returns whether the verified read accepted.
bool check_bytes(const std::uint8_t* data, std::size_t size) {
  // Exactly-sized heap copies: the reader keeps the vector's buffer.
  auto verified = ShardReader::from_bytes(std::vector<std::uint8_t>(data, data + size), "fuzz");
  auto unverified =
      ShardReader::from_bytes(std::vector<std::uint8_t>(data, data + size), "fuzz", false);
  std::vector<std::uint32_t> unverified_tokens;
  if (unverified.is_ok()) unverified_tokens = check_accepted(*unverified, size, false);
  if (!verified.is_ok()) return false;
  if (!unverified.is_ok()) {
    sparq::fuzz::property_failed("accepted with the payload verified, refused without: " +
                                 unverified.status().message());
  }
  if (check_accepted(*verified, size, true) != unverified_tokens) {
    sparq::fuzz::property_failed("verified and unverified reads give different tokens");
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const bool accepted = check_bytes(data, size);

  // The file path: the same answer as from_bytes (the same checks, by the same code).
  const std::string& path = sparq::fuzz::scratch_path(".shard");
  sparq::fuzz::write_scratch(path, data, size);
  auto opened = ShardReader::open(path);
  auto in_memory = ShardReader::from_bytes(std::vector<std::uint8_t>(data, data + size), path);
  if (opened.is_ok() != accepted || in_memory.is_ok() != accepted ||
      (!accepted && opened.status().message() != in_memory.status().message())) {
    sparq::fuzz::property_failed(
        "open() and from_bytes() disagree: " +
        (opened.is_ok() ? std::string("accepted") : opened.status().message()) + " vs " +
        (in_memory.is_ok() ? std::string("accepted") : in_memory.status().message()));
  }
  if (opened.is_ok() &&
      check_accepted(*opened, size, true) != check_accepted(*in_memory, size, true)) {
    sparq::fuzz::property_failed("open() and from_bytes() read different tokens");
  }

  if (size < kShardHeaderBytes) return 0;
  // Repaired: the layout of shard.h (magic 0, version 8, payload checksum 32, header 120).
  std::vector<std::uint8_t> bytes(data, data + size);
  std::memcpy(bytes.data(), sparq::data::kShardMagic, 8);
  const std::uint32_t version = sparq::data::kShardVersion;
  std::memcpy(bytes.data() + 8, &version, 4);
  const std::uint64_t payload =
      sparq::checksum64(bytes.data() + kShardHeaderBytes, size - kShardHeaderBytes);
  std::memcpy(bytes.data() + 32, &payload, 8);
  const std::uint64_t header =
      sparq::checksum64(bytes.data(), sparq::data::kShardHeaderChecksumOffset);
  std::memcpy(bytes.data() + sparq::data::kShardHeaderChecksumOffset, &header, 8);
  check_bytes(bytes.data(), bytes.size());
  return 0;
}
