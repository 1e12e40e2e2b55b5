// The OpenBLAS and BLIS backends: cblas_sgemm from a library opened at run time.
//
// Both libraries export cblas_sgemm (and the whole BLAS), so they cannot both be linked into
// one binary; dlopen(RTLD_LOCAL) keeps each library's symbols to itself, which lets one build
// test and benchmark both, and lets a machine without them run sparq on Eigen.
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/gemm_backends.h"
#include "core/threading.h"

#ifndef SPARQ_SYSTEM_LIBDIR
#define SPARQ_SYSTEM_LIBDIR "/usr/lib/x86_64-linux-gnu"
#endif

namespace sparq::gemm_detail {
namespace {

// CBLAS's enum values (fixed by the CBLAS standard); C enums are passed as int.
constexpr int kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasTrans = 112;
using CblasSgemm = void (*)(int order, int trans_a, int trans_b, int m, int n, int k,
                            float alpha, const float* a, int lda, const float* b, int ldb,
                            float beta, float* c, int ldc);

struct Library {
  void* handle = nullptr;
  CblasSgemm sgemm = nullptr;
  void (*set_threads_int)(int) = nullptr;              // openblas_set_num_threads
  void (*set_threads_dim)(std::int64_t) = nullptr;     // bli_thread_set_num_threads (dim_t)
  std::string path;                                    // the file that loaded
  std::string error;                                   // why none loaded
  std::atomic<int> threads{-1};                        // last count handed to the library
};

struct Spec {
  const char* file;                 // soname Debian installs
  const char* flavour_prefix;       // Debian's per-flavour directories: <prefix>-openmp etc.
  const char* set_threads_symbol;
};

Spec spec_of(GemmBackend backend) {
  if (backend == GemmBackend::kOpenBlas) {
    return {"libopenblas.so.0", "openblas", "openblas_set_num_threads"};
  }
  return {"libblis.so.4", "blis", "bli_thread_set_num_threads"};
}

// Candidate files, best first. The -openmp flavours share sparq's OpenMP runtime (libgomp),
// so their threads are sparq's threads; -pthread ones keep a second pool of spinning threads
// and -serial ones never use more than one core.
std::vector<std::string> candidates(const Spec& spec) {
  std::vector<std::string> dirs;
  if (const char* extra = std::getenv("SPARQ_GEMM_LIB_PATH")) {
    std::string list = extra;
    for (std::size_t start = 0; start <= list.size();) {
      const std::size_t end = std::min(list.find(':', start), list.size());
      if (end > start) dirs.push_back(list.substr(start, end - start));
      start = end + 1;
    }
  }
  dirs.push_back(SPARQ_SYSTEM_LIBDIR);
  std::vector<std::string> files;
  for (const std::string& dir : dirs) {
    for (const char* flavour : {"-openmp", "-pthread", "-serial"}) {
      files.push_back(dir + "/" + spec.flavour_prefix + flavour + "/" + spec.file);
    }
    files.push_back(dir + "/" + spec.file);
  }
  files.push_back(spec.file);  // whatever the dynamic loader finds (other distributions)
  return files;
}

void load(GemmBackend backend, Library& lib) {
  const Spec spec = spec_of(backend);
  std::string tried;
  for (const std::string& file : candidates(spec)) {
    void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      tried += std::string("\n  ") + dlerror();  // names the file
      continue;
    }
    auto sgemm = reinterpret_cast<CblasSgemm>(dlsym(handle, "cblas_sgemm"));
    if (sgemm == nullptr) {
      tried += "\n  " + file + ": no cblas_sgemm";
      dlclose(handle);
      continue;
    }
    lib.handle = handle;
    lib.sgemm = sgemm;
    void* set_threads = dlsym(handle, spec.set_threads_symbol);
    if (backend == GemmBackend::kOpenBlas) {
      lib.set_threads_int = reinterpret_cast<void (*)(int)>(set_threads);
    } else {
      lib.set_threads_dim = reinterpret_cast<void (*)(std::int64_t)>(set_threads);
    }
    lib.path = file;
    return;
  }
  lib.error = "tried" + tried;
}

Library& library(GemmBackend backend) {
  SPARQ_CHECK(backend != GemmBackend::kEigen, "Eigen has no library to load");
  static Library libs[2];
  static std::once_flag once[2];
  const int index = backend == GemmBackend::kOpenBlas ? 0 : 1;
  std::call_once(once[index], [&] { load(backend, libs[index]); });
  return libs[index];
}

// Hands the library sparq's thread count when it changed. Only outside a parallel region:
// the setters change the library's global state, and inside a region the -openmp flavours
// already run single-threaded (the nested region gets one thread).
void sync_threads(Library& lib) {
  if (team_size() > 1) return;
  const int want = max_threads();
  if (lib.threads.exchange(want) == want) return;
  if (lib.set_threads_int != nullptr) lib.set_threads_int(want);
  if (lib.set_threads_dim != nullptr) lib.set_threads_dim(want);
}

}  // namespace

bool cblas_available(GemmBackend backend, std::string* why) {
  Library& lib = library(backend);
  if (lib.sgemm == nullptr && why != nullptr) *why = lib.error;
  return lib.sgemm != nullptr;
}

std::string cblas_library_path(GemmBackend backend) { return library(backend).path; }

std::string cblas_core_name(GemmBackend backend) {
  Library& lib = library(backend);
  if (lib.handle == nullptr || backend != GemmBackend::kOpenBlas) return "";
  auto corename = reinterpret_cast<char* (*)()>(dlsym(lib.handle, "openblas_get_corename"));
  const char* name = corename != nullptr ? corename() : nullptr;
  return name != nullptr ? name : "";
}

void cblas_gemm(GemmBackend backend, const GemmShape& s, float alpha, const float* a,
                const float* b, float beta, float* c) {
  Library& lib = library(backend);
  SPARQ_CHECK(lib.sgemm != nullptr, "GEMM backend {} is not available: {}",
              gemm_backend_name(backend), lib.error);
  // Debian's CBLAS takes 32-bit sizes.
  for (std::int64_t v : {s.m, s.n, s.k, s.lda, s.ldb, s.ldc}) {
    SPARQ_CHECK(v <= INT_MAX, "GEMM size {} exceeds the 32-bit CBLAS interface of {}", v,
                gemm_backend_name(backend));
  }
  sync_threads(lib);
  lib.sgemm(kCblasRowMajor, s.trans_a ? kCblasTrans : kCblasNoTrans,
            s.trans_b ? kCblasTrans : kCblasNoTrans, static_cast<int>(s.m),
            static_cast<int>(s.n), static_cast<int>(s.k), alpha, a, static_cast<int>(s.lda), b,
            static_cast<int>(s.ldb), beta, c, static_cast<int>(s.ldc));
}

}  // namespace sparq::gemm_detail
