#!/usr/bin/python3
"""eval/groups.py - a data set served and built as two shard groups in two
Dask worker processes (issue 31, "An honest plan for 100M"), on one
machine, every socket on 127.0.0.1 (mess.dask.local_cluster).

    # serving rate: the groups extracted from a built server directory
    # (mess.dask.extract_groups), served by 2 local workers, beside the
    # single directory in one process, same client and queries, per pool
    nice -n 10 python3 eval/groups.py serve --data /work/data/1m \\
        --single /work/data/srv/1m --client /work/data/srv/1m.client \\
        --pools 1500,2043 --queries 1000 --dir /work/data/groups/serve
    # parallel build: the same uploads applied by one process with 2
    # threads to one directory, then by 2 worker processes (1 thread each)
    # to their groups' directories (Deployment.apply_upload: each group
    # gets its shards' records, mess_records_split), wall and CPU of both,
    # and recall@10 of both at --pool on the first --queries queries
    nice -n 10 python3 eval/groups.py build --data /work/data/large \\
        --dir /work/data/groups/build --queries 1000 --pool 1500

`serve` runs `python3 -m mess.dask demo` once per pool (each extracts its
groups into DIR/B; one JSON line each, as the demo prints it, with the
load average).  `build` prints one JSON line.  Both are bounded: the
cluster's calls time out after --timeout seconds and its workers exit
when the scheduler goes.  The library is found as mess.dask finds it
(MESS_LIBRARY, or the source tree's build/libmess.so)."""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))


def serve(args):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(HERE, "..", "python") + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    rc = 0
    for b in [int(x) for x in args.pools.split(",")]:
        load0 = os.getloadavg()[0]
        cmd = [sys.executable, "-m", "mess.dask", "demo", "--workers", str(args.workers),
               "--data", args.data, "--pool", str(b), "--queries", str(args.queries),
               "--rounds", str(args.rounds), "--single", args.single,
               "--client", args.client, "--dir", os.path.join(args.dir, str(b)),
               "--timeout", str(args.timeout)]
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, timeout=args.limit)
        rc = rc or p.returncode
        out = p.stdout.decode().strip().splitlines()
        if out:
            r = json.loads(out[-1])
            r["load_average_before"] = round(load0, 2)
            print(json.dumps(r), flush=True)
    return rc


def _recall(client, server_search, queries, gt, pool):
    hits = 0
    for q, g in zip(queries, gt):
        qo, r = client.request(q, pool)
        resp = server_search(bytes(r))
        r.close()
        ids, _, _ = client.finish(qo, resp, 10)
        hits += len(set(int(x) for x in ids) & set(int(x) for x in g[:10]))
    return hits / (10.0 * len(queries))


