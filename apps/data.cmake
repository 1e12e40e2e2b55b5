# prepare_data: text corpora -> token shards (src/data/corpus.h).
sparq_executable(prepare_data SOURCES prepare_data.cpp DEPS sparq_data CLI11::CLI11)
