/*
 * hnswlib_ref.c - the plaintext reference of the benchmarks: hnswlib on
 * the raw vectors, run through scripts/hnswlib_ref.py in the same
 * invocation (bench protocol, bench server).
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"

void bench_hnswlib_lines(const char *cmd, FILE *json)
{
    char line[1024];
    FILE *f = popen(cmd, "r");
    int first = 1;
    fprintf(json, "\"hnswlib\":[");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            size_t n = strlen(line);
            while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
                line[--n] = 0;
            if (n == 0 || line[0] != '{')
                continue;
            printf("  hnswlib %s\n", line);
            fprintf(json, "%s%s", first ? "" : ",", line);
            first = 0;
        }
        if (pclose(f) != 0 && first)
            printf("  hnswlib: helper failed (python3-hnswlib installed?)\n");
    }
    fprintf(json, "]");
}
