/*
 * server_open.c - opening a server directory (PLAN D14, docs/PROTOCOL.md
 * "Server directory"): its MANIFEST read and checked, each shard's files
 * mapped (all shards or a subset, src/store/server_store.c), then the
 * write-ahead log's records replayed through the server's own apply
 * (server_apply.c); mess_server_open, mess_server_verify.  The upper
 * half of the directory with server_checkpoint.c: it stands on apply,
 * which stands on the store.
 */
#include <errno.h>

#include <sys/stat.h>

#include <sodium.h>

#include "params.h"
#include "server.h"
#include "wal.h"

/* ---- the write-ahead log's replay (D16, wal.c) ---------------------------- */

/* Record r of the log applied to s.  A subset server applies the part
 * of it that falls on its shards (mess_records_split). */
static int replay_record(mess_server *s, const struct wal_record *r)
{
    uint32_t *held = NULL, j, n = 0;
    uint8_t *part = NULL;
    const uint8_t *buf = r->body;
    size_t len = r->len, missing;
    int rc = MESS_OK;
    if (s->held != s->p.shards && r->kind != WAL_COMPACT) {
        held = (uint32_t *)mess_malloc_array(s->p.shards, sizeof *held);
        if (!held)
            return MESS_ENOMEM;
        for (j = 0; j < s->p.shards; j++)
            if (server_holds(s, j))
                held[n++] = j;
        rc = mess_records_split(&s->p, r->body, r->len, held, n, &part, &len);
        free(held);
        buf = part;
        if (rc == MESS_OK && len != r->len)
            s->log_foreign = 1; /* records of shards it does not hold */
    }
    if (s->held != s->p.shards && r->kind == WAL_COMPACT)
        s->log_foreign = 1;     /* compacts the shards it does not hold too */
    if (rc == MESS_OK)
        rc = r->kind == WAL_UPLOAD ? mess_server_apply_upload(s, buf, len, 1)
           : r->kind == WAL_DELETE ? mess_server_apply_delete(s, buf, len, &missing)
                                   : mess_server_compact(s, 1);
    mess_buf_free(part);
    return rc;
}

/* Opens S/wal for the server's generation, applies its records, and keeps
 * it as the server's log: writable (a torn tail is cut, a stale log
 * emptied), or read-only for a verification (the directory is not
 * changed).  A subset server applies its shards' part of each record. */
int store_open_log(mess_server *s, int writable, char *msg, size_t cap)
{
    struct wal *w = NULL;
    struct wal_record r;
    char *path = store_file_path(s->dir, "wal", 0, 0, NULL);
    char why[256] = "";
    int rc;
    if (!path)
        return mess_fail(msg, cap, MESS_ENOMEM, "out of memory");
    rc = wal_open(path, s->generation, writable ? 0 : WAL_READONLY, &w, why, sizeof why);
    free(path);
    if (rc != MESS_OK)
        return mess_fail(msg, cap, rc, "%s", why[0] ? why : "cannot open the write-ahead log");
    s->replaying = 1;
    while (rc == MESS_OK && wal_replay_next(w, &r)) {
        rc = replay_record(s, &r);
        if (rc != MESS_OK)
            rc = mess_fail(msg, cap, rc, "write-ahead log: record %llu at byte %zu cannot be "
                      "applied: %s", (unsigned long long)r.seq, r.offset,
                      mess_strerror(rc));
    }
    s->replaying = 0;
    if (rc == MESS_OK)
        rc = wal_ready(w); /* changes nothing: a torn tail is cut by the writer */
    if (rc != MESS_OK) {
        wal_close(w);
        return rc;
    }
    s->wal = w;
    return MESS_OK;
}

int store_open(const char *dir, const mess_params *expect, const uint32_t *shards,
               size_t nshards, int mode, mess_server **out, char *msg, size_t cap)
{
    struct store_manifest m;
    mess_server *s = NULL;
    uint8_t *want = NULL;
    uint32_t j;
    int rc;

    if (msg && cap)
        msg[0] = '\0';
    if (out)
        *out = NULL;
    if (!dir || !out || (nshards && !shards))
        return mess_fail(msg, cap, MESS_EINVAL, "invalid argument");
    if (sodium_init() < 0)
        return MESS_ECRYPTO;
    if (!host_little_endian())
        return mess_fail(msg, cap, MESS_EFORMAT, "server directories need a little-endian host");
    rc = store_read_manifest(dir, &m, msg, cap);
    if (rc != MESS_OK)
        return rc;
    if (expect) {
        mess_params e;
        uint8_t fa[MESS_FINGERPRINT_BYTES], fb[MESS_FINGERPRINT_BYTES];
        if (params_import(expect, &e) != MESS_OK) {
            rc = mess_fail(msg, cap, MESS_EINVAL, "invalid expected parameters");
            goto done;
        }
        params_fingerprint(&m.p, fa);
        params_fingerprint(&e, fb);
        if (memcmp(fa, fb, sizeof fa) != 0) {
            rc = mess_fail(msg, cap, MESS_EPARAM, "%s was made for other parameters", dir);
            goto done;
        }
    }
    want = (uint8_t *)calloc(m.p.shards, 1);
    if (!want) {
        rc = mess_fail(msg, cap, MESS_ENOMEM, "out of memory");
        goto done;
    }
    rc = store_shard_set(shards, nshards, m.p.shards, want, msg, cap);
    if (rc != MESS_OK)
        goto done;
    if (nshards == 0)
        memset(want, 1, m.p.shards);
    rc = server_alloc(&m.p, 0, &s);
    if (rc != MESS_OK) {
        rc = mess_fail(msg, cap, rc, "cannot make the server handle");
        goto done;
    }
    s->dir = (char *)malloc(strlen(dir) + 1);
    if (!s->dir) {
        rc = mess_fail(msg, cap, MESS_ENOMEM, "out of memory");
        goto done;
    }
    strcpy(s->dir, dir);
    s->generation = m.generation;
    s->owned = m.owned;
    memcpy(s->owner, m.owner, MESS_OWNER_BYTES);
    s->held = 0;
    for (j = 0; j < m.p.shards; j++) {
        store_take_record(&s->shards[j], &m.shard[j]);
        if (!want[j])
            continue;
        rc = store_load_shard(s, j, &m.shard[j], mode, msg, cap);
        if (rc != MESS_OK)
            goto done;
        s->held++;
    }
    rc = store_open_log(s, mode != STORE_VERIFY, msg, cap);
    if (rc == MESS_OK && mode != STORE_VERIFY)
        store_graphs_readin(s); /* in the background; verify reads every page */
done:
    free(want);
    free(m.shard);
    if (rc == MESS_OK)
        *out = s;
    else
        mess_server_free(s);
    return rc;
}

