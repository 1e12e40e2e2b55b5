# `cmake --install build --prefix P` (docs/embedding.md, "Installing sparq and finding it from
# CMake"):
#   P/lib/libsparq_*.a                 the static libraries (sparq_library() records them)
#   P/include/sparq/*.h                the public headers (include/sparq/) and version.h
#   P/include/sparq/internal/<module>/ every module header of src/, as "core/tensor.h" & co.
#   P/bin/{train,sparq_info,prepare_data}
#   P/share/sparq/configs/*.yaml
#   P/lib/cmake/sparq/                 sparqConfig.cmake, sparqConfigVersion.cmake, the targets
# A program then does find_package(sparq 0.1 CONFIG REQUIRED) and links sparq::sparq.
# GoogleTest and Google Benchmark are test/bench-only: nothing installed refers to them.

include(CMakePackageConfigHelpers)

set(SPARQ_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/sparq)

get_property(sparq_libraries GLOBAL PROPERTY SPARQ_LIBRARIES)
install(TARGETS ${sparq_libraries} sparq_options sparq
        EXPORT sparqTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT sparqTargets NAMESPACE sparq:: DESTINATION ${SPARQ_INSTALL_CMAKEDIR})

# The command-line front ends. They link CUDA's shared libraries (when built with CUDA) from
# outside the system's library path: keep those directories as the installed RPATH.
set(sparq_installed_apps train sparq_info prepare_data)
set_target_properties(${sparq_installed_apps} PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS ${sparq_installed_apps} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Module headers keep their src/ layout under include/sparq/internal/ so that their own
# includes ("core/tensor.h") resolve. Only .h: the one .cuh (layers/cuda/reduce.cuh) is
# included by .cu files alone.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sparq/internal
        FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/sparq/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sparq
        FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/include/sparq/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sparq)

# The run configs (not configs/bench/, the benchmarks' own).
file(GLOB sparq_configs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/configs/*.yaml)
install(FILES ${sparq_configs} DESTINATION ${CMAKE_INSTALL_DATADIR}/sparq/configs)

# What the config file needs to know about this build: which optional parts were built (so
# that it looks for MPI, CUDA, NCCL, cuDNN only then), and where NCCL and cuDNN were found,
# as hints for finding them again (a wheel's libcudnn.so.9 has no plain libcudnn.so name).
foreach(lib NCCL CUDNN)
  set(SPARQ_${lib}_HINTS "")
  set(SPARQ_${lib}_NAMES "")
  if(SPARQ_HAS_${lib})
    get_filename_component(include_dir "${SPARQ_${lib}_INCLUDE}" ABSOLUTE)
    get_filename_component(library_dir "${SPARQ_${lib}_LIBRARY}" DIRECTORY)
    get_filename_component(library_name "${SPARQ_${lib}_LIBRARY}" NAME)
    set(SPARQ_${lib}_HINTS "${include_dir};${library_dir}")
    set(SPARQ_${lib}_NAMES "${library_name}")
  endif()
endforeach()

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/sparqConfig.cmake.in
  ${PROJECT_BINARY_DIR}/sparqConfig.cmake
  INSTALL_DESTINATION ${SPARQ_INSTALL_CMAKEDIR})
# Version policy: sparq is 0.x, where (semantic versioning) a minor release may change the
# API, so find_package(sparq 0.1) accepts 0.1.z (z >= the patch asked for) and refuses 0.2:
# SameMinorVersion. SameMajorVersion would let a 0.1 consumer pick up an incompatible 0.2.
# From 1.0 on, SameMajorVersion is the policy to switch to.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/sparqConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/sparqConfig.cmake ${PROJECT_BINARY_DIR}/sparqConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/SparqCudaLibraries.cmake
        DESTINATION ${SPARQ_INSTALL_CMAKEDIR})

# The build tree is a package too (find_package(sparq) with sparq_DIR=<build dir>): the same
# config file, over the targets exported from the build, whose include directories are the
# source tree's (BUILD_INTERFACE). Without it the build dir's sparqConfig.cmake failed on a
# missing sparqTargets.cmake (review, 2026-12-07).
export(EXPORT sparqTargets NAMESPACE sparq:: FILE ${PROJECT_BINARY_DIR}/sparqTargets.cmake)
configure_file(${PROJECT_SOURCE_DIR}/cmake/SparqCudaLibraries.cmake
               ${PROJECT_BINARY_DIR}/SparqCudaLibraries.cmake COPYONLY)
