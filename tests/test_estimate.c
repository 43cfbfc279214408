/*
 * test_estimate.c - mess_estimate (mess_experimental.h) against real
 * servers built from the bundled SIFT set: entry and payload counts
 * exactly; the link arrays (upper layers are random) and the shards'
 * graph files (hnsw_write_graph) within 2%; the in-memory server after a
 * save and load (mess_server_stats bytes less the payloads) within 2%;
 * the travel file between its ciphertexts and its bound; then the error
 * paths and the growable-struct contract (mess.h, "Growable structs").
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hnsw_bin.h"
#include "../mess_experimental.h"
#include "store.h"
#include "harness.h"
#include "sift.h"

/* Bytes of the graph files of s's shards (hnsw_write_graph: the hot part
 * of a file-backed server), written to path; 0 on a failure. */
static double graph_file_bytes(const mess_server *s, const char *path)
{
    double total = 0;
    uint8_t digest[32];
    uint32_t j;
    for (j = 0; j < s->p.shards; j++) {
        struct stat sb;
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600), rc;
        if (fd < 0)
            return 0;
        rc = hnsw_write_graph(s->shards[j].graph, fd, digest);
        close(fd);
        if (rc != MESS_OK || stat(path, &sb) != 0)
            return 0;
        total += (double)sb.st_size;
    }
    unlink(path);
    return total;
}

static float *base, *train;
static size_t n_base, n_train, dim;

static const uint8_t seed[32] = {15, 1, 15, 2, 15, 3, 15, 4, 15, 5, 15, 6, 15, 7,
                                 15, 8, 15, 9, 15, 10, 15, 11, 15, 12, 15, 13, 15,
                                 14, 15, 15, 15, 16};

static int rel_close(double got, double want, double tol)
{
    double d = got - want;
    if (d < 0)
        d = -d;
    if (d <= tol * want)
        return 1;
    fprintf(stderr, "  got %.0f, estimated %.0f (%.2f%%, tolerance %.1f%%)\n", got,
            want, 100.0 * (got - want) / want, 100.0 * tol);
    return 0;
}

/* Builds a server of `items` items for client c (parameters p), checks
 * the estimate against it, its travel file and its loaded copy. */
static void check_real(mess_client *c, const mess_params *p, size_t items)
{
    mess_server *s = NULL, *loaded = NULL;
    mess_estimate_result e;
    mess_server_stats st;
    uint64_t *ids = NULL;
    uint8_t *buf = NULL;
    size_t len = 0, i, levels_sum = 0, nodes_sum = 0;
    uint32_t j, *levels = NULL;
    char path[64];
    struct stat sb;
    double links;

    snprintf(path, sizeof path, "/tmp/test_estimate.%ld.srv", (long)getpid());
    CHECK(items <= n_base);
    ids = (uint64_t *)malloc(items * sizeof *ids);
    levels = (uint32_t *)malloc(items * p->per_item * sizeof *levels);
    if (!ids || !levels)
        goto done;
    for (i = 0; i < items; i++)
        ids[i] = 7 * i + 3;
    CHECK_OK(mess_estimate(p, items, &e));
    CHECK_OK(mess_server_new(p, &s));
    if (!c || !s)
        goto done;
    CHECK_OK(mess_client_upload(c, ids, base, items, 2, &buf, &len));
    CHECK_OK(mess_server_apply_upload(s, buf, len, 2));
    CHECK_OK(mess_server_stats_get(s, &st));

    /* counts and the cold part: exact */
    CHECK(e.items == items && e.entries == st.entries);
    CHECK(e.payload_bytes == mess_payload_size(p));
    CHECK(e.arena_bytes == st.entries * mess_payload_size(p));
    CHECK(e.code_bytes == st.entries * (p->kappa / 8));
    CHECK(e.label_bytes == st.entries * mess_label_bytes());

    /* the link arrays: levels, flags, a full layer-0 block per node and
     * (1 + M_hnsw) ids per upper level, summed over the real levels */
    for (j = 0; j < p->shards; j++) {
        size_t n = 0, k;
        CHECK_OK(mess_server_shard_nodes(s, j, &n));
        CHECK_OK(mess_server_shard_levels(s, j, levels, items * p->per_item));
        for (k = 0; k < n; k++)
            levels_sum += levels[k];
        nodes_sum += n;
    }
    CHECK(nodes_sum == st.entries);
    links = (double)nodes_sum * (2.0 + (1.0 + 2.0 * p->hnsw_m) * 4.0) +
            (double)levels_sum * (1.0 + p->hnsw_m) * 4.0;
    CHECK(rel_close(links, (double)e.link_bytes, 0.02));

    /* the graph files: each section page-aligned after a header page */
    CHECK(rel_close(graph_file_bytes(s, path), (double)e.resident_bytes, 0.02));

    /* the travel file: at most the bound (its layer-0 lists are 35-75%
     * full here, by M_hnsw and efConstruction), at least the ciphertexts
     * (they do not compress) */
    CHECK_OK(mess_server_save(s, path));
    CHECK(stat(path, &sb) == 0);
    CHECK((uint64_t)sb.st_size <= e.travel_bytes);
    CHECK((uint64_t)sb.st_size >= e.arena_bytes);

    /* the server in memory as a load leaves it */
    CHECK_OK(mess_server_load(path, p, &loaded));
    if (loaded) {
        CHECK_OK(mess_server_stats_get(loaded, &st));
        /* the graph part (the payloads are exact and would hide it) */
        CHECK(rel_close((double)(st.bytes - e.arena_bytes),
                        (double)(e.memory_bytes - e.arena_bytes), 0.02));
    }
    CHECK(e.memory_per_entry > e.resident_per_entry &&
          e.disk_per_entry > (double)e.payload_bytes);
done:
    unlink(path);
    mess_buf_free(buf);
    mess_server_free(s);
    mess_server_free(loaded);
    free(ids);
    free(levels);
}

