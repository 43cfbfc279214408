/*
 * wire.c - headers, sizes and validation of the client/server buffers.
 */
#include "payload.h"
#include "wire.h"

static const char wire_magic[4][4] = {
    {'M', 'S', 'U', 'P'}, {'M', 'S', 'D', 'L'}, {'M', 'S', 'R', 'Q'},
    {'M', 'S', 'R', 'S'}};

void wire_header(struct mess_wr *w, enum wire_kind kind, const mess_params *p)
{
    uint8_t fp[MESS_FINGERPRINT_BYTES];
    params_fingerprint(p, fp);
    mess_wr_bytes(w, wire_magic[kind], 4);
    mess_wr_u32(w, WIRE_VERSION);
    mess_wr_bytes(w, fp, sizeof fp);
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
    out->budgets = mess_rd_take(&r, (size_t)p->shards * 2);
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
                           WIRE_HEADER_BYTES + WIRE_OWNER_BYTES + 8);
}

size_t mess_delete_size(const mess_params *in, size_t items)
{
    mess_params q;
    const mess_params *p = &q;
    if (params_import(in, &q) != MESS_OK || mess_params_check(p) != MESS_OK)
        return 0;
    return checked_records(items, p->per_item, wire_delete_record_bytes(),
                           WIRE_HEADER_BYTES + WIRE_OWNER_BYTES + 8);
}

size_t mess_request_size(const mess_params *in)
{
    mess_params q;
    const mess_params *p = &q;
    if (params_import(in, &q) != MESS_OK || mess_params_check(p) != MESS_OK)
        return 0;
    return WIRE_HEADER_BYTES + WIRE_OWNER_BYTES + WIRE_REQUEST_ID_BYTES +
           (size_t)p->shards * (2 + wire_code_bytes(p));
}

/* Upper bound: every shard returns its full budget. */
size_t mess_response_size(const mess_params *in, size_t pool)
{
    mess_params q;
    const mess_params *p = &q;
    if (params_import(in, &q) != MESS_OK || mess_params_check(p) != MESS_OK)
        return 0;
    return checked_records(pool, 1, payload_entry_bytes(p),
                           WIRE_HEADER_BYTES + WIRE_REQUEST_ID_BYTES +
                               (size_t)p->shards * 2);
}
