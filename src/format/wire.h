/*
 * wire.h - the buffers that cross between client and server.  Internal.
 *
 * This module alone knows their layout: the protocol's files, the tests
 * (tests/harness.h) and the fuzz targets build and read buffers through
 * the functions below; Python mirrors it in python/mess/wire.py, which a
 * test checks against the library's size functions.
 *
 * Every buffer starts with a 24-byte header:
 *   magic[4] | u32 version (WIRE_VERSION, 3; others are MESS_EVERSION) |
 *   parameter fingerprint[16]
 * and its length is exact: a parser checks every count against the bytes
 * that are actually there before touching them.  The client's buffers then
 * carry its owner tag (mess.h, "Owner tag").
 *
 * upload   "MSUP" hdr | owner[16] | u64 n | n x (u32 shard | label[16] | code | entry)
 * delete   "MSDL" hdr | owner[16] | u64 n | n x (u32 shard | label[16])
 * request  "MSRQ" hdr | owner[16] | request id[16] | M x u16 budget | M x code
 * response "MSRS" hdr | request id[16] | for each shard in order:
 *                       u16 count (<= its budget) | count x entry
 * partial  "MSRP" hdr | request id[16] | u32 k (1..M) | k sections, shards
 *                       strictly increasing: u32 shard | u16 count | count x entry
 *          (the answer of a server searching a shard subset, D18; the
 *          partials of a request covering every shard exactly once merge
 *          into the response the whole server gives, byte for byte)
 * code = kappa/8 bytes (64-bit words, little-endian); entry = payload.h.
 */
#ifndef MESS_WIRE_H
#define MESS_WIRE_H

#include "params.h"

#define WIRE_VERSION 3
#define WIRE_MAGIC_BYTES 4
#define WIRE_VERSION_OFFSET WIRE_MAGIC_BYTES /* u32 after the magic */
#define WIRE_HEADER_BYTES 24 /* magic | version | fingerprint */
#define WIRE_REQUEST_ID_BYTES 16
#define WIRE_OWNER_BYTES MESS_OWNER_BYTES
#define WIRE_COUNT_BYTES 8   /* u64 record count of upload and delete */
#define WIRE_BUDGET_BYTES 2  /* u16 budget of a request, count of a response */
/* A record: u32 shard | label (two u64, lo | hi) | ... */
#define WIRE_SHARD_BYTES 4
#define WIRE_LABEL_BYTES 16
#define WIRE_LABEL_OFFSET WIRE_SHARD_BYTES
#define WIRE_CODE_OFFSET (WIRE_LABEL_OFFSET + WIRE_LABEL_BYTES)
/* Where the client's buffers' bodies start (after header and owner tag). */
#define WIRE_CLIENT_BODY_OFFSET (WIRE_HEADER_BYTES + WIRE_OWNER_BYTES)
/* Where the records of an upload or delete start (after their count). */
#define WIRE_RECORDS_OFFSET (WIRE_CLIENT_BODY_OFFSET + WIRE_COUNT_BYTES)
/* Where a request's id and budgets start. */
#define WIRE_REQUEST_ID_OFFSET WIRE_CLIENT_BODY_OFFSET
#define WIRE_REQUEST_BUDGETS_OFFSET (WIRE_REQUEST_ID_OFFSET + WIRE_REQUEST_ID_BYTES)
/* Where a response's per-shard counts start. */
#define WIRE_RESPONSE_BODY_OFFSET (WIRE_HEADER_BYTES + WIRE_REQUEST_ID_BYTES)
/* A partial response: its u32 section count follows the request id, then
 * each section is u32 shard | u16 count | entries. */
#define WIRE_PARTIAL_SECTIONS_OFFSET WIRE_RESPONSE_BODY_OFFSET
#define WIRE_PARTIAL_BODY_OFFSET (WIRE_PARTIAL_SECTIONS_OFFSET + 4)
#define WIRE_SECTION_BYTES (WIRE_SHARD_BYTES + WIRE_BUDGET_BYTES)

