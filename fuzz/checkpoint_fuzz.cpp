// Arbitrary bytes -> read_checkpoint_file, twice: as given, and "repaired" (magic, version,
// total size and whole-file checksum made right) so that mutations reach the section table
// and metadata parser behind them.
// Properties: no crash or sanitizer report; every section of an accepted file lies within
// it and can be read back (read_floats with its own size), every metadata key is found.
#include <cstring>
#include <vector>

#include "core/checksum.h"
#include "fuzz_util.h"
#include "train/checkpoint.h"

namespace {

void read_and_check(const std::vector<std::uint8_t>& bytes) {
  const std::string& path = sparq::fuzz::scratch_path(".ckpt");
  sparq::fuzz::write_scratch(path, bytes.data(), bytes.size());
  auto file = sparq::train::read_checkpoint_file(path);
  if (!file.is_ok()) return;
  std::size_t total = 0;
  for (const auto& [name, section] : file->sections) {
    total += section.size();
    auto view = file->section(name);
    if (!view.is_ok()) sparq::fuzz::property_failed("a listed section is not found");
    if (section.size() % sizeof(float) == 0) {
      std::vector<float> floats(section.size() / sizeof(float));
      if (!file->read_floats(name, floats).is_ok()) {
        sparq::fuzz::property_failed("read_floats refuses a section of the right size");
      }
    }
  }
  if (total > bytes.size()) sparq::fuzz::property_failed("sections hold more bytes than the file");
  for (const auto& [key, value] : file->meta) {
    if (!file->meta_value(key).is_ok()) sparq::fuzz::property_failed("a listed key is not found");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::uint8_t> bytes(data, data + size);
  read_and_check(bytes);
  if (size < 48) return 0;  // the 40-byte fixed header and the 8-byte trailer
  // Repaired, after checkpoint.h's layout: magic 0, version 8, total size 24, trailer.
  std::memcpy(bytes.data(), sparq::train::kCheckpointMagic, 8);
  const std::uint32_t version = sparq::train::kCheckpointVersion;
  std::memcpy(bytes.data() + 8, &version, 4);
  const std::uint64_t total = size;
  std::memcpy(bytes.data() + 24, &total, 8);
  const std::uint64_t sum = sparq::checksum64(bytes.data(), size - 8);
  std::memcpy(bytes.data() + size - 8, &sum, 8);
  read_and_check(bytes);
  return 0;
}
