/*
 * statefile.c - compressed, checksummed, atomically replaced (or created,
 * never replacing a file) state files, optionally sealed under a
 * passphrase (Argon2id + XChaCha20-Poly1305).
 */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_customMem, ZSTD_create?Ctx_advanced */
#include <zstd.h>
#include <zstd_errors.h>

#include "atomicfile.h"
#include "statefile.h"

static const uint8_t statefile_magic[8] = {'M', 'E', 'S', 'S', 'S', 'T', 'A', 'T'};
#define STATEFILE_VERSION MESS_STATE_FILE_VERSION
#define FLAG_SEALED 1u
#define HEADER_BYTES (20 + MESS_PARAMS_BYTES + 16)
#define SALT_BYTES crypto_pwhash_SALTBYTES
#define SEAL_NONCE_BYTES crypto_aead_xchacha20poly1305_ietf_NPUBBYTES
#define SEAL_BYTES (SALT_BYTES + 16 + SEAL_NONCE_BYTES)
#define SUM_BYTES 32
#define ZSTD_LEVEL 3
/* A body that claims to expand beyond this ratio is hostile, not ours. */
#define MAX_EXPANSION 1024
/* Sealed body, before encryption: u64 raw length | u64 zstd length | zstd
 * frame | zero padding to padme(16 + zstd length). */
#define INNER_HDR 16

/* Padme (Nikitin et al., PURBs, PETS 2019): L rounded up so that only its
 * top floor(log2 E) + 1 bits remain, E = floor(log2 L).  Overhead at most
 * about 1 / (2 log2 L); a length reveals O(log log L) bits.  0 when the
 * rounded length would not fit. */
size_t statefile_padme(size_t len)
{
    unsigned e = 0, s = 0;
    size_t x, mask;
    if (len < 2)
        return len;
    for (x = len; x > 1; x >>= 1)
        e++;
    for (x = e; x > 1; x >>= 1)
        s++;
    s++; /* floor(log2 e) + 1 */
    if (e <= s)
        return len;
    mask = ((size_t)1 << (e - s)) - 1;
    if (len > SIZE_MAX - mask)
        return 0;
    return (len + mask) & ~mask;
}

/* zstd's working memory holds what it compresses or decompresses (a client
 * body's master key among the literals): it allocates through these, which
 * keep each block's size in front of it and wipe the whole block before
 * freeing it.  16 bytes of header keep malloc's alignment. */
#define WIPE_HDR 16
static void *wipe_alloc(void *opaque, size_t size)
{
    uint8_t *b;
    (void)opaque;
    if (size > SIZE_MAX - WIPE_HDR)
        return NULL;
    b = (uint8_t *)malloc(size + WIPE_HDR);
    if (!b)
        return NULL;
    memcpy(b, &size, sizeof size);
    return b + WIPE_HDR;
}

static void wipe_free(void *opaque, void *p)
{
    uint8_t *b;
    size_t size;
    (void)opaque;
    if (!p)
        return;
    b = (uint8_t *)p - WIPE_HDR;
    memcpy(&size, b, sizeof size);
    sodium_memzero(b, size + WIPE_HDR);
    free(b);
}

static const ZSTD_customMem wipe_mem = {wipe_alloc, wipe_free, NULL};

/* ZSTD_compress / ZSTD_decompress through a context on wipe_mem; zstd's
 * memory_allocation error code when the context cannot be made. */
#define ZSTD_NO_MEMORY ((size_t)0 - (size_t)ZSTD_error_memory_allocation)
static size_t compress_wiped(void *dst, size_t cap, const void *src, size_t len)
{
    ZSTD_CCtx *cc = ZSTD_createCCtx_advanced(wipe_mem);
    size_t r;
    if (!cc)
        return ZSTD_NO_MEMORY;
    r = ZSTD_compressCCtx(cc, dst, cap, src, len, ZSTD_LEVEL);
    ZSTD_freeCCtx(cc);
    return r;
}

static size_t decompress_wiped(void *dst, size_t cap, const void *src, size_t len)
{
    ZSTD_DCtx *dc = ZSTD_createDCtx_advanced(wipe_mem);
    size_t r;
    if (!dc)
        return ZSTD_NO_MEMORY;
    r = ZSTD_decompressDCtx(dc, dst, cap, src, len);
    ZSTD_freeDCtx(dc);
    return r;
}

static int derive_key(const char *pass, size_t pass_len, const uint8_t *salt,
                      unsigned long long ops, size_t mem, uint8_t key[32])
{
    if (crypto_pwhash(key, 32, pass, pass_len, salt, ops, mem,
                      crypto_pwhash_ALG_ARGON2ID13) != 0)
        return MESS_ENOMEM;
    return MESS_OK;
}

