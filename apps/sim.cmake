# simulate: the step simulator (src/sim, docs/simulate.md) behind a command line.
sparq_executable(simulate SOURCES simulate.cpp simulate_args.cpp DEPS sparq_sim CLI11::CLI11)
