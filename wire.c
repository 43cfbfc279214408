/*
 * wire.c - headers, sizes and validation of the client/server buffers.
 */
#include "payload.h"
#include "wire.h"

static const char wire_magic[4][4] = {
    {'M', 'S', 'U', 'P'}, {'M', 'S', 'D', 'L'}, {'M', 'S', 'R', 'Q'},
    {'M', 'S', 'R', 'S'}};

void wire_header_put(uint8_t *dst, enum wire_kind kind, const mess_params *p)
{
    memcpy(dst, wire_magic[kind], WIRE_MAGIC_BYTES);
    mess_store_u32(dst + WIRE_VERSION_OFFSET, WIRE_VERSION);
    params_fingerprint(p, dst + WIRE_VERSION_OFFSET + 4);
}

void wire_header(struct mess_wr *w, enum wire_kind kind, const mess_params *p)
{
    uint8_t *dst = mess_wr_reserve(w, WIRE_HEADER_BYTES);
    if (dst)
        wire_header_put(dst, kind, p);
}

void wire_header_owned(struct mess_wr *w, enum wire_kind kind,
                       const mess_params *p, const uint8_t *owner)
{
    wire_header(w, kind, p);
    mess_wr_bytes(w, owner, WIRE_OWNER_BYTES);
}

int wire_check_header_owned(struct mess_rd *r, enum wire_kind kind,
                            const mess_params *p, const uint8_t **owner)
{
    int rc = wire_check_header(r, kind, p);
    if (rc != MESS_OK)
        return rc;
    *owner = mess_rd_take(r, WIRE_OWNER_BYTES);
    return *owner ? MESS_OK : MESS_EFORMAT;
}

int wire_check_header(struct mess_rd *r, enum wire_kind kind,
                      const mess_params *p)
{
    uint8_t fp[MESS_FINGERPRINT_BYTES];
    const uint8_t *magic = mess_rd_take(r, 4), *got;
    uint32_t version;
    if (!magic || memcmp(magic, wire_magic[kind], 4) != 0)
        return MESS_EFORMAT;
    if (mess_rd_u32(r, &version))
        return MESS_EFORMAT;
    if (version != WIRE_VERSION)
        return MESS_EVERSION;
    got = mess_rd_take(r, MESS_FINGERPRINT_BYTES);
    if (!got)
        return MESS_EFORMAT;
    params_fingerprint(p, fp);
    return memcmp(fp, got, sizeof fp) == 0 ? MESS_OK : MESS_EPARAM;
}

size_t wire_code_bytes(const mess_params *p)
{
    return (size_t)p->kappa / 8;
}

size_t wire_upload_record_bytes(const mess_params *p)
{
    return WIRE_CODE_OFFSET + wire_code_bytes(p) + payload_entry_bytes(p);
}

size_t wire_delete_record_bytes(void)
{
    return WIRE_CODE_OFFSET;
}

size_t wire_request_codes_offset(const mess_params *p)
{
    return WIRE_REQUEST_BUDGETS_OFFSET + (size_t)p->shards * WIRE_BUDGET_BYTES;
}

size_t wire_response_bytes(const mess_params *p, size_t entries)
{
    return WIRE_RESPONSE_BODY_OFFSET + (size_t)p->shards * WIRE_BUDGET_BYTES +
           entries * payload_entry_bytes(p);
}

void wire_load_code(const uint8_t *src, uint32_t words, uint64_t *code)
{
    uint32_t i;
    for (i = 0; i < words; i++)
        code[i] = mess_load_u64(src + 8 * i);
}

void wire_store_code(uint8_t *dst, uint32_t words, const uint64_t *code)
{
    uint32_t i;
    for (i = 0; i < words; i++)
        mess_store_u64(dst + 8 * i, code[i]);
}

void wire_records_begin(struct mess_wr *w, enum wire_kind kind,
                        const mess_params *p, const uint8_t *owner,
                        uint64_t records)
{
    wire_header_owned(w, kind, p, owner);
    mess_wr_u64(w, records);
}