static void base_params(mess_params *p)
{
    mess_params_default(p, (uint32_t)dim);
    p->shards = 8;
    p->per_item = 2;
    p->ef_construction = 20;
    p->train_sample = 2000;
}

/* One client (training costs seconds), servers of several sizes. */
static void check_sizes(const mess_params *p, const size_t *sizes, size_t n)
{
    mess_client *c = NULL;
    size_t i;
    CHECK_OK(mess_client_new(p, train, n_train, seed, 2, &c));
    for (i = 0; c && i < n; i++)
        check_real(c, p, sizes[i]);
    mess_client_free(c);
}

static void test_real_default_graph(void)
{
    static const size_t sizes[] = {2000, 6000};
    mess_params p;
    base_params(&p);
    check_sizes(&p, sizes, 2);
}

static void test_real_other_shapes(void)
{
    static const size_t sizes[] = {3000};
    mess_params p;
    base_params(&p);
    p.shards = 16;
    p.per_item = 4;
    p.hnsw_m = 8;
    p.kappa = 256;
    p.payload = MESS_PAYLOAD_F16;
    check_sizes(&p, sizes, 1);
    base_params(&p);
    p.hnsw_m = 32;
    p.payload = MESS_PAYLOAD_I8;
    check_sizes(&p, sizes, 1);
}

/* Large sizes are linear: per-entry figures settle, totals scale. */
static void test_scaling(void)
{
    mess_params p;
    mess_estimate_result a, b;
    mess_params_default(&p, 128);
    CHECK_OK(mess_estimate(&p, 1000000, &a));
    CHECK_OK(mess_estimate(&p, 2000000, &b));
    CHECK(a.entries == 16000000 && a.shard_entries == 250000.0);
    CHECK(a.payload_bytes == 16 + 8 + 128 * 4);
    CHECK(a.arena_bytes == 16000000ull * 536);
    CHECK(b.arena_bytes == 2 * a.arena_bytes);
    CHECK(rel_close(b.resident_per_entry, a.resident_per_entry, 0.15));
    CHECK(rel_close(b.disk_per_entry, a.disk_per_entry, 0.05));
    /* the hot set is the graph, the disk holds the payloads too */
    CHECK(a.resident_bytes >= a.code_bytes + a.label_bytes + a.link_bytes + a.map_bytes);
    CHECK(a.disk_bytes > a.resident_bytes + a.arena_bytes);
    CHECK(a.memory_bytes > a.arena_bytes + a.code_bytes + a.link_bytes);
    CHECK(a.travel_bytes > a.arena_bytes);
}

