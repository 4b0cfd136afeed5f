// Where a CPU graph's time went, node by node and thread by thread: what it takes to tell a slow
// kernel from threads waiting for each other (`latte bench --profile`). Off by default; on, the
// CPU backend reads the clock twice per node and thread (tens of nanoseconds against the
// microseconds a decode step's smallest nodes take).
#pragma once
#include <atomic>
#include <cstddef>
#include <vector>

namespace ggl {

struct CpuProfile {
  int threads = 0;
  // Seconds, at [node index * threads + thread] (the graph's node order; views and leaves zero):
  // in the node's kernel, and at the barrier just before the node, waiting for the team to finish
  // the nodes it depends on.
  std::vector<double> run, wait;
  double run_of(size_t node, int thread) const { return run[node * threads + thread]; }
  double wait_before(size_t node, int thread) const { return wait[node * threads + thread]; }
};

// Process-wide switch: on, every CpuBackend records the profile of each graph it computes
// (CpuBackend::last_profile).
inline std::atomic<bool> g_cpu_profiling{false};
inline void set_cpu_profiling(bool on) { g_cpu_profiling.store(on, std::memory_order_relaxed); }
inline bool cpu_profiling() { return g_cpu_profiling.load(std::memory_order_relaxed); }

}  // namespace ggl
