#!/usr/bin/python3
"""tests/wal_race.py - the write-ahead-log race of docs/PROTOCOL.md
("Truncation while mapped (SIGBUS)"): opens of a server directory in other
processes while a writer appends can cut the writer's acknowledged records.

Not part of `make check` (processes, about a minute): it exits 1 if an
acknowledged upload is lost.  It demonstrated the bug until the writer
claim (docs/PROTOCOL.md "One writer at a time") fixed it.  Usage (about a minute; needs a built libmess.so):

    python3 tests/wal_race.py [WORKDIR]

It makes a small directory (400 SIFT vectors of datasets/sift, defaults),
then one writer process applies 10 uploads of 2,000 items (each acknowledged:
appended to S/wal with one writev + fdatasync) while two reader processes
open and free the directory in a loop; then the writer frees its handle
and the directory is opened again.  Every acknowledged item must be there.
On 2026-11-25 (main 24c92aa) with a 10,000-item base and uploads of 2,000
items, all 320,000 acknowledged entries were lost: a reader's open takes
the record being written for a crash's torn tail and cuts it; the writer
keeps writing past the cut, and the next open cuts the damaged record.
"""
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import numpy as np  # noqa: E402
import mess  # noqa: E402


def bvecs(path):
    raw = np.fromfile(path, dtype=np.uint8)
    dim = int(raw[:4].view(np.int32)[0])
    return raw.reshape(-1, 4 + dim)[:, 4:].astype(np.float32)


def main():
    work = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") \
        else tempfile.mkdtemp(prefix="walrace")
    os.makedirs(work, exist_ok=True)
    d = os.path.join(work, "s")
    role = os.environ.get("WAL_RACE_ROLE")
    v = bvecs(os.path.join(HERE, "..", "datasets", "sift", "learn.bvecs"))
    if role is None:
        p = mess.Params(v.shape[1])
        c = mess.Client(p, v[:2000], seed=b"\x01" * 32)
        c.save(d + ".client")
        s = mess.Server.create(d, p)
        u = c.upload(np.arange(400), v[2000:2400])
        s.apply_upload(u)
        s.checkpoint()
        s.close()
        env = dict(os.environ, WAL_RACE_ROLE="reader")
        readers = [subprocess.Popen([sys.executable, __file__, work], env=env)
                   for _ in range(2)]
        time.sleep(2)
        w = subprocess.run([sys.executable, __file__, work],
                           env=dict(os.environ, WAL_RACE_ROLE="writer"))
        for r in readers:
            r.kill()
            r.wait()
        return w.returncode
    c = mess.Client.load(d + ".client")
    if role == "reader":
        while True:
            try:
                mess.Server.open(d, c.params).close()
            except mess.MessError:
                pass
    s = mess.Server.open(d, c.params)
    before = s.stats().entries
    acked = 0
    for k in range(10):  # big records: the race needs an open during a writev
        ids = np.arange(10000 + 2000 * k, 10000 + 2000 * (k + 1))
        s.apply_upload(c.upload(ids, v[(2400 + ids) % len(v)]))
        acked += 2000
    after = s.stats().entries
    s.close()
    again = mess.Server.open(d, c.params).stats().entries
    lost = after - again
    print("wal_race: %d entries before, %d after %d acknowledged items, %d after "
          "reopening: %d lost" % (before, after, acked, again, lost))
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
