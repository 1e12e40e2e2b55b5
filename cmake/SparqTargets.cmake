# Helpers shared by every folder: sparq_library(), sparq_executable(), sparq_add_test()
# and sparq_add_mpi_test().

# Flags every sparq target gets: warnings, native code, OpenMP, the include roots and the
# SPARQ_HAS_* feature macros. No -ffast-math: f16/bf16 rounding and NaN checks rely on IEEE.
# sparq_options is installed and exported with the libraries (cmake/SparqInstall.cmake), so
# what a program built against the installed package needs (include roots, C++20, feature
# macros, link dependencies) is usable by it, while the warnings and -march=native stay
# BUILD_INTERFACE: a consumer chooses its own flags.
add_library(sparq_options INTERFACE)
# In the build tree: src/ (the modules' "core/tensor.h" includes), include/ (the public
# <sparq/...> headers) and the generated include/sparq/version.h. Installed, the modules'
# headers live under include/sparq/internal/, which stays on the path so that their own
# "core/tensor.h" includes resolve.
target_include_directories(sparq_options INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/sparq/internal>)
# The headers are C++20; in the build tree CMAKE_CXX_STANDARD already asks for it.
target_compile_features(sparq_options INTERFACE cxx_std_20)
set(sparq_cxx "$<COMPILE_LANGUAGE:CXX>")
target_compile_options(sparq_options INTERFACE
  $<BUILD_INTERFACE:$<${sparq_cxx}:-Wall -Wextra -Wno-unused-parameter -Wno-maybe-uninitialized>>
  # Clang (the fuzz build) does not know GCC's -Wno-maybe-uninitialized and would warn on
  # every file.
  $<BUILD_INTERFACE:$<$<AND:${sparq_cxx},$<CXX_COMPILER_ID:Clang>>:-Wno-unknown-warning-option>>
  $<BUILD_INTERFACE:$<$<AND:${sparq_cxx},$<BOOL:${SPARQ_NATIVE}>>:-march=native>>)
target_link_libraries(sparq_options INTERFACE OpenMP::OpenMP_CXX fmt::fmt spdlog::spdlog)
target_compile_definitions(sparq_options INTERFACE SPDLOG_FMT_EXTERNAL)
if(SPARQ_HAS_CUDA)
  target_compile_definitions(sparq_options INTERFACE SPARQ_HAS_CUDA=1)
  target_link_libraries(sparq_options INTERFACE CUDA::cudart CUDA::cublas)
  target_compile_options(sparq_options INTERFACE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-fopenmp>)
  # nvcc's front end cannot compile fmt's consteval format checks: .cu files include
  # core/fatal.h and core/cuda/cuda_check.h, never fmt (or check.h, log.h, status.h).
endif()
if(SPARQ_HAS_NCCL)
  target_compile_definitions(sparq_options INTERFACE SPARQ_HAS_NCCL=1)
endif()
if(SPARQ_HAS_CUDNN)
  target_compile_definitions(sparq_options INTERFACE SPARQ_HAS_CUDNN=1)
endif()
if(SPARQ_HAS_MPI)
  target_compile_definitions(sparq_options INTERFACE SPARQ_HAS_MPI=1)
endif()

# Note [Precompiled headers]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# A large share of the build is every file parsing the same headers again: the standard
# library, fmt and spdlog, and GoogleTest in the tests. With SPARQ_PCH (default ON) the
# libraries and executables share one precompiled header (target sparq_pch) and the test
# binaries another (sparq_test_pch), each compiled once and reused by every target
# (REUSE_FROM): about 8% off a clean build (docs/reliability.md, "Sanitizers", Figures).
# The headers are only parsed sooner: no generated code changes. What it can hide is a
# missing #include (the force-included headers are visible to every file); the fuzz build
# compiles without precompiled headers (its clang would refuse one built without its
# sanitizer flags anyway), and so does the installed-package test's consumer.
# CUDA files never take them (nvcc cannot compile fmt's format checks; sparq_library).
option(SPARQ_PCH "Precompile the headers every file parses (Note [Precompiled headers])" ON)
if(SPARQ_FUZZ)
  set(SPARQ_PCH OFF)
endif()
set(sparq_pch_headers <algorithm> <array> <cmath> <cstddef> <cstdint> <cstring> <functional>
    <map> <memory> <optional> <span> <string> <string_view> <unordered_map> <utility> <vector>
    <fmt/format.h> <spdlog/spdlog.h>)
if(SPARQ_PCH)
  add_library(sparq_pch OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch_anchor.cpp)
  target_link_libraries(sparq_pch PRIVATE sparq_options)
  target_precompile_headers(sparq_pch PRIVATE ${sparq_pch_headers})
endif()

