/*
 * fuzz_wal.c - the write-ahead log reader (wal_scan, wal_open) on hostile
 * bytes, read as the log of manifest generation 7 (the seeds' own).
 * Whatever it accepts must be consistent: the kept prefix and the cut tail
 * add up to the input, the records it yields tile the prefix in seq order,
 * the prefix alone reads back with nothing cut, one more record appended
 * to the prefix reads as one more, and opening the bytes as a file gives
 * the same answer as scanning them.  A refusal must say why.
 */
#include <unistd.h>

#include "wal.h"
#include "fuzz.h"

#define FUZZ_WAL_GEN 7

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct wal_scan sc, again;
    struct wal_record r;
    struct mess_wr w;
    struct wal *f = NULL;
    char msg[256];
    size_t pos = 0, end = 0;
    uint64_t n = 0, g;
    int rc, frc;

    rc = wal_scan(data, size, FUZZ_WAL_GEN, &sc, msg, sizeof msg);
    if (size % 4 == 0) { /* the file reader, on a quarter of the inputs */
        const char *path = fuzz_tmp_path(".wal");
        if (fuzz_write_file(path, data, size) != 0)
            fuzz_fail("cannot write the temporary log");
        frc = wal_open(path, FUZZ_WAL_GEN, WAL_READONLY, &f, msg, sizeof msg);
        if (frc != rc || (f && (wal_info(f)->records != sc.records ||
                                wal_info(f)->cut != sc.cut)))
            fuzz_fail("wal_open and wal_scan disagree");
        while (f && wal_replay_next(f, &r))
            if (r.seq >= sc.records)
                fuzz_fail("wal_open replays more than wal_scan found");
        wal_close(f);
        unlink(path);
    }
    if (rc != MESS_OK) {
        if (rc != MESS_EFORMAT || msg[0] == '\0')
            fuzz_fail("a refused log without MESS_EFORMAT and a message");
        return 0;
    }
    if (sc.valid > size || sc.valid + sc.cut != size)
        fuzz_fail("prefix and tail do not add up");
    if (sc.stale != (sc.records > 0 && sc.log_gen < FUZZ_WAL_GEN) ||
        sc.log_gen > FUZZ_WAL_GEN)
        fuzz_fail("generation rule");
    while (wal_scan_next(data, &sc, &pos, &r)) {
        if (r.offset != end || r.body != data + end + WAL_HEAD_BYTES || r.seq != n ||
            (r.kind != WAL_UPLOAD && r.kind != WAL_DELETE && r.kind != WAL_COMPACT) || r.len > sc.valid ||
            pos > sc.valid || pos - end != WAL_OVERHEAD + r.len)
            fuzz_fail("a yielded record is inconsistent");
        end = pos;
        n++;
    }
    if (sc.stale ? n != 0 : (n != sc.records || end != sc.valid))
        fuzz_fail("records do not tile the prefix");
    if (wal_scan(data, sc.valid, FUZZ_WAL_GEN, &again, msg, sizeof msg) != MESS_OK ||
        again.cut != 0 || again.records != sc.records || again.valid != sc.valid)
        fuzz_fail("the kept prefix does not read back whole");
    /* one more record after the prefix, as an append after the cut makes */
    g = sc.records ? sc.log_gen : FUZZ_WAL_GEN;
    mess_wr_init(&w);
    if (sc.valid) /* mess_wr_bytes of 0 bytes on an empty writer is NULL + 0 */
        mess_wr_bytes(&w, data, sc.valid);
    wal_encode(&w, WAL_DELETE, g, sc.records, data, size < 40 ? size : 40);
    if (w.err || wal_scan(w.p, w.len, FUZZ_WAL_GEN, &again, msg, sizeof msg) != MESS_OK ||
        again.cut != 0 || again.records != sc.records + 1 || again.stale != sc.stale)
        fuzz_fail("an append after the kept prefix does not read back");
    mess_wr_free(&w);
    return 0;
}
