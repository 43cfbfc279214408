/*
 * bench_hnsw.c - `mess bench hnsw`: the binary HNSW engine on given codes.
 *
 * Builds one index over the base codes (single thread), finds the exact
 * Hamming top-P of every query by brute force, then for each P and each
 * beam width ef runs every query single-threaded (best of --repeat runs) and
 * reports recall and queries per second (CPU time of the thread).  The codes come from files so
 * that a baseline can be run on exactly the same bits in the same
 * invocation (scripts/bench_hnsw.py does that with faiss IndexBinaryHNSW).
 *
 * Recall@P counts returned hits whose distance is at most the exact P-th
 * smallest distance: with integer distances many codes tie, and any of the
 * tied codes is an equally correct answer.
 *
 * --mapped also writes the index as a graph file (hnsw_write_graph), maps
 * it as the server does and attaches it (hnsw_attach), then times the same
 * searches on both, alternating heap and mapped runs, and reports the
 * mapped/heap time ratio; the hits must be identical.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "hnsw_bin.h"
#include "../mess.h"
#include "bench.h"

#define MAX_LIST 32

/* CPU time of the calling thread: the runs are single-threaded, and on a
 * shared machine wall-clock time would also count time spent descheduled. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "a,b,c" -> values in [lo, hi]; returns the count or -1. */
static int parse_list(const char *s, long lo, long hi, long *out)
{
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < lo || v > hi || n == MAX_LIST)
            return -1;
        out[n++] = v;
        s = end;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return n;
}

/* Codes file: TEXMEX .bvecs whose records are packed codes (dim = bits/8
 * bytes, bit i of the code in byte i/8). */
static int read_codes(const char *path, uint64_t **codes, size_t *n,
                      uint32_t *bits)
{
    uint8_t *raw;
    size_t dim;
    int rc = mess_bvecs_read(path, &raw, n, &dim);
    if (rc != MESS_OK) {
        cli_fail("cannot read codes", path, rc);
        return -1;
    }
    if (dim % 8 != 0 || dim * 8 > MESS_MAX_BITS || *n == 0) {
        cli_error("'%s': %zu-byte records; codes must be a multiple of 64 bits",
                  path, dim);
        mess_vecs_free(raw);
        return -1;
    }
    *bits = (uint32_t)(dim * 8);
    *codes = (uint64_t *)malloc(*n * dim);
    if (!*codes) {
        mess_vecs_free(raw);
        cli_error("out of memory");
        return -1;
    }
    /* little-endian words, whatever the host order */
    {
        size_t i, words = *n * dim / 8;
        for (i = 0; i < words; i++) {
            uint64_t w = 0;
            int b;
            for (b = 7; b >= 0; b--)
                w = w << 8 | raw[i * 8 + (size_t)b];
            (*codes)[i] = w;
        }
    }
    mess_vecs_free(raw);
    return 0;
}

/* Exact P-th smallest Hamming distance of each query, for each P; -1 when
 * out of memory. */
static int exact_kth(const uint64_t *base, size_t n, const uint64_t *q,
                      size_t nq, uint32_t words, const long *P, int nP,
                      uint32_t *kth)
{
    uint32_t bits = words * 64;
    size_t *hist = (size_t *)calloc(bits + 1, sizeof *hist);
    size_t i, j;
    int p;
    if (!hist)
        return -1;
    for (i = 0; i < nq; i++) {
        uint32_t d;
        size_t acc = 0;
        memset(hist, 0, (bits + 1) * sizeof *hist);
        for (j = 0; j < n; j++)
            hist[hnsw_hamming(q + i * words, base + j * words, words)]++;
        p = 0;
        for (d = 0; d <= bits && p < nP; d++) {
            acc += hist[d];
            while (p < nP && acc >= (size_t)P[p])
                kth[i * (size_t)nP + (size_t)p++] = d;
        }
        while (p < nP)
            kth[i * (size_t)nP + (size_t)p++] = bits;
    }
    free(hist);
    return 0;
}

static void usage(void)
{
    printf("usage: mess bench hnsw --base CODES.bvecs --query CODES.bvecs [options]\n\n"
           "Builds the binary HNSW index over the base codes (one thread) and\n"
           "reports recall against exact Hamming top-P and single-thread queries\n"
           "per second for each P and ef.  Codes are .bvecs records of bits/8\n"
           "bytes (bits a multiple of 64).  The last line is a JSON object.\n\n"
           "  --m N          M_hnsw (default 16; 2*M links at layer 0)\n"
           "  --efc N        ef_construction (default 100)\n"
           "  --seed N       level generator seed (default 1)\n"
           "  --P LIST       result sizes (default 25,50,100)\n"
           "  --ef LIST      search beams, ef' = max(P, ef) (default 16,24,32,48,64,96,128,192,256,384,512)\n"
           "  --repeat N     timed runs per point, the fastest counts (default 3)\n"
           "  --nq N         use the first N queries only\n"
           "  --kth-out F    write the exact P-th distances (.ivecs, one column per P)\n"
           "  --popcount W   auto (the CPU decides, the default), hw (the POPCNT\n"
           "                 instruction) or soft (the baseline code a build without\n"
           "                 run-time selection would use); results are identical\n"
           "  --mapped       also search the index as a mapped graph file (the\n"
           "                 server's working form), alternating with the heap\n"
           "                 index, and report the mapped/heap time ratio\n");
}

