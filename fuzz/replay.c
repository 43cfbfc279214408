/*
 * replay.c - a main() for a fuzz target without libFuzzer: runs every file
 * named on the command line (or, with no arguments, every file of
 * fuzz/corpus/NAME and fuzz/regress/NAME) through LLVMFuzzerTestOneInput
 * once.  Built with the ordinary compiler under ASan+UBSan for make check;
 * a crash or sanitizer report ends the program without the summary line.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

#ifndef FUZZ_NAME
#error "compile with -DFUZZ_NAME=\"target\""
#endif

static size_t replayed;

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long n;
    if (!f)
        return -1;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return -1;
    }
    buf = (uint8_t *)malloc(n ? (size_t)n : 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    replayed++;
    return 0;
}

/* Every regular file of dir (missing dir: nothing). */
static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4096];
    struct stat st;
    int rc = 0;
    if (!d)
        return 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && replay_file(path) != 0) {
            fprintf(stderr, "cannot read %s\n", path);
            rc = -1;
        }
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    int i, failed = 0;
    fuzz_fixture();
    if (argc > 1) {
        for (i = 1; i < argc; i++)
            if (replay_file(argv[i]) != 0)
                failed++;
    } else {
        failed += replay_dir("fuzz/corpus/" FUZZ_NAME) != 0;
        failed += replay_dir("fuzz/regress/" FUZZ_NAME) != 0;
        if (replayed == 0) {
            fprintf(stderr, "no inputs in fuzz/corpus/%s\n", FUZZ_NAME);
            failed++;
        }
    }
    printf("%s: %zu inputs replayed\n", FUZZ_NAME, replayed);
    printf("%zu passed, %d failed\n", replayed, failed);
    return failed ? 1 : 0;
}
