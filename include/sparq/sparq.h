// Everything public in one include: compressors, aggregation strategies, models, training,
// the version. docs/embedding.md describes the API and what is stable.
#pragma once

#include "sparq/aggregation.h"
#include "sparq/compressor.h"
#include "sparq/model.h"
#include "sparq/train.h"
#include "sparq/version.h"