/* The graph file of h in an unlinked temporary file (in $TMPDIR, else
 * /tmp), mapped as the server maps it (MAP_PRIVATE, read/write) and
 * attached; NULL after a message. */
static struct hnsw *bench_attach(const struct hnsw *h, void **map, size_t *len)
{
    const char *dir = getenv("TMPDIR"), *why = NULL;
    char path[4096], reason[4200];
    uint8_t digest[32];
    struct hnsw *b = NULL;
    off_t end = 0;
    int fd, rc = MESS_OK;
    if (!dir || !*dir)
        dir = "/tmp";
    snprintf(path, sizeof path, "%s/mess-bench-graph-XXXXXX", dir);
    *map = NULL;
    fd = mkstemp(path);
    if (fd < 0) {
        snprintf(reason, sizeof reason, "cannot create a temporary file in %s", dir);
        why = reason;
        goto fail;
    }
    unlink(path);
    rc = hnsw_write_graph(h, fd, digest);
    if (rc == MESS_OK && (end = lseek(fd, 0, SEEK_END)) <= 0)
        rc = MESS_EIO;
    if (rc != MESS_OK) {
        snprintf(reason, sizeof reason, "cannot write the graph file: %s", mess_strerror(rc));
        why = reason;
        goto fail;
    }
    *len = (size_t)end;
    *map = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (*map == MAP_FAILED) {
        *map = NULL;
        why = "cannot map the graph file";
        goto fail;
    }
    rc = hnsw_attach(*map, *len, hnsw_get_params(h), &b);
    if (rc != MESS_OK) {
        snprintf(reason, sizeof reason, "cannot attach the graph file: %s", mess_strerror(rc));
        why = reason;
        goto fail;
    }
    close(fd);
    return b;
fail:
    cli_error("--mapped: %s", why);
    if (*map)
        munmap(*map, *len);
    *map = NULL;
    if (fd >= 0)
        close(fd);
    return NULL;
}