def build(args):
    import numpy as np
    from mess import Client, Params, Server
    from mess import dask as md
    from mess.vecs import read_ivecs
    md.require()
    base = md._read(args.data, "base")
    learn = md._read(args.data, "learn")
    queries = md._read(args.data, "query")[:args.queries]
    gt = read_ivecs(os.path.join(args.data, "groundtruth.ivecs"))[:args.queries]
    n = len(base)
    p = Params(base.shape[1], payload=args.payload, ef_construction=args.efc)
    client = Client(p, learn, seed=bytes(range(32)), threads=2)
    # the owner's encode, once, apart from both builds
    t0 = time.perf_counter()
    ups = []
    for i in range(0, n, args.batch):
        with client.upload(np.arange(i, min(n, i + args.batch), dtype=np.uint64),
                           base[i:i + args.batch], threads=2) as u:
            ups.append(bytes(u))
    t_encode = time.perf_counter() - t0
    md._log("encoded %d items in %d uploads, %.1f s" % (n, len(ups), t_encode))
    os.makedirs(args.dir, exist_ok=True)
    out = {"items": n, "shards": p.shards, "per_item": p.per_item, "payload": args.payload,
           "ef_construction": args.efc, "encode_seconds": round(t_encode, 1),
           "load_average_start": round(os.getloadavg()[0], 2)}

    # one process, one directory, 2 threads
    single_dir = os.path.join(args.dir, "single")
    t0, c0 = time.perf_counter(), time.process_time()
    single = Server.create(single_dir, p)
    for u in ups:
        single.apply_upload(u, threads=2)
    single.checkpoint()
    out["single_wall_seconds"] = round(time.perf_counter() - t0, 1)
    out["single_cpu_seconds"] = round(time.process_time() - c0, 1)
    out["entries"] = single.stats().entries
    md._log("single: %.1f s wall, %.1f s CPU" % (out["single_wall_seconds"],
                                                  out["single_cpu_seconds"]))
    out["load_average_after_single"] = round(os.getloadavg()[0], 2)

    # two worker processes, one group each, 1 thread each
    groups_dir = os.path.join(args.dir, "groups")
    per = md.worker_memory_limit(p, n, 1, args.workers)
    with md.local_cluster(workers=args.workers, threads_per_worker=1, memory_limit=per,
                          timeout=int(args.timeout)) as dc:
        with md.Deployment(dc, p, args.workers, groups_dir, threads=1, timeout=args.timeout,
                           checkpoint_every=10 ** 9) as d:
            pids = [i["pid"] for i in d.info()]
            cpu0 = [md._cpu_seconds(x) for x in pids]
            t0, c0 = time.perf_counter(), time.process_time()
            for u in ups:
                d.apply_upload(u)
            d.checkpoint()
            out["groups_wall_seconds"] = round(time.perf_counter() - t0, 1)
            out["groups_coordinator_cpu_seconds"] = round(time.process_time() - c0, 1)
            cpu1 = [md._cpu_seconds(x) for x in pids]
            out["groups_worker_cpu_seconds"] = [
                None if a is None or b is None else round(b - a, 1)
                for a, b in zip(cpu0, cpu1)]
            out["groups_entries"] = [i["entries"] for i in d.info()]
            md._log("groups: %.1f s wall, workers %s s CPU"
                    % (out["groups_wall_seconds"], out["groups_worker_cpu_seconds"]))
            out["load_average_after_groups"] = round(os.getloadavg()[0], 2)
            # the built groups answer as the single build does
            out["pool"] = args.pool
            out["queries"] = len(queries)
            out["recall_at_10_groups"] = round(
                _recall(client, lambda r: d.search(r), queries, gt, args.pool), 4)
    out["recall_at_10_single"] = round(
        _recall(client, lambda r: single.search(r, threads=1), queries, gt, args.pool), 4)
    single.close()
    out["wall_ratio_single_over_groups"] = round(
        out["single_wall_seconds"] / out["groups_wall_seconds"], 3)
    out["load_average_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out), flush=True)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="eval/groups.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("serve", help="serving rate: 2 groups on 2 local workers beside "
                        "the single directory, per pool (mess.dask demo)")
    sp.add_argument("--data", required=True, help="base/query/learn/groundtruth directory")
    sp.add_argument("--single", required=True, help="a built, checkpointed server directory")
    sp.add_argument("--client", required=True, help="the client file that built it")
    sp.add_argument("--dir", required=True, help="where each pool's groups are extracted "
                    "(DIR/B, new)")
    sp.add_argument("--pools", default="1500,2043", help="comma-separated pools B")
    sp.add_argument("--queries", type=int, default=1000, help="first N queries")
    sp.add_argument("--rounds", type=int, default=1)
    sp.add_argument("--workers", type=int, default=2)
    sp.add_argument("--timeout", type=float, default=120.0,
                    help="seconds any one call may take")
    sp.add_argument("--limit", type=float, default=1800.0,
                    help="seconds one pool's run may take in all")
    bp = sub.add_parser("build", help="parallel build: one process with 2 threads, then "
                        "2 group processes with 1 thread each, same uploads")
    bp.add_argument("--data", required=True)
    bp.add_argument("--dir", required=True, help="new directory for both builds")
    bp.add_argument("--queries", type=int, default=1000)
    bp.add_argument("--pool", type=int, default=1500)
    bp.add_argument("--payload", default="u8")
    bp.add_argument("--efc", type=int, default=64, help="efConstruction")
    bp.add_argument("--batch", type=int, default=10000, help="items per upload")
    bp.add_argument("--workers", type=int, default=2)
    bp.add_argument("--timeout", type=float, default=600.0,
                    help="seconds any one call may take")
    args = ap.parse_args(argv)
    return serve(args) if args.cmd == "serve" else build(args)


if __name__ == "__main__":
    sys.exit(main())
