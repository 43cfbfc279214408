/*
 * sift.h - the bundled SIFT set (datasets/sift, datasets/README.md) as float
 * vectors, for the tests that build real clients and servers.
 *
 * Include after harness.h and mess_experimental.h (mess_vecs_read_f32).
 */
#ifndef MESS_TEST_SIFT_H
#define MESS_TEST_SIFT_H

/* Reads datasets/sift's base, query and learn files into the arrays whose
 * pointers are given (a NULL array pointer skips that file) and requires
 * one dimension for all of them.  On failure prints which file and why,
 * frees what it read and returns -1; free each array with mess_vecs_free. */
static inline int test_read_sift(float **base, size_t *n_base, float **query,
                                 size_t *n_query, float **learn,
                                 size_t *n_learn, size_t *dim)
{
    static const char *const names[3] = {DATA("sift/base.bvecs"),
                                         DATA("sift/query.bvecs"),
                                         DATA("sift/learn.bvecs")};
    float **out[3];
    size_t *count[3];
    size_t i, d = 0, di;
    int rc = MESS_OK;
    out[0] = base, out[1] = query, out[2] = learn;
    count[0] = n_base, count[1] = n_query, count[2] = n_learn;
    for (i = 0; i < 3; i++)
        if (out[i])
            *out[i] = NULL;
    for (i = 0; i < 3 && rc == MESS_OK; i++) {
        if (!out[i])
            continue;
        rc = mess_vecs_read_f32(names[i], out[i], count[i], &di);
        if (rc != MESS_OK)
            fprintf(stderr, "cannot read %s: %s\n", names[i], mess_strerror(rc));
        else if (d != 0 && di != d) {
            fprintf(stderr, "%s: dimension %zu, the other files %zu\n", names[i],
                    di, d);
            rc = MESS_EFORMAT;
        }
        d = di;
    }
    if (rc != MESS_OK) {
        for (i = 0; i < 3; i++)
            if (out[i]) {
                mess_vecs_free(*out[i]);
                *out[i] = NULL;
            }
        return -1;
    }
    *dim = d;
    return 0;
}

/* The first `rows` vectors of datasets/sift's learn file, each cut to its
 * first `dim` components, in one malloc'd array (free it).  NULL, after
 * printing why, when the file cannot be read or is smaller. */
static inline float *test_sift_learn_rows(size_t rows, size_t dim)
{
    float *learn, *out;
    size_t nl, dl, i, j;
    int rc = mess_vecs_read_f32(DATA("sift/learn.bvecs"), &learn, &nl, &dl);
    if (rc != MESS_OK) {
        fprintf(stderr, "cannot read datasets/sift/learn.bvecs: %s\n", mess_strerror(rc));
        return NULL;
    }
    if (nl < rows || dl < dim) {
        fprintf(stderr, "datasets/sift/learn.bvecs: %zu x %zu, the test needs %zu x %zu\n",
                nl, dl, rows, dim);
        mess_vecs_free(learn);
        return NULL;
    }
    out = (float *)malloc(rows * dim * sizeof *out);
    if (out)
        for (i = 0; i < rows; i++)
            for (j = 0; j < dim; j++)
                out[i * dim + j] = learn[i * dl + j];
    else
        fprintf(stderr, "out of memory\n");
    mess_vecs_free(learn);
    return out;
}

/* The storage tests' small client: the defaults for `dim` components with
 * `shards` shards of 64 bits, `per_item` per item, trained on train[0..n)
 * with a fixed seed; *p gets the parameters.  Prints why on failure. */
static inline int test_small_client(mess_params *p, size_t dim, uint32_t shards,
                                    uint32_t per_item, const float *train, size_t n,
                                    const uint8_t seed[32], mess_client **c)
{
    int rc;
    mess_params_default(p, (uint32_t)dim);
    p->shards = shards;
    p->per_item = per_item;
    p->kappa = 64;
    rc = mess_client_new(p, train, n, seed, 1, c);
    if (rc != MESS_OK)
        fprintf(stderr, "cannot create the test client: %s\n", mess_strerror(rc));
    return rc;
}

#endif
