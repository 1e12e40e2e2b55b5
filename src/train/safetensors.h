// safetensors import and export (the Hugging Face tensor file format), so sparq weights can
// go to and come from the PyTorch ecosystem.
//
// Format: an 8-byte little-endian header length N, then N bytes of UTF-8 JSON
//   {"<name>": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"<key>": "<value>", ...}}                    (metadata optional)
// then the data: every tensor's row-major little-endian bytes at [begin, end) relative to the
// end of the header. sparq writes F32 only, with the header padded by spaces to a multiple of
// 8 bytes (as the reference implementation does) and tensors in the store's forward order.
// It reads F32, F16, BF16 and F64 (converted to f32); other dtypes are validated but cannot
// be loaded. The reader checks that the header lies within the file, that every tensor's
// range lies within the data, matches shape * dtype size and overlaps no other tensor;
// every error names the file and, where one is involved, the tensor.
//
// The JSON reader and writer are internal and handle only what safetensors headers need
// (objects, arrays, strings with escapes, non-negative integers).
//
// Stores must be allocated on the CPU (a CUDA store must be copied to the host first).
// Hugging Face GPT-2 checkpoints, whose names and layouts differ: train/hf_gpt2.h.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/param_store.h"
#include "core/status.h"
#include "core/tensor.h"

namespace sparq::train {

// One tensor of a safetensors file: its header entry. `begin`/`end` are byte offsets into the
// data section. `dtype` is the format's spelling ("F32", "BF16", "I64", ...).
struct SafetensorsEntry {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;
  std::int64_t numel() const;
};

// A validated safetensors file held in memory (it owns the file's bytes).
class SafetensorsFile {
 public:
  static Result<SafetensorsFile> read(const std::string& path);
  // Only the header (names, dtypes, shapes, offsets), validated against the file's size
  // exactly as read() validates it, without reading the data: a dry run checks initial
  // weights of any size this way. read_f32 on such a file is a programming error.
  static Result<SafetensorsFile> read_header(const std::string& path);

  const std::string& path() const { return path_; }
  // Header order (the order in the JSON text).
  const std::vector<SafetensorsEntry>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // nullptr when absent.
  const SafetensorsEntry* find(std::string_view name) const;
  // Converts the tensor to f32 into `out`, whose size must equal its element count.
  Status read_f32(const SafetensorsEntry& entry, std::span<float> out) const;
  // An error naming the tensor, the value and its element when any element is NaN or
  // infinite once converted to f32: the importers refuse such weights before copying anything
  // (they trained nothing but skipped steps, blamed on the learning rate: review, 2026-12-07).
  Status check_finite(const SafetensorsEntry& entry) const;
  // Convenience: the tensor as a new vector (error when absent).
  Result<std::vector<float>> read_f32(std::string_view name) const;

 private:
  // Validates the header in bytes_ (which holds at least its first 8 + N bytes) for a file of
  // `file_bytes` bytes and fills the entries.
  Status parse_header(std::uint64_t file_bytes);

  std::string path_;
  std::string bytes_;  // the whole file, or (read_header) its first 8 + N bytes
  bool has_data_ = false;
  std::size_t data_begin_ = 0;  // 8 + N
  std::vector<SafetensorsEntry> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A tensor to write: f32 values (numel must equal the shape's product) under `name`.
struct SafetensorsTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::span<const float> values;
};

// Writes F32 tensors (unique names, none named "__metadata__") and optional metadata,
// atomically.
Status write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

// Every parameter of `store` under its sparq name ("h.0.attn.qkv.weight", ...) and shape,
// then the model's state tensors (Model::state(): BatchNorm's running statistics,
// "features.0.bn.running_mean", ...; F32, on any device) under theirs. Without the state an
// exported VGG evaluated with its initial statistics (review, 2026-12-06: 16% top-1 where the
// run had reached 72%). A state name that is also a parameter's is an error.
Status export_safetensors(const ParamStore& store, const std::string& path,
                          const std::map<std::string, std::string>& metadata = {},
                          const std::vector<StateTensor>& state = {});

struct ImportOptions {
  // When true, store parameters absent from the file keep their values; when false (the
  // default) any absent parameter is an error naming it.
  bool allow_missing = false;
  // When true, file tensors that are not parameters of the store are ignored; when false
  // they are an error naming them (a typo or another model must not pass silently).
  bool allow_unexpected = false;
  // When true, everything is validated (names, shapes, dtypes) from the file's header alone
  // and nothing is copied: the store may be unallocated or on a device.
  bool check_only = false;
  // Set when given: the names of the `state` tensors the file lacks (they keep their values).
  // A file with none of them (one exported before the state was, or a parameters-only file)
  // loads; one with some but not all is an error unless allow_missing.
  std::vector<std::string>* state_absent = nullptr;
};

// Loads tensors named as sparq names them (export_safetensors' files) into `store`.
// Shapes must match exactly, and every value must be finite (SafetensorsFile::check_finite).
// Everything is validated before anything is copied, so on error
// the store is unchanged. The store must be allocated on the CPU unless options.check_only.
// `state`: the model's state tensors (export_safetensors), on any device, loaded under the same
// rules as the parameters but for ImportOptions::state_absent.
Status import_safetensors(ParamStore& store, const std::string& path,
                          const ImportOptions& options = {},
                          const std::vector<StateTensor>& state = {});

// The header key of the file's string metadata, never a tensor's name.
inline constexpr std::string_view kSafetensorsMetadataKey = "__metadata__";

// Helpers for importers of other naming schemes (train/hf_gpt2.h), so every importer
// validates and reports shapes, dtypes and the store's device the same way.
// The dtypes read_f32 converts: F32, F16, BF16, F64.
bool convertible_to_f32(std::string_view dtype);
std::vector<std::int64_t> dims_of(const Shape& shape);
std::string dims_str(const std::vector<std::int64_t>& dims);  // "[2, 3]"
// An error naming `what` unless the store is allocated on the CPU.
Status check_cpu_store(const ParamStore& store, std::string_view what);

}  // namespace sparq::train
