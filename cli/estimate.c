/*
 * estimate.c - `mess estimate`: the memory and disk a configuration needs
 * for N items (mess_estimate, mess_experimental.h).
 */
#include <stdio.h>

#include "cli.h"

static const char estimate_help[] =
    "usage: mess estimate --items N [--dim D] [options]\n"
    "\n"
    "Prints (one JSON line) what a server of these parameters holding N items\n"
    "needs: entries (N x t), the hot graph (codes, labels, links, label map:\n"
    "resident_bytes, the graph files a file-backed server maps), the cold\n"
    "payload arenas on disk, the whole directory, the exported travel file\n"
    "(an upper bound) and the server held in memory; with per-entry figures.\n"
    "Nothing is built (docs/EVALUATION.md, \"Memory and disk per entry\").\n"
    "\n"
    "  --items N           items to hold (required)\n"
    "  --dim D             vector dimension (128)\n";

int cli_cmd_estimate(int argc, char **argv)
{
    struct cli_args a;
    mess_params p;
    mess_estimate_result e;
    long items, dim;
    int rc;

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(estimate_help, stdout);
        cli_params_help(stdout, 1);
        return CLI_OK;
    }
    if (cli_opt_long(&a, "--items", 0, 0x7fffffffffffffffL, -1, &items) ||
        cli_opt_long(&a, "--dim", 1, MESS_MAX_DIM, 128, &dim) ||
        cli_params_options(&a, 1, &p) || cli_check_unused(&a))
        return CLI_USAGE;
    if (items < 0) {
        cli_error("estimate needs --items N (see --help)");
        return CLI_USAGE;
    }
    p.dim = (uint32_t)dim;
    rc = mess_estimate(&p, (uint64_t)items, &e);
    if (rc != MESS_OK)
        return cli_fail("estimate", NULL, rc);
    printf("{\"items\":%llu,\"entries\":%llu,\"shard_entries\":%.1f,"
           "\"payload_bytes\":%u,\"code_bytes\":%llu,\"label_bytes\":%llu,"
           "\"link_bytes\":%llu,\"map_bytes\":%llu,\"resident_bytes\":%llu,"
           "\"arena_bytes\":%llu,\"disk_bytes\":%llu,\"travel_bytes\":%llu,"
           "\"memory_bytes\":%llu,\"resident_per_entry\":%.1f,"
           "\"disk_per_entry\":%.1f,\"memory_per_entry\":%.1f,"
           "\"dim\":%u,\"shards\":%u,\"per_item\":%u,\"bits\":%u,\"hnsw_m\":%u,"
           "\"payload\":\"%s\"}\n",
           (unsigned long long)e.items, (unsigned long long)e.entries,
           e.shard_entries, e.payload_bytes, (unsigned long long)e.code_bytes,
           (unsigned long long)e.label_bytes, (unsigned long long)e.link_bytes,
           (unsigned long long)e.map_bytes, (unsigned long long)e.resident_bytes,
           (unsigned long long)e.arena_bytes, (unsigned long long)e.disk_bytes,
           (unsigned long long)e.travel_bytes, (unsigned long long)e.memory_bytes,
           e.resident_per_entry, e.disk_per_entry, e.memory_per_entry, p.dim,
           p.shards, p.per_item, p.kappa, p.hnsw_m, cli_payload_name(p.payload));
    return CLI_OK;
}
