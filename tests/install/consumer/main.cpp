// Built against the installed package only: the generated public header, one module header
// through include/sparq/internal ("compress/registry.h", as the module headers include each
// other), and a call that needs the installed libraries to link and run.
#include <sparq/version.h>

#include <cstdio>

#include "compress/registry.h"

int main() {
  std::printf("sparq %s (%d.%d.%d)\n", SPARQ_VERSION_STRING, SPARQ_VERSION_MAJOR,
              SPARQ_VERSION_MINOR, SPARQ_VERSION_PATCH);
  std::printf("compressors:");
  for (const auto& name : sparq::compress::compressor_names()) std::printf(" %s", name.c_str());
  std::printf("\n");
  return 0;
}
