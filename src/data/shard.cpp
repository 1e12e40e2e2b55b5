#include "data/shard.h"

#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>

#include "core/check.h"
#include "core/fault.h"
#include "core/file_io.h"

namespace sparq::data {
namespace {

static_assert(std::endian::native == std::endian::little, "shards are little-endian");

template <typename T>
void put(std::uint8_t* header, std::size_t offset, T value) {
  std::memcpy(header + offset, &value, sizeof(T));
}

void encode_header(const ShardHeader& h, std::uint8_t* out) {
  std::memset(out, 0, kShardHeaderBytes);
  std::memcpy(out, kShardMagic, 8);
  put(out, 8, h.version);
  put(out, 12, h.token_width);
  put(out, 16, h.token_count);
  put(out, 24, h.vocab_size);
  put(out, 28, h.document_count);
  put(out, 32, h.payload_checksum);
  std::memcpy(out + kShardNameOffset, h.tokenizer.data(),
              std::min(h.tokenizer.size(), kShardNameBytes - 1));
  put(out, kShardHeaderChecksumOffset, shard_checksum(out, kShardHeaderChecksumOffset));
}

// The directory to fsync after renaming `path` ("" means the current one).
std::string parent_dir(const std::string& path) {
  return std::filesystem::path(path).parent_path().string();
}

}  // namespace

// ---- writer ---------------------------------------------------------------------------

Result<ShardWriter> ShardWriter::create(const std::string& path, std::string tokenizer,
                                        std::uint32_t vocab_size) {
  if (tokenizer.size() >= kShardNameBytes) {
    return Status::error("tokenizer name '{}' is longer than {} bytes", tokenizer,
                         kShardNameBytes - 1);
  }
  if (vocab_size == 0) return Status::error("shard '{}': vocab size must be positive", path);
  ShardWriter w;
  w.path_ = path;
  w.header_.tokenizer = std::move(tokenizer);
  w.header_.vocab_size = vocab_size;
  w.header_.token_width = vocab_size <= 65536 ? 2 : 4;
  SPARQ_ASSIGN_OR_RETURN(auto created, create_private_file(path));
  const auto& [fd, tmp] = created;
  w.tmp_path_ = tmp;
  w.file_ = ::fdopen(fd, "wb");
  if (!w.file_) {
    const int err = errno;
    ::close(fd);
    std::remove(tmp.c_str());
    return Status::error("cannot open '{}' for writing: {}", tmp, std::strerror(err));
  }
  const std::uint8_t zeros[kShardHeaderBytes] = {};
  if (std::fwrite(zeros, 1, kShardHeaderBytes, w.file_) != kShardHeaderBytes) {
    return Status::error("write to '{}' failed: {}", tmp, std::strerror(errno));
  }
  return w;
}

ShardWriter::ShardWriter(ShardWriter&& o) noexcept
    : path_(std::move(o.path_)),
      tmp_path_(std::move(o.tmp_path_)),
      file_(o.file_),
      state_(o.state_),
      header_(std::move(o.header_)),
      checksum_(o.checksum_) {
  o.file_ = nullptr;
  o.state_ = State::kDone;
}

ShardWriter::~ShardWriter() {
  if (file_) std::fclose(file_);
  if (state_ != State::kDone && !tmp_path_.empty()) std::remove(tmp_path_.c_str());
}

Status ShardWriter::append(std::span<const std::uint32_t> tokens) {
  SPARQ_CHECK(state_ == State::kOpen, "append() after close() on shard {}", path_);
  // Nothing to write; an empty scratch_ has data() == nullptr, which fwrite must not get.
  if (tokens.empty()) return Status::ok();
  const std::size_t width = header_.token_width;
  scratch_.resize(tokens.size() * width);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    SPARQ_CHECK(tokens[i] < header_.vocab_size, "token {} >= vocab size {} in shard {}", tokens[i],
                header_.vocab_size, path_);
    if (width == 2) {
      put(scratch_.data(), 2 * i, static_cast<std::uint16_t>(tokens[i]));
    } else {
      put(scratch_.data(), 4 * i, tokens[i]);
    }
  }
  const std::size_t bytes = tokens.size() * width;
  if (std::fwrite(scratch_.data(), 1, bytes, file_) != bytes) {
    return Status::error("write to '{}' failed: {}", tmp_path_, std::strerror(errno));
  }
  checksum_.update(scratch_.data(), bytes);
  header_.token_count += tokens.size();
  return Status::ok();
}

Status ShardWriter::add_documents(std::uint64_t n) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint32_t>::max();
  if (n > kMax - header_.document_count) {
    return Status::error(
        "shard '{}': more than {} documents, the limit of the header's 32-bit document count; "
        "split the input into several shards",
        path_, kMax);
  }
  header_.document_count += static_cast<std::uint32_t>(n);
  return Status::ok();
}

// The first step of close() that failed, with its errno (0: an injected fault).
struct CloseFailure {
  const char* step = nullptr;
  int err = 0;
  bool note(const char* what, bool ok) {
    if (!ok && step == nullptr) step = what, err = errno;
    return ok;
  }
};

