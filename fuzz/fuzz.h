/*
 * fuzz.h - what the fuzz targets share: a small fixed MESS deployment built
 * from the bundled SIFT data in deterministic mode, so every target, the
 * seed generator and the replay driver see byte-identical clients, servers
 * and requests.
 *
 * Each fuzz_<name>.c defines LLVMFuzzerTestOneInput.  Built with clang
 * -fsanitize=fuzzer it is a libFuzzer binary; linked with replay.c it is a
 * plain program that feeds it every file of fuzz/corpus/<name> and
 * fuzz/regress/<name> (make check).
 */
#ifndef MESS_FUZZ_H
#define MESS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "../mess_experimental.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Items the fixed server holds, and the pool of the fixed query. */
#define FUZZ_ITEMS 48
#define FUZZ_POOL 16

/* The parameters: SIFT's 128 dimensions, small M and graphs for speed. */
void fuzz_params(mess_params *p);

/* The fixed deployment, built once on first use and never freed, always in
 * the same order (so deterministic mode repeats it exactly):
 *   client   trained on datasets/sift/learn.bvecs with a fixed seed
 *   upload   the first FUZZ_ITEMS base vectors (ids fuzz_item_id(i))
 *   server   a server that applied that upload
 *   delete   the delete buffer of the first FUZZ_ITEMS / 4 items
 *   request  the first query vector, pool FUZZ_POOL, and its query state
 *   response the server's real answer to it */
struct fuzz_fixture {
    mess_params p;
    mess_client *client;
    mess_server *server;
    uint8_t *upload, *del, *request, *response;
    size_t upload_len, del_len, request_len, response_len;
    mess_query *query;
    float q[128];     /* the query vector */
    float x[128];     /* base vector 0 */
};
const struct fuzz_fixture *fuzz_fixture(void);
uint64_t fuzz_item_id(size_t i);

/* State-file targets: the first input byte picks how the rest is used.
 *   0  the whole file, as is (container parsing, checksum rejection)
 *   1  a parameter block (64 bytes) and a raw body, wrapped here in a
 *      valid unsealed container (body parsers, past the checksum)
 *   2  a whole file whose trailing checksum is recomputed here (header
 *      fields, lengths, the zstd frame)
 * Writes the resulting file to path; returns 0, or -1 on an I/O error. */
int fuzz_state_file(const char *path, uint32_t role, const uint8_t *data,
                    size_t size);

/* A private temporary path ending in `suffix` for file-reading targets. */
const char *fuzz_tmp_path(const char *suffix);
/* Writes data to path (no fsync: only this process reads it back). */
int fuzz_write_file(const char *path, const uint8_t *data, size_t size);

/* The base graph the delta target applies its inputs to: a small real
 * graph (24 codes, one deleted).  graph != NULL: the graph itself (the
 * caller frees it; file and len untouched); else its graph file
 * (hnsw_write_graph) in *file (kept; do not free), *len bytes.  0 or -1. */
struct hnsw;
int fuzz_delta_base(struct hnsw **graph, uint8_t **file, size_t *len);

/* Aborts with a message: a broken invariant is a finding. */
void fuzz_fail(const char *what);

#endif
