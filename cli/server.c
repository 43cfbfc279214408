/*
 * server.c - the server directory from the command line: opening one with
 * a message that names the file and the reason, and `mess export |
 * import | verify | checkpoint` (docs/PROTOCOL.md, "Server directory").
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../mess.h"
#include "cli.h"

/* The reason of a failed call: the system's for MESS_EIO with errno set,
 * else the library's. */
static const char *reason(int rc, int err)
{
    if (rc == MESS_EBUSY)
        return "another process is writing this directory (one writer at a time); "
               "try again when it is done";
    if (rc == MESS_ESTATE && err == ESTALE)
        return "another handle changed it since this one opened it; run the command "
               "again";
    return rc == MESS_EIO && err ? strerror(err) : mess_strerror(rc);
}

/* A file where a directory is expected: an exported server (travel form)
 * or a client file get their own message. */
static int refuse_file(const char *dir)
{
    struct stat st;
    uint32_t version, role;
    int sealed;
    if (stat(dir, &st) != 0) {
        cli_error("%s: %s", dir, strerror(errno));
        return 1;
    }
    if (S_ISDIR(st.st_mode))
        return 0;
    if (mess_state_file_peek(dir, &version, &role, &sealed) == MESS_OK && role == 2)
        cli_error("%s: this is an exported server; run `mess import %s DIR` and give "
                  "DIR as --server", dir, dir);
    else if (mess_state_file_peek(dir, &version, &role, &sealed) == MESS_OK && role == 1)
        cli_error("%s: this is a client file, not a server directory", dir);
    else
        cli_error("%s: not a server directory (--server takes the directory "
                  "`mess init` made)", dir);
    return 1;
}

int cli_server_open(const char *dir, const mess_params *expect,
                    const char *client, mess_server **s)
{
    char msg[512];
    int rc, err;
    *s = NULL;
    if (refuse_file(dir))
        return CLI_FAIL;
    errno = 0;
    rc = mess_server_open(dir, expect, NULL, 0, s);
    if (rc == MESS_OK)
        return CLI_OK;
    err = errno;
    if (rc == MESS_EPARAM && client) {
        cli_error("server state '%s' was made for other parameters than client '%s'",
                  dir, client);
        return CLI_FAIL;
    }
    /* the full check names the file and the reason */
    msg[0] = '\0';
    if (mess_server_verify(dir, msg, sizeof msg) == MESS_OK || !msg[0])
        snprintf(msg, sizeof msg, "%s", reason(rc, err));
    cli_error("cannot open server '%s': %s", dir, msg);
    return CLI_FAIL;
}

int cli_server_fresh(const char *dir)
{
    struct stat st;
    DIR *d;
    struct dirent *e;
    int empty = 1;
    if (stat(dir, &st) != 0)
        return CLI_OK; /* made by mess_server_create (its errors are its own) */
    if (S_ISDIR(st.st_mode) && (d = opendir(dir)) != NULL) {
        while ((e = readdir(d)) != NULL)
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                empty = 0;
        closedir(d);
        if (empty)
            return CLI_OK;
    }
    cli_error("%s exists%s: the server is a new directory (remove it, or choose "
              "another --server)", dir, S_ISDIR(st.st_mode) ? " and is not empty" : "");
    return CLI_FAIL;
}

int cli_server_failed(const char *dir, int rc, int err)
{
    cli_error("cannot write server '%s' (it keeps its last checkpoint): %s", dir,
              reason(rc, err));
    return CLI_FAIL;
}

int cli_server_unusable(const mess_server *s, const char *dir)
{
    char why[512];
    if (!s || mess_server_error(s, why, sizeof why) == MESS_OK)
        return CLI_OK;
    cli_error("server '%s': %s (`mess verify --server %s` checks every file)", dir, why, dir);
    return CLI_FAIL;
}

int cli_server_write(mess_server *s, const char *dir)
{
    int rc;
    errno = 0;
    rc = mess_server_checkpoint(s);
    if (rc == MESS_OK)
        return CLI_OK;
    return cli_server_failed(dir, rc, errno);
}

