"""Issue 15's measurements on the 1M and large SIFT sets (docs/EVALUATION.md,
"File-backed server").  Benchmarks, not tests: every number is printed with
the command line, the load (os.getloadavg) and the time, and appended as
one JSON object per line to OUT/results.jsonl.

    onem.py hnswlib --data datasets/1m --out docs/eval/1m
        plaintext hnswlib (M 16, efConstruction 300 as the paper's
        Appendix) on the raw vectors, one thread, Recall@10 vs ef.

    onem.py build --data datasets/1m --dir S --config d8q8
        a file-backed server directory (mess_server_create, uploads of
        --batch items applied with 2 threads, a checkpoint every
        --checkpoint items and at the end): build rate, checkpoint time,
        file sizes beside mess_estimate.  The client is saved as S.client
        (deterministic experiment mode: runs repeat).
    onem.py build ... --in-memory; onem.py import --dir S
        the same server built in memory and saved as the travel file
        S.travel, then turned into the directory S (mess_server_import).
    onem.py memory --data datasets/large --dir S
        today's in-memory server: S.travel loaded (mess_server_load), then
        Recall@10 vs B, server ms (one thread; and again warm over the
        same requests), client ms, bytes per query.
    onem.py query --data datasets/1m --dir S --config d8q8 --pools ...
        Recall@10 vs B, server and client ms per query, bytes per query,
        resident bytes (/proc/self/smaps: the mappings of S's files, and
        the process) after the queries.
    onem.py open --dir S [--first-query --data D --pool B]
        mess_server_open time, cold (every file of S dropped from the page
        cache with posix_fadvise(POSIX_FADV_DONTNEED): no root needed) and
        warm, and resident bytes right after the open; with --first-query
        also the server time of the first and the second query after each
        open (one thread, B = --pool), where a lazy open pays the shards'
        delta chains (docs/PROTOCOL.md "Lazy apply"), and the copied graph
        pages after them.
    onem.py cold --data datasets/large --dir S --config d8q8
        per page-cache advice policy (mess_server_set_advice: none,
        graph-random, arena-random, ... joined by '+'), in one process and
        alternating: cold open, the first --queries searches (B = --pool,
        one thread) one by one, then the same warm; the page cache filled
        by each; picks the least open + N x cold mean among policies that
        open in <= 50 ms.
    onem.py compare --data datasets/large --dir S --config d8q8
        server search time at one B, one thread, the directory opened
        (mapped) vs the same server loaded in memory from its exported
        travel file, in one process, the same requests; warm and cold.
    onem.py append --data D --dir S --config d8q8 --count 10000
        time to append --count new items (uploads applied + one
        checkpoint) to the server in S, and the bytes each step wrote
        beside the bytes the items add; in the same process hnswlib's
        add_items of the same vectors into hnswlib over the same base
        (M 16, efConstruction 300, --threads) and its save.  Run it on
        servers of different sizes (10k, 100k, 1M base) to see it scale.

Configurations (M = 64, t = 16, kappa = 128, M_hnsw = 16, efConstruction
300, f32 payloads): nonoise (p_D = p_q = 0), d8q8 (0.08, 0.08), d8q12
(0.08, 0.12).
"""
import argparse
import json
import os
import sys
import time

import numpy as np

