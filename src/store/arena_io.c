/*
 * arena_io.c - reading returned entries from the mapped payload arenas
 * (docs/PROTOCOL.md "Reading the payload"): whether an entry's pages are
 * cached, asking the kernel for them ahead of the copy, and lifting the
 * random advice around a read of a whole arena.  The advice itself
 * (mess_server_set_advice, store_arena_advise) is server_store.c's.
 */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE /* mincore */
#endif
#include <sys/mman.h>
#include <unistd.h>

#include "store.h"

/* The page-aligned start of node's ciphertext in st's arena and the
 * length from there to the entry's end. */
static void *entry_pages(const struct shard_store *st, size_t entry_bytes, size_t node,
                         size_t *len)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t at = (uintptr_t)(st->arena + node * entry_bytes);
    uintptr_t lo = at - at % page;
    *len = (size_t)(at + entry_bytes - lo);
    return (void *)lo;
}

void store_entry_willneed(const struct shard_store *st, size_t entry_bytes, size_t node)
{
    size_t len;
    /* the length may end anywhere: the mapping's last page is whole */
    void *p = entry_pages(st, entry_bytes, node, &len);
    posix_madvise(p, len, POSIX_MADV_WILLNEED);
}

int store_entry_cached(const struct shard_store *st, size_t entry_bytes, size_t node)
{
#if defined(__linux__)
    unsigned char vec[4];
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len, n, i;
    void *p = entry_pages(st, entry_bytes, node, &len);
    n = (len + page - 1) / page;
    if (n > sizeof vec)
        n = sizeof vec; /* a larger entry: its first pages tell */
    if (mincore(p, n * page, vec) != 0)
        return -1;
    for (i = 0; i < n; i++)
        if (!(vec[i] & 1))
            return 0;
    return 1;
#else
    (void)st;
    (void)entry_bytes;
    (void)node;
    return -1; /* no mincore: unknown */
#endif
}

void store_arena_sweep(const struct shard_store *st, int sweep)
{
    void *m = (void *)(uintptr_t)st->arena;
    if (!st->arena || !st->arena_map)
        return;
    if (sweep)
        posix_madvise(m, st->arena_map, POSIX_MADV_NORMAL);
    else
        store_arena_advise(m, st->arena_map);
}