uint8_t *wire_upload_record_put(uint8_t *rec, const mess_params *p,
                                uint32_t shard, const uint8_t *label,
                                const uint64_t *code)
{
    mess_store_u32(rec, shard);
    memcpy(rec + WIRE_LABEL_OFFSET, label, WIRE_LABEL_BYTES);
    wire_store_code(rec + WIRE_CODE_OFFSET, params_words(p), code);
    return rec + WIRE_CODE_OFFSET + wire_code_bytes(p);
}

void wire_delete_record_put(struct mess_wr *w, uint32_t shard,
                            const uint8_t *label)
{
    mess_wr_u32(w, shard);
    mess_wr_bytes(w, label, WIRE_LABEL_BYTES);
}

int wire_records_parse(struct mess_rd *r, enum wire_kind kind,
                       const mess_params *p, struct wire_records *out)
{
    uint64_t n;
    size_t bytes;
    out->rec_bytes = kind == WIRE_UPLOAD ? wire_upload_record_bytes(p)
                                         : wire_delete_record_bytes();
    if (mess_rd_u64(r, &n))
        return MESS_EFORMAT;
    if (n > SIZE_MAX || mess_mul_size((size_t)n, out->rec_bytes, &bytes) != MESS_OK ||
        bytes != mess_rd_left(r))
        return MESS_EFORMAT;
    out->n = (size_t)n;
    out->recs = mess_rd_take(r, bytes);
    return MESS_OK;
}

const uint8_t *wire_upload_record_code(const uint8_t *rec,
                                       const mess_params *p, uint64_t *code)
{
    wire_load_code(rec + WIRE_CODE_OFFSET, params_words(p), code);
    return rec + WIRE_CODE_OFFSET + wire_code_bytes(p);
}

uint8_t *wire_request_begin(struct mess_wr *w, const mess_params *p,
                            const uint8_t *owner)
{
    wire_header_owned(w, WIRE_REQUEST, p, owner);
    return mess_wr_reserve(w, WIRE_REQUEST_ID_BYTES +
                                  (size_t)p->shards * (WIRE_BUDGET_BYTES + wire_code_bytes(p)));
}

void wire_request_put(uint8_t *body, const mess_params *p,
                      const uint8_t *request_id, const uint16_t *budgets,
                      const uint64_t *codes)
{
    uint32_t j, words = params_words(p);
    size_t cb = wire_code_bytes(p);
    memcpy(body, request_id, WIRE_REQUEST_ID_BYTES);
    body += WIRE_REQUEST_ID_BYTES;
    for (j = 0; j < p->shards; j++, body += WIRE_BUDGET_BYTES) {
        body[0] = (uint8_t)budgets[j];
        body[1] = (uint8_t)(budgets[j] >> 8);
    }
    for (j = 0; j < p->shards; j++)
        wire_store_code(body + (size_t)j * cb, words, codes + (size_t)j * words);
}

void wire_request_code(const struct wire_request *q, const mess_params *p,
                       uint32_t shard, uint64_t *code)
{
    wire_load_code(q->codes + (size_t)shard * wire_code_bytes(p), params_words(p), code);
}

int wire_request_parse(const mess_params *p, const uint8_t *buf, size_t len,
                       struct wire_request *out)
{
    struct mess_rd r;
    int rc;
    if (!buf)
        return MESS_EINVAL;
    mess_rd_init(&r, buf, len);
    rc = wire_check_header_owned(&r, WIRE_REQUEST, p, &out->owner);
    if (rc != MESS_OK)
        return rc;
    out->request_id = mess_rd_take(&r, WIRE_REQUEST_ID_BYTES);
    out->budgets = mess_rd_take(&r, (size_t)p->shards * WIRE_BUDGET_BYTES);
    out->codes = mess_rd_take(&r, (size_t)p->shards * wire_code_bytes(p));
    if (!out->request_id || !out->budgets || !out->codes || mess_rd_left(&r) != 0)
        return MESS_EFORMAT;
    return MESS_OK;
}

void wire_split_pool(uint32_t shards, size_t pool, uint32_t start,
                     uint16_t *budgets)
{
    size_t base = pool / shards, extra = pool % shards;
    uint32_t j;
    for (j = 0; j < shards; j++) {
        uint32_t pos = (j + shards - start % shards) % shards;
        size_t b = base + (pos < extra ? 1 : 0);
        budgets[j] = (uint16_t)(b > MESS_MAX_BUDGET ? MESS_MAX_BUDGET : b);
    }
}

