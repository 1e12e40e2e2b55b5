# bench_comm: collectives through CommEngine + MpiCommunicator next to direct MPI calls.
# Run: mpirun -np 2 build/bench/bench_comm [max_mib]
if(SPARQ_HAS_MPI)
  sparq_executable(bench_comm SOURCES ${CMAKE_CURRENT_LIST_DIR}/bench_comm.cpp
                   DEPS sparq_comm MPI::MPI_CXX)
endif()