Status ShardWriter::close() {
  SPARQ_CHECK(state_ == State::kOpen, "close() called twice on shard {}", path_);
  header_.payload_checksum = checksum_.digest();
  std::uint8_t bytes[kShardHeaderBytes];
  encode_header(header_, bytes);
  CloseFailure f;
  const bool header_written = std::fseek(file_, 0, SEEK_SET) == 0 &&
                              std::fwrite(bytes, 1, kShardHeaderBytes, file_) == kShardHeaderBytes;
  // Without the fsync a crash after the rename could leave a partial shard in place.
  if (f.note("writing the header", header_written) && f.note("flush", std::fflush(file_) == 0)) {
    if (fault::point("shard.close")) {
      f.step = "fsync";  // err stays 0: injected
    } else {
      f.note("fsync", ::fsync(::fileno(file_)) == 0);
    }
  }
  // fclose() can report a write error of its own (NFS, quotas), so its result counts too.
  f.note("close", std::fclose(file_) == 0);
  file_ = nullptr;
  state_ = State::kClosed;
  if (f.step == nullptr) return Status::ok();
  const std::string& tmp = tmp_path_;
  std::remove(tmp.c_str());
  state_ = State::kDone;
  return Status::error("{} of '{}' failed ({} tokens written): {}", f.step, tmp,
                       header_.token_count,
                       f.err ? std::strerror(f.err) : "injected fault (SPARQ_FAULT shard.close)");
}

Status ShardWriter::commit() {
  SPARQ_CHECK(state_ == State::kClosed, "commit() of shard {} without close()", path_);
  const std::string& tmp = tmp_path_;
  if (fault::point("shard.rename")) {
    return Status::error("cannot rename '{}' to '{}': injected fault (SPARQ_FAULT shard.rename)",
                         tmp, path_);
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    return Status::error("cannot rename '{}' to '{}': {}", tmp, path_, std::strerror(errno));
  }
  state_ = State::kDone;
  return Status::ok();
}

Status ShardWriter::finish() {
  SPARQ_RETURN_IF_ERROR(close());
  SPARQ_RETURN_IF_ERROR(commit());
  return sync_directory(parent_dir(path_)).with_context("after writing '" + path_ + "'");
}

namespace {

// Removes the old files at the companions' paths and makes that durable, so that none of
// them can outlive this run next to the new main file.
Status remove_old_companions(std::span<ShardWriter* const> companions) {
  for (ShardWriter* w : companions) {
    if (std::remove(w->path().c_str()) != 0 && errno != ENOENT) {
      return Status::error(
          "cannot remove the old '{}' before replacing it: {}; no file was replaced", w->path(),
          std::strerror(errno));
    }
    SPARQ_RETURN_IF_ERROR(sync_directory(parent_dir(w->path())));
  }
  return Status::ok();
}

// Renames a closed writer into place and makes the rename durable.
Status commit_durably(ShardWriter& w) {
  SPARQ_RETURN_IF_ERROR(w.commit());
  return sync_directory(parent_dir(w.path()));
}

}  // namespace

Status finish_together(std::span<ShardWriter* const> writers) {
  for (ShardWriter* w : writers) SPARQ_RETURN_IF_ERROR(w->close());
  if (writers.empty()) return Status::ok();
  // The paths of writers[begin, end), for the messages below.
  const auto paths = [&](std::size_t begin, std::size_t end) {
    std::vector<std::string> names;
    for (std::size_t i = begin; i < end; ++i) names.push_back(writers[i]->path());
    return fmt::format("'{}'", fmt::join(names, "', '"));
  };
  const std::size_t n = writers.size();
  SPARQ_RETURN_IF_ERROR(remove_old_companions(writers.subspan(1)));
  if (Status st = commit_durably(*writers[0]); !st) {
    return Status::error(
        "{}; kept from the earlier run: '{}'; removed: {} (so that it cannot be paired with "
        "another run's data): rerun",
        st.message(), writers[0]->path(), paths(1, n));
  }
  for (std::size_t i = 1; i < n; ++i) {
    if (Status st = commit_durably(*writers[i]); !st) {
      return Status::error(
          "{}; now from this run: {}; missing: {} (the old files were removed so that they "
          "cannot be paired with the new ones): rerun",
          st.message(), paths(0, i), paths(i, n));
    }
  }
  return Status::ok();
}

std::string describe_other_writers_temporary(const std::string& file) {
  return fmt::format(
      "'{}' is another run's unfinished shard: left by a run that was killed, or being written "
      "now; remove it once no prepare_data writes into this folder",
      file);
}

Status write_shard(const std::string& path, const std::string& tokenizer, std::uint32_t vocab_size,
                   std::span<const std::uint32_t> tokens, std::uint32_t document_count) {
  SPARQ_ASSIGN_OR_RETURN(ShardWriter writer, ShardWriter::create(path, tokenizer, vocab_size));
  SPARQ_RETURN_IF_ERROR(writer.append(tokens));
  SPARQ_RETURN_IF_ERROR(writer.add_documents(document_count));
  return writer.finish();
}

}  // namespace sparq::data
