/*
 * bench.c - `mess bench WHAT`: the benchmarks are their own program,
 * mess-bench (bench/), because they time the library's internals; it is
 * built next to the tool (build/mess-bench) and not installed.  The tool
 * runs the one beside its own executable with the same arguments, so
 * `build/mess bench ...` keeps its options, output and exit codes; an
 * installed mess has none beside it and says where the benchmarks are.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* The program beside the tool.  The portable tool (build/mess-portable)
 * is built with its own twin's name (the Makefile defines it), so its
 * benchmarks measure the portable library too. */
#ifndef CLI_BENCH_PROGRAM
#define CLI_BENCH_PROGRAM "mess-bench"
#endif

/* PATH_MAX is not in every C library's limits.h: /proc/self/exe longer
 * than this is refused like a missing /proc. */
#define EXE_PATH_MAX 4096

int cli_cmd_bench(int argc, char **argv)
{
    static const char program[] = CLI_BENCH_PROGRAM;
    char path[EXE_PATH_MAX + sizeof program];
    char **args;
    char *slash = NULL;
    ssize_t n;
    int i, err;

    n = readlink("/proc/self/exe", path, EXE_PATH_MAX);
    err = errno;
    if (n > 0 && n < EXE_PATH_MAX) {
        path[n] = '\0';
        slash = strrchr(path, '/');
    }
    if (!slash) {
        cli_error("bench: cannot find this program's directory (/proc/self/exe: %s)",
                  n < 0 ? strerror(err) : "path too long");
        return CLI_FAIL;
    }
    memcpy(slash + 1, program, sizeof program);

    args = malloc(((size_t)argc + 2) * sizeof *args);
    if (!args) {
        cli_error("out of memory");
        return CLI_FAIL;
    }
    args[0] = path;
    for (i = 0; i < argc; i++)
        args[i + 1] = argv[i];
    args[argc + 1] = NULL;
    execv(path, args);
    /* execv returned, so it failed; ENOENT: no benchmark program beside
     * the tool, as in an installation */
    err = errno;
    free(args);
    if (err == ENOENT) {
        cli_error("bench: the benchmarks are not installed; they are built from "
                  "the source tree (make, then build/mess-bench WHAT or build/mess bench WHAT)");
        return CLI_USAGE;
    }
    cli_error("bench: %s: %s", path, strerror(err));
    return CLI_FAIL;
}
