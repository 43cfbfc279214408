/*
 * client_state.c - the client state file's body (serialise and load, and
 * the public save and load); statefile.c wraps it in the container.  The
 * server's body (its travel form) is src/server/server_state.c's.
 */
#include <sodium.h>

#include "client.h"
#include "isohash.h"
#include "statefile.h"

/* ------------------------------------------------------------------------
 * State file
 *
 * Client body: u32 version (3) | u8 deterministic | u64 op counter |
 *              master key[32] | isohash |
 *              u64 g | g x (u64 id | u32 generation | u8 deleted),
 *              ids strictly ascending (the generation map) |
 *              u64 uploads applied | u64 deletes applied (version 3)
 * Version 2 (libmess before issue 29 item 7) has no counts: it loads
 * with them unknown (mess_client_applied: MESS_ENOTFOUND).
 * ---------------------------------------------------------------------- */

#define CLIENT_BODY_VERSION 3
#define CLIENT_BODY_UNCOUNTED 2 /* the last version without the counts */

int mess_client_save(const mess_client *c, const char *path,
                     const char *passphrase)
{
    return mess_client_save_pass(c, path, passphrase,
                                 passphrase ? strlen(passphrase) : 0);
}

/* The client file at path: replaced (create 0), or created only if
 * nothing is there (create 1: statefile_create, MESS_EEXIST). */
static int client_save_as(const mess_client *c, const char *path,
                   const char *passphrase, size_t passphrase_len, int create)
{
    struct mess_wr w;
    int rc;
    if (!c || !path || (passphrase != NULL) != (passphrase_len != 0))
        return MESS_EINVAL;
    static const uint8_t placeholder[KEY_BYTES];
    mess_wr_init(&w);
    mess_wr_u32(&w, CLIENT_BODY_VERSION);
    mess_wr_u8(&w, (uint8_t)c->deterministic);
    mess_wr_u64(&w, c->op_counter);
    /* The key goes in last, once the buffer has stopped growing: a realloc
     * would leave copies of it in freed memory. */
    mess_wr_bytes(&w, placeholder, KEY_BYTES);
    rc = isohash_serialize(c->hash, &w);
    if (rc == MESS_OK) {
        size_t i;
        mess_wr_u64(&w, (uint64_t)c->ngens);
        for (i = 0; i < c->ngens; i++) {
            mess_wr_u64(&w, c->gens[i].id);
            mess_wr_u32(&w, c->gens[i].gen);
            mess_wr_u8(&w, c->gens[i].deleted);
        }
        /* a client loaded from a version 2 file stays uncounted: written
         * as UINT64_MAX, never a count a later check would trust */
        mess_wr_u64(&w, c->applied_unknown ? UINT64_MAX : c->applied_uploads);
        mess_wr_u64(&w, c->applied_unknown ? UINT64_MAX : c->applied_deletes);
        rc = w.err;
    }
    if (rc == MESS_OK)
        memcpy(w.p + 4 + 1 + 8, c->keys->master, KEY_BYTES);
    if (rc == MESS_OK)
        rc = (create ? statefile_create : statefile_write)(
            path, STATEFILE_CLIENT, &c->p, w.p, w.len, passphrase,
            passphrase_len, 0600);
    if (w.p)
        sodium_memzero(w.p, w.len);
    mess_wr_free(&w);
    return rc;
}

int mess_client_note_applied(mess_client *c, uint64_t uploaded, uint64_t deleted)
{
    if (!c)
        return MESS_EINVAL;
    client_lock(c);
    if (!c->applied_unknown) {
        /* saturating at UINT64_MAX - 1: UINT64_MAX means unknown */
        c->applied_uploads = uploaded < UINT64_MAX - 1 - c->applied_uploads
                                 ? c->applied_uploads + uploaded : UINT64_MAX - 1;
        c->applied_deletes = deleted < UINT64_MAX - 1 - c->applied_deletes
                                 ? c->applied_deletes + deleted : UINT64_MAX - 1;
    }
    client_unlock(c);
    return MESS_OK;
}

int mess_client_applied(const mess_client *c, uint64_t *uploaded, uint64_t *deleted)
{
    int rc = MESS_OK;
    if (uploaded)
        *uploaded = 0;
    if (deleted)
        *deleted = 0;
    if (!c || !uploaded || !deleted)
        return MESS_EINVAL;
    client_lock_read(c);
    if (c->applied_unknown)
        rc = MESS_ENOTFOUND;
    else
        *uploaded = c->applied_uploads, *deleted = c->applied_deletes;
    client_unlock(c);
    return rc;
}