K = 10
EF_GRID = (10, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
_T0 = time.perf_counter()


def log(msg):
    t = time.perf_counter() - _T0
    print("[%3d:%02d] %s" % (t // 60, t % 60, msg), file=sys.stderr, flush=True)


def read_vecs(path, dtype):
    """A TEXMEX file (.bvecs uint8, .ivecs int32, .fvecs float32): n x dim."""
    raw = np.fromfile(path, dtype=np.uint8)
    dim = int(raw[:4].view(np.int32)[0])
    item = np.dtype(dtype).itemsize
    rec = 4 + dim * item
    if dim <= 0 or raw.size % rec:
        raise SystemExit("%s: not a whole number of %d-d records" % (path, dim))
    return raw.reshape(-1, rec)[:, 4:].copy().view(dtype).reshape(-1, dim)


def recall(ids, truth):
    hits = 0
    for a, b in zip(ids, truth):
        hits += len(set(int(x) for x in a[:K]) & set(int(x) for x in b[:K]))
    return hits / (K * len(truth))


def load():
    return "%.2f %.2f %.2f" % os.getloadavg()


def record(out, row):
    row = dict(row)
    row["time_utc"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    row["load"] = load()
    row["command"] = " ".join(sys.argv)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.jsonl"), "a") as f:
        f.write(json.dumps(row, sort_keys=True) + "\n")
    log(json.dumps(row, sort_keys=True))


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cmd_hnswlib(a):
    import hnswlib
    base = read_vecs(os.path.join(a.data, "base.bvecs"), np.uint8)
    if a.base:
        base = base[:a.base]
    queries = read_vecs(os.path.join(a.data, "query.bvecs"), np.uint8)
    truth = read_vecs(os.path.join(a.data, "groundtruth.ivecs"), np.int32)[:, :K]
    if a.queries:
        queries, truth = queries[:a.queries], truth[:a.queries]
    if a.base and a.base < 1000000 and not a.truth:
        raise SystemExit("--base needs --truth FILE (the prefix's own ground truth)")
    if a.truth:
        truth = read_vecs(a.truth, np.int32)[:len(queries), :K]
    n, dim = base.shape
    log("hnswlib: %d x %d base, %d queries, M=%d efConstruction=%d, %d thread(s)"
        % (n, dim, len(queries), a.m, a.ef_construction, a.threads))
    rss0 = rss_kb()
    idx = hnswlib.Index(space="l2", dim=dim)
    idx.init_index(max_elements=n, ef_construction=a.ef_construction, M=a.m,
                   random_seed=100)
    idx.set_num_threads(a.threads)
    t0 = time.perf_counter()
    c0 = time.process_time()
    step = 50000
    for i in range(0, n, step):
        idx.add_items(base[i:i + step].astype(np.float32), np.arange(i, min(n, i + step)))
        log("hnswlib: %d / %d added (%.0f s)" % (min(n, i + step), n, time.perf_counter() - t0))
    build_s = time.perf_counter() - t0
    build_cpu = time.process_time() - c0
    record(a.out, dict(kind="hnswlib_build", data=a.data, n=n, m=a.m,
                       ef_construction=a.ef_construction, threads=a.threads,
                       build_s=build_s, build_cpu_s=build_cpu, rate=n / build_s,
                       index_rss_bytes=1024 * (rss_kb() - rss0)))
    idx.set_num_threads(1)
    qf = queries.astype(np.float32)
    for ef in EF_GRID:
        idx.set_ef(max(ef, K))
        t0 = time.perf_counter()
        lab, _ = idx.knn_query(qf, k=K, num_threads=1)
        ms = 1e3 * (time.perf_counter() - t0) / len(qf)
        record(a.out, dict(kind="hnswlib_query", data=a.data, n=n, ef=ef,
                           queries=len(qf), recall=recall(lab, truth), ms_per_query=ms))


# ---- MESS (file-backed server) ---------------------------------------------

CONFIGS = {"nonoise": (0.0, 0.0), "d8q8": (0.08, 0.08), "d8q12": (0.08, 0.12)}
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
_M = None


def lib():
    """The Python bindings (python/mess) plus the directory calls of
    mess.h and mess_estimate, declared here through ctypes."""
    global _M
    if _M is not None:
        return _M
    import ctypes
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import mess
    from mess import _lib as L
    c = ctypes
    P = c.c_void_p

    def proto(name, args):
        f = getattr(L.lib, name, None)
        if f is None:
            return None
        f.argtypes, f.restype = args, c.c_int
        return f
    mess.x_create = proto("mess_server_create", [c.c_char_p, P, c.POINTER(P)])
    mess.x_open = proto("mess_server_open", [c.c_char_p, P, P, c.c_size_t, c.POINTER(P)])
    mess.x_checkpoint = proto("mess_server_checkpoint", [P])
    mess.x_export = proto("mess_server_export", [P, c.c_char_p])
    mess.x_import = proto("mess_server_import", [c.c_char_p, c.c_char_p])
    mess.x_estimate = proto("mess_estimate_sized", [P, c.c_uint64, P, c.c_size_t])
    _M = mess
    return mess


def ok(rc, what):
    if rc != 0:
        m = lib()
        raise SystemExit("%s: %s" % (what, m._lib.error(rc, what)))


def params_for(m, dim, config):
    p_d, p_q = CONFIGS[config]
    return m.Params(dim, p_store=p_d, p_query=p_q, per_item=16, shards=64, kappa=128,
                    hnsw_m=16, ef_construction=300, payload="f32")


def seed():
    import hashlib
    return hashlib.sha256(b"libmess-eval").digest()


def open_dir(m, path, params=None):
    import ctypes
    out = ctypes.c_void_p()
    ok(m.x_open(path.encode(), ctypes.byref(params) if params is not None else None,
                None, 0, ctypes.byref(out)), "mess_server_open " + path)
    return m.Server(None, _ptr=out.value)


def estimate(m, params, items):
    """mess_estimate as a dict (its struct read by field offsets)."""
    import ctypes
    if m.x_estimate is None:
        return {}
    fields = [("size", ctypes.c_uint32), ("payload_bytes", ctypes.c_uint32),
              ("items", ctypes.c_uint64), ("entries", ctypes.c_uint64),
              ("shard_entries", ctypes.c_double)] + \
        [(n, ctypes.c_uint64) for n in ("code_bytes", "label_bytes", "link_bytes",
                                        "map_bytes", "resident_bytes", "arena_bytes",
                                        "disk_bytes", "travel_bytes", "memory_bytes")] + \
        [(n, ctypes.c_double) for n in ("resident_per_entry", "disk_per_entry",
                                        "memory_per_entry")]
    R = type("R", (ctypes.Structure,), {"_fields_": fields})
    r = R()
    ok(m.x_estimate(ctypes.byref(params), items, ctypes.byref(r), ctypes.sizeof(r)),
       "mess_estimate")
    return {n: getattr(r, n) for n, _ in fields[1:]}


def dir_files(path):
    """{name: bytes} of the files in a server directory."""
    return {f: os.path.getsize(os.path.join(path, f)) for f in sorted(os.listdir(path))
            if os.path.isfile(os.path.join(path, f))}


def file_kinds(files):
    out = {"graph": 0, "arena": 0, "other": 0}
    for f, n in files.items():
        k = "graph" if f.endswith(".graph") else "arena" if f.endswith(".arena") else "other"
        out[k] += n
    return out


def drop_cache(path):
    """Drops the pages of every file under path from the page cache
    (posix_fadvise DONTNEED after fdatasync: works without root on files
    we can open; pages mapped by a live process stay)."""
    for dp, _, fs in os.walk(path):
        for f in fs:
            fd = os.open(os.path.join(dp, f), os.O_RDONLY)
            try:
                os.fdatasync(fd)
            except OSError:
                pass
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)


def smaps(path):
    """Resident bytes of this process: total (smaps_rollup), and of the
    mappings of files under `path` by kind (graph, arena, other)."""
    path = os.path.abspath(path)
    res = {"rss": 0, "graph": 0, "arena": 0, "other": 0, "graph_private_dirty": 0}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Rss:"):
                res["rss"] = 1024 * int(line.split()[1])
    cur = None
    with open("/proc/self/smaps") as f:
        for line in f:
            parts = line.split()
            if parts and "-" in parts[0] and len(parts) >= 5 and ":" in parts[3]:
                name = parts[5] if len(parts) > 5 else ""
                cur = None
                if name.startswith(path):
                    cur = "graph" if name.endswith(".graph") else \
                        "arena" if name.endswith(".arena") else "other"
            elif cur and line.startswith("Rss:"):
                res[cur] += 1024 * int(parts[1])
            elif cur == "graph" and line.startswith("Private_Dirty:"):
                # pages a delta chain's blocks were written into (copies)
                res["graph_private_dirty"] += 1024 * int(parts[1])
    return res


def load_set(a, need_base=True, need_queries=True):
    d = {}
    if need_base:
        d["base"] = read_vecs(os.path.join(a.data, "base.bvecs"), np.uint8)
        if a.base:
            d["base"] = d["base"][:a.base]
    d["learn"] = read_vecs(os.path.join(a.data, "learn.bvecs"), np.uint8)
    if not need_queries:
        return d
    q = read_vecs(os.path.join(a.data, "query.bvecs"), np.uint8)
    t = read_vecs(a.truth or os.path.join(a.data, "groundtruth.ivecs"), np.int32)[:, :K]
    n = a.queries or len(q)
    d["queries"], d["truth"] = q[:n].astype(np.float32), t[:n]
    return d


def cmd_build(a):
    import ctypes
    m = lib()
    d = load_set(a, need_queries=False)
    base = d["base"]
    n = len(base)
    p = params_for(m, base.shape[1], a.config)
    first = 0
    t0 = time.perf_counter()
    if a.resume:  # a directory a killed build left: its client, its items
        client = m.Client.load(a.dir + ".client")
        p = client.params
    else:
        client = m.Client(p, d["learn"].astype(np.float32), seed=seed(), threads=a.threads)
        client.save(a.dir + ".client", exist_ok=False)  # another build's keys stay
    train_s = time.perf_counter() - t0
    if a.resume:
        if a.in_memory:
            raise SystemExit("--resume continues a directory, not --in-memory")
        server = open_dir(m, a.dir, p)
        first = server.stats().entries // 16
        if server.stats().entries != 16 * first:
            raise SystemExit("%s: %d entries is not whole items" % (a.dir, server.stats().entries))
        log("resume: %s holds the first %d items" % (a.dir, first))
    elif a.in_memory:  # a server in memory, saved as the travel file DIR.travel
        server = m.Server(p)
    else:
        out = ctypes.c_void_p()
        ok(m.x_create(a.dir.encode(), ctypes.byref(p), ctypes.byref(out)),
           "mess_server_create")
        server = m.Server(None, _ptr=out.value)
    enc = app = ckpt = 0.0
    since = 0
    t_build = time.perf_counter()
    for i in range(first, n, a.batch):
        x = base[i:i + a.batch].astype(np.float32)
        ids = np.arange(i, i + len(x), dtype=np.uint64)
        t1 = time.perf_counter()
        buf = client.upload(ids, x, a.threads)
        t2 = time.perf_counter()
        server.apply_upload(buf, a.threads)
        t3 = time.perf_counter()
        buf.close()
        enc += t2 - t1
        app += t3 - t2
        since += len(x)
        if not a.in_memory and (since >= a.checkpoint or i + a.batch >= n):
            ok(m.x_checkpoint(server.ptr), "mess_server_checkpoint")
            ckpt += time.perf_counter() - t3
            since = 0
        log("build %s: %d / %d items (encode %.0f s, apply %.0f s, checkpoints %.0f s)"
            % (a.config, min(n, i + a.batch), n, enc, app, ckpt))
    wall = time.perf_counter() - t_build
    entries = server.stats().entries
    if a.in_memory:
        t1 = time.perf_counter()
        server.save(a.dir + ".travel")
        ckpt = time.perf_counter() - t1
        files = {"travel": os.path.getsize(a.dir + ".travel")}
    else:
        files = dir_files(a.dir)
    kinds = file_kinds(files)
    est = estimate(m, p, n)
    record(a.out, dict(kind="mess_build", data=a.data, dir=a.dir, config=a.config, items=n,
                       in_memory=bool(a.in_memory), resumed_at=first,
                       entries=entries, threads=a.threads, batch=a.batch,
                       checkpoint_every=a.checkpoint, train_s=train_s, encode_s=enc,
                       apply_s=app, checkpoint_s=ckpt, wall_s=wall,
                       rate_entries_per_s=(entries - 16 * first) / wall,
                       rate_without_checkpoints=(entries - 16 * first) / (enc + app),
                       graph_file_bytes=kinds["graph"], arena_file_bytes=kinds["arena"],
                       other_file_bytes=kinds["other"], disk_bytes=sum(files.values()),
                       disk_per_entry=sum(files.values()) / entries,
                       graph_per_entry=kinds["graph"] / entries,
                       est_resident_bytes=est.get("resident_bytes"),
                       est_arena_bytes=est.get("arena_bytes"),
                       est_disk_bytes=est.get("disk_bytes"),
                       peak_rss_bytes=peak_rss()))
    server.close()
    client.close()


def peak_rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return 1024 * int(line.split()[1])
    return 0


def cmd_query(a):
    m = lib()
    d = load_set(a, need_base=False)
    client = m.Client.load(a.dir + ".client")
    before = smaps(a.dir)
    t0 = time.perf_counter()
    server = open_dir(m, a.dir, client.params)
    open_ms = 1e3 * (time.perf_counter() - t0)
    entries = server.stats().entries
    for B in [int(x) for x in a.pools.split(",")]:
        got, srv, cli, nbytes, uniq = [], 0.0, 0.0, 0, 0
        for q in d["queries"]:
            r = client.query(server, q, K, B, 1)
            got.append(r.ids)
            srv += r.server_seconds
            cli += r.client_seconds
            nbytes += r.request_bytes + r.response_bytes
            uniq += r.stats.unique
        nq = len(d["queries"])
        res = smaps(a.dir)
        record(a.out, dict(kind="mess_query", data=a.data, dir=a.dir, config=a.config,
                           entries=entries, pool=B, queries=nq,
                           recall=recall(got, d["truth"]), server_ms=1e3 * srv / nq,
                           client_ms=1e3 * cli / nq, bytes_per_query=nbytes / nq,
                           unique=uniq / nq, open_ms=open_ms,
                           rss_delta_bytes=res["rss"] - before["rss"],
                           graph_resident_bytes=res["graph"],
                           arena_resident_bytes=res["arena"],
                           resident_per_entry=(res["rss"] - before["rss"]) / entries))
    server.close()
    client.close()


def cmd_import(a):
    m = lib()
    travel = a.dir + ".travel"
    t0 = time.perf_counter()
    ok(m.x_import(travel.encode(), a.dir.encode()), "mess_server_import")
    record(a.out, dict(kind="mess_import", dir=a.dir, travel_bytes=os.path.getsize(travel),
                       import_s=time.perf_counter() - t0, peak_rss_bytes=peak_rss(),
                       disk_bytes=sum(dir_files(a.dir).values())))


def cmd_open(a):
    m = lib()
    rows = {"cold": [], "warm": []}
    cpu = {"cold": [], "warm": []}
    first = {"cold": [], "warm": []}
    second = {"cold": [], "warm": []}
    first_cpu = {"cold": [], "warm": []}
    dirty = {"cold": [], "warm": []}
    res = None
    client = qs = None
    if a.first_query:
        d = load_set(a, need_base=False)
        qs = d["queries"]
        client = m.Client.load(a.dir + ".client")
    for i in range(a.repeat):
        for mode in ("cold", "warm"):
            if mode == "cold":
                drop_cache(a.dir)
            before = smaps(a.dir)
            t0 = time.perf_counter()
            c0 = time.process_time()
            s = open_dir(m, a.dir)
            cpu[mode].append(1e3 * (time.process_time() - c0))
            rows[mode].append(1e3 * (time.perf_counter() - t0))
            if res is None:
                res = smaps(a.dir)
                res["rss"] -= before["rss"]
                entries = s.stats().entries
            if client is not None:
                # two different queries: the first pays what the open left
                c0 = time.process_time()
                r = client.query(s, qs[(2 * i) % len(qs)], K, a.pool, 1)
                first_cpu[mode].append(1e3 * (time.process_time() - c0))
                first[mode].append(1e3 * r.server_seconds)
                r = client.query(s, qs[(2 * i + 1) % len(qs)], K, a.pool, 1)
                second[mode].append(1e3 * r.server_seconds)
                dirty[mode].append(smaps(a.dir)["graph_private_dirty"])
            s.close()
    if client is not None:
        client.close()
    extra = {"library": os.environ.get("MESS_LIBRARY", "python/mess default")}
    if first["cold"]:
        for mode in ("cold", "warm"):
            extra["first_query_server_ms_%s_median" % mode] = float(np.median(first[mode]))
            extra["second_query_server_ms_%s_median" % mode] = float(np.median(second[mode]))
            extra["first_query_server_ms_%s" % mode] = first[mode]
            # the process's CPU over the whole first query (request, search, finish)
            extra["first_query_cpu_ms_%s_median" % mode] = float(np.median(first_cpu[mode]))
            extra["second_query_server_ms_%s" % mode] = second[mode]
        extra["graph_private_dirty_after_two_queries"] = int(np.median(dirty["warm"]))
        extra["pool"] = a.pool
    record(a.out, dict(extra, kind="mess_open", dir=a.dir, entries=entries, repeat=a.repeat,
                       cold_ms_median=float(np.median(rows["cold"])),
                       warm_ms_median=float(np.median(rows["warm"])),
                       cold_ms=rows["cold"], warm_ms=rows["warm"],
                       cold_cpu_ms_median=float(np.median(cpu["cold"])),
                       warm_cpu_ms_median=float(np.median(cpu["warm"])),
                       load=load(),
                       rss_after_open_bytes=res["rss"],
                       graph_resident_after_open=res["graph"],
                       arena_resident_after_open=res["arena"],
                       graph_private_dirty_after_open=res["graph_private_dirty"]))


# mess_server_set_advice masks (mess_experimental.h) by name, for `cold`
ADVICE = {"graph-random-open": 0x01, "graph-random": 0x02, "arena-random": 0x04,
          "upper-willneed": 0x08, "graph-willneed": 0x10}
POLICIES = ("none", "graph-random+arena-random", "graph-random", "arena-random",
            "graph-random-open", "graph-random-open+upper-willneed",
            "graph-random+upper-willneed", "upper-willneed",
            "graph-random-open+graph-willneed")


def advice_mask(policy):
    mask = 0
    for part in policy.split("+"):
        if part != "none":
            if part not in ADVICE:
                raise SystemExit("unknown advice %r (known: none, %s)"
                                 % (part, ", ".join(sorted(ADVICE))))
            mask |= ADVICE[part]
    return mask


def page_cache(path):
    """Bytes of the files under path in the page cache (mincore over a
    fresh read-only mapping of each file), by kind."""
    import ctypes
    import mmap
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    page = mmap.PAGESIZE
    out = {"graph": 0, "arena": 0, "other": 0}
    for f, n in dir_files(path).items():
        if n == 0:
            continue
        k = "graph" if f.endswith(".graph") else "arena" if f.endswith(".arena") else "other"
        fd = os.open(os.path.join(path, f), os.O_RDONLY)
        try:
            addr = libc.mmap(None, n, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if addr in (None, ctypes.c_void_p(-1).value):
                continue
            vec = ctypes.create_string_buffer((n + page - 1) // page)
            if libc.mincore(addr, n, vec) == 0:
                out[k] += page * sum(b & 1 for b in vec.raw)
            libc.munmap(addr, n)
        finally:
            os.close(fd)
    return out


def cmd_cold(a):
    """Per page-cache advice policy (mess_server_set_advice), in one
    process: the directory's files dropped from the page cache, the open
    timed, then the first --queries searches one by one (cold: the mean of
    the first 100 and of all), then the same searches again (warm); the
    policies run in order and then in reverse (--rounds 2) so the machine's
    drift falls on all alike.  A user who opens and then asks N queries
    waits open + N x mean(first N): that sum picks the policy."""
    m = lib()
    import ctypes
    f = getattr(m._lib.lib, "mess_server_set_advice", None)
    if f is None:
        raise SystemExit("this libmess has no mess_server_set_advice")
    f.argtypes, f.restype = [ctypes.c_uint, ctypes.POINTER(ctypes.c_uint)], ctypes.c_int
    prev = ctypes.c_uint()
    ok(f(0, ctypes.byref(prev)), "mess_server_set_advice")
    library_default = prev.value
    ok(f(library_default, None), "mess_server_set_advice")
    d = load_set(a, need_base=False)
    client = m.Client.load(a.dir + ".client")
    reqs = []
    for q in d["queries"]:
        qs, req = client.request(q, a.pool)
        qs.close()
        reqs.append(req)
    policies = a.policies.split(",")
    for pol in policies:
        advice_mask(pol)
    order = []
    for r in range(a.rounds):
        order += [(r, x) for x in (policies if r % 2 == 0 else policies[::-1])]
    got = {}
    for rnd, pol in order:
        mask = advice_mask(pol)
        ok(f(mask, None), "mess_server_set_advice")
        drop_cache(a.dir)
        pc0 = page_cache(a.dir)
        l0 = load()
        t0 = time.perf_counter()
        s = open_dir(m, a.dir, client.params)
        open_ms = 1e3 * (time.perf_counter() - t0)
        pc_open = page_cache(a.dir)
        res_open = smaps(a.dir)
        per = []
        for r in reqs:
            t1 = time.perf_counter()
            s.search(r, 1).close()
            per.append(1e3 * (time.perf_counter() - t1))
        pc_cold = page_cache(a.dir)
        warm = time_search(s, reqs)
        entries = s.stats().entries
        s.close()
        row = dict(kind="mess_cold", dir=a.dir, entries=entries, policy=pol, mask=mask,
                   library_default=library_default, round=rnd, pool=a.pool,
                   queries=len(reqs), load_before=l0, open_ms=open_ms,
                   cold_first100_ms=float(np.mean(per[:100])),
                   cold_mean_ms=float(np.mean(per)),
                   cold_first_ms=per[0], warm_ms=warm,
                   wait100_ms=open_ms + float(np.sum(per[:100])),
                   wait_all_ms=open_ms + float(np.sum(per)),
                   cache_before=pc0, cache_after_open=pc_open,
                   cache_after_cold=pc_cold, graph_rss_after_open=res_open["graph"])
        record(a.out, row)
        got.setdefault(pol, []).append(row)
    ok(f(library_default, None), "mess_server_set_advice")
    print("%-34s %9s %9s %9s %8s %10s %10s %9s" % (
        "policy", "open ms", "cold100", "coldN", "warm", "open+100q", "open+Nq",
        "graph MB"), flush=True)
    summary = []
    for pol in policies:
        rows = got[pol]
        med = {k: float(np.median([r[k] for r in rows]))
               for k in ("open_ms", "cold_first100_ms", "cold_mean_ms", "warm_ms",
                         "wait100_ms", "wait_all_ms")}
        med["graph_cache_after_open"] = float(np.median(
            [r["cache_after_open"]["graph"] for r in rows]))
        summary.append(dict(policy=pol, mask=advice_mask(pol), **med))
        print("%-34s %9.1f %9.2f %9.2f %8.2f %10.0f %10.0f %9.1f" % (
            pol, med["open_ms"], med["cold_first100_ms"], med["cold_mean_ms"],
            med["warm_ms"], med["wait100_ms"], med["wait_all_ms"],
            med["graph_cache_after_open"] / 1e6), flush=True)
    ok50 = [x for x in summary if x["open_ms"] <= 50] or summary
    best = min(ok50, key=lambda x: x["wait_all_ms"])
    record(a.out, dict(kind="mess_cold_summary", dir=a.dir, pool=a.pool, queries=len(reqs),
                       rounds=a.rounds, library_default=library_default, policies=summary,
                       rule="least open + N x cold mean among policies opening in <= 50 ms",
                       best=best["policy"]))
    for r in reqs:
        r.close()
    client.close()


def time_search(server, reqs, threads=1):
    t0 = time.perf_counter()
    for r in reqs:
        server.search(r, threads).close()
    return 1e3 * (time.perf_counter() - t0) / len(reqs)


def cmd_compare(a):
    m = lib()
    d = load_set(a, need_base=False)
    client = m.Client.load(a.dir + ".client")
    reqs = []
    for q in d["queries"]:
        qs, req = client.request(q, a.pool)
        qs.close()
        reqs.append(req)
    travel = a.dir + ".travel"
    s = open_dir(m, a.dir, client.params)
    if not os.path.exists(travel):
        ok(m.x_export(s.ptr, travel.encode()), "mess_server_export")
    s.close()
    out = dict(kind="mess_compare", data=a.data, dir=a.dir, config=a.config, pool=a.pool,
               queries=len(reqs), threads=1)
    # mapped, cold: the directory's files dropped from the page cache first
    drop_cache(a.dir)
    t0 = time.perf_counter()
    s = open_dir(m, a.dir, client.params)
    out["mmap_open_cold_ms"] = 1e3 * (time.perf_counter() - t0)
    out["mmap_cold_ms"] = time_search(s, reqs)
    out["mmap_resident"] = smaps(a.dir)
    drop_cache(travel)
    t0 = time.perf_counter()
    h = m.Server.load(travel, client.params)
    out["memory_load_s"] = time.perf_counter() - t0
    out["memory_first_ms"] = time_search(h, reqs)
    out["memory_bytes"] = h.stats().bytes
    # warm: both servers in the process, passes alternated so that the
    # machine's other load falls on both alike; best pass of each
    mm, hh = [], []
    for _ in range(a.repeat):
        mm.append(time_search(s, reqs))
        hh.append(time_search(h, reqs))
    out["mmap_warm_passes_ms"], out["memory_warm_passes_ms"] = mm, hh
    out["mmap_warm_ms"], out["memory_warm_ms"] = min(mm), min(hh)
    s.close()
    h.close()
    out["ratio_warm"] = out["mmap_warm_ms"] / out["memory_warm_ms"]
    out["ratio_cold"] = out["mmap_cold_ms"] / out["memory_warm_ms"]
    record(a.out, out)
    for r in reqs:
        r.close()
    client.close()


def cmd_memory(a):
    """The in-memory server of today (mess_server_load of DIR.travel): load
    time, then per pool Recall@10, server ms (one thread), client ms,
    bytes; server search time again over the same requests (warm)."""
    m = lib()
    d = load_set(a, need_base=False)
    client = m.Client.load(a.dir + ".client")
    travel = a.dir + ".travel"
    drop_cache(travel)
    rss0 = smaps(a.dir)["rss"]
    t0 = time.perf_counter()
    h = m.Server.load(travel, client.params)
    load_s = time.perf_counter() - t0
    st = h.stats()
    for B in [int(x) for x in a.pools.split(",")]:
        got, srv, cli, nbytes = [], 0.0, 0.0, 0
        reqs = []
        for q in d["queries"]:
            r = client.query(h, q, K, B, 1)
            got.append(r.ids)
            srv += r.server_seconds
            cli += r.client_seconds
            nbytes += r.request_bytes + r.response_bytes
        for q in d["queries"]:
            qs, req = client.request(q, B)
            qs.close()
            reqs.append(req)
        warm = min(time_search(h, reqs) for _ in range(a.repeat))
        for r in reqs:
            r.close()
        nq = len(d["queries"])
        record(a.out, dict(kind="mess_memory", data=a.data, dir=a.dir, config=a.config,
                           entries=st.entries, memory_bytes=st.bytes, load_s=load_s,
                           rss_delta_bytes=smaps(a.dir)["rss"] - rss0, pool=B, queries=nq,
                           recall=recall(got, d["truth"]), server_ms=1e3 * srv / nq,
                           server_warm_ms=warm, client_ms=1e3 * cli / nq,
                           bytes_per_query=nbytes / nq))
    h.close()
    client.close()


def proc_io():
    """/proc/self/io: wchar (bytes given to write calls), write_bytes
    (bytes this process sent to the storage layer)."""
    out = {}
    with open("/proc/self/io") as f:
        for line in f:
            k, v = line.split(":")
            out[k.strip()] = int(v)
    return out


def hnswlib_base(a, n, count, dim):
    """hnswlib (M 16, efConstruction 300, --threads) over the first n base
    vectors of --data, room for count more; loaded from --hnswlib-index if
    that file exists, else built (and saved there when given)."""
    import hnswlib
    idx = hnswlib.Index(space="l2", dim=dim)
    if a.hnswlib_index and os.path.exists(a.hnswlib_index):
        t0 = time.perf_counter()
        idx.load_index(a.hnswlib_index, max_elements=n + count)
        log("hnswlib: %d vectors loaded from %s in %.0f s"
            % (idx.get_current_count(), a.hnswlib_index, time.perf_counter() - t0))
        if idx.get_current_count() != n:
            raise SystemExit("%s holds %d vectors, the base has %d"
                             % (a.hnswlib_index, idx.get_current_count(), n))
        return idx, None
    base = read_vecs(os.path.join(a.data, "base.bvecs"), np.uint8)[:n]
    if len(base) != n:
        raise SystemExit("%s has %d base vectors, the server %d items"
                         % (a.data, len(base), n))
    idx.init_index(max_elements=n + count, ef_construction=300, M=16, random_seed=100)
    idx.set_num_threads(a.threads)
    t0 = time.perf_counter()
    for i in range(0, n, 50000):
        idx.add_items(base[i:i + 50000].astype(np.float32), np.arange(i, min(n, i + 50000)))
        log("hnswlib base: %d / %d (%.0f s)" % (min(n, i + 50000), n, time.perf_counter() - t0))
    build_s = time.perf_counter() - t0
    if a.hnswlib_index:
        idx.save_index(a.hnswlib_index)
    return idx, build_s


GRAPH_SECTIONS = ("codes", "labels", "levels", "deleted", "links0", "upper_offsets",
                  "upper_links", "label_map")


def graph_sections(path):
    """{section: (offset, bytes)} from a graph file's header (docs/HNSW.md,
    "Graph file": 8 x (u64 offset, u64 bytes) at byte 104), and n, m0."""
    with open(path, "rb") as f:
        h = f.read(4096)
    v = np.frombuffer(h[104:232], dtype="<u8").reshape(8, 2)
    n = int(np.frombuffer(h[64:72], dtype="<u8")[0])
    m0 = int(np.frombuffer(h[32:36], dtype="<u4")[0])
    return {s: (int(o), int(b)) for s, (o, b) in zip(GRAPH_SECTIONS, v)}, n, m0


def graph_changes(old, new):
    """What a checkpoint had to change in one shard's graph file: the old
    file's part that differs in the new one (4 KB pages of the old file's
    sections, layer-0 link blocks of old nodes), and the bytes of the new
    nodes.  Old nodes keep their place in every per-node section."""
    so, n_old, m0 = graph_sections(old)
    sn, n_new, _ = graph_sections(new)
    a = np.memmap(old, dtype=np.uint8, mode="r")
    b = np.memmap(new, dtype=np.uint8, mode="r")
    page = 4096
    out = dict(old_bytes=len(a), new_bytes=len(b), nodes_old=n_old, nodes_new=n_new,
               pages_changed=0, pages_old=0, link_blocks_changed=0, new_node_bytes=0,
               label_map_bytes=sn["label_map"][1])
    for s in GRAPH_SECTIONS:
        (oa, la), (ob, lb) = so[s], sn[s]
        if s == "label_map":
            continue  # rebuilt canonically: counted apart (label_map_bytes)
        keep = min(la, lb)
        x = a[oa:oa + keep]
        y = b[ob:ob + keep]
        npg = (keep + page - 1) // page
        out["pages_old"] += (la + page - 1) // page
        if keep:
            pad = npg * page - keep
            d = np.concatenate([x != y, np.zeros(pad, dtype=bool)]).reshape(npg, page)
            out["pages_changed"] += int(d.any(axis=1).sum())
            if s == "links0" and n_old:
                blk = 4 * (1 + m0)
                out["link_blocks_changed"] += int(
                    (x[:n_old * blk] != y[:n_old * blk]).reshape(n_old, blk).any(axis=1).sum())
        out["new_node_bytes"] += max(0, lb - la)
    out["link_block_bytes"] = 4 * (1 + m0)
    return out


def graph_change_totals(before, after):
    """graph_changes summed over the shards: the old graph files (hard
    links in `before`) against the new ones in `after`, shard by shard."""
    def by_shard(d):
        return {f.split("-")[1]: os.path.join(d, f) for f in os.listdir(d)
                if f.endswith(".graph")}
    old, new = by_shard(before), by_shard(after)
    tot = {}
    for j in sorted(old):
        if j not in new or os.path.samefile(old[j], new[j]):
            continue
        for k, v in graph_changes(old[j], new[j]).items():
            if k != "link_block_bytes":
                tot[k] = tot.get(k, 0) + v
            else:
                tot[k] = v
    page = 4096
    blk = tot.get("link_block_bytes", 0)
    # what a proportional checkpoint would have to write (docs/PROTOCOL.md,
    # "Proportional checkpoint"): the changed pages of the old files plus
    # the new nodes (a page journal), or the changed layer-0 link blocks
    # plus the new nodes (a block delta); both beside the full rewrite
    return {"graph_" + k: v for k, v in tot.items()} | dict(
        page_journal_bytes=tot.get("pages_changed", 0) * page + tot.get("new_node_bytes", 0),
        block_delta_bytes=tot.get("link_blocks_changed", 0) * (blk + 4)
        + tot.get("new_node_bytes", 0),
        full_rewrite_bytes=tot.get("new_bytes", 0))


def cmd_append(a):
    """--count new items appended to the server in DIR (encode, apply with
    --threads: a write-ahead-log append; one checkpoint), the bytes each
    step wrote, and in the same process hnswlib's incremental add_items of
    the same vectors into an hnswlib index over the same base (D21): the
    growth an HNSW insert has by itself, without our storage."""
    m = lib()
    d = load_set(a, need_base=False, need_queries=False)
    client = m.Client.load(a.dir + ".client")
    s = open_dir(m, a.dir, client.params)
    base_items = a.base or s.stats().entries // 16
    # new items: learn vectors (never in the base), ids past the base's
    x = d["learn"][:a.count].astype(np.float32)
    if len(x) < a.count:
        raise SystemExit("only %d learn vectors for --count %d" % (len(x), a.count))
    row = dict(kind="mess_append", dir=a.dir, base_items=base_items, count=a.count,
               threads=a.threads)
    idx = None
    if not a.no_hnswlib:
        idx, build_s = hnswlib_base(a, base_items, a.count, x.shape[1])
        row["hnswlib_base_build_s"] = build_s
    if not a.skip_mess:
        ids = np.arange(a.first_id, a.first_id + a.count, dtype=np.uint64)
        files0 = dir_files(a.dir)
        keep = None
        if a.graph_changes:  # hard links keep the graph files the checkpoint replaces
            keep = os.path.join(a.dir + ".before-append")
            os.makedirs(keep)
            for f in files0:
                if f.endswith(".graph"):
                    os.link(os.path.join(a.dir, f), os.path.join(keep, f))
        row["load_before"] = load()
        t0 = time.perf_counter()
        buf = client.upload(ids, x, a.threads)
        t1 = time.perf_counter()
        upload_bytes = len(buf)
        io1 = proc_io()
        s.apply_upload(buf, a.threads)
        t2 = time.perf_counter()
        io2 = proc_io()
        ok(m.x_checkpoint(s.ptr), "mess_server_checkpoint")
        t3 = time.perf_counter()
        io3 = proc_io()
        buf.close()
        files1 = dir_files(a.dir)
        # what the checkpoint wrote, from the files: files it created
        # (new graph files, new arenas, MANIFEST) and arena growth
        new = {f: n for f, n in files1.items() if f not in files0 and f != "wal"}
        grown = sum(n - files0[f] for f, n in files1.items()
                    if f in files0 and f.endswith(".arena"))
        manifest = files1.get("MANIFEST", 0)
        no_wal = lambda fs: sum(n for f, n in fs.items() if f != "wal")
        added = no_wal(files1) - no_wal(files0)
        written = sum(new.values()) + grown + manifest
        row.update(encode_s=t1 - t0, apply_s=t2 - t1, checkpoint_s=t3 - t2,
                   total_s=t3 - t0, upload_bytes=upload_bytes,
                   apply_wchar=io2["wchar"] - io1["wchar"],
                   apply_write_bytes=io2["write_bytes"] - io1["write_bytes"],
                   checkpoint_wchar=io3["wchar"] - io2["wchar"],
                   checkpoint_write_bytes=io3["write_bytes"] - io2["write_bytes"],
                   checkpoint_files_written=len(new),
                   checkpoint_graph_bytes=sum(n for f, n in new.items() if f.endswith(".graph")),
                   checkpoint_delta_bytes=sum(n for f, n in new.items() if f.endswith(".delta")),
                   checkpoint_deltas=sum(1 for f in new if f.endswith(".delta")),
                   checkpoint_arena_bytes=grown + sum(n for f, n in new.items()
                                                      if f.endswith(".arena")),
                   checkpoint_bytes=written, added_bytes=added,
                   written_per_added=written / added if added else None,
                   disk_bytes=sum(files1.values()), entries_after=s.stats().entries)
        if keep:
            row.update(graph_change_totals(keep, a.dir))
            for f in os.listdir(keep):
                os.remove(os.path.join(keep, f))
            os.rmdir(keep)
    if idx is not None:
        ids = np.arange(base_items, base_items + a.count)
        row["hnswlib_load_before"] = load()
        idx.set_num_threads(a.threads)
        t0 = time.perf_counter()
        idx.add_items(x, ids)
        row["hnswlib_add_s"] = time.perf_counter() - t0
        # hnswlib has no incremental persistence: its save rewrites the index
        tmp = os.path.join(a.out, ".hnswlib-append.tmp")
        t0 = time.perf_counter()
        idx.save_index(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        row["hnswlib_save_s"] = time.perf_counter() - t0
        row["hnswlib_file_bytes"] = os.path.getsize(tmp)
        row["hnswlib_added_bytes"] = os.path.getsize(tmp) * a.count // (base_items + a.count)
        os.remove(tmp)
        if "apply_s" in row:
            row["apply_over_hnswlib_add"] = row["apply_s"] / row["hnswlib_add_s"]
    record(a.out, row)
    s.close()
    client.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("hnswlib", help="plaintext hnswlib on the raw vectors")
    h.add_argument("--data", default="datasets/1m")
    h.add_argument("--out", default="docs/eval/1m")
    h.add_argument("--base", type=int, default=0, help="first N base vectors only")
    h.add_argument("--truth", help="ground truth of the prefix (with --base)")
    h.add_argument("--queries", type=int, default=0)
    h.add_argument("--m", type=int, default=16)
    h.add_argument("--ef-construction", type=int, default=300)
    h.add_argument("--threads", type=int, default=1)
    def common(x, data="datasets/1m"):
        x.add_argument("--data", default=data)
        x.add_argument("--out", default="docs/eval/1m")
        x.add_argument("--dir", required=True, help="the server directory")
        x.add_argument("--config", choices=sorted(CONFIGS), default="d8q8")
        x.add_argument("--threads", type=int, default=2)
        x.add_argument("--queries", type=int, default=1000)
        x.add_argument("--truth", help="ground truth (default DATA/groundtruth.ivecs)")
        x.add_argument("--base", type=int, default=0, help="first N base vectors only")
    b = sub.add_parser("build", help="build a server directory")
    common(b)
    b.add_argument("--batch", type=int, default=20000)
    b.add_argument("--checkpoint", type=int, default=200000)
    b.add_argument("--resume", action="store_true",
                   help="continue a directory whose build was killed (DIR.client, its items)")
    b.add_argument("--in-memory", action="store_true",
                   help="build in memory and save DIR.travel (then: import)")
    i = sub.add_parser("import", help="DIR.travel -> DIR (mess_server_import)")
    common(i)
    q = sub.add_parser("query", help="Recall@10 vs B, ms, bytes, resident")
    common(q)
    q.add_argument("--pools", default="250,500,1000,1500,3000")
    o = sub.add_parser("open", help="open time cold / warm")
    common(o)
    o.add_argument("--repeat", type=int, default=5)
    o.add_argument("--first-query", action="store_true",
                   help="also time the first two queries after each open (--data, --pool)")
    o.add_argument("--pool", type=int, default=1500)
    cc = sub.add_parser("cold", help="open + first queries cold, per page-cache advice")
    common(cc, data="datasets/large")
    cc.add_argument("--pool", type=int, default=1500)
    cc.add_argument("--rounds", type=int, default=2)
    cc.add_argument("--policies", default=",".join(POLICIES),
                    help="comma-separated; each a '+'-joined set of: none, "
                    + ", ".join(sorted(ADVICE)))
    c = sub.add_parser("compare", help="mapped vs in-memory search, one thread")
    common(c)
    c.add_argument("--pool", type=int, default=1500)
    c.add_argument("--repeat", type=int, default=5)
    mm = sub.add_parser("memory", help="today's in-memory server (load of DIR.travel)")
    common(mm)
    mm.add_argument("--pools", default="250,500,1000,1500,3000")
    mm.add_argument("--repeat", type=int, default=2)
    p = sub.add_parser("append", help="append --count items + checkpoint")
    common(p)
    p.add_argument("--count", type=int, default=10000)
    p.add_argument("--first-id", type=int, default=10 ** 9)
    p.add_argument("--graph-changes", action="store_true",
                   help="compare each replaced graph file with its successor: changed "
                   "pages and link blocks (what a proportional checkpoint would write)")
    p.add_argument("--no-hnswlib", action="store_true",
                   help="skip hnswlib's add_items of the same vectors")
    p.add_argument("--skip-mess", action="store_true",
                   help="hnswlib only (the server's append measured elsewhere)")
    p.add_argument("--hnswlib-index",
                   help="hnswlib index of the base: loaded if it exists, else built and saved")
    a = ap.parse_args()
    {"hnswlib": cmd_hnswlib, "build": cmd_build, "import": cmd_import, "memory": cmd_memory, "query": cmd_query, "open": cmd_open,
     "compare": cmd_compare, "append": cmd_append, "cold": cmd_cold}[a.cmd](a)


if __name__ == "__main__":
    main()
