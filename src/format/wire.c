/*
 * wire.c - headers, sizes and validation of the client/server buffers.
 */
#include <stdio.h>

#include "payload.h"
#include "wire.h"

static const char wire_magic[5][4] = {
    {'M', 'S', 'U', 'P'}, {'M', 'S', 'D', 'L'}, {'M', 'S', 'R', 'Q'},
    {'M', 'S', 'R', 'S'}, {'M', 'S', 'R', 'P'}};

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

/* ---- partial responses -------------------------------------------------------- */

size_t wire_partial_bytes(const mess_params *p, size_t sections, size_t entries)
{
    return WIRE_PARTIAL_BODY_OFFSET + sections * WIRE_SECTION_BYTES +
           entries * payload_entry_bytes(p);
}

uint8_t *wire_partial_start(uint8_t *out, const mess_params *p,
                            const uint8_t *request_id, uint32_t sections)
{
    wire_header_put(out, WIRE_PARTIAL, p);
    memcpy(out + WIRE_HEADER_BYTES, request_id, WIRE_REQUEST_ID_BYTES);
    mess_store_u32(out + WIRE_PARTIAL_SECTIONS_OFFSET, sections);
    return out + WIRE_PARTIAL_BODY_OFFSET;
}

uint8_t *wire_partial_put_section(uint8_t *dst, uint32_t shard, size_t count)
{
    mess_store_u32(dst, shard);
    return wire_response_put_count(dst + WIRE_SHARD_BYTES, count);
}

int wire_partial_open(const mess_params *p, const uint8_t *buf, size_t len,
                      struct wire_partial *out)
{
    int rc;
    mess_rd_init(&out->body, buf, len);
    rc = wire_check_header(&out->body, WIRE_PARTIAL, p);
    if (rc != MESS_OK)
        return rc;
    out->request_id = mess_rd_take(&out->body, WIRE_REQUEST_ID_BYTES);
    if (!out->request_id || mess_rd_u32(&out->body, &out->sections) ||
        out->sections == 0 || out->sections > p->shards)
        return MESS_EFORMAT;
    return MESS_OK;
}

const uint8_t *wire_partial_next(struct wire_partial *r, size_t entry_bytes,
                                 uint32_t *shard, uint32_t *count)
{
    uint8_t b[WIRE_BUDGET_BYTES];
    if (mess_rd_u32(&r->body, shard) || mess_rd_bytes(&r->body, b, sizeof b))
        return NULL;
    *count = (uint32_t)b[0] | (uint32_t)b[1] << 8;
    return mess_rd_take(&r->body, (size_t)*count * entry_bytes);
}

/* ---- shard sets: split and merge (D18) ------------------------------------- */

/* Marks the shard set in mark[M] (zeroed by the caller): MESS_EINVAL for an
 * empty set, a shard >= M or one listed twice. */
static int shard_set_mark(const mess_params *p, const uint32_t *shards,
                          size_t nshards, uint8_t *mark)
{
    size_t i;
    if (!shards || nshards == 0 || nshards > p->shards)
        return MESS_EINVAL;
    for (i = 0; i < nshards; i++) {
        if (shards[i] >= p->shards || mark[shards[i]])
            return MESS_EINVAL;
        mark[shards[i]] = 1;
    }
    return MESS_OK;
}

int mess_records_split(const mess_params *in, const uint8_t *buf, size_t len,
                       const uint32_t *shards, size_t nshards, uint8_t **out,
                       size_t *out_len)
{
    mess_params p;
    struct mess_rd r;
    struct wire_records recs;
    enum wire_kind kind;
    const uint8_t *owner;
    uint8_t *mark = NULL, *dst;
    size_t i, keep = 0, bytes;
    int rc;

    if (out)
        *out = NULL;
    if (out_len)
        *out_len = 0;
    if (!in || !buf || !out || !out_len || params_import(in, &p) != MESS_OK ||
        mess_params_check(&p) != MESS_OK)
        return MESS_EINVAL;
    mark = (uint8_t *)calloc(p.shards, 1);
    if (!mark)
        return MESS_ENOMEM;
    rc = shard_set_mark(&p, shards, nshards, mark);
    if (rc != MESS_OK)
        goto done;
    kind = len >= WIRE_MAGIC_BYTES && memcmp(buf, wire_magic[WIRE_DELETE], 4) == 0
               ? WIRE_DELETE
               : WIRE_UPLOAD;
    mess_rd_init(&r, buf, len);
    rc = wire_check_header_owned(&r, kind, &p, &owner);
    if (rc == MESS_OK)
        rc = wire_records_parse(&r, kind, &p, &recs);
    if (rc != MESS_OK)
        goto done;
    /* every record belongs to a shard of the parameters: one that belongs
     * to no group would otherwise be dropped without a word */
    for (i = 0; i < recs.n; i++) {
        uint32_t j = wire_record_shard(wire_record(&recs, i));
        if (j >= p.shards) {
            rc = MESS_EFORMAT;
            goto done;
        }
        keep += mark[j];
    }
    bytes = WIRE_RECORDS_OFFSET + keep * recs.rec_bytes; /* <= len: no overflow */
    dst = (uint8_t *)malloc(bytes);
    if (!dst) {
        rc = MESS_ENOMEM;
        goto done;
    }
    memcpy(dst, buf, WIRE_CLIENT_BODY_OFFSET); /* header and owner tag as they were */
    mess_store_u64(dst + WIRE_CLIENT_BODY_OFFSET, (uint64_t)keep);
    *out = dst;
    *out_len = bytes;
    dst += WIRE_RECORDS_OFFSET;
    for (i = 0; i < recs.n; i++) {
        const uint8_t *rec = wire_record(&recs, i);
        if (mark[wire_record_shard(rec)]) {
            memcpy(dst, rec, recs.rec_bytes);
            dst += recs.rec_bytes;
        }
    }
done:
    free(mark);
    return rc;
}