enum wire_kind { WIRE_UPLOAD, WIRE_DELETE, WIRE_REQUEST, WIRE_RESPONSE, WIRE_PARTIAL };

/* ---- header ---------------------------------------------------------------- */

/* Writes the header of `kind` for parameters p (WIRE_HEADER_BYTES). */
void wire_header_put(uint8_t *dst, enum wire_kind kind, const mess_params *p);
/* Appends the header of `kind` for parameters p. */
void wire_header(struct mess_wr *w, enum wire_kind kind, const mess_params *p);
/* The header followed by the client's owner tag (upload, delete, request). */
void wire_header_owned(struct mess_wr *w, enum wire_kind kind,
                       const mess_params *p, const uint8_t *owner);
/* Checks magic, version and fingerprint; leaves r after the header.
 * MESS_EFORMAT, MESS_EVERSION or MESS_EPARAM. */
int wire_check_header(struct mess_rd *r, enum wire_kind kind,
                      const mess_params *p);
/* wire_check_header, then the owner tag: *owner points into the buffer. */
int wire_check_header_owned(struct mess_rd *r, enum wire_kind kind,
                            const mess_params *p, const uint8_t **owner);

/* ---- sizes ----------------------------------------------------------------- */

size_t wire_code_bytes(const mess_params *p);
size_t wire_upload_record_bytes(const mess_params *p);
size_t wire_delete_record_bytes(void);
/* Where a request's M codes start. */
size_t wire_request_codes_offset(const mess_params *p);
/* A response carrying `entries` entries in total. */
size_t wire_response_bytes(const mess_params *p, size_t entries);

/* Reads a code (unaligned bytes) into words. */
void wire_load_code(const uint8_t *src, uint32_t words, uint64_t *code);
void wire_store_code(uint8_t *dst, uint32_t words, const uint64_t *code);

/* ---- upload and delete ------------------------------------------------------ */

/* Appends header, owner tag and the u64 record count of an upload or a
 * delete; the records follow. */
void wire_records_begin(struct mess_wr *w, enum wire_kind kind,
                        const mess_params *p, const uint8_t *owner,
                        uint64_t records);
/* Writes an upload record's shard, label and code at rec; returns where
 * its entry (payload_entry_bytes) goes. */
uint8_t *wire_upload_record_put(uint8_t *rec, const mess_params *p,
                                uint32_t shard, const uint8_t *label,
                                const uint64_t *code);
/* Appends a delete record. */
void wire_delete_record_put(struct mess_wr *w, uint32_t shard,
                            const uint8_t *label);

/* The records of an upload or delete, after its checked header and owner
 * tag (r is left there by wire_check_header_owned): the count must match
 * the bytes exactly (MESS_EFORMAT otherwise). */
struct wire_records {
    const uint8_t *recs;
    size_t n, rec_bytes;
};
int wire_records_parse(struct mess_rd *r, enum wire_kind kind,
                       const mess_params *p, struct wire_records *out);
static inline const uint8_t *wire_record(const struct wire_records *r, size_t i)
{
    return r->recs + i * r->rec_bytes;
}
static inline uint32_t wire_record_shard(const uint8_t *rec)
{
    return mess_load_u32(rec);
}
static inline const uint8_t *wire_record_label(const uint8_t *rec)
{
    return rec + WIRE_LABEL_OFFSET;
}
/* An upload record's code into words; returns its entry. */
const uint8_t *wire_upload_record_code(const uint8_t *rec,
                                       const mess_params *p, uint64_t *code);

/* ---- request ------------------------------------------------------------------ */

/* Appends the header and owner tag of a request and reserves its body;
 * returns the body for wire_request_put, or NULL (w->err set). */
uint8_t *wire_request_begin(struct mess_wr *w, const mess_params *p,
                            const uint8_t *owner);