static const char export_help[] =
    "usage: mess export --server S FILE\n"
    "\n"
    "Writes server directory S as one compressed file (the travel form: the\n"
    "same server always gives the same bytes), for copying it elsewhere;\n"
    "`mess import FILE DIR` makes a directory of it again.\n";

int cli_cmd_export(int argc, char **argv)
{
    struct cli_args a;
    const char *spath, *file;
    mess_server *s;
    int rc, err;
    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(export_help, stdout);
        return CLI_OK;
    }
    spath = cli_opt(&a, "--server");
    file = cli_positional(&a, 0);
    if (!spath || !file) {
        cli_error("export needs --server and FILE (see --help)");
        return CLI_USAGE;
    }
    if (cli_check_unused(&a))
        return CLI_USAGE;
    if (cli_server_open(spath, NULL, NULL, &s) != CLI_OK)
        return CLI_FAIL;
    errno = 0;
    rc = mess_server_export(s, file);
    err = errno;
    if (rc != MESS_OK && cli_server_unusable(s, spath) != CLI_OK) {
        mess_server_free(s);
        return CLI_FAIL;
    }
    mess_server_free(s);
    if (rc != MESS_OK) {
        cli_error("cannot export to '%s': %s", file, reason(rc, err));
        return CLI_FAIL;
    }
    printf("{\"exported\":\"%s\"}\n", file);
    return CLI_OK;
}

static const char import_help[] =
    "usage: mess import FILE DIR\n"
    "\n"
    "Makes server directory DIR (new, or empty) from FILE, a server `mess\n"
    "export` wrote (or a server file of libmess 0.2).\n";

int cli_cmd_import(int argc, char **argv)
{
    struct cli_args a;
    const char *file, *dir;
    int rc, err;
    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(import_help, stdout);
        return CLI_OK;
    }
    file = cli_positional(&a, 0);
    dir = cli_positional(&a, 0); /* the next one: file is taken */
    if (!file || !dir) {
        cli_error("import needs FILE and DIR (see --help)");
        return CLI_USAGE;
    }
    if (cli_check_unused(&a))
        return CLI_USAGE;
    errno = 0;
    rc = mess_server_import(file, dir);
    err = errno;
    if (rc == MESS_EEXIST) {
        cli_error("%s: the directory exists and is not empty", dir);
        return CLI_FAIL;
    }
    if (rc != MESS_OK) {
        cli_error("cannot import '%s' into '%s': %s", file, dir, reason(rc, err));
        return CLI_FAIL;
    }
    printf("{\"imported\":\"%s\"}\n", dir);
    return CLI_OK;
}

static const char extract_help[] =
    "usage: mess extract --server S --shards LIST DIR\n"
    "\n"
    "Makes the new server directory DIR for a shard group from server\n"
    "directory S: the files of the shards in LIST (numbers and ranges, as\n"
    "0-31,40) are copied (never linked), every other shard is empty, and DIR\n"
    "has its own MANIFEST and an empty log.  S must be checkpointed (no\n"
    "updates in its log) and DIR must not exist; on failure nothing named\n"
    "DIR is left (docs/DISTRIBUTED.md).\n";

/* "0-31,40" into ascending shard numbers below max; 0 and a message on error. */
static size_t parse_shards(const char *text, uint32_t *out, uint32_t max)
{
    const char *p = text;
    size_t n = 0;
    while (*p) {
        char *end;
        unsigned long a = strtoul(p, &end, 10), b;
        if (end == p || *p == '-' || *p == '+')
            goto bad;
        b = a;
        p = end;
        if (*p == '-') {
            b = strtoul(p + 1, &end, 10);
            if (end == p + 1 || p[1] == '-' || p[1] == '+')
                goto bad;
            p = end;
        }
        if (a > b || b >= max) {
            cli_error("--shards: %lu-%lu is not a range of shards below %u", a, b,
                      (unsigned)max);
            return 0;
        }
        for (; a <= b; a++) {
            if (n == max) {
                cli_error("--shards: shard %lu listed twice", a);
                return 0;
            }
            out[n++] = (uint32_t)a;
        }
        if (*p == ',')
            p++;
        else if (*p)
            goto bad;
    }
    return n;
bad:
    cli_error("--shards: '%s' is not a list of shard numbers (as 0-31,40)", text);
    return 0;
}

