// Thin wrappers over OpenMP so the rest of sparq never includes <omp.h> and still builds
// (single-threaded) without it.
#pragma once

namespace sparq {

int max_threads();          // threads a new parallel region would use
void set_num_threads(int n);
int thread_index();         // inside a parallel region; 0 outside
int team_size();            // inside a parallel region; 1 outside

}  // namespace sparq
