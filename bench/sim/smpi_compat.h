/* smpicxx force-includes smpi_helpers.h, whose function-like macros (exit, malloc, free, getpid, sleep,
   ...) rename C++ members and std:: functions (CLI11's App::exit). Included after it (bench/sim/build.sh),
   this takes them back; paro needs none of SMPI's interceptions. */
#undef exit
#undef malloc
#undef calloc
#undef realloc
#undef free
#undef getpid
#undef sleep
#undef usleep
#undef gettimeofday
#undef nanosleep
#undef clock_gettime
#undef getopt
#undef getopt_long
#undef getopt_long_only

/* Buffers of at least 1 MiB share one physical copy across the simulated ranks (SMPI's shared malloc)
   and paro computes nothing on them: the study measures simulated time only, and 1024 ranks' own copies
   of 1 GiB buffers would not fit in memory (include/paro/transport/transport.hpp). Smaller buffers stay
   real, as the topology exchange at start-up needs (a few hundred bytes per rank). */
#include <smpi/smpi.h>
#define PARO_SIMULATED_DATA_BYTES (std::size_t{1} << 20)
