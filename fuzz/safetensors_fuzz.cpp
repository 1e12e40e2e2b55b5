// Arbitrary bytes -> SafetensorsFile::read (header length, the JSON subset parser, every
// entry's dtype, shape and data_offsets, overlaps), then read_f32 of every float tensor.
// Properties: no crash or sanitizer report; an accepted tensor's range lies within the data
// and matches its element count, and converting a float tensor succeeds.
#include <vector>

#include "fuzz_util.h"
#include "train/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = sparq::fuzz::scratch_path(".safetensors");
  sparq::fuzz::write_scratch(path, data, size);
  auto file = sparq::train::SafetensorsFile::read(path);
  if (!file.is_ok()) return 0;
  for (const auto& t : file->tensors()) {
    if (t.end < t.begin || t.end > size) sparq::fuzz::property_failed("a range outside the file");
    const std::int64_t n = t.numel();
    if (n < 0 || static_cast<std::uint64_t>(n) > t.end - t.begin) {
      sparq::fuzz::property_failed("an element count larger than the tensor's bytes");
    }
    if (!sparq::train::convertible_to_f32(t.dtype)) continue;
    std::vector<float> out(static_cast<std::size_t>(n));
    const sparq::Status s = file->read_f32(t, out);
    if (!s.is_ok()) sparq::fuzz::property_failed("read_f32 of an accepted tensor: " + s.message());
  }
  return 0;
}
