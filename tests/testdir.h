/*
 * testdir.h - removing a test's scratch server directory (its files, then
 * the directory; a plain file at dir is unlinked), shared by the tests
 * that build directories under build/; a shard's file by its suffix and
 * two files compared byte for byte (test_store.c, test_extract.c).
 * Include after harness.h.
 */
#ifndef MESS_TEST_TESTDIR_H
#define MESS_TEST_TESTDIR_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];
    if (!d) {
        unlink(dir);
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

/* The one file of shard j with the suffix in dir, or "". */
static inline void shard_file(const char *dir, uint32_t j, const char *suffix, char *out,
                              size_t cap)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char prefix[32];
    out[0] = '\0';
    snprintf(prefix, sizeof prefix, "shard-%04u-", (unsigned)j);
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        size_t a = strlen(e->d_name), b = strlen(suffix);
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && a >= b &&
            strcmp(e->d_name + a - b, suffix) == 0)
            snprintf(out, cap, "%s/%s", dir, e->d_name);
    }
    closedir(d);
}

/* 1 if both files can be read and hold the same bytes. */
static inline int files_equal(const char *x, const char *y)
{
    size_t a, b;
    uint8_t *p = test_read_file(x, &a), *q = test_read_file(y, &b);
    int eq = p && q && a == b && memcmp(p, q, a) == 0;
    free(p);
    free(q);
    return eq;
}

#endif
