#!/usr/bin/env bash
# ctest test_install_package: installs the build into a fresh prefix, moves the prefix (the
# package must not depend on where it was installed), builds tests/install/consumer/ and the
# extra projects against it with find_package(sparq), and runs them.
#
#   install_test.sh --build-dir=B --source-dir=S --version=X.Y.Z --cxx=CXX [--libdir=lib]
#                   [--launcher=L] [--generator=G] [--mpiexec=M] [--mpirun-flags="F ..."]
#                   [--project DIR COMMAND]...
#
# Each `--project DIR COMMAND` is one more project built against the prefix after the
# consumer; COMMAND then runs under bash in DIR's build folder, with $PREFIX (the installed
# package), $MPIEXEC and $MPIRUN_FLAGS set, and fails the test when it fails (pipefail is on).
# The outer build's compiler, launcher (ccache) and generator are reused for every project.
set -euo pipefail

build_dir="" source_dir="" version="" cxx="" libdir="lib" launcher="" generator="" mpiexec="" mpirun_flags=""
projects=() commands=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir=*) build_dir=${1#*=} ;;
    --libdir=*) libdir=${1#*=} ;;  # CMAKE_INSTALL_LIBDIR: lib64 or lib/<multiarch> elsewhere
    --source-dir=*) source_dir=${1#*=} ;;
    --version=*) version=${1#*=} ;;
    --cxx=*) cxx=${1#*=} ;;
    --launcher=*) launcher=${1#*=} ;;
    --generator=*) generator=${1#*=} ;;
    --mpiexec=*) mpiexec=${1#*=} ;;
    --mpirun-flags=*) mpirun_flags=${1#*=} ;;
    --project)
      [[ $# -ge 3 ]] || { echo "install_test.sh: --project needs DIR and COMMAND" >&2; exit 2; }
      projects+=("$2") commands+=("$3")
      shift 2 ;;
    *) echo "install_test.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
for required in build_dir source_dir version cxx; do
  [[ -n ${!required} ]] || { echo "install_test.sh: --${required/_/-}= is required" >&2; exit 2; }
done

build_dir=$(cd "$build_dir" && pwd)  # absolute: the apps run from another folder below
consumer_dir=$(cd "$(dirname "$0")/consumer" && pwd)
work=$(mktemp -d "$build_dir/install_test.XXXXXX")
prefix=$work/prefix
ok=0
cleanup() {
  if [[ $ok == 1 ]]; then rm -rf "$work"; else echo "install_test.sh: FAILED, kept $work" >&2; fi
}
trap cleanup EXIT
fail() { echo "install_test.sh: $*" >&2; exit 1; }
step() { echo "== $*"; }

step "install $build_dir, then move the prefix to $prefix"
cmake --install "$build_dir" --prefix "$work/staged" >"$work/install.log" ||
  { tail -20 "$work/install.log"; fail "cmake --install failed"; }
mv "$work/staged" "$prefix"

step "layout"
cmake_dir=$prefix/$libdir/cmake/sparq
for f in include/sparq/version.h include/sparq/internal/core/tensor.h \
         include/sparq/internal/compress/registry.h "$libdir/libsparq_core.a" "$libdir/libsparq_train.a" \
         bin/train bin/sparq_info bin/prepare_data share/sparq/configs/default.yaml \
         "$libdir/cmake/sparq/sparqConfig.cmake" "$libdir/cmake/sparq/sparqConfigVersion.cmake" \
         "$libdir/cmake/sparq/sparqTargets.cmake"; do
  [[ -e $prefix/$f ]] || fail "missing from the prefix: $f"
done
# Relocatable and test-free: the package's CMake files name neither the build nor the source
# tree, and nothing installed needs GoogleTest or Google Benchmark.
if grep -l -F -e "$build_dir" -e "$source_dir" "$cmake_dir"/*.cmake; then
  fail "the files above name the build or source tree"
fi
if grep -l -i -E 'gtest|benchmark::' "$cmake_dir"/*.cmake; then
  fail "the files above refer to GoogleTest or Google Benchmark"
fi

cmake_args=(-DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release)
[[ -n $generator ]] && cmake_args+=(-G "$generator")
[[ -n $launcher ]] && cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")

# configure_project DIR BUILD [cmake args]: configures DIR in BUILD against the prefix.
configure_project() {
  local dir=$1 build=$2
  shift 2
  cmake -S "$dir" -B "$build" "${cmake_args[@]}" "$@" >"$build.log" 2>&1
}

# build_project DIR BUILD [cmake args]: configures and builds DIR against the prefix, or
# fails the test.
build_project() {
  local dir=$1 build=$2
  configure_project "$@" || { cat "$build.log"; fail "configuring $dir failed"; }
  cmake --build "$build" >>"$build.log" 2>&1 || { cat "$build.log"; fail "building $dir failed"; }
}

major_minor=${version%.*}
step "consumer: find_package(sparq $major_minor), link sparq::sparq"
build_project "$consumer_dir" "$work/consumer" -DSPARQ_REQUIRE_VERSION="$major_minor"
out=$("$work/consumer/consumer")
echo "$out"
grep -q -F -x "sparq $version ($version)" <<<"$out" ||
  fail "consumer: expected the line 'sparq $version ($version)'"
grep -q -E '^compressors:.* topk( |$).* lbs( |$)' <<<"$out" || fail "consumer: compressors missing"

if [[ -n $mpiexec ]]; then
  step "consumer under $mpiexec -n 2"
  read -r -a flags <<<"$mpirun_flags"
  ranks=$("$mpiexec" -n 2 "${flags[@]}" "$work/consumer/consumer" |
          grep -c -F "sparq $version " || true)
  [[ $ranks == 2 ]] || fail "consumer under mpirun: $ranks of 2 ranks printed the version"
fi

# SameMinorVersion (cmake/SparqInstall.cmake): an incompatible request must fail to configure,
# and say why.
next_minor="${version%%.*}.$((${major_minor#*.} + 1))"
for wanted in 99.0 "$next_minor"; do
  step "find_package(sparq $wanted) must fail"
  refused=$work/consumer-$wanted
  if configure_project "$consumer_dir" "$refused" -DSPARQ_REQUIRE_VERSION="$wanted"; then
    fail "find_package(sparq $wanted) accepted version $version"
  fi
  # CMake wraps its message: compare with the line breaks folded into spaces.
  tr -s ' \n' ' ' <"$refused.log" |
    grep -q -F "compatible with requested version \"$wanted\"" ||
    { cat "$refused.log"; fail "find_package(sparq $wanted) failed for another reason"; }
done

step "installed apps"
cd "$work"  # whatever they write stays in the scratch folder
info=$("$prefix/bin/sparq_info" --json) || fail "bin/sparq_info --json failed"
grep -q '"compressors"' <<<"$info" || fail "bin/sparq_info --json: no \"compressors\" in: $info"
"$prefix/bin/train" --config "$prefix/share/sparq/configs/default.yaml" --dry-run \
  >"$work/train.log" 2>&1 ||
  { cat "$work/train.log"; fail "bin/train --dry-run with share/sparq/configs/default.yaml"; }

for i in "${!projects[@]}"; do
  dir=${projects[$i]}
  build=$work/project-$i-$(basename "$dir")
  step "project $dir, then: ${commands[$i]}"
  build_project "$dir" "$build"
  (cd "$build" && PREFIX=$prefix MPIEXEC=$mpiexec MPIRUN_FLAGS=$mpirun_flags \
     bash -c "set -euo pipefail; ${commands[$i]}") || fail "project $dir: '${commands[$i]}' failed"
done

ok=1
echo "install_test.sh: all checks passed"
