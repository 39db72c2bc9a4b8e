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
