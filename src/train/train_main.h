// The `train` command line as a function: apps/train.cpp is `return train_main(argc, argv);`,
// and a program that registers its own compressors, aggregations or models (include/sparq/)
// calls it after registering to get the same tool with its additions (train_main.cpp lists
// the options and exit codes).
#pragma once

namespace sparq::train {

int train_main(int argc, char** argv);

}  // namespace sparq::train