/* Fills a reserved request body: id, M budgets, M codes (M x words). */
void wire_request_put(uint8_t *body, const mess_params *p,
                      const uint8_t *request_id, const uint16_t *budgets,
                      const uint64_t *codes);

/* A validated request: pointers into the caller's buffer. */
struct wire_request {
    const uint8_t *owner;   /* WIRE_OWNER_BYTES */
    const uint8_t *request_id;
    const uint8_t *budgets; /* M x u16 */
    const uint8_t *codes;   /* M x code */
};
int wire_request_parse(const mess_params *p, const uint8_t *buf, size_t len,
                       struct wire_request *out);
static inline uint32_t wire_request_budget(const struct wire_request *q,
                                           uint32_t shard)
{
    return (uint32_t)q->budgets[2 * shard] | (uint32_t)q->budgets[2 * shard + 1] << 8;
}
/* Shard j's code of a request into words. */
void wire_request_code(const struct wire_request *q, const mess_params *p,
                       uint32_t shard, uint64_t *code);

/* Splits pool B over M shards as evenly as possible: the first B mod M
 * shards of a rotation starting at `start` get one more. */
void wire_split_pool(uint32_t shards, size_t pool, uint32_t start,
                     uint16_t *budgets);

/* ---- response ----------------------------------------------------------------- */

/* Writes a response's header and request id at out (sized by
 * wire_response_bytes); returns where the first shard's count goes. */
uint8_t *wire_response_start(uint8_t *out, const mess_params *p,
                             const uint8_t *request_id);
/* Writes shard's count; returns where its entries go. */
uint8_t *wire_response_put_count(uint8_t *dst, size_t count);

/* A response being read: after wire_response_open, the request id; then
 * wire_response_next gives each shard's entries in order. */
struct wire_response {
    const uint8_t *request_id;
    struct mess_rd body; /* the per-shard counts and entries */
};
/* Checks the header and takes the request id (MESS_EFORMAT, MESS_EVERSION,
 * MESS_EPARAM). */
int wire_response_open(const mess_params *p, const uint8_t *buf, size_t len,
                       struct wire_response *out);
/* The next shard's entries (*count of them, entry_bytes each), or NULL
 * when the count or the entries are cut short. */
const uint8_t *wire_response_next(struct wire_response *r, size_t entry_bytes,
                                  uint32_t *count);
/* The response's shape is what was asked: M shards, each at most its
 * budget, nothing after; *total entries.  MESS_EFORMAT otherwise. */
int wire_response_check(const struct wire_response *r, const mess_params *p,
                        const uint16_t *budgets, size_t *total);

/* ---- partial response (a shard subset's answer) ---------------------------- */

/* A partial response of `sections` shards carrying `entries` in total. */
size_t wire_partial_bytes(const mess_params *p, size_t sections, size_t entries);
/* Writes a partial's header, request id and section count at out (sized
 * by wire_partial_bytes); returns where the first section goes. */
uint8_t *wire_partial_start(uint8_t *out, const mess_params *p,
                            const uint8_t *request_id, uint32_t sections);
/* Writes a section's shard and count; returns where its entries go. */
uint8_t *wire_partial_put_section(uint8_t *dst, uint32_t shard, size_t count);

/* A partial being read: after wire_partial_open, the request id and the
 * section count (1..M, else MESS_EFORMAT); wire_partial_next gives each
 * section in order. */
struct wire_partial {
    const uint8_t *request_id;
    uint32_t sections;
    struct mess_rd body;
};
int wire_partial_open(const mess_params *p, const uint8_t *buf, size_t len,
                      struct wire_partial *out);
/* The next section's shard, count and entries, or NULL when it is cut
 * short (nothing is checked against M or the budgets here). */
const uint8_t *wire_partial_next(struct wire_partial *r, size_t entry_bytes,
                                 uint32_t *shard, uint32_t *count);

#endif
