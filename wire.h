/*
 * wire.h - the buffers that cross between client and server.  Internal.
 *
 * Every buffer starts with a 24-byte header:
 *   magic[4] | u32 version (3; other versions are MESS_EVERSION) |
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
 * code = kappa/8 bytes (64-bit words, little-endian); entry = payload.h.
 */
#ifndef MESS_WIRE_H
#define MESS_WIRE_H

#include "params.h"

#define WIRE_HEADER_BYTES 24
#define WIRE_REQUEST_ID_BYTES 16
#define WIRE_OWNER_BYTES MESS_OWNER_BYTES
#define WIRE_VERSION 3
/* A record's label: 16 bytes at offset 4, two u64 (lo | hi). */
#define WIRE_LABEL_BYTES 16
#define WIRE_LABEL_OFFSET 4
#define WIRE_CODE_OFFSET (WIRE_LABEL_OFFSET + WIRE_LABEL_BYTES)

enum wire_kind { WIRE_UPLOAD, WIRE_DELETE, WIRE_REQUEST, WIRE_RESPONSE };

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

size_t wire_code_bytes(const mess_params *p);
size_t wire_upload_record_bytes(const mess_params *p);
size_t wire_delete_record_bytes(void);

/* Reads a code (unaligned bytes) into words. */
void wire_load_code(const uint8_t *src, uint32_t words, uint64_t *code);
void wire_store_code(uint8_t *dst, uint32_t words, const uint64_t *code);

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

/* Splits pool B over M shards as evenly as possible: the first B mod M
 * shards of a rotation starting at `start` get one more. */
void wire_split_pool(uint32_t shards, size_t pool, uint32_t start,
                     uint16_t *budgets);

#endif