uint8_t *wire_response_start(uint8_t *out, const mess_params *p,
                             const uint8_t *request_id)
{
    wire_header_put(out, WIRE_RESPONSE, p);
    memcpy(out + WIRE_HEADER_BYTES, request_id, WIRE_REQUEST_ID_BYTES);
    return out + WIRE_RESPONSE_BODY_OFFSET;
}

uint8_t *wire_response_put_count(uint8_t *dst, size_t count)
{
    dst[0] = (uint8_t)count;
    dst[1] = (uint8_t)(count >> 8);
    return dst + WIRE_BUDGET_BYTES;
}

int wire_response_open(const mess_params *p, const uint8_t *buf, size_t len,
                       struct wire_response *out)
{
    int rc;
    mess_rd_init(&out->body, buf, len);
    rc = wire_check_header(&out->body, WIRE_RESPONSE, p);
    if (rc != MESS_OK)
        return rc;
    out->request_id = mess_rd_take(&out->body, WIRE_REQUEST_ID_BYTES);
    return out->request_id ? MESS_OK : MESS_EFORMAT;
}

const uint8_t *wire_response_next(struct wire_response *r, size_t entry_bytes,
                                  uint32_t *count)
{
    uint8_t b[WIRE_BUDGET_BYTES];
    if (mess_rd_bytes(&r->body, b, sizeof b))
        return NULL;
    *count = (uint32_t)b[0] | (uint32_t)b[1] << 8;
    return mess_rd_take(&r->body, (size_t)*count * entry_bytes);
}

int wire_response_check(const struct wire_response *r, const mess_params *p,
                        const uint16_t *budgets, size_t *total)
{
    struct wire_response s = *r;
    size_t eb = payload_entry_bytes(p);
    uint32_t j, count;
    *total = 0;
    for (j = 0; j < p->shards; j++) {
        if (!wire_response_next(&s, eb, &count) || count > budgets[j])
            return MESS_EFORMAT;
        *total += count;
    }
    return mess_rd_left(&s.body) == 0 ? MESS_OK : MESS_EFORMAT;
}

/* fixed + n * per * rec, or 0 if that overflows size_t (no buffer that
 * large can exist, and 0 is the "invalid" answer of these functions). */
static size_t checked_records(size_t n, size_t per, size_t rec, size_t fixed)
{
    size_t total;
    if (mess_mul_size(n, per, &total) || mess_mul_size(total, rec, &total) ||
        mess_add_size(total, fixed, &total))
        return 0;
    return total;
}

size_t mess_upload_size(const mess_params *in, size_t items)
{
    mess_params q;
    const mess_params *p = &q;
    if (params_import(in, &q) != MESS_OK || mess_params_check(p) != MESS_OK)
        return 0;
    return checked_records(items, p->per_item, wire_upload_record_bytes(p),
                           WIRE_CLIENT_BODY_OFFSET + WIRE_COUNT_BYTES);
}

size_t mess_delete_size(const mess_params *in, size_t items)
{
    mess_params q;
    const mess_params *p = &q;
    if (params_import(in, &q) != MESS_OK || mess_params_check(p) != MESS_OK)
        return 0;
    return checked_records(items, p->per_item, wire_delete_record_bytes(),
                           WIRE_CLIENT_BODY_OFFSET + WIRE_COUNT_BYTES);
}

size_t mess_request_size(const mess_params *in)
{
    mess_params q;
    const mess_params *p = &q;
    if (params_import(in, &q) != MESS_OK || mess_params_check(p) != MESS_OK)
        return 0;
    return WIRE_CLIENT_BODY_OFFSET + WIRE_REQUEST_ID_BYTES +
           (size_t)p->shards * (WIRE_BUDGET_BYTES + wire_code_bytes(p));
}

/* Upper bound: every shard returns its full budget. */
size_t mess_response_size(const mess_params *in, size_t pool)
{
    mess_params q;
    const mess_params *p = &q;
    if (params_import(in, &q) != MESS_OK || mess_params_check(p) != MESS_OK)
        return 0;
    return checked_records(pool, 1, payload_entry_bytes(p),
                           WIRE_RESPONSE_BODY_OFFSET +
                               (size_t)p->shards * WIRE_BUDGET_BYTES);
}
