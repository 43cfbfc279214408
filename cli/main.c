/*
 * main.c - the `mess` tool: dispatch to one command per family.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "../mess.h"
#include "cli.h"

struct command {
    const char *name;
    cli_command_fn fn;
    const char *summary;
};

static int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("mess %s\n", mess_version());
    return CLI_OK;
}

/* One line per command; the families live in cli/<family>.c. */
static const struct command commands[] = {
    {"init", cli_cmd_init, "create a client state and an empty server state"},
    {"insert", cli_cmd_insert, "insert the vectors of a file"},
    {"query", cli_cmd_query, "run queries, report recall, bytes and time"},
    {"request", cli_cmd_request, "the client's requests and sealed queries as files"},
    {"search", cli_cmd_search, "answer a request file with a server (its host)"},
    {"finish", cli_cmd_finish, "results from a response file and the sealed queries"},
    {"delete", cli_cmd_delete, "delete items by id"},
    {"compact", cli_cmd_compact, "remove deleted entries from the server"},
    {"info", cli_cmd_info, "what the server holds and can see; a client file's mode"},
    {"export", cli_cmd_export, "write a server directory as one file (to copy it)"},
    {"import", cli_cmd_import, "make a server directory from an exported file"},
    {"verify", cli_cmd_verify, "check a server directory's files in full"},
    {"extract", cli_cmd_extract, "make a shard group's server directory from one"},
    {"checkpoint", cli_cmd_checkpoint, "write a server directory's pending changes"},
    {"account", cli_cmd_account, "privacy accountants: what the server can learn (mess account --help)"},
    {"plan", cli_cmd_plan, "predicted recall and the smallest pool for a target"},
    {"estimate", cli_cmd_estimate, "memory and disk a configuration needs for N items"},
    {"bench", cli_cmd_bench, "benchmarks against baselines, in a source-tree build (mess bench --help)"},
    {"version", cmd_version, "print the library version"},
};

static void usage(FILE *f)
{
    size_t i;
    fprintf(f, "usage: mess COMMAND [OPTIONS]   (mess COMMAND --help for details)\n\n"
               "Private nearest-neighbour search (MESS) for offline experiments.\n\n"
               "commands:\n");
    for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

static int run(int argc, char **argv)
{
    size_t i;
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0)
        return cmd_version(0, NULL);
    for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 2, argv + 2);
    cli_error("unknown command '%s' (see mess --help)", argv[1]);
    return CLI_USAGE;
}

/* What a command prints on stdout is its result: a write of it that failed
 * (a full disk, or a file-size limit now that SIGXFSZ is ignored) is a
 * failure, never exit 0 with the output cut short. */
static int stdout_written(int rc)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return rc;
    /* the reason is known when the flush failed; a printf that failed
     * earlier left only the error flag */
    cli_error("cannot write standard output: %s",
              errno ? strerror(errno) : "a write failed, the output is incomplete");
    return rc == CLI_OK ? CLI_FAIL : rc;
}

int main(int argc, char **argv)
{
#ifdef SIGXFSZ
    /* A file-size limit (ulimit -f) makes a write past it fail with EFBIG
     * once SIGXFSZ is ignored, as it is here: by default the signal ends
     * the process mid-write, with no message and without the line saying
     * how many items an insert stored.  Every write of the library and the
     * tool checks its result, so the command now fails with "File too
     * large" like any other full disk (tests/cli_resume.sh). */
    signal(SIGXFSZ, SIG_IGN);
#endif
    return stdout_written(run(argc, argv));
}