/* statefile_write (create 0: replaces path) and statefile_create (create
 * 1: path must not exist). */
static int write_state(const char *path, uint32_t role, const mess_params *p,
                       const uint8_t *raw, size_t raw_len,
                       const char *passphrase, size_t pass_len, unsigned mode,
                       int create)
{
    struct mess_wr w;
    size_t bound, zlen, zcap, hdr_len, body_len, stored_len;
    uint8_t *z = NULL, *q, key[32];
    int sealed = passphrase != NULL, rc;

    if (!path || !p || (!raw && raw_len) || (passphrase != NULL) != (pass_len != 0))
        return MESS_EINVAL; /* an empty passphrase seals nothing */
    if (sodium_init() < 0)
        return MESS_ECRYPTO;
    /* Sealed: the zstd frame goes after the 16 bytes of inner header into a
     * buffer already as long as the padded body can get (padme is
     * monotonic), so nothing holding it is reallocated. */
    bound = ZSTD_compressBound(raw_len);
    if (ZSTD_isError(bound) || bound > SIZE_MAX / 2)
        return MESS_ELIMIT;
    zcap = sealed ? statefile_padme(INNER_HDR + bound) : bound;
    if (zcap == 0)
        return MESS_ELIMIT;
    z = (uint8_t *)malloc(zcap ? zcap : 1);
    if (!z)
        return MESS_ENOMEM;
    zlen = compress_wiped(z + (sealed ? INNER_HDR : 0), bound, raw, raw_len);
    if (ZSTD_isError(zlen)) {
        sodium_memzero(z, zcap);
        free(z);
        return MESS_ENOMEM;
    }
    if (sealed) {
        mess_store_u64(z, raw_len);
        mess_store_u64(z + 8, zlen);
        body_len = statefile_padme(INNER_HDR + zlen);
        /* zstd may have used the output past the frame as scratch */
        memset(z + INNER_HDR + zlen, 0, body_len - INNER_HDR - zlen);
        stored_len = body_len + crypto_aead_xchacha20poly1305_ietf_ABYTES;
    } else {
        body_len = stored_len = zlen;
    }

    mess_wr_init(&w);
    mess_wr_bytes(&w, statefile_magic, 8);
    mess_wr_u32(&w, STATEFILE_VERSION);
    mess_wr_u32(&w, role);
    mess_wr_u32(&w, sealed ? FLAG_SEALED : 0);
    params_encode(p, &w);
    mess_wr_u64(&w, sealed ? 0 : raw_len); /* sealed: inside the ciphertext */
    mess_wr_u64(&w, stored_len);
    if (sealed) {
        uint8_t seal[SEAL_BYTES];
        unsigned long long ops = crypto_pwhash_OPSLIMIT_INTERACTIVE;
        size_t mem = crypto_pwhash_MEMLIMIT_INTERACTIVE;
        randombytes_buf(seal, SALT_BYTES);
        mess_store_u64(seal + SALT_BYTES, ops);
        mess_store_u64(seal + SALT_BYTES + 8, mem);
        randombytes_buf(seal + SALT_BYTES + 16, SEAL_NONCE_BYTES);
        mess_wr_bytes(&w, seal, SEAL_BYTES);
        rc = derive_key(passphrase, pass_len, seal, ops, mem, key);
        if (rc != MESS_OK) {
            sodium_memzero(z, zcap);
            free(z);
            mess_wr_free(&w);
            return rc;
        }
    }
    hdr_len = w.len;
    /* body and checksum reserved at once: no realloc copies the body */
    q = mess_wr_reserve(&w, stored_len + SUM_BYTES);
    if (q)
        w.len -= SUM_BYTES;
    if (q && sealed) {
        unsigned long long clen;
        crypto_aead_xchacha20poly1305_ietf_encrypt(
            q, &clen, z, body_len, w.p, hdr_len, NULL,
            w.p + HEADER_BYTES + SALT_BYTES + 16, key);
    } else if (q) {
        memcpy(q, z, zlen);
    }
    sodium_memzero(key, sizeof key);
    /* the compressed body of a client holds its keys */
    sodium_memzero(z, zcap);
    free(z);
    q = mess_wr_reserve(&w, SUM_BYTES);
    if (q)
        crypto_generichash(q, SUM_BYTES, w.p, w.len - SUM_BYTES, NULL, 0);
    if (w.err)
        rc = w.err;
    else if (create)
        rc = atomicfile_create(path, w.p, w.len, mode);
    else
        rc = atomicfile_replace(path, w.p, w.len, mode);
    if (w.p)
        sodium_memzero(w.p, w.cap);
    mess_wr_free(&w);
    return rc;
}

