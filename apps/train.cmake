# train: the training loop (src/train/trainer.h) behind a command line.
sparq_executable(train SOURCES train.cpp DEPS sparq_run)