# Note [Unity test binaries]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# A test file is short, but each one instantiated and compiled again the same GoogleTest,
# fmt, std::regex and sparq inline code: about 3.8 s of CPU per file, 706 s for the suite's
# 187 files, the largest part of CI's build. With SPARQ_UNITY_TESTS (default ON) each test
# binary compiles as one translation unit of all its files (CMake's UNITY_BUILD, one batch):
# test_compress's first 11 files took 110 s one by one and 14.5 s together. The rule it puts
# on the tests: files of one binary share one anonymous namespace, so a file-local helper's
# name must not be defined again by another file of the same binary (give it a name that says
# what it does, or share it through a header in the test folder). Editing one test file
# recompiles its whole binary; -DSPARQ_UNITY_TESTS=OFF builds them file by file.
option(SPARQ_UNITY_TESTS "Compile each test binary as one unit (Note [Unity test binaries])" ON)

# Uses the shared precompiled header in `target` (Note [Precompiled headers]).
function(sparq_use_pch target pch)
  if(SPARQ_PCH)
    target_precompile_headers(${target} REUSE_FROM ${pch})
  endif()
endfunction()

# sparq_library(NAME SOURCES ... [CUDA_SOURCES ...] [DEPS ...])
# CUDA_SOURCES are only compiled when CUDA is available.
function(sparq_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;CUDA_SOURCES;DEPS" ${ARGN})
  set(srcs ${ARG_SOURCES})
  if(SPARQ_HAS_CUDA)
    list(APPEND srcs ${ARG_CUDA_SOURCES})
  endif()
  add_library(${name} STATIC ${srcs})
  target_link_libraries(${name} PUBLIC sparq_options ${ARG_DEPS})
  sparq_use_pch(${name} sparq_pch)
  if(SPARQ_HAS_CUDA AND ARG_CUDA_SOURCES)
    set_source_files_properties(${ARG_CUDA_SOURCES} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endif()
  # cmake/SparqInstall.cmake installs and exports every library made here, once.
  set_property(GLOBAL APPEND PROPERTY SPARQ_LIBRARIES ${name})
endfunction()

# Note [Kernels that round as written]
# nvcc contracts a * b + c into one fused multiply-add wherever it finds one (its --fmad
# default), and so does g++ (-ffp-contract=fast is its C++ default, -std=c++20 included), each
# where its own optimizer sees fit, so shared per-element math that is not written with
# mul_add() (core/host_device.h) may round once on one side and twice on the other. The codecs
# promise the CPU's message bytes and the optimizers the CPU's parameters, so both libraries
# compile with contraction off, their .cu with --fmad=false and their .cpp with
# -ffp-contract=off: every product and sum rounds as written, and only mul_add()'s explicit
# fmaf fuses, on both sides. (The host side changed no bits when it was added: of its implicit
# contractions, terngrad.cpp's multiplied by an exact factor; review, 2026-12-06.) Measured
# in PTX (2026-12-06, a static review): 16 fused multiply-adds that the source does not write
# in scaled_codes.cu, 8 in block_codec.cu and 16 in qsgd.cu, and 80 products in
# optimizer_kernels.cu that ptxas may fuse; none with the flag. Layers match the CPU within a
# tolerance and keep the compilers' defaults. test_round_as_written checks both flags.
function(sparq_round_as_written target)
  if(SPARQ_HAS_CUDA)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--fmad=false>)
  endif()
  target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU,Clang>:$<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off>>)
endfunction()

function(sparq_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE sparq_options ${ARG_DEPS})
  sparq_use_pch(${name} sparq_pch)
endfunction()

# The tests' precompiled header: the libraries' one and GoogleTest (Note [Precompiled headers]).
if(SPARQ_PCH AND SPARQ_BUILD_TESTS)
  add_library(sparq_test_pch OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch_anchor.cpp)
  target_link_libraries(sparq_test_pch PRIVATE sparq_options GTest::gtest)
  target_precompile_headers(sparq_test_pch PRIVATE ${sparq_pch_headers} <gtest/gtest.h>)
endif()

# Tests run with one OpenMP thread so several ctest jobs or MPI ranks share 2 cores fairly.
# Two Open MPI launcher settings (ignored by other MPIs) keep the suite inside CI's 30 minutes:
#   odls_base_sigkill_timeout=0  a job whose ranks exit non-zero (every refusal, every fault
#       trial) ended 1-2 s after its ranks did, mpirun waiting to escalate SIGTERM to SIGKILL
#       for processes already gone (2 s of a 2.2 s refusal; 80 s of test_train_app's 130 s);
#   pml=ob1 (SPARQ_TEST_PML)  the point-to-point layer Open MPI picks on a machine without a
#       fast network (CI's), named so that MPI_Init does not first try UCX and the other
#       network layers (0.2-0.3 s per process). Where Open MPI would pick UCX (InfiniBand
#       hosts), the suite then runs on ob1: configure with -DSPARQ_TEST_PML= (empty) to let
#       Open MPI choose, or =ucx to test that one.
# test_fault_injection keeps the launcher's defaults: its table measures how a failed job
# ends under them (docs/reliability.md, "Fault injection").
set(SPARQ_TEST_PML "ob1" CACHE STRING
    "Open MPI point-to-point layer for the tests (OMPI_MCA_pml); empty: Open MPI chooses")
set(SPARQ_TEST_ENV OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1
                   OMPI_MCA_odls_base_sigkill_timeout=0)