int mess_client_save_pass(const mess_client *c, const char *path,
                          const char *passphrase, size_t passphrase_len)
{
    int rc;
    if (!c)
        return MESS_EINVAL;
    client_lock_read(c);
    rc = client_save_as(c, path, passphrase, passphrase_len, 0);
    client_unlock(c);
    return rc;
}

int mess_client_save_new(const mess_client *c, const char *path,
                         const char *passphrase, size_t passphrase_len)
{
    int rc;
    if (!c)
        return MESS_EINVAL;
    client_lock_read(c);
    rc = client_save_as(c, path, passphrase, passphrase_len, 1);
    client_unlock(c);
    return rc;
}

/* The generation map of a client file: hostile input, every count checked
 * against the bytes present, ids strictly ascending, flags 0 or 1. */
#define GEN_RECORD_BYTES 13
static int gens_deserialize(struct mess_rd *r, mess_client *c)
{
    uint64_t g, i;
    if (mess_rd_u64(r, &g) || g > mess_rd_left(r) / GEN_RECORD_BYTES)
        return MESS_EFORMAT;
    c->gens = (struct gen_entry *)mess_malloc_array(g ? (size_t)g : 1, sizeof *c->gens);
    if (!c->gens)
        return MESS_ENOMEM;
    for (i = 0; i < g; i++) {
        struct gen_entry *e = &c->gens[i];
        if (mess_rd_u64(r, &e->id) || mess_rd_u32(r, &e->gen) ||
            mess_rd_u8(r, &e->deleted) || e->deleted > 1 ||
            (i > 0 && e->id <= c->gens[i - 1].id))
            return MESS_EFORMAT;
        c->ngens = (size_t)i + 1;
    }
    return MESS_OK;
}

int mess_client_load(const char *path, const char *passphrase,
                     mess_client **out)
{
    return mess_client_load_pass(path, passphrase,
                                 passphrase ? strlen(passphrase) : 0, out);
}

int mess_client_load_pass(const char *path, const char *passphrase,
                          size_t passphrase_len, mess_client **out)
{
    mess_params p;
    mess_client *c = NULL;
    uint8_t *raw = NULL, det;
    size_t raw_len = 0;
    struct mess_rd r;
    uint32_t version;
    int rc;

    if (out)
        *out = NULL;
    if (!path || !out || (passphrase != NULL) != (passphrase_len != 0))
        return MESS_EINVAL;
    rc = statefile_read(path, STATEFILE_CLIENT, passphrase, passphrase_len, &p, &raw,
                        &raw_len);
    if (rc != MESS_OK)
        return rc;
    rc = client_alloc(&p, &c);
    if (rc != MESS_OK)
        goto done;
    mess_rd_init(&r, raw, raw_len);
    rc = MESS_EFORMAT;
    if (mess_rd_u32(&r, &version) || mess_rd_u8(&r, &det) ||
        mess_rd_u64(&r, &c->op_counter) ||
        mess_rd_bytes(&r, c->keys->master, KEY_BYTES))
        goto done;
    if (version != CLIENT_BODY_VERSION && version != CLIENT_BODY_UNCOUNTED) {
        rc = MESS_EVERSION;
        goto done;
    }
    if (det > 1)
        goto done;
    c->deterministic = det;
    client_keys_derive(c);
    rc = isohash_deserialize(&r, &c->hash);
    if (rc == MESS_OK)
        rc = gens_deserialize(&r, c);
    if (rc != MESS_OK)
        goto done;
    c->applied_unknown = 1;
    if (version == CLIENT_BODY_VERSION) {
        if (mess_rd_u64(&r, &c->applied_uploads) || mess_rd_u64(&r, &c->applied_deletes)) {
            rc = MESS_EFORMAT;
            goto done;
        }
        c->applied_unknown = c->applied_uploads == UINT64_MAX;
    }
    if (mess_rd_left(&r) != 0 || isohash_dim(c->hash) != p.dim ||
        isohash_kappa(c->hash) != p.kappa || isohash_shards(c->hash) != p.shards) {
        rc = MESS_EFORMAT;
        goto done;
    }
    *out = c;
    c = NULL;
    rc = MESS_OK;
done:
    mess_client_free(c);
    statefile_free_raw(raw, raw_len);
    return rc;
}