int bench_hnsw(int argc, char **argv)
{
    struct cli_args a;
    const char *base_path, *query_path, *s, *kth_out, *pop;
    struct hnsw *hm = NULL;
    struct hnsw_hit *hits_m = NULL;
    void *map = NULL;
    size_t map_len = 0;
    double *qps_m = NULL, ratio_max = 0;
    int mapped;
    long m, efc, seed, repeat, nq_max, P[MAX_LIST], ef[MAX_LIST];
    int nP = 3, nef = 11, ip, ie, rc = CLI_FAIL;
    uint64_t *base = NULL, *query = NULL;
    size_t n, nq, i, q;
    uint32_t bits, qbits, words, *kth = NULL;
    struct hnsw *h = NULL;
    struct hnsw_scratch *sc = NULL;
    struct hnsw_hit *hits = NULL;
    double t0, build_s, kth_s, *recall = NULL, *qps = NULL;
    static const long def_P[] = {25, 50, 100};
    static const long def_ef[] = {16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512};

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        usage();
        return CLI_OK;
    }
    memcpy(P, def_P, sizeof def_P);
    memcpy(ef, def_ef, sizeof def_ef);
    base_path = cli_opt(&a, "--base");
    query_path = cli_opt(&a, "--query");
    kth_out = cli_opt(&a, "--kth-out");
    pop = cli_opt(&a, "--popcount");
    mapped = cli_flag(&a, "--mapped");
    if (cli_opt_long(&a, "--m", 2, MESS_MAX_HNSW_M, 16, &m) ||
        cli_opt_long(&a, "--efc", 1, MESS_MAX_EF, 100, &efc) ||
        cli_opt_long(&a, "--seed", 0, 0x7fffffffL, 1, &seed) ||
        cli_opt_long(&a, "--repeat", 1, 10000, 3, &repeat) ||
        cli_opt_long(&a, "--nq", 1, 0x7fffffffL, 0x7fffffffL, &nq_max))
        return CLI_USAGE;
    if ((s = cli_opt(&a, "--P")) && (nP = parse_list(s, 1, 100000, P)) <= 0) {
        cli_error("--P: a comma-separated list of 1..100000");
        return CLI_USAGE;
    }
    if ((s = cli_opt(&a, "--ef")) && (nef = parse_list(s, 1, MESS_MAX_EF, ef)) <= 0) {
        cli_error("--ef: a comma-separated list of 1..%d", MESS_MAX_EF);
        return CLI_USAGE;
    }
    if (cli_check_unused(&a))
        return CLI_USAGE;
    if (pop) {
        int mode = strcmp(pop, "auto") == 0 ? -1 : strcmp(pop, "soft") == 0 ? 0
                 : strcmp(pop, "hw") == 0 ? 1 : 2;
        if (mode == 2) {
            cli_error("--popcount: auto, hw or soft, not '%s'", pop);
            return CLI_USAGE;
        }
        if (hnsw_popcount_force(mode) != MESS_OK) {
            cli_error("--popcount hw: this CPU has no POPCNT instruction");
            return CLI_FAIL;
        }
    }
    if (!base_path || !query_path) {
        cli_error("--base and --query are required (see mess bench hnsw --help)");
        return CLI_USAGE;
    }
    if (read_codes(base_path, &base, &n, &bits) || read_codes(query_path, &query, &nq, &qbits))
        goto done;
    if (bits != qbits) {
        cli_error("base codes have %u bits, queries %u", bits, qbits);
        goto done;
    }
    if (nq > (size_t)nq_max)
        nq = (size_t)nq_max;
    words = bits / 64;

    /* build, one thread */
    {
        struct hnsw_params hp;
        hp.bits = bits;
        hp.m = (uint32_t)m;
        hp.ef_construction = (uint32_t)efc;
        hp.seed = (uint64_t)seed;
        if ((rc = hnsw_new(&hp, &h)) != MESS_OK) {
            cli_error("hnsw_new: %s", mess_strerror(rc));
            rc = CLI_FAIL;
            goto done;
        }
        rc = CLI_FAIL;
        t0 = now_s();
        for (i = 0; i < n; i++) {
            int e = hnsw_add(h, base + i * words, hnsw_label_of((uint64_t)i, 0), NULL);
            if (e != MESS_OK) {
                cli_error("hnsw_add: %s", mess_strerror(e));
                goto done;
            }
        }
        build_s = now_s() - t0;
    }
    printf("hnsw_bin: n=%zu bits=%u M=%ld efc=%ld popcount=%s: build %.2f s (one thread), "
           "%.1f bytes/node in memory (codes %u, layer-0 links %u)\n",
           n, bits, m, efc, hnsw_popcount_hw() ? "hw" : "soft", build_s,
           (double)hnsw_bytes(h) / (double)n, bits / 8, (uint32_t)(4 * (1 + 2 * m)));

    if (mapped) {
        hm = bench_attach(h, &map, &map_len);
        if (!hm)
            goto done;
        printf("mapped graph file: %zu bytes, %.1f bytes/node (heap after attach %zu bytes)\n",
               map_len, (double)map_len / (double)n, hnsw_heap_bytes(hm));
    }

    kth = (uint32_t *)malloc(nq * (size_t)nP * sizeof *kth);
    recall = (double *)calloc((size_t)nP * (size_t)nef, sizeof *recall);
    qps = (double *)calloc((size_t)nP * (size_t)nef, sizeof *qps);
    {
        long maxP = 0;
        for (ip = 0; ip < nP; ip++)
            maxP = P[ip] > maxP ? P[ip] : maxP;
        hits = (struct hnsw_hit *)malloc((size_t)maxP * sizeof *hits);
        hits_m = (struct hnsw_hit *)malloc((size_t)maxP * sizeof *hits_m);
    }
    qps_m = (double *)calloc((size_t)nP * (size_t)nef, sizeof *qps_m);
    if (!kth || !recall || !qps || !hits || !hits_m || !qps_m ||
        hnsw_scratch_new(&sc) != MESS_OK) {
        cli_error("out of memory");
        goto done;
    }
    t0 = now_s();
    if (exact_kth(base, n, query, nq, words, P, nP, kth) != 0) {
        cli_error("out of memory");
        goto done;
    }
    kth_s = now_s() - t0;
    printf("exact Hamming top-P of %zu queries by brute force: %.2f s\n", nq, kth_s);
    if (kth_out) {
        int32_t *k32 = (int32_t *)malloc(nq * (size_t)nP * sizeof *k32);
        int e = MESS_ENOMEM;
        if (k32) {
            for (i = 0; i < nq * (size_t)nP; i++)
                k32[i] = (int32_t)kth[i];
            e = mess_ivecs_write(kth_out, k32, nq, (size_t)nP);
            free(k32);
        }
        if (e != MESS_OK) {
            cli_fail("cannot write", kth_out, e);
            goto done;
        }
    }

    for (ip = 0; ip < nP; ip++)
        for (ie = 0; ie < nef; ie++) {
            double best = 0, best_m = 0;
            size_t good = 0, got, got_m, j;
            long r;
            for (r = 0; r < repeat; r++) {
                double t;
                t0 = now_s();
                for (q = 0; q < nq; q++) {
                    int e = hnsw_search(h, sc, query + q * words, (size_t)P[ip],
                                        (size_t)ef[ie], hits, &got);
                    if (e != MESS_OK) {
                        cli_error("hnsw_search: %s", mess_strerror(e));
                        goto done;
                    }
                    if (r == 0)
                        for (j = 0; j < got; j++)
                            good += hits[j].dist <= kth[q * (size_t)nP + (size_t)ip];
                }
                t = now_s() - t0;
                if (r == 0 || t < best)
                    best = t;
                if (!hm)
                    continue;
                /* the same queries on the mapped graph, right after */
                t0 = now_s();
                for (q = 0; q < nq; q++) {
                    int e = hnsw_search(hm, sc, query + q * words, (size_t)P[ip],
                                        (size_t)ef[ie], hits_m, &got_m);
                    if (e != MESS_OK) {
                        cli_error("hnsw_search: %s", mess_strerror(e));
                        goto done;
                    }
                }
                t = now_s() - t0;
                if (r == 0 || t < best_m)
                    best_m = t;
                /* the last query's hits: identical on both forms */
                hnsw_search(h, sc, query + (nq - 1) * words, (size_t)P[ip],
                            (size_t)ef[ie], hits, &got);
                if (got != got_m || memcmp(hits, hits_m, got * sizeof *hits) != 0) {
                    cli_error("the mapped graph returned other hits than the heap graph");
                    goto done;
                }
            }
            recall[ip * nef + ie] = (double)good / ((double)nq * (double)P[ip]);
            qps[ip * nef + ie] = best > 0 ? (double)nq / best : 0;
            if (hm) {
                double ratio = best > 0 ? best_m / best : 0;
                qps_m[ip * nef + ie] = best_m > 0 ? (double)nq / best_m : 0;
                ratio_max = ratio > ratio_max ? ratio : ratio_max;
                printf("P=%ld ef=%ld recall=%.4f qps=%.0f qps_mapped=%.0f mapped/heap time %.3f\n",
                       P[ip], ef[ie], recall[ip * nef + ie], qps[ip * nef + ie],
                       qps_m[ip * nef + ie], ratio);
            } else {
                printf("P=%ld ef=%ld recall=%.4f qps=%.0f\n", P[ip], ef[ie],
                       recall[ip * nef + ie], qps[ip * nef + ie]);
            }
        }

    printf("{\"n\":%zu,\"nq\":%zu,\"bits\":%u,\"m\":%ld,\"efc\":%ld,\"popcount\":\"%s\","
           "\"build_s\":%.4f,\"bytes_per_node\":%.1f,\"P\":[",
           n, nq, bits, m, efc, hnsw_popcount_hw() ? "hw" : "soft", build_s,
           (double)hnsw_bytes(h) / (double)n);
    for (ip = 0; ip < nP; ip++)
        printf("%s%ld", ip ? "," : "", P[ip]);
    printf("],\"ef\":[");
    for (ie = 0; ie < nef; ie++)
        printf("%s%ld", ie ? "," : "", ef[ie]);
    printf("],\"recall\":[");
    for (ip = 0; ip < nP; ip++) {
        printf("%s[", ip ? "," : "");
        for (ie = 0; ie < nef; ie++)
            printf("%s%.5f", ie ? "," : "", recall[ip * nef + ie]);
        printf("]");
    }
    printf("],\"qps\":[");
    for (ip = 0; ip < nP; ip++) {
        printf("%s[", ip ? "," : "");
        for (ie = 0; ie < nef; ie++)
            printf("%s%.1f", ie ? "," : "", qps[ip * nef + ie]);
        printf("]");
    }
    printf("]");
    if (hm) {
        printf(",\"mapped_bytes_per_node\":%.1f,\"mapped_time_ratio_max\":%.3f,\"qps_mapped\":[",
               (double)map_len / (double)n, ratio_max);
        for (ip = 0; ip < nP; ip++) {
            printf("%s[", ip ? "," : "");
            for (ie = 0; ie < nef; ie++)
                printf("%s%.1f", ie ? "," : "", qps_m[ip * nef + ie]);
            printf("]");
        }
        printf("]");
    }
    printf("}\n");
    rc = CLI_OK;
done:
    hnsw_scratch_free(sc);
    hnsw_free(hm);
    if (map)
        munmap(map, map_len);
    free(hits_m);
    free(qps_m);
    hnsw_free(h);
    free(base);
    free(query);
    free(kth);
    free(recall);
    free(qps);
    free(hits);
    return rc;
}
