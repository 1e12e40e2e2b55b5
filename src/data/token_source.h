// A random-access sequence of token ids that the LM and MLM loaders read from: a memory-
// mapped shard, or tokens held in memory (synthetic sources, tests).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/shard.h"

namespace sparq::data {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual std::uint64_t size() const = 0;
  virtual std::uint32_t vocab_size() const = 0;
  // Copies tokens [begin, begin + count) (precondition: in range). Thread-safe.
  virtual void read(std::uint64_t begin, std::uint64_t count, std::uint32_t* out) const = 0;
};

class ShardTokenSource final : public TokenSource {
 public:
  explicit ShardTokenSource(ShardReader shard) : shard_(std::move(shard)) {}
  static Result<std::shared_ptr<ShardTokenSource>> open(const std::string& path) {
    SPARQ_ASSIGN_OR_RETURN(ShardReader reader, ShardReader::open(path));
    return std::make_shared<ShardTokenSource>(std::move(reader));
  }
  std::uint64_t size() const override { return shard_.size(); }
  std::uint32_t vocab_size() const override { return shard_.header().vocab_size; }
  void read(std::uint64_t begin, std::uint64_t count, std::uint32_t* out) const override {
    shard_.read(begin, count, out);
  }
  const ShardReader& shard() const { return shard_; }

 private:
  ShardReader shard_;
};

class VectorTokenSource final : public TokenSource {
 public:
  VectorTokenSource(std::vector<std::uint32_t> tokens, std::uint32_t vocab_size)
      : tokens_(std::move(tokens)), vocab_size_(vocab_size) {}
  std::uint64_t size() const override { return tokens_.size(); }
  std::uint32_t vocab_size() const override { return vocab_size_; }
  void read(std::uint64_t begin, std::uint64_t count, std::uint32_t* out) const override;
  const std::vector<std::uint32_t>& tokens() const { return tokens_; }

 private:
  std::vector<std::uint32_t> tokens_;
  std::uint32_t vocab_size_;
};

}  // namespace sparq::data