int mess_server_open(const char *dir, const mess_params *expect,
                     const uint32_t *shards, size_t nshards, mess_server **out)
{
    return store_open(dir, expect, shards, nshards, STORE_LAZY, out, NULL, 0);
}

/* S/LOCK, when there is one, is a regular file: the writers never open
 * it through a link (store_open_lock), and verify names one planted there. */
static int lock_is_plain(const char *dir, char *msg, size_t cap)
{
    struct stat st;
    char *p = store_file_path(dir, "LOCK", 0, 0, NULL);
    int rc = MESS_OK;
    if (!p)
        return mess_fail(msg, cap, MESS_ENOMEM, "out of memory");
    if (lstat(p, &st) == 0 && !S_ISREG(st.st_mode))
        rc = mess_fail(msg, cap, MESS_EFORMAT, "LOCK: %s",
                       S_ISLNK(st.st_mode) ? STORE_LINK_REFUSED : "not a regular file");
    free(p);
    return rc;
}

/* Appends to verify's line what the log's torn tail is (issue 29 item 7):
 * a crash during an append leaves one (that change was never
 * acknowledged), and so does a copy of the directory cut short (then
 * acknowledged changes are lost: the client's count tells, mess verify
 * --client).  The next writer's open cuts it. */
static void log_tail_said(const mess_server *s, char *msg, size_t cap)
{
    const struct wal_scan *sc = s->wal ? wal_info(s->wal) : NULL;
    uint32_t kind;
    uint64_t seq, len;
    size_t used;
    if (!sc || sc->stale || sc->cut == 0 || !msg || cap == 0)
        return;
    used = strlen(msg);
    if (wal_torn_head(s->wal, &kind, &seq, &len))
        mess_say(msg + used, cap - used,
                 "; but the write-ahead log ends in a torn record after its %llu complete "
                 "ones: record %llu (%s, %zu of its %llu bytes present, from byte %zu), "
                 "which the next writer drops (a crash during an append: never "
                 "acknowledged; or a copy cut short: acknowledged changes lost)",
                 (unsigned long long)sc->records, (unsigned long long)seq,
                 kind == WAL_UPLOAD ? "an upload" : kind == WAL_DELETE ? "a delete"
                 : kind == WAL_COMPACT ? "a compaction" : "of unknown kind", sc->cut,
                 (unsigned long long)(len + WAL_OVERHEAD), sc->valid);
    else
        mess_say(msg + used, cap - used,
                 "; but the write-ahead log ends in %zu bytes that are no complete record "
                 "(from byte %zu, after its %llu complete ones), which the next writer "
                 "drops (a crash during an append, or a copy cut short)", sc->cut,
                 sc->valid, (unsigned long long)sc->records);
}

int mess_server_verify(const char *dir, char *msg, size_t msg_cap)
{
    mess_server *s = NULL;
    mess_server_stats st;
    int rc;
    if (!dir || (msg_cap && !msg))
        return MESS_EINVAL;
    rc = store_open(dir, NULL, NULL, 0, STORE_VERIFY, &s, msg, msg_cap);
    if (rc != MESS_OK)
        return rc;
    rc = lock_is_plain(dir, msg, msg_cap);
    if (rc != MESS_OK) {
        mess_server_free(s);
        return rc;
    }
    st.size = sizeof st;
    mess_server_stats_get(s, &st);
    mess_fail(msg, msg_cap, MESS_OK,
         "ok: generation %llu, %u shards, %zu entries (%zu live), every file "
         "matches the manifest", (unsigned long long)s->generation,
         (unsigned)s->p.shards, st.entries, st.live);
    log_tail_said(s, msg, msg_cap);
    mess_server_free(s);
    return MESS_OK;
}
