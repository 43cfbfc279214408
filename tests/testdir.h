/*
 * testdir.h - removing a test's scratch server directory (its files, then
 * the directory; a plain file at dir is unlinked), shared by the tests
 * that build directories under build/.  Include after harness.h.
 */
#ifndef MESS_TEST_TESTDIR_H
#define MESS_TEST_TESTDIR_H

#include <dirent.h>
#include <stdio.h>
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

#endif
