#include "core/threading.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace sparq {

#ifdef _OPENMP
int max_threads() { return omp_get_max_threads(); }
void set_num_threads(int n) { omp_set_num_threads(n > 0 ? n : 1); }
int thread_index() { return omp_get_thread_num(); }
int team_size() { return omp_get_num_threads(); }
#else
int max_threads() { return 1; }
void set_num_threads(int) {}
int thread_index() { return 0; }
int team_size() { return 1; }
#endif

}  // namespace sparq
