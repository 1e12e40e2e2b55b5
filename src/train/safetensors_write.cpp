// The safetensors format written (train/safetensors.h): a JSON header of F32 tensors and
// metadata, then the values, 8-byte aligned.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <set>
#include <string_view>

#include "core/output_file.h"
#include "train/json_subset.h"
#include "train/safetensors.h"

namespace sparq::train {

Status write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    append_json_string(header, kSafetensorsMetadataKey);
    header += ":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) header += ',';
      first = false;
      append_json_string(header, k);
      header += ':';
      append_json_string(header, v);
    }
    header += '}';
  }
  std::set<std::string_view> names;
  std::uint64_t offset = 0;
  for (const SafetensorsTensor& t : tensors) {
    if (t.name == kSafetensorsMetadataKey || !names.insert(t.name).second) {
      return Status::error("safetensors '{}': tensor name '{}' is reserved or repeated", path,
                           t.name);
    }
    std::int64_t numel = 1;
    for (const std::int64_t d : t.shape) numel *= d;
    if (numel < 0 || static_cast<std::size_t>(numel) != t.values.size()) {
      return Status::error("safetensors '{}': tensor '{}' has shape {} but {} values", path, t.name,
                           dims_str(t.shape), t.values.size());
    }
    if (header.size() > 1) header += ',';
    append_json_string(header, t.name);
    header += fmt::format(R"(:{{"dtype":"F32","shape":[{}],"data_offsets":[{},{}]}})",
                          fmt::join(t.shape, ","), offset, offset + t.values.size_bytes());
    offset += t.values.size_bytes();
  }
  header += '}';
  header.resize((header.size() + 7) / 8 * 8, ' ');  // keeps the data 8-byte aligned

  std::string out;
  out.reserve(8 + header.size() + offset);
  const std::uint64_t header_len = header.size();
  out.append(reinterpret_cast<const char*>(&header_len), 8);
  out += header;
  for (const SafetensorsTensor& t : tensors) {
    out.append(reinterpret_cast<const char*>(t.values.data()), t.values.size_bytes());
  }
  // Through a link to the file it names, into a device or pipe in place (core/output_file.h).
  return write_output_file(path, out);
}

}  // namespace sparq::train
