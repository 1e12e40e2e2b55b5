// custom_train: sparq's `train` command line with one more compressor, block_randomk.
//
//   mpirun -np 2 ./custom_train --config <prefix>/share/sparq/configs/default.yaml \
//       --set compress.name=block_randomk --set compress.block_randomk.density=0.1
#include <cstdio>
#include <sparq/train.h>

#include "block_randomk.h"

int main(int argc, char** argv) {
  const sparq::Status registered = example::register_block_randomk();
  if (!registered.is_ok()) {
    std::fprintf(stderr, "custom_train: %s\n", registered.message().c_str());
    return 1;
  }
  return sparq::train::train_main(argc, argv);
}
