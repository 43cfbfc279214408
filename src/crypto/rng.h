/*
 * rng.h - the source of every random coin in libmess.  Internal header.
 *
 * A ChaCha20 keystream (libsodium crypto_stream_chacha20) read in blocks.
 * Production mode keys it with 32 bytes from the OS CSPRNG
 * (randombytes_buf) at init: a standard CSPRNG construction that avoids a
 * system call per block.  Deterministic mode keys it with a secret 32-byte
 * seed and uses the 64-bit stream id as the nonce, so separate purposes,
 * items and shards get independent streams that repeat exactly across runs
 * and thread schedules.  Never rand(), never a seed the server can know.
 */
#ifndef MESS_RNG_H
#define MESS_RNG_H

#include <stddef.h>
#include <stdint.h>

#define MESS_RNG_BLOCK 512

/* The buffer is refilled with 128 keystream bytes first, then twice as many
 * each time up to MESS_RNG_BLOCK: a generator that serves one code does not
 * pay for keystream it never reads, a long-lived one amortises the call.
 * The byte stream is the same whatever the refill sizes (the ChaCha20 block
 * counter runs on), so deterministic mode is unaffected. */
struct mess_rng {
    uint8_t key[32];
    uint8_t nonce[8];
    uint64_t counter; /* next 64-byte ChaCha20 block */
    size_t pos;       /* next unread byte of buf */
    size_t fill;      /* valid bytes in buf */
    uint8_t buf[MESS_RNG_BLOCK];
};

/* seed: NULL for the CSPRNG, or 32 secret bytes (deterministic mode).
 * Returns MESS_OK or MESS_ECRYPTO if libsodium cannot initialise. */
int mess_rng_init(struct mess_rng *r, const uint8_t *seed, uint64_t stream_id);
void mess_rng_bytes(struct mess_rng *r, void *out, size_t n);
uint32_t mess_rng_u32(struct mess_rng *r);
uint64_t mess_rng_u64(struct mess_rng *r);
/* Uniform integer in [0, n), n >= 1, without modulo bias. */
uint32_t mess_rng_below(struct mess_rng *r, uint32_t n);
/* Uniform double in [0, 1) with 53 random bits. */
double mess_rng_uniform(struct mess_rng *r);
/* Standard normal (Box-Muller on two 53-bit uniforms). */
double mess_rng_gaussian(struct mess_rng *r);
/* Wipes key and buffered keystream. */
void mess_rng_wipe(struct mess_rng *r);

#endif