static void test_errors(void)
{
    mess_params p;
    mess_estimate_result e;
    mess_params_default(&p, 128);
    CHECK_RC(mess_estimate(NULL, 10, &e), MESS_EINVAL);
    CHECK_RC(mess_estimate(&p, 10, NULL), MESS_EINVAL);
    p.kappa = 100; /* not a multiple of 64 */
    CHECK_RC(mess_estimate(&p, 10, &e), MESS_EINVAL);
    mess_params_default(&p, 128);
    p.size = 0;
    CHECK_RC(mess_estimate(&p, 10, &e), MESS_EINVAL);
    mess_params_default(&p, 128);
    /* 2^53 entries; and a shard over HNSW's node limit */
    CHECK_RC(mess_estimate(&p, (uint64_t)1 << 50, &e), MESS_ELIMIT);
    CHECK_RC(mess_estimate(&p, UINT64_MAX, &e), MESS_ELIMIT);
    CHECK_RC(mess_estimate(&p, 20000000000ull, &e), MESS_ELIMIT);
    CHECK_OK(mess_estimate(&p, 10000000000ull, &e)); /* 2.5e9 per shard fits */
    /* no items: empty shards, no per-entry figures */
    CHECK_OK(mess_estimate(&p, 0, &e));
    CHECK(e.entries == 0 && e.arena_bytes == 0 && e.resident_per_entry == 0.0 &&
          e.disk_per_entry == 0.0 && e.resident_bytes > 0);
}

/* The growable-struct contract: the first layout is the whole struct
 * today; the library writes no byte past the size it is given, refuses a
 * size below the first layout, zeroes what a larger (newer) struct has
 * beyond the fields it knows. */
static void test_layout(void)
{
    struct {
        mess_estimate_result r;
        uint8_t tail[64];
    } box;
    mess_params p;
    size_t i;
    int intact = 1;
    mess_params_default(&p, 128);
    CHECK(mess_sizeof_estimate_result() == sizeof(mess_estimate_result));
    CHECK(MESS_ESTIMATE_RESULT_MIN_SIZE <= sizeof(mess_estimate_result));

    memset(&box, 0xA5, sizeof box);
    CHECK_OK(mess_estimate_sized(&p, 1000, &box.r, MESS_ESTIMATE_RESULT_MIN_SIZE));
    CHECK(box.r.size == MESS_ESTIMATE_RESULT_MIN_SIZE && box.r.entries == 16000);
    for (i = MESS_ESTIMATE_RESULT_MIN_SIZE; i < sizeof box; i++)
        if (((uint8_t *)&box)[i] != 0xA5)
            intact = 0;
    CHECK(intact);

    memset(&box, 0xA5, sizeof box);
    CHECK_RC(mess_estimate_sized(&p, 1000, &box.r, MESS_ESTIMATE_RESULT_MIN_SIZE - 1),
             MESS_EINVAL);
    CHECK(((uint8_t *)&box)[0] == 0xA5); /* nothing written */
    CHECK_RC(mess_estimate_sized(&p, 1000, &box.r, 0), MESS_EINVAL);

    memset(&box, 0xA5, sizeof box);
    CHECK_OK(mess_estimate_sized(&p, 1000, &box.r, sizeof box));
    CHECK(box.r.size == sizeof box);
    intact = 1;
    for (i = 0; i < sizeof box.tail; i++)
        if (box.tail[i] != 0)
            intact = 0;
    CHECK(intact);
}

int main(void)
{
    if (test_read_sift(&base, &n_base, NULL, NULL, &train, &n_train, &dim)) {
        printf("cannot read datasets/sift (run from the repository root)\n");
        printf("0 passed, 1 failed\n");
        return 1;
    }
    RUN(test_real_default_graph);
    RUN(test_real_other_shapes);
    RUN(test_scaling);
    RUN(test_errors);
    RUN(test_layout);
    mess_vecs_free(base);
    mess_vecs_free(train);
    HARNESS_END();
}
