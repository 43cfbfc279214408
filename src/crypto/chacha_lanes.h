/*
 * chacha_lanes.h - the ChaCha20 block function on many independent inputs
 * at once (internal).
 *
 * libsodium computes one HChaCha20 per call and runs IETF ChaCha20 inputs
 * of fewer than four blocks one block at a time, so a response's peeks
 * (one HChaCha20 per entry), SIVs (one per opened entry) and short
 * vectors (i8, f16) cost a scalar block each.  Here the 20 rounds run on
 * CHACHA_LANES states side by side, each lane with its own key and input:
 * plain C99 loops over the lanes that the compiler turns into SIMD
 * instructions, compiled for the baseline ISA and, on x86-64 with GCC or
 * clang, again for AVX2 behind a run-time CPU check (as hnsw_bin.c does
 * for popcount); the AVX-512 copy is written with intrinsics, its state
 * in 16 registers and its keystream transposed in registers.  Every copy gives the same bits as
 * libsodium's crypto_core_hchacha20 and crypto_stream_chacha20_ietf
 * (tests/test_payload.c compares them on random inputs).
 */
#ifndef MESS_CHACHA_LANES_H
#define MESS_CHACHA_LANES_H

#include <stddef.h>
#include <stdint.h>

#define CHACHA_LANES 16

/* HChaCha20: out[i] = crypto_core_hchacha20(in[i], key[i]) (32 bytes:
 * words 0-3 and 12-15 of the permuted state), for i < n. */
void chacha_hchacha_many(size_t n, const uint8_t *const *key,
                         const uint8_t (*in)[16], uint8_t (*out)[32]);

/* The first 8 bytes of IETF ChaCha20 keystream block ctr[i] of nonce[i]
 * under key[i], as a little-endian u64, for i < n: an entry's id pad. */
void chacha_pad8_many(size_t n, const uint8_t *const *key, const uint32_t *ctr,
                      const uint8_t *const *nonce, uint64_t *pad);

/* One IETF ChaCha20 XOR job: len bytes of src XORed into dst with the
 * keystream of (key, nonce) from block ctr on (ctr + blocks < 2^32). */
struct chacha_job {
    const uint8_t *key;   /* 32 bytes */
    const uint8_t *nonce; /* 12 bytes */
    uint32_t ctr;
    const uint8_t *src;
    uint8_t *dst;         /* may equal src */
    size_t len;
};

/* Runs n jobs, the blocks of all of them packed into lanes together:
 * dst = src XOR crypto_stream_chacha20_ietf_xor_ic(.., ctr, ..) for each. */
void chacha_xor_many(size_t n, const struct chacha_job *jobs);

/* Which core runs: 0 portable C, 1 AVX2, 2 AVX-512 (what the CPU has,
 * or what chacha_lanes_force chose). */
int chacha_lanes_isa(void);

/* -1: the CPU decides (default); 0, 1, 2: that core (MESS_EINVAL if the
 * CPU lacks it).  For tests and benchmarks; not thread-safe.  The one
 * table of these choices: SIMD_CHACHA in src/common/simd.h. */
int chacha_lanes_force(int isa);

#endif
