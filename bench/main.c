/*
 * main.c - mess-bench, the benchmarks of the source tree: `mess-bench
 * WHAT` (or `mess bench WHAT`, which runs this program) dispatches to the
 * benchmark families.  Each benchmark prints its findings and, as its
 * last line, one JSON object.
 *
 * The benchmarks time the library's internals (hnsw_bin, the client's
 * steps, the wire layout), so they link build/libmess.a with the internal
 * headers and are not installed: the installed `mess` tool uses the
 * public API only (cli/bench.c says where the benchmarks are).
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"

struct bench {
    const char *name;
    cli_command_fn fn;
    const char *summary;
};

/* One line per benchmark; each lives in bench/bench_<name>.c. */
static const struct bench benches[] = {
    {"batch", bench_batch, "many queries: per-call (threads started per call) vs batch calls on persistent workers"},
    {"client", bench_client, "the client's per-query steps (encode, peek, open, rerank) beside their floors"},
    {"encode", bench_encode, "client encoding: IsoHash and randomized-response throughput, --quality recall"},
    {"hnsw", bench_hnsw, "binary HNSW engine on given codes: build, recall, QPS"},
    {"io", bench_io, "storage reads per query with the arenas cold: bytes, p50/p99, against the device's floor"},
    {"open", bench_open, "opening a server directory vs loading its exported file, cold and warm cache"},
    {"payload", bench_payload, "opening response entries: SIV one copy per id or all, vs a stored-nonce AEAD"},
    {"server", bench_server, "server search vs its memory floor: widths, threads, batch q/s per core vs hnswlib"},
    {"throughput", bench_throughput, "both roles' batch calls in throughput mode, q/s per core per batch size vs hnswlib"},
    {"protocol", bench_protocol, "MESS protocol: recall vs pool, time, bytes, build rate, server memory"},
    {NULL, NULL, NULL},
};

static void usage(FILE *f)
{
    size_t i;
    fprintf(f, "usage: mess bench WHAT [OPTIONS]   (mess bench WHAT --help)\n\n");
    for (i = 0; benches[i].name; i++)
        fprintf(f, "  %-8s %s\n", benches[i].name, benches[i].summary);
}

/* argc/argv: the arguments after the program's name, WHAT first (`mess
 * bench WHAT ...` runs `mess-bench WHAT ...`). */
static int dispatch(int argc, char **argv)
{
    size_t i;
    if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? CLI_USAGE : CLI_OK;
    }
    for (i = 0; benches[i].name; i++)
        if (strcmp(argv[0], benches[i].name) == 0)
            return benches[i].fn(argc - 1, argv + 1);
    cli_error("unknown benchmark '%s' (see mess bench --help)", argv[0]);
    return CLI_USAGE;
}

int main(int argc, char **argv) { return dispatch(argc - 1, argv + 1); }
