# bench_comm: collectives through CommEngine + MpiCommunicator next to direct MPI calls.
# Run: mpirun -np 2 build/bench/bench_comm [max_mib]
#      mpirun -np 2 build/bench/bench_comm --allreduce-algorithms [max_mib] [gbit_per_s]
if(SPARQ_HAS_MPI)
  sparq_executable(bench_comm SOURCES ${CMAKE_CURRENT_LIST_DIR}/bench_comm.cpp
                   DEPS sparq_comm MPI::MPI_CXX)
endif()
