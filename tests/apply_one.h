/*
 * apply_one.h - one item's upload or delete made by the client and applied
 * by the server at once, with the node ids each shard's graph gained: how
 * the storage-side privacy tests (test_averaging, test_update_attack) find
 * the entries of one upload.  Define SHARDS (the client's shard count)
 * before including it.
 */
#ifndef MESS_TEST_APPLY_ONE_H
#define MESS_TEST_APPLY_ONE_H

#include "../mess.h"
#include "../mess_experimental.h"

/* Node ids of shard j added by one apply: [before, after). */
struct added {
    size_t before[SHARDS], after[SHARDS];
};

static int apply_one(mess_client *c, mess_server *s, uint64_t id,
                     const float *x, struct added *a)
{
    uint8_t *buf;
    size_t len;
    uint32_t j;
    int rc;
    for (j = 0; j < SHARDS; j++)
        mess_server_shard_nodes(s, j, &a->before[j]);
    rc = mess_client_upload(c, &id, x, 1, 1, &buf, &len);
    if (rc != MESS_OK)
        return rc;
    rc = mess_server_apply_upload(s, buf, len, 1);
    mess_buf_free(buf);
    for (j = 0; j < SHARDS; j++)
        mess_server_shard_nodes(s, j, &a->after[j]);
    return rc;
}

static int delete_one(mess_client *c, mess_server *s, uint64_t id)
{
    uint8_t *buf;
    size_t len, missing = 0;
    int rc = mess_client_delete(c, &id, 1, &buf, &len);
    if (rc != MESS_OK)
        return rc;
    rc = mess_server_apply_delete(s, buf, len, &missing);
    mess_buf_free(buf);
    return rc == MESS_OK && missing != 0 ? MESS_ENOTFOUND : rc;
}

#endif
