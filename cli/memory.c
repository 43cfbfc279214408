/*
 * memory.c - what a process holds in memory, private against mapped file
 * pages (/proc/self/smaps), for `mess info` and the benchmarks.  A server
 * directory's graphs and arenas are mapped: their resident pages are the
 * page cache's, shared and given back under pressure, which is what lets
 * an index exceed memory; only private (anonymous) pages are the
 * process's own (docs/PROTOCOL.md "Reading the payload").
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_memory(const char *dir, struct cli_memory *m)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[4096 + 256], *real = NULL;
    size_t rlen = 0;
    int in_dir = 0;
    unsigned long long kb;
    memset(m, 0, sizeof *m);
    if (!f)
        return -1;
    if (dir) {
        real = realpath(dir, NULL);
        rlen = real ? strlen(real) : 0;
    }
    while (fgets(line, sizeof line, f)) {
        char *path;
        unsigned long long lo, hi;
        if (sscanf(line, "%llx-%llx ", &lo, &hi) == 2 && strchr(line, ' ')) {
            /* a mapping's header: address range, perms, offset, dev,
             * inode, then its path (if any) */
            path = strchr(line, '/');
            path = path && strstr(line, " /") ? path : NULL;
            in_dir = real && path && strncmp(path, real, rlen) == 0 && path[rlen] == '/';
            continue;
        }
        if (sscanf(line, "Rss: %llu kB", &kb) == 1) {
            m->rss += 1024.0 * (double)kb;
            if (in_dir)
                m->dir_rss += 1024.0 * (double)kb;
        } else if (sscanf(line, "Anonymous: %llu kB", &kb) == 1) {
            m->anon += 1024.0 * (double)kb;
            if (in_dir)
                m->dir_anon += 1024.0 * (double)kb;
        }
    }
    fclose(f);
    free(real);
    return 0;
}
