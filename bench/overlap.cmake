# bench_overlap: WFBP overlap against communicate-after-backward, per model and compressor.
# Run: scripts/mpirun.sh -np 2 build/bench/bench_overlap [steps] [--gbps G]
if(SPARQ_HAS_MPI)
  sparq_executable(bench_overlap SOURCES ${CMAKE_CURRENT_LIST_DIR}/bench_overlap.cpp
                   DEPS sparq_train)
endif()
