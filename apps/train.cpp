// train: data-parallel training with compressed gradient communication. The command line
// lives in the library (src/train/train_main.cpp) so that embedding programs get it too.
#include "train/train_main.h"

int main(int argc, char** argv) { return sparq::train::train_main(argc, argv); }
