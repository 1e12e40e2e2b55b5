# sparq_find_cuda_library(TARGET <imported target> VAR <NAME> HEADER <file> NAMES <names...>
#                         [HINTS <dirs...>])
#
# Finds one of NVIDIA's libraries that ship no CMake package (NCCL, cuDNN) beside the CUDA
# toolkit and makes it an IMPORTED INTERFACE target. Used by the build
# (cmake/SparqDependencies.cmake) and again by the installed package's sparqConfig.cmake: both
# find the library the same way, and the installed package names no absolute path of the
# machine it was built on (an imported target is exported by name, not by content).
#
# The cache variables SPARQ_<NAME>_INCLUDE and SPARQ_<NAME>_LIBRARY can be set with -D to
# point at another copy (scripts/gpu_check.sh does, for cuDNN from a Python wheel). Sets
# SPARQ_<NAME>_FOUND (ON/OFF) in the caller's scope. Needs find_package(CUDAToolkit) first.
function(sparq_find_cuda_library)
  cmake_parse_arguments(ARG "" "TARGET;VAR;HEADER" "NAMES;HINTS" ${ARGN})
  set(include_var SPARQ_${ARG_VAR}_INCLUDE)
  set(library_var SPARQ_${ARG_VAR}_LIBRARY)
  find_path(${include_var} ${ARG_HEADER} HINTS ${CUDAToolkit_INCLUDE_DIRS} ${ARG_HINTS})
  find_library(${library_var} NAMES ${ARG_NAMES} HINTS ${CUDAToolkit_LIBRARY_DIR} ${ARG_HINTS})
  if(NOT ${include_var} OR NOT ${library_var})
    set(SPARQ_${ARG_VAR}_FOUND OFF PARENT_SCOPE)
    return()
  endif()
  if(NOT TARGET ${ARG_TARGET})  # a second find_package(sparq) in the same directory
    add_library(${ARG_TARGET} INTERFACE IMPORTED)
    set_target_properties(${ARG_TARGET} PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${${include_var}}"
      INTERFACE_LINK_LIBRARIES "${${library_var}}")
  endif()
  set(SPARQ_${ARG_VAR}_FOUND ON PARENT_SCOPE)
endfunction()
