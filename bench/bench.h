/*
 * bench.h - mess-bench, the benchmarks of the source tree: one family per
 * bench/bench_<name>.c, dispatched by bench/main.c.  The benchmarks may
 * include the library's internal headers; they share the tool's argument
 * parsing, file reading, clocks and server opening (cli/cli.h: cli/args.c,
 * files.c, clock.c and server.c are linked into both programs).
 */
#ifndef MESS_BENCH_H
#define MESS_BENCH_H

#include "../cli/cli.h"

/* `mess bench NAME`: argc/argv start after NAME; the exit codes are the
 * tool's (CLI_OK, CLI_FAIL, CLI_USAGE). */
int bench_hnsw(int argc, char **argv);
int bench_encode(int argc, char **argv);
int bench_protocol(int argc, char **argv);
int bench_payload(int argc, char **argv);
int bench_batch(int argc, char **argv);
int bench_client(int argc, char **argv);
int bench_open(int argc, char **argv);
int bench_server(int argc, char **argv);
int bench_io(int argc, char **argv);
int bench_throughput(int argc, char **argv);

/* Runs cmd (scripts/hnswlib_ref.py with its options, stderr dropped) and
 * keeps its JSON lines, each echoed as "  hnswlib LINE" and written to
 * json as "hnswlib":[LINE,...] (empty when the helper fails, which is
 * said on stdout). */
void bench_hnswlib_lines(const char *cmd, FILE *json);

/* The efs hnswlib is run at, for "the smallest ef whose recall@10 reaches
 * libmess's": steps of 4 around 48-64 (where the large set's comparisons
 * fall), where a coarser grid gave hnswlib more work than it needs (ef 64
 * for ef 56's recall on the large set: 10% more distances a query).  In
 * ascending order: bench_throughput.c takes the first line that reaches
 * libmess's recall. */
#define BENCH_HNSWLIB_EFS "10,16,24,32,40,44,48,52,56,60,64,72,80,96,128,192,256"

/* bench_server.c, also for bench_throughput.c: the work of the searches
 * of nq requests (every shard's hnsw_search on one scratch: its counts and
 * the hits returned), and the load average's three figures. */
struct hnsw_counts;
int bench_count_work(const mess_server *s, uint8_t **reqs, const size_t *lens,
                     size_t nq, struct hnsw_counts *c, double *hits);
void bench_loadavg(char *out, size_t cap);

#endif
