// checksum64: the 64-bit checksum of sparq's binary files (token shards, checkpoints).
//
// Algorithm: FNV-1a with 64-bit state over little-endian 8-byte WORDS (state = (state ^ word)
// * prime), then over the trailing 0..7 bytes one at a time. Folding words instead of bytes
// makes it run at memory speed. It catches any change within one word, and ordinary damage
// (zeroed or garbled pages, truncation, reordered words), but it is weaker than byte-wise
// FNV: a multiply carries only upward, so changes confined to the top byte of two or more
// words cancel about once in 256 (flipping bit 63 of any two words always does; review).
// So where two texts must be equal, sparq compares bytes (the config check, comm/agree.cpp),
// and where replicated bytes must be equal across ranks or files (a resume's parameters, an
// elastic resume's replicated sections) it compares mixed_hash64 (below). Neither is
// cryptographic: they guard against corruption and mix-ups, not tampering.
// The value is part of on-disk formats: changing the algorithm breaks every existing file.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sparq {

std::uint64_t checksum64(const void* data, std::size_t bytes);

// A 64-bit hash for comparing bytes that must be equal where they are not sent (the replicated
// parameters of every rank after a resume, a replicated section of each old rank's file in an
// elastic resume), in no on-disk format, so free to be stronger than checksum64: each word is
// multiplied, rotated and multiplied again, so a change in any bit reaches every bit above and
// below it, and two sign flips (checksum64's blind spot, above) do not cancel.
std::uint64_t mixed_hash64(const void* data, std::size_t bytes);

// The same checksum over a byte stream fed in arbitrary pieces: after update(a), update(b),
// digest() == checksum64(a + b). Cheap to copy; digest() does not end the stream.
class Checksum64 {
 public:
  void update(const void* data, std::size_t bytes);
  std::uint64_t digest() const;

 private:
  std::uint64_t state_ = 0xcbf29ce484222325ull;  // the FNV-1a 64-bit offset basis
  std::uint8_t pending_[8] = {};                 // bytes not yet forming a whole word
  std::size_t pending_bytes_ = 0;
};

}  // namespace sparq