int cli_cmd_extract(int argc, char **argv)
{
    struct cli_args a;
    const char *src, *list, *dst;
    uint32_t *shards;
    size_t n;
    char msg[512];
    int rc, err;
    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(extract_help, stdout);
        return CLI_OK;
    }
    src = cli_opt(&a, "--server");
    list = cli_opt(&a, "--shards");
    dst = cli_positional(&a, 0);
    if (!src || !list || !dst) {
        cli_error("extract needs --server, --shards and DIR (see --help)");
        return CLI_USAGE;
    }
    if (cli_check_unused(&a))
        return CLI_USAGE;
    if (refuse_file(src))
        return CLI_FAIL;
    shards = (uint32_t *)malloc(MESS_MAX_SHARDS * sizeof *shards);
    if (!shards) {
        cli_error("out of memory");
        return CLI_FAIL;
    }
    n = parse_shards(list, shards, MESS_MAX_SHARDS);
    if (n == 0) {
        free(shards);
        return CLI_USAGE;
    }
    msg[0] = '\0';
    errno = 0;
    rc = mess_server_extract(src, shards, n, dst, msg, sizeof msg);
    err = errno;
    free(shards);
    if (rc != MESS_OK) {
        cli_error("cannot extract shards %s of '%s' into '%s': %s", list, src, dst,
                  msg[0] ? msg : reason(rc, err));
        return CLI_FAIL;
    }
    printf("{\"extracted\":\"%s\",\"shards\":%zu}\n", dst, n);
    return CLI_OK;
}

static const char verify_help[] =
    "usage: mess verify --server S [--client C [--passphrase-env V]]\n"
    "\n"
    "Checks server directory S in full: the MANIFEST, every file's length,\n"
    "every graph file's digest and structure, the write-ahead log.  Prints one\n"
    "line, exits 0 if the directory is sound and 1 (with the file and the\n"
    "reason) if not.  A log that ends in a torn record (a crash during an\n"
    "append, or a copy cut short) is sound, but the line says what the next\n"
    "writer's open drops.\n"
    "\n"
    "  --client C   also compare S with what client C put there: C counts the\n"
    "               items uploaded and the ids deleted that a server\n"
    "               acknowledged (mess insert, mess delete); S holding fewer\n"
    "               live items than uploads - deletes is reported, exit 1\n"
    "               (acknowledged changes lost: a log cut short, an older copy\n"
    "               of S).  It detects accidents, not a malicious host.  A\n"
    "               client file of format 2 did not count: nothing to compare.\n";

/* verify --client: S's live items against what client C put there (its
 * acknowledged uploads - deletes).  CLI_OK (the summary printed), CLI_FAIL
 * or CLI_USAGE after a message. */
static int verify_client(struct cli_args *a, const char *spath, const char *cpath,
                         const char *summary)
{
    const char *pass;
    mess_client *c = NULL;
    mess_server *s = NULL;
    mess_server_stats st;
    mess_params p;
    uint64_t up = 0, del = 0, want, live;
    uint8_t tag[MESS_OWNER_BYTES];
    int rc;
    if (cli_passphrase(a, &pass) || cli_check_unused(a))
        return CLI_USAGE;
    errno = 0;
    rc = mess_client_load(cpath, pass, &c);
    if (rc != MESS_OK)
        return cli_fail("cannot load client state", cpath, rc);
    mess_client_params(c, &p);
    if (cli_server_open(spath, &p, cpath, &s) != CLI_OK) {
        mess_client_free(c);
        return CLI_FAIL;
    }
    mess_client_owner(c, tag);
    rc = mess_server_check_owner(s, tag);
    if (rc == MESS_EOWNER) {
        cli_error("server '%s' belongs to another client (not to '%s'): nothing to "
                  "compare", spath, cpath);
        rc = CLI_FAIL;
        goto done;
    }
    if (mess_client_applied(c, &up, &del) == MESS_ENOTFOUND) {
        printf("%s: %s; client '%s' did not count its changes (a client file of format "
               "2): nothing to compare\n", spath, summary, cpath);
        rc = CLI_OK;
        goto done;
    }
    mess_server_stats_get(s, &st);
    live = p.per_item ? (uint64_t)st.live / p.per_item : 0;
    want = up > del ? up - del : 0;
    if (live < want) {
        printf("%s: %s\n", spath, summary); /* the files are sound */
        cli_error("server '%s' holds %llu live items, fewer than the %llu client '%s' put "
                  "there (%llu uploaded, %llu deleted, acknowledged): %llu acknowledged "
                  "items are missing (a log cut short, or a copy older than the client "
                  "file)", spath, (unsigned long long)live, (unsigned long long)want, cpath,
                  (unsigned long long)up, (unsigned long long)del,
                  (unsigned long long)(want - live));
        rc = CLI_FAIL;
        goto done;
    }
    printf("%s: %s; it holds %llu live items, client '%s' put %llu there (%llu uploaded, "
           "%llu deleted)\n", spath, summary, (unsigned long long)live, cpath,
           (unsigned long long)want, (unsigned long long)up, (unsigned long long)del);
    rc = CLI_OK;
done:
    mess_server_free(s);
    mess_client_free(c);
    return rc;
}