if(SPARQ_TEST_PML)
  list(APPEND SPARQ_TEST_ENV OMPI_MCA_pml=${SPARQ_TEST_PML})
endif()

# sparq_add_test(NAME SOURCES ... DEPS ...): one GoogleTest binary, registered with ctest.
function(sparq_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  # A GPU test in a build without CUDA could only skip itself: it is not built (this keeps the
  # CPU-only sanitized build short; docs/reliability.md, "Sanitizers").
  if("gpu" IN_LIST ARG_LABELS AND NOT SPARQ_HAS_CUDA)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES} ${PROJECT_SOURCE_DIR}/tests/common/unit_test_main.cpp)
  target_link_libraries(${name} PRIVATE sparq_options ${ARG_DEPS} GTest::gtest)
  sparq_use_pch(${name} sparq_test_pch)
  set_target_properties(${name} PROPERTIES UNITY_BUILD ${SPARQ_UNITY_TESTS} UNITY_BUILD_BATCH_SIZE 0)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_compile_definitions(${name} PRIVATE SPARQ_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_test(NAME ${name} COMMAND ${name})
  # 77: every test of the binary skipped (Note [Skipped test binaries], tests/common/skip_code.h).
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${SPARQ_TEST_ENV}" LABELS "unit;${ARG_LABELS}"
                                          SKIP_RETURN_CODE 77)
endfunction()

# mpirun needs --allow-run-as-root only when we are root (CI runs as root).
execute_process(COMMAND id -u OUTPUT_VARIABLE SPARQ_UID OUTPUT_STRIP_TRAILING_WHITESPACE)
set(SPARQ_MPIRUN_FLAGS --oversubscribe)
if(SPARQ_UID STREQUAL "0")
  list(APPEND SPARQ_MPIRUN_FLAGS --allow-run-as-root)
endif()

# sparq_add_mpi_test(NAME SOURCES ... DEPS ... RANKS 1 2 3 4 [TIMEOUT s]): one binary, one
# ctest entry per rank count, each run under mpirun.
function(sparq_add_mpi_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;RANKS;ARGS" ${ARGN})
  if(NOT SPARQ_HAS_MPI)
    message(STATUS "MPI not found: skipping MPI test ${name}")
    return()
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${name} ${ARG_SOURCES} ${PROJECT_SOURCE_DIR}/tests/common/mpi_test_main.cpp)
  target_link_libraries(${name} PRIVATE sparq_options ${ARG_DEPS} GTest::gtest MPI::MPI_CXX)
  sparq_use_pch(${name} sparq_test_pch)
  set_target_properties(${name} PROPERTIES UNITY_BUILD ${SPARQ_UNITY_TESTS} UNITY_BUILD_BATCH_SIZE 0)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_compile_definitions(${name} PRIVATE SPARQ_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  foreach(np IN LISTS ARG_RANKS)
    add_test(NAME ${name}_np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${SPARQ_MPIRUN_FLAGS}
                     $<TARGET_FILE:${name}> ${ARG_ARGS})
    set_tests_properties(${name}_np${np} PROPERTIES ENVIRONMENT "${SPARQ_TEST_ENV}"
                         TIMEOUT ${ARG_TIMEOUT} LABELS "mpi" PROCESSORS ${np}
                         SKIP_RETURN_CODE 77)  # Note [Skipped test binaries]
  endforeach()
endfunction()

# One more run of an MPI test's executable with extra environment (a list of VAR=value):
# ctest names it ${name}_${variant}_np<N>, e.g. the collectives under comm.mpi_wait: sleep.
function(sparq_add_mpi_test_variant name variant)
  cmake_parse_arguments(ARG "" "TIMEOUT" "RANKS;ENV" ${ARGN})
  if(NOT SPARQ_HAS_MPI)
    return()
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  foreach(np IN LISTS ARG_RANKS)
    add_test(NAME ${name}_${variant}_np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${SPARQ_MPIRUN_FLAGS}
                     $<TARGET_FILE:${name}>)
    set_tests_properties(${name}_${variant}_np${np} PROPERTIES
                         ENVIRONMENT "${SPARQ_TEST_ENV};${ARG_ENV}"
                         TIMEOUT ${ARG_TIMEOUT} LABELS "mpi" PROCESSORS ${np}
                         SKIP_RETURN_CODE 77)  # Note [Skipped test binaries]
  endforeach()
endfunction()

# For tests that launch mpirun jobs themselves (subprocess tests): the launcher and its flags
# as SPARQ_MPIEXEC and SPARQ_MPIRUN_FLAGS string macros, and ctest properties for a test that
# occupies two cores for a while.
function(sparq_mpirun_subprocess_test target timeout)
  list(JOIN SPARQ_MPIRUN_FLAGS " " flags)
  target_compile_definitions(${target} PRIVATE SPARQ_MPIEXEC="${MPIEXEC_EXECUTABLE}"
                                               SPARQ_MPIRUN_FLAGS="${flags}")
  set_tests_properties(${target} PROPERTIES TIMEOUT ${timeout} LABELS "mpi" PROCESSORS 2)
endfunction()