static const char *header_problem(int rc)
{
    switch (rc) {
    case MESS_EVERSION:
        return "another wire format version";
    case MESS_EPARAM:
        return "made for other parameters";
    default:
        return "not a partial response (magic, header or request id)";
    }
}

int mess_response_merge(const mess_params *in, const uint8_t *req,
                        size_t req_len, const uint8_t *const *parts,
                        const size_t *part_lens, size_t nparts, uint8_t **resp,
                        size_t *resp_len, char *msg, size_t msg_cap)
{
    mess_params p;
    struct wire_request rq;
    size_t eb, i, total = 0, missing = 0, len;
    uint32_t j, first_gap = 0;
    /* per shard: the part that answers it (+1; 0 = none), its count and entries */
    size_t *owner = NULL;
    uint32_t *count = NULL;
    const uint8_t **entries = NULL;
    uint8_t *out, *dst;
    int rc;

    mess_say(msg, msg_cap, "%s", "");
    if (resp)
        *resp = NULL;
    if (resp_len)
        *resp_len = 0;
    if (!in || !req || !parts || !part_lens || nparts == 0 || !resp || !resp_len ||
        params_import(in, &p) != MESS_OK || mess_params_check(&p) != MESS_OK) {
        mess_say(msg, msg_cap, "invalid arguments (parameters, request, parts, outputs)");
        return MESS_EINVAL;
    }
    for (i = 0; i < nparts; i++)
        if (!parts[i]) {
            mess_say(msg, msg_cap, "part %zu is NULL", i);
            return MESS_EINVAL;
        }
    rc = wire_request_parse(&p, req, req_len, &rq);
    if (rc != MESS_OK) {
        mess_say(msg, msg_cap, "the request is not a valid request for these parameters");
        return rc;
    }
    eb = payload_entry_bytes(&p);
    owner = (size_t *)calloc(p.shards, sizeof *owner);
    count = (uint32_t *)calloc(p.shards, sizeof *count);
    entries = (const uint8_t **)calloc(p.shards, sizeof *entries);
    if (!owner || !count || !entries) {
        rc = MESS_ENOMEM;
        mess_say(msg, msg_cap, "out of memory");
        goto done;
    }
    for (i = 0; i < nparts; i++) {
        struct wire_partial w;
        uint32_t s, shard, c, prev = 0;
        memset(&w, 0, sizeof w);
        rc = wire_partial_open(&p, parts[i], part_lens[i], &w);
        if (rc != MESS_OK) {
            if (rc == MESS_EFORMAT && w.request_id)
                mess_say(msg, msg_cap, "part %zu: section count must be 1..%u",
                    i, (unsigned)p.shards);
            else
                mess_say(msg, msg_cap, "part %zu: %s", i, header_problem(rc));
            goto done;
        }
        if (memcmp(w.request_id, rq.request_id, WIRE_REQUEST_ID_BYTES) != 0) {
            rc = MESS_EAUTH;
            mess_say(msg, msg_cap, "part %zu answers another request (request id differs)", i);
            goto done;
        }
        for (s = 0; s < w.sections; s++) {
            const uint8_t *e = wire_partial_next(&w, eb, &shard, &c);
            rc = MESS_EFORMAT;
            if (!e) {
                mess_say(msg, msg_cap, "part %zu: section %u is cut short", i, (unsigned)s);
                goto done;
            }
            if (shard >= p.shards || (s > 0 && shard <= prev)) {
                mess_say(msg, msg_cap,
                    "part %zu: section %u names shard %lu (shards must be "
                    "below %u and increasing)", i, (unsigned)s,
                    (unsigned long)shard, (unsigned)p.shards);
                goto done;
            }
            if (c > wire_request_budget(&rq, shard)) {
                mess_say(msg, msg_cap, "part %zu: shard %u returns %u entries, over its budget %u",
                    i, (unsigned)shard, (unsigned)c,
                    (unsigned)wire_request_budget(&rq, shard));
                goto done;
            }
            if (owner[shard]) {
                mess_say(msg, msg_cap, "overlap: shard %u is answered by parts %zu and %zu",
                    (unsigned)shard, owner[shard] - 1, i);
                goto done;
            }
            owner[shard] = i + 1;
            count[shard] = c;
            entries[shard] = e;
            total += c;
            prev = shard;
        }
        if (mess_rd_left(&w.body) != 0) {
            rc = MESS_EFORMAT;
            mess_say(msg, msg_cap, "part %zu: %zu bytes after its last section", i,
                mess_rd_left(&w.body));
            goto done;
        }
    }
    for (j = 0; j < p.shards; j++)
        if (!owner[j] && missing++ == 0)
            first_gap = j;
    if (missing) {
        rc = MESS_EFORMAT;
        mess_say(msg, msg_cap, "gap: %zu shard(s) answered by no part, the first is shard %u",
            missing, (unsigned)first_gap);
        goto done;
    }
    len = wire_response_bytes(&p, total); /* the parts hold these bytes: no overflow */
    out = (uint8_t *)malloc(len);
    if (!out) {
        rc = MESS_ENOMEM;
        mess_say(msg, msg_cap, "out of memory");
        goto done;
    }
    dst = wire_response_start(out, &p, rq.request_id);
    for (j = 0; j < p.shards; j++) {
        dst = wire_response_put_count(dst, count[j]);
        if (count[j])
            memcpy(dst, entries[j], (size_t)count[j] * eb);
        dst += (size_t)count[j] * eb;
    }
    *resp = out;
    *resp_len = len;
    rc = MESS_OK;
done:
    free(owner);
    free(count);
    free((void *)entries);
    return rc;
}