int statefile_write(const char *path, uint32_t role, const mess_params *p,
                    const uint8_t *raw, size_t raw_len,
                    const char *passphrase, size_t pass_len, unsigned mode)
{
    return write_state(path, role, p, raw, raw_len, passphrase, pass_len, mode, 0);
}

int statefile_create(const char *path, uint32_t role, const mess_params *p,
                     const uint8_t *raw, size_t raw_len,
                     const char *passphrase, size_t pass_len, unsigned mode)
{
    return write_state(path, role, p, raw, raw_len, passphrase, pass_len, mode, 1);
}

/* Reads a whole regular file with read(2) (no stdio buffer keeps a copy of
 * an unsealed client's keys).  On MESS_EIO, errno says why. */
static int read_file(const char *path, uint8_t **out, size_t *len)
{
    struct stat st;
    uint8_t *buf;
    size_t n, got = 0;
    int fd = atomicfile_open_file(path, O_RDONLY, 0, &st), err;
    if (fd < 0)
        return MESS_EIO;
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX / 2) {
        close(fd);
        return MESS_ELIMIT;
    }
    n = (size_t)st.st_size;
    buf = (uint8_t *)malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        return MESS_ENOMEM;
    }
    while (got < n) {
        ssize_t k = read(fd, buf + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            err = k < 0 ? errno : EIO; /* shrank while being read */
            sodium_memzero(buf, got);
            free(buf);
            close(fd);
            errno = err;
            return MESS_EIO;
        }
        got += (size_t)k;
    }
    close(fd);
    *out = buf;
    *len = n;
    return MESS_OK;
}

void statefile_free_raw(uint8_t *raw, size_t raw_len)
{
    if (raw) {
        sodium_memzero(raw, raw_len);
        free(raw);
    }
}

