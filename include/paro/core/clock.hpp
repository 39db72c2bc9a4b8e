#pragma once
// A clock in microseconds for timing collectives: the wall clock, or under SimGrid SMPI (built with
// -DPARO_SIMULATED_CLOCK) the simulated time of MPI_Wtime, since the process's own clock would then time
// the simulator rather than the simulated cluster.

#include <chrono>
#ifdef PARO_SIMULATED_CLOCK
#include <cmath>
#include <ctime>

#include <mpi.h>
#endif

namespace paro::clock {

// Whether every rank reads the same clock (the simulation's), so that times of different ranks compare.
#ifdef PARO_SIMULATED_CLOCK
inline constexpr bool is_global = true;
#else
inline constexpr bool is_global = false;
#endif

inline double now_us() {
#ifdef PARO_SIMULATED_CLOCK
  return MPI_Wtime() * 1e6;
#else
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
#endif
}

#ifdef PARO_SIMULATED_CLOCK
// Sleeps in simulated time until the clock reads t_us (at once if it already does).
inline void sleep_until_us(double t_us) {
  const double seconds = (t_us - now_us()) * 1e-6;
  if (seconds <= 0) return;
  timespec span{static_cast<std::time_t>(seconds), static_cast<long>((seconds - std::floor(seconds)) * 1e9)};
  smpi_nanosleep(&span, nullptr);
}
#endif

}  // namespace paro::clock
