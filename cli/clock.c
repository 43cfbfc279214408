/*
 * clock.c - the clocks the commands time with: wall time (monotonic) and
 * the process's CPU time (all its threads), both in seconds.
 */
#include <time.h>

#include "cli.h"

static double seconds(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double cli_wall_s(void) { return seconds(CLOCK_MONOTONIC); }

double cli_cpu_s(void) { return seconds(CLOCK_PROCESS_CPUTIME_ID); }
