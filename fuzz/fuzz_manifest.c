/*
 * fuzz_manifest.c - the server directory's MANIFEST (server_store.c) as
 * hostile input: parsed on its own, then written over the MANIFEST of a
 * real directory (the fixture server, imported once per process) and
 * opened, so every length, generation and node count it claims meets the
 * real files; any server it opens is searched and checked.  The first
 * byte picks the mode:
 *   0  the MANIFEST as is (magic, version, checksum)
 *   1  the rest with its trailing BLAKE2b-256 recomputed here (every field
 *      past the checksum)
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "payload.h"
#include "server.h"
#include "fuzz.h"

static char dir[4200];

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[4600];
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

/* The fixture server as a directory, made once. */
static const char *fixture_dir(void)
{
    if (!dir[0]) {
        const struct fuzz_fixture *fx = fuzz_fixture();
        char travel[4200];
        snprintf(dir, sizeof dir, "%s", fuzz_tmp_path(".manifest-dir"));
        snprintf(travel, sizeof travel, "%s", fuzz_tmp_path(".manifest-travel"));
        remove_dir();
        if (mess_server_export(fx->server, travel) != MESS_OK ||
            mess_server_import(travel, dir) != MESS_OK)
            fuzz_fail("cannot make the fixture directory");
        unlink(travel);
        atexit(remove_dir);
    }
    return dir;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct fuzz_fixture *fx = fuzz_fixture();
    struct store_manifest m;
    char path[4600], msg[256];
    uint8_t *buf;
    mess_server *s = NULL;
    int rc;

    if (size < 1 || data[0] > 1)
        return 0;
    buf = (uint8_t *)malloc(size);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, size - 1);
    size -= 1;
    if (data[0] == 1 && size >= STORE_DIGEST_BYTES)
        crypto_generichash(buf + size - STORE_DIGEST_BYTES, STORE_DIGEST_BYTES, buf,
                           size - STORE_DIGEST_BYTES, NULL, 0);
    rc = store_manifest_parse(buf, size, &m, msg, sizeof msg);
    if (rc == MESS_OK) {
        uint32_t j;
        for (j = 0; j < m.p.shards; j++)
            if (m.shard[j].arena_bytes != m.shard[j].nodes * payload_entry_bytes(&m.p))
                fuzz_fail("a manifest accepted with an arena length unlike its nodes");
        free(m.shard);
    } else if (!memchr(msg, '\0', sizeof msg) || !msg[0]) {
        fuzz_fail("a refused manifest without a message");
    }
    snprintf(path, sizeof path, "%s/MANIFEST", fixture_dir());
    if (fuzz_write_file(path, buf, size) != 0) {
        free(buf);
        return 0;
    }
    if (store_open(dir, NULL, NULL, 0, 0, &s, msg, sizeof msg) == MESS_OK) {
        mess_server_stats st;
        uint8_t *resp = NULL;
        size_t len = 0;
        if (rc != MESS_OK)
            fuzz_fail("a directory opened with a refused manifest");
        st.size = sizeof st;
        if (mess_server_stats_get(s, &st) != MESS_OK || st.live + st.deleted != st.entries)
            fuzz_fail("stats of an opened server");
        if (mess_server_search(s, fx->request, fx->request_len, 1, &resp, &len) == MESS_OK) {
            if (len > mess_response_size(&fx->p, FUZZ_POOL))
                fuzz_fail("response larger than its bound");
            mess_buf_free(resp);
        }
        mess_server_free(s);
    }
    free(buf);
    return 0;
}
