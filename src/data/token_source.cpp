#include "data/token_source.h"

#include <algorithm>

#include "core/check.h"

namespace sparq::data {

void VectorTokenSource::read(std::uint64_t begin, std::uint64_t count, std::uint32_t* out) const {
  SPARQ_CHECK(begin + count <= tokens_.size(), "range [{}, {}) outside {} tokens", begin,
              begin + count, tokens_.size());
  std::copy_n(tokens_.begin() + static_cast<std::ptrdiff_t>(begin), count, out);
}

}  // namespace sparq::data
