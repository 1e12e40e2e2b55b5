# SPARQ_SANITIZE: build every target (libraries, tests, apps, benchmarks) with GCC/Clang
# sanitizers. scripts/test.sh --sanitize uses SPARQ_SANITIZE=address,undefined in build-asan/
# (docs/reliability.md, "Sanitizers").
#
# Included after SparqDependencies (it needs SPARQ_HAS_CUDA) and before any target is made:
# add_compile_options/add_link_options only reach targets created after them.

set(SPARQ_SANITIZE "OFF" CACHE STRING
    "Sanitizers for every target: OFF, or a -fsanitize= list such as address,undefined")
set_property(CACHE SPARQ_SANITIZE PROPERTY STRINGS OFF address,undefined address undefined)

if(NOT SPARQ_SANITIZE OR SPARQ_SANITIZE STREQUAL "OFF")
  return()
endif()

# Only the sanitizers the sanitized suite is meant to run under; thread and memory sanitizers
# need every library (Open MPI, libgomp, OpenBLAS) rebuilt with them, which Debian does not ship.
string(REPLACE "," ";" sparq_sanitizer_list "${SPARQ_SANITIZE}")
foreach(sanitizer IN LISTS sparq_sanitizer_list)
  if(NOT sanitizer MATCHES "^(address|undefined)$")
    message(FATAL_ERROR "SPARQ_SANITIZE=${SPARQ_SANITIZE}: unknown sanitizer '${sanitizer}' "
                        "(expected OFF, address, undefined or address,undefined)")
  endif()
endforeach()

# nvcc does not pass -fsanitize through to device code, and the CUDA runtime's own allocations
# drown ASan's reports: the sanitized build is a CPU build.
if(SPARQ_HAS_CUDA)
  message(FATAL_ERROR "SPARQ_SANITIZE=${SPARQ_SANITIZE} needs -DSPARQ_CUDA=OFF "
                      "(the sanitized build is CPU only)")
endif()

set(sparq_sanitize_flags -fsanitize=${SPARQ_SANITIZE} -fno-omit-frame-pointer)
if("undefined" IN_LIST sparq_sanitizer_list)
  # A UBSan report must fail the test, not scroll by: make every undefined-behaviour check fatal.
  list(APPEND sparq_sanitize_flags -fno-sanitize-recover=undefined)
endif()
add_compile_options(${sparq_sanitize_flags})
add_link_options(-fsanitize=${SPARQ_SANITIZE})

# Line tables (-g1: file:line in the stack traces at a fraction of -g's compile and link time),
# and -O1 (unless Debug's -O0 was asked for): fast enough for CI, close to the optimised code. Compile options come after CMAKE_CXX_FLAGS_<CONFIG>
# on the command line, so this -O1 wins over Release's -O3 (which keeps its -DNDEBUG).
add_compile_options(-g1 $<$<NOT:$<CONFIG:Debug>>:-O1>)

message(STATUS "sparq: sanitizers ${SPARQ_SANITIZE} (-g1, -O1 unless Debug)")
