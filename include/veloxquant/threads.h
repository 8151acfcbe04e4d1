// The CPU threads the library's parallel loops use (weight products, cache appends, attention).
// One process-wide pool: the CLI's --threads and the Python package's set_threads set it.
#pragma once

namespace veloxquant {

// Threads a loop runs on, the calling thread included (1: everything on the caller).
int threads();

// Sets that count: the pool starts or stops workers to match. Throws Error below 1 or above
// 1024. Safe to call between loops from any thread; a loop in flight keeps its workers.
void set_threads(int n);

// The count a process starts with: VELOXQUANT_THREADS when set (1 to 1024), otherwise one per
// physical core this process may run on (its affinity mask, so `taskset -c 0` means 1; SMT
// siblings count once), capped by a cgroup CPU quota.
int default_threads();

}  // namespace veloxquant
