// The one source of the precompiled-header targets sparq_pch and sparq_test_pch
// (Note [Precompiled headers], cmake/SparqTargets.cmake): CMake compiles a header for a target
// with sources, and this file gives them one.
