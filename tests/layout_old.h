/*
 * layout_old.h - the declarations an older libmess header made, for
 * tests/test_layout.c: a caller compiled against it (its own struct
 * definitions, each lacking the fields added after the first layout; the
 * same symbols) must keep working with this library ("Growable structs"
 * in mess.h).  Deliberately not including mess.h.
 */
#ifndef MESS_LAYOUT_OLD_H
#define MESS_LAYOUT_OLD_H

#include <stddef.h>
#include <stdint.h>

#define MESS_OK          0
#define MESS_EINVAL    (-1)
#define MESS_EAUTH     (-7)

/* mess_params without train_sample */
typedef struct mess_params {
    uint32_t size;
    uint32_t dim, metric, kappa, shards, per_item;
    double p_store, p_prr, p_irr;
    uint32_t hnsw_m, ef_construction, ef_search, payload;
} mess_params;

/* mess_finish_stats without unopened */
typedef struct mess_finish_stats {
    uint32_t size;
    size_t candidates, unique, auth_failures;
} mess_finish_stats;

/* mess_server_stats without min_shard, max_shard */
typedef struct mess_server_stats {
    uint32_t size;
    size_t entries, live, deleted, bytes;
} mess_server_stats;

typedef struct mess_client mess_client;
typedef struct mess_server mess_server;
typedef struct mess_query mess_query;

const char *mess_strerror(int code);
int mess_params_default_sized(mess_params *p, size_t size, uint32_t dim);
#define mess_params_default(p, dim) mess_params_default_sized((p), sizeof *(p), (dim))
int mess_params_check(const mess_params *p);
int mess_client_new(const mess_params *p, const float *train, size_t n,
                    const uint8_t *seed, unsigned threads, mess_client **out);
void mess_client_free(mess_client *c);
int mess_client_params_sized(const mess_client *c, mess_params *out, size_t size);
#define mess_client_params(c, out) mess_client_params_sized((c), (out), sizeof *(out))
int mess_server_new(const mess_params *p, mess_server **out);
void mess_server_free(mess_server *s);
int mess_client_upload(mess_client *c, const uint64_t *ids, const float *vectors,
                       size_t n, unsigned threads, uint8_t **buf, size_t *len);
int mess_server_apply_upload(mess_server *s, const uint8_t *buf, size_t len,
                             unsigned threads);
size_t mess_upload_size(const mess_params *p, size_t items);
int mess_client_request(mess_client *c, const float *q, size_t pool,
                        mess_query **q_out, uint8_t **req, size_t *req_len);
int mess_server_search(const mess_server *s, const uint8_t *req, size_t req_len,
                       unsigned threads, uint8_t **resp, size_t *resp_len);
int mess_client_finish_sized(const mess_client *c, const mess_query *q,
                             const uint8_t *resp, size_t resp_len, size_t k,
                             uint64_t *ids, float *dists, size_t *n_out,
                             mess_finish_stats *stats, size_t stats_size);
#define mess_client_finish(c, q, resp, resp_len, k, ids, dists, n_out, stats) \
    mess_client_finish_sized((c), (q), (resp), (resp_len), (k), (ids), \
                             (dists), (n_out), (stats), sizeof(mess_finish_stats))
void mess_query_free(mess_query *q);
void mess_buf_free(uint8_t *buf);
int mess_server_stats_get_sized(const mess_server *s, mess_server_stats *out,
                                size_t size);
#define mess_server_stats_get(s, out) mess_server_stats_get_sized((s), (out), sizeof *(out))

#endif
