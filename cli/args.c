/*
 * args.c - option parsing for the `mess` tool.  Every numeric option is
 * range-checked; an unknown or malformed option is an error, never ignored.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void cli_args_init(struct cli_args *a, int argc, char **argv)
{
    a->argc = argc < 256 ? argc : 256;
    a->argv = argv;
    memset(a->used, 0, sizeof a->used);
}

void cli_error(const char *fmt, ...)
{
    va_list ap;
    fputs("mess: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* Finds option `name`; returns its value ("" for a bare flag form when
 * want_value is 0) or NULL. */
static const char *find(struct cli_args *a, const char *name, int want_value)
{
    size_t len = strlen(name);
    int i;
    for (i = 0; i < a->argc; i++) {
        const char *s = a->argv[i];
        if (strcmp(s, "--") == 0)
            break;
        if (strncmp(s, name, len) != 0)
            continue;
        if (s[len] == '\0') {
            a->used[i] = 1;
            if (!want_value)
                return "";
            if (i + 1 < a->argc) {
                a->used[i + 1] = 1;
                return a->argv[i + 1];
            }
            return NULL;
        }
        if (want_value && s[len] == '=') {
            a->used[i] = 1;
            return s + len + 1;
        }
    }
    return NULL;
}

const char *cli_opt(struct cli_args *a, const char *name)
{
    return find(a, name, 1);
}

int cli_flag(struct cli_args *a, const char *name)
{
    return find(a, name, 0) != NULL;
}

int cli_wants_help(struct cli_args *a)
{
    return cli_flag(a, "--help") || cli_flag(a, "-h");
}

int cli_opt_long(struct cli_args *a, const char *name, long lo, long hi,
                 long def, long *out)
{
    const char *v = cli_opt(a, name);
    char *end;
    long x;
    if (!v) {
        *out = def;
        return 0;
    }
    errno = 0;
    x = strtol(v, &end, 0);
    if (errno || end == v || *end != '\0' || x < lo || x > hi) {
        cli_error("%s: expected an integer in [%ld, %ld], got '%s'", name, lo,
                  hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

int cli_opt_double(struct cli_args *a, const char *name, double lo, double hi,
                   double def, double *out)
{
    const char *v = cli_opt(a, name);
    char *end;
    double x;
    if (!v) {
        *out = def;
        return 0;
    }
    errno = 0;
    x = strtod(v, &end);
    if (errno || end == v || *end != '\0' || !(x >= lo && x <= hi)) {
        cli_error("%s: expected a number in [%g, %g], got '%s'", name, lo, hi,
                  v);
        return -1;
    }
    *out = x;
    return 0;
}

const char *cli_positional(struct cli_args *a, int idx)
{
    int i, k = 0, after_dashes = 0;
    for (i = 0; i < a->argc; i++) {
        const char *s = a->argv[i];
        if (!after_dashes && strcmp(s, "--") == 0) {
            a->used[i] = 1;
            after_dashes = 1;
            continue;
        }
        if (a->used[i] || (!after_dashes && s[0] == '-' && s[1] != '\0'))
            continue;
        if (k++ == idx) {
            a->used[i] = 1;
            return s;
        }
    }
    return NULL;
}

int cli_check_unused(struct cli_args *a)
{
    int i;
    for (i = 0; i < a->argc; i++) {
        if (!a->used[i]) {
            cli_error("unexpected argument '%s' (see --help)", a->argv[i]);
            return -1;
        }
    }
    return 0;
}