int cli_cmd_verify(int argc, char **argv)
{
    struct cli_args a;
    const char *spath, *cpath;
    char msg[1024];
    int rc;
    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(verify_help, stdout);
        return CLI_OK;
    }
    spath = cli_opt(&a, "--server");
    cpath = cli_opt(&a, "--client");
    if (!spath) {
        cli_error("verify needs --server (see --help)");
        return CLI_USAGE;
    }
    if (!cpath && cli_check_unused(&a))
        return CLI_USAGE;
    if (refuse_file(spath))
        return CLI_FAIL;
    msg[0] = '\0';
    rc = mess_server_verify(spath, msg, sizeof msg);
    if (rc != MESS_OK) {
        cli_error("server '%s' is damaged: %s", spath, msg[0] ? msg : mess_strerror(rc));
        return CLI_FAIL;
    }
    if (cpath)
        return verify_client(&a, spath, cpath, msg);
    printf("%s: %s\n", spath, msg);
    return CLI_OK;
}

static const char checkpoint_help[] =
    "usage: mess checkpoint --server S\n"
    "\n"
    "Writes what was applied to server directory S since its last checkpoint\n"
    "as a new generation of its files (the commands that change S do this\n"
    "before they return).\n";

int cli_cmd_checkpoint(int argc, char **argv)
{
    struct cli_args a;
    const char *spath;
    mess_server *s;
    int rc;
    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(checkpoint_help, stdout);
        return CLI_OK;
    }
    spath = cli_opt(&a, "--server");
    if (!spath) {
        cli_error("checkpoint needs --server (see --help)");
        return CLI_USAGE;
    }
    if (cli_check_unused(&a))
        return CLI_USAGE;
    if (cli_server_open(spath, NULL, NULL, &s) != CLI_OK)
        return CLI_FAIL;
    rc = cli_server_write(s, spath);
    mess_server_free(s);
    if (rc == CLI_OK)
        printf("{\"checkpoint\":\"%s\"}\n", spath);
    return rc;
}

int cli_layout_opt(struct cli_args *a, int *layout)
{
    const char *v = cli_opt(a, "--layout");
    *layout = MESS_LAYOUT_DEFAULT;
    if (!v || !strcmp(v, "default"))
        return CLI_OK;
    if (!strcmp(v, "codes")) {
        *layout = MESS_LAYOUT_CODES;
        return CLI_OK;
    }
    cli_error("--layout: default or codes, got '%s'", v);
    return CLI_USAGE;
}

int cli_server_layout(mess_server *s, int layout, const char *dir)
{
    int rc;
    if (layout == MESS_LAYOUT_DEFAULT)
        return CLI_OK;
    rc = mess_server_set_layout(s, layout);
    if (rc == MESS_OK)
        return CLI_OK;
    if (rc == MESS_EPARAM)
        cli_error("--layout codes: server '%s' has codes of other than 128 bits", dir);
    else
        cli_error("--layout codes: server '%s': %s", dir, mess_strerror(rc));
    return CLI_FAIL;
}