int statefile_read(const char *path, uint32_t role, const char *passphrase,
                   size_t pass_len, mess_params *p, uint8_t **raw_out,
                   size_t *raw_len_out)
{
    uint8_t *file = NULL, *raw = NULL, *z = NULL, sum[SUM_BYTES], key[32];
    const uint8_t *magic, *body, *seal = NULL;
    size_t flen = 0, hdr_len, zlen, zcap = 0, got;
    uint32_t version, frole, flags;
    uint64_t raw_len, stored_len;
    struct mess_rd r;
    int rc;

    if (!path || !p || !raw_out || !raw_len_out ||
        (passphrase != NULL) != (pass_len != 0))
        return MESS_EINVAL;
    *raw_out = NULL;
    *raw_len_out = 0;
    if (sodium_init() < 0)
        return MESS_ECRYPTO;
    rc = read_file(path, &file, &flen);
    if (rc != MESS_OK)
        return rc;
    rc = MESS_EFORMAT;
    mess_rd_init(&r, file, flen);
    magic = mess_rd_take(&r, 8);
    if (!magic || memcmp(magic, statefile_magic, 8) != 0)
        goto done;
    if (mess_rd_u32(&r, &version) || mess_rd_u32(&r, &frole) ||
        mess_rd_u32(&r, &flags))
        goto done;
    if (version < MESS_STATE_FILE_VERSION_MIN || version > STATEFILE_VERSION) {
        rc = MESS_EVERSION; /* mess_state_file_peek says which */
        goto done;
    }
    if (flen < SUM_BYTES)
        goto done;
    crypto_generichash(sum, SUM_BYTES, file, flen - SUM_BYTES, NULL, 0);
    if (sodium_memcmp(sum, file + flen - SUM_BYTES, SUM_BYTES) != 0)
        goto done; /* truncated or corrupted */
    if (frole != role) {
        rc = (frole == STATEFILE_CLIENT || frole == STATEFILE_SERVER ||
              frole == STATEFILE_QUERY)
                 ? MESS_EROLE : MESS_EFORMAT;
        goto done;
    }
    if ((flags & ~FLAG_SEALED) != 0)
        goto done;
    if (params_decode(&r, p) || mess_rd_u64(&r, &raw_len) ||
        mess_rd_u64(&r, &stored_len))
        goto done;
    if (flags & FLAG_SEALED) {
        seal = mess_rd_take(&r, SEAL_BYTES);
        if (!seal)
            goto done;
    } else if (passphrase) {
        /* Whoever can write the file could otherwise plant an unsealed
         * client with keys of their choosing under a sealed one's name. */
        rc = MESS_EPASS;
        goto done;
    }
    hdr_len = r.off;
    if (stored_len != (uint64_t)mess_rd_left(&r) - SUM_BYTES)
        goto done;
    body = mess_rd_take(&r, (size_t)stored_len);
    if (!body)
        goto done;
    zlen = (size_t)stored_len;
    if (seal) {
        unsigned long long ops = mess_load_u64(seal + SALT_BYTES);
        uint64_t mem = mess_load_u64(seal + SALT_BYTES + 8);
        unsigned long long mlen;
        size_t i;
        uint8_t pad = 0;
        if (!passphrase) {
            rc = MESS_EPASS;
            goto done;
        }
        if (raw_len != 0 || /* a sealed file keeps it inside */
            zlen < crypto_aead_xchacha20poly1305_ietf_ABYTES + INNER_HDR ||
            ops < crypto_pwhash_OPSLIMIT_MIN || ops > crypto_pwhash_OPSLIMIT_SENSITIVE ||
            mem < crypto_pwhash_MEMLIMIT_MIN || mem > crypto_pwhash_MEMLIMIT_SENSITIVE)
            goto done;
        rc = derive_key(passphrase, pass_len, seal, ops, (size_t)mem, key);
        if (rc != MESS_OK)
            goto done;
        zcap = zlen;
        z = (uint8_t *)malloc(zcap);
        if (!z) {
            rc = MESS_ENOMEM;
            goto done;
        }
        if (crypto_aead_xchacha20poly1305_ietf_decrypt(
                z, &mlen, NULL, body, zlen, file, hdr_len,
                seal + SALT_BYTES + 16, key) != 0) {
            rc = MESS_EPASS;
            goto done;
        }
        rc = MESS_EFORMAT;
        raw_len = mess_load_u64(z);
        stored_len = mess_load_u64(z + 8); /* now: the zstd frame's length */
        if (stored_len > (uint64_t)mlen - INNER_HDR)
            goto done;
        for (i = INNER_HDR + (size_t)stored_len; i < (size_t)mlen; i++)
            pad |= z[i];
        if (pad != 0)
            goto done;
        zlen = (size_t)stored_len;
        body = z + INNER_HDR;
    }
    if (raw_len > (stored_len + 4096) * MAX_EXPANSION || raw_len > SIZE_MAX / 2) {
        rc = MESS_ELIMIT;
        goto done;
    }
    raw = (uint8_t *)malloc(raw_len ? (size_t)raw_len : 1);
    if (!raw) {
        rc = MESS_ENOMEM;
        goto done;
    }
    got = decompress_wiped(raw, (size_t)raw_len, body, zlen);
    if (ZSTD_isError(got) || got != raw_len) {
        /* zstd allocates its decompression context: out of memory there
         * is not a damaged file */
        rc = ZSTD_isError(got) && ZSTD_getErrorCode(got) == ZSTD_error_memory_allocation
                 ? MESS_ENOMEM
                 : MESS_EFORMAT;
        goto done;
    }
    *raw_out = raw;
    *raw_len_out = (size_t)raw_len;
    raw = NULL;
    rc = MESS_OK;
done:
    sodium_memzero(key, sizeof key);
    if (raw)
        statefile_free_raw(raw, (size_t)raw_len);
    if (z) {
        sodium_memzero(z, zcap);
        free(z);
    }
    sodium_memzero(file, flen); /* an unsealed client file holds its keys */
    free(file);
    return rc;
}

int mess_state_file_peek(const char *path, uint32_t *version, uint32_t *role,
                         int *sealed)
{
    struct stat st;
    uint8_t h[20];
    size_t got = 0;
    int fd, err;
    if (!path || !version || !role || !sealed)
        return MESS_EINVAL;
    fd = atomicfile_open_file(path, O_RDONLY, 0, &st);
    if (fd < 0)
        return MESS_EIO;
    while (got < sizeof h) {
        ssize_t k = read(fd, h + got, sizeof h - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            err = errno;
            close(fd);
            errno = err;
            return MESS_EIO;
        }
        if (k == 0)
            break;
        got += (size_t)k;
    }
    close(fd);
    if (got < sizeof h || memcmp(h, statefile_magic, 8) != 0)
        return MESS_EFORMAT;
    *version = mess_load_u32(h + 8);
    *role = mess_load_u32(h + 12);
    *sealed = (mess_load_u32(h + 16) & FLAG_SEALED) != 0;
    return MESS_OK;
}
