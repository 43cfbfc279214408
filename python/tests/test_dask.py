"""mess.dask on a local cluster (127.0.0.1, 2 worker processes): responses of
1, 2 and 4 shard groups identical to one server's, uploads and deletes
routed to the groups, a killed worker (its group reopened from its files
and the query retried, or a clear error when it cannot be), hostile partial
responses through the bindings (split_records, Server.search_shards,
merge_responses), every socket on loopback, a worker's answers that are
not plain data refused unread, the deployment's files not followed
through links.  Needs Debian's python3-distributed and python3-dask."""
import glob
import http.client
import os
import signal
import tempfile
import unittest

import numpy as np

import mess
from mess import wire

try:
    import mess.dask as md
    md.require()
    MISSING = None
except ImportError as e:  # the packages are in scripts/deps.sh's check group
    MISSING = "mess.dask needs python3-distributed and python3-dask (apt-get install " \
              "python3-distributed python3-dask): %s" % e

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SIFT = os.path.join(ROOT, "datasets", "sift")
N, NQ, POOL = 1000, 8, 160


def params():
    return mess.Params(128, shards=16, per_item=4, ef_construction=40, hnsw_m=8,
                       train_sample=1000, kappa=64)


def listening_sockets(pids):
    """(pid, address, port) of every listening TCP socket, IPv4 and IPv6, of
    the processes `pids` (psutil: a dependency of python3-distributed)."""
    import psutil
    out = []
    for pid in pids:
        for c in psutil.Process(pid).connections(kind="inet"):
            if c.status == psutil.CONN_LISTEN:
                out.append((pid, c.laddr.ip, c.laddr.port))
    return out


def http_status(port, path):
    """The status of GET path on 127.0.0.1:port (5 s at most)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.request("GET", path)
        return c.getresponse().status
    finally:
        c.close()


def _touch(path):
    """What unpickling a Hostile object does: writes the file `path`."""
    with open(path, "w") as f:
        f.write("unpickled")
    return "unpickled"


class Hostile:
    """An object whose unpickling runs code (_touch)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (_touch, (self.marker,))


def install_hostile_answers(marker, mode, methods, dask_worker=None):
    """Run in each worker (Client.run): its answers to the actor calls
    `methods` become what a compromised worker could send whatever
    serializers it was asked for: mode "pickle" (Dask's pickle family),
    "dask" (the dask family, whose header carries its type pickled),
    "topickle" (Dask's __Pickled__ frame), each holding a Hostile, or
    "shape" (plain data, but not bytes)."""
    import pickle
    from distributed.protocol.serialize import Serialized, ToPickle
    honest = getattr(dask_worker, "_mess_honest", None) or dask_worker.handlers["actor_execute"]
    dask_worker._mess_honest = honest

    async def hostile(actor=None, function=None, args=(), kwargs=None):
        if function not in methods:
            return await honest(actor=actor, function=function, args=args, kwargs=kwargs)
        if mode == "pickle":
            result = Serialized({"serializer": "pickle"}, [pickle.dumps(Hostile(marker))])
        elif mode == "dask":
            result = Serialized({"serializer": "dask",
                                 "type-serialized": pickle.dumps(Hostile(marker))}, [b""])
        elif mode == "topickle":
            result = ToPickle(Hostile(marker))
        else:
            result = ("ok", "text, not bytes")
        return {"status": "OK", "result": result}
    dask_worker.handlers["actor_execute"] = hostile


def restore_honest_answers(dask_worker=None):
    honest = getattr(dask_worker, "_mess_honest", None)
    if honest is not None:
        dask_worker.handlers["actor_execute"] = honest


def make_certificates(directory, name):
    """A CA of its own and one certificate and key it signed, made with the
    openssl command as docs/DISTRIBUTED.md ("TLS") says: (ca, cert, key)."""
    import subprocess
    d = os.path.join(directory, name)
    os.makedirs(d)
    ca, ca_key = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
    cert, key, csr = (os.path.join(d, n) for n in ("node.pem", "node.key", "node.csr"))
    ext = os.path.join(d, "node.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints = critical, CA:FALSE\n"
                "keyUsage = critical, digitalSignature, keyEncipherment\n"
                "extendedKeyUsage = serverAuth, clientAuth\n"
                "subjectKeyIdentifier = hash\n"
                "authorityKeyIdentifier = keyid\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for cmd in (["req", "-x509"] + ec + ["-days", "2", "-subj", "/CN=%s CA" % name,
                                        "-keyout", ca_key, "-out", ca],
                ["req"] + ec + ["-subj", "/CN=%s node" % name, "-keyout", key, "-out", csr],
                ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
                 "-days", "2", "-extfile", ext, "-out", cert]):
        subprocess.run(["openssl"] + cmd, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)
    return ca, cert, key


class Data:
    base = mess.read_f32(os.path.join(SIFT, "base.bvecs"))[:N].copy()
    train = mess.read_f32(os.path.join(SIFT, "learn.bvecs"))[:2000].copy()
    queries = mess.read_f32(os.path.join(SIFT, "query.bvecs"))[:NQ].copy()


class Fixture:
    """One client and one whole server holding N items, then N/10 deleted."""
    p = params()
    client = mess.Client(p, Data.train, seed=bytes(range(32)))
    single = mess.Server(p)
    ups = [client.upload(np.arange(0, 600), Data.base[:600]),
           client.upload(np.arange(600, N), Data.base[600:])]
    dels = [client.delete(np.arange(0, N, 10))]
    for u in ups:
        single.apply_upload(u)
    for d in dels:
        single.apply_delete(d)

    @classmethod
    def requests(cls, pool=POOL):
        out = []
        for q in Data.queries:
            qs, r = cls.client.request(q, pool)
            out.append((qs, bytes(r)))
            r.close()
        return out


class TestBindings(unittest.TestCase):
    """split_records, search_shards and merge_responses without Dask."""

    def test_split_search_merge(self):
        p, f = Fixture.p, Fixture
        sets = [[3, 1, 0], list(range(4, 16)), [2]]
        groups = []
        for s in sets:
            srv = mess.Server(p)
            for u in f.ups:
                srv.apply_upload(mess.split_records(p, u, s))
            self.assertEqual(srv.apply_delete(mess.split_records(p, f.dels[0], s)), 0)
            groups.append(srv)
        for qs, req in f.requests():
            whole = bytes(f.single.search(req))
            parts = [g.search_shards(req, s) for g, s in zip(groups, sets)]
            merged = mess.merge_responses(p, req, parts[::-1])
            self.assertEqual(bytes(merged), whole)
            ids, _, _ = f.client.finish(qs, merged, 10)
            self.assertEqual(len(ids), 10)
        for g in groups:
            g.close()

    def test_refusals(self):
        p, f = Fixture.p, Fixture
        (qa, ra), (qb, rb) = f.requests()[:2]
        lo = f.single.search_shards(ra, range(8))
        hi = f.single.search_shards(ra, range(8, 16))
        other = f.single.search_shards(rb, range(8, 16))
        with self.assertRaisesRegex(mess.FormatError, "overlap: shard 0"):
            mess.merge_responses(p, ra, [lo, hi, lo])
        with self.assertRaisesRegex(mess.FormatError, "gap: 8 shard"):
            mess.merge_responses(p, ra, [lo])
        with self.assertRaisesRegex(mess.AuthenticationError, "part 1 answers another request"):
            mess.merge_responses(p, ra, [lo, other])
        cut = bytes(hi)[:-1]
        with self.assertRaisesRegex(mess.FormatError, "cut short"):
            mess.merge_responses(p, ra, [lo, cut])
        # a well-formed part over its budget (POOL / 16 = 10 per shard)
        hdr, rid, budgets, _ = wire.parse_request(ra, 16, p.kappa // 8)
        sections = wire.partial_sections(hi, p.payload_size())
        shard, entries = sections[0]
        forged = wire.build_partial(hdr, rid, [(shard, entries * 2)] + sections[1:])
        with self.assertRaisesRegex(mess.FormatError, "over its budget"):
            mess.merge_responses(p, ra, [lo, forged])
        with self.assertRaises(ValueError):
            f.single.search_shards(ra, [1, 1])
        with self.assertRaises(ValueError):
            mess.split_records(p, f.ups[0], [16])
        with self.assertRaises(mess.FormatError):
            mess.split_records(p, ra, [1])  # a request is not an upload


@unittest.skipIf(MISSING is not None, MISSING or "")
class TestPacked(unittest.TestCase):
    """A group's answers travel as one array (pack_answers); the caller
    reads it as a worker's hostile bytes (unpack_answers)."""

    def test_round_trip_and_hostile(self):
        p, f = Fixture.p, Fixture
        reqs = [r for _, r in f.requests()]
        sets = md.group_shards(16, 2)
        parts = [f.single.search_shards(r, sets[0]) for r in reqs[:3]]
        want = [bytes(x) for x in parts]
        arr = md.pack_answers([(0, parts[0]), (5, b"group 0: refused"),
                               (0, parts[1]), (0, parts[2])])
        got = md.unpack_answers(arr, 4)
        self.assertEqual([g[0] for g in got], ["ok", "error", "ok", "ok"])
        self.assertEqual([bytes(got[i][1]) for i in (0, 2, 3)], want)
        self.assertEqual(got[1][1:], (5, "group 0: refused"))
        # the merge takes the views as they are (no copy)
        with f.single.search_shards(reqs[0], sets[1]) as other:
            merged = mess.merge_responses(p, reqs[0], [got[0][1], other])
            self.assertEqual(bytes(merged), bytes(f.single.search(reqs[0])))
        a = np.asarray(arr)
        for bad, why in ((a[:-1], "cut short"), (np.concatenate([a, a[:1]]), "trailing"),
                         (a[:7], "not a packed array"), (a.view(np.int8), "not a packed")):
            with self.assertRaisesRegex(ValueError, why):
                md.unpack_answers(bad, 4)
        with self.assertRaisesRegex(ValueError, "answered 4 requests of 3"):
            md.unpack_answers(a, 3)
        huge = a.copy()
        huge[16:24] = np.frombuffer(np.array([2 ** 63], dtype="<u8").tobytes(), np.uint8)
        with self.assertRaisesRegex(ValueError, "cut short"):
            md.unpack_answers(huge, 4)
        many = a.copy()
        many[:8] = np.frombuffer(np.array([2 ** 60], dtype="<u8").tobytes(), np.uint8)
        with self.assertRaisesRegex(ValueError, "answered"):
            md.unpack_answers(many, 2 ** 60)


@unittest.skipIf(MISSING is not None, MISSING or "")
class TestFiles(unittest.TestCase):
    """A deployment's own files (a group's .seq and .lock) are opened
    without following links and must be regular files: a link planted
    under their names by whoever can write the directory is refused with
    an error naming the file, and the file it points to is neither
    created, read nor written.  No cluster: the group's actor class runs
    in this process."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="mess-dask-files-")
        self.root = os.path.join(self.tmp.name, "deployment")
        self.outside = os.path.join(self.tmp.name, "outside")
        os.makedirs(self.root)
        os.makedirs(self.outside)

    def tearDown(self):
        self.tmp.cleanup()

    def group(self):
        return md.GroupServer(Fixture.p.as_dict(), range(16), self.root, 0, threads=1)

    def close(self, g):
        import asyncio
        self.assertEqual(asyncio.run(g.close())[0], "ok")

    def test_lock_link_refused(self):
        lock = os.path.join(self.root, "group-0.lock")
        victim = os.path.join(self.outside, "victim")
        os.symlink(victim, lock)  # dangling: opening it would create victim
        with self.assertRaisesRegex(md.UnsafeFileError, "group-0.lock is a symbolic link"):
            self.group()
        self.assertFalse(os.path.lexists(victim))
        with open(victim, "w") as f:
            f.write("outside")
        with self.assertRaisesRegex(md.UnsafeFileError, "group-0.lock is a symbolic link"):
            self.group()
        with open(victim) as f:
            self.assertEqual(f.read(), "outside")
        os.unlink(lock)
        os.mkfifo(lock)  # not a regular file: refused, not waited on
        with self.assertRaisesRegex(md.UnsafeFileError, "group-0.lock is not a regular file"):
            self.group()
        os.unlink(lock)
        self.close(self.group())  # a plain file: as before
        self.assertTrue(os.path.isfile(lock) and not os.path.islink(lock))

    def test_seq_link_refused(self):
        self.close(self.group())  # makes group-0 and its .seq
        seq = os.path.join(self.root, "group-0.seq")
        victim = os.path.join(self.outside, "seq")
        with open(seq) as f:
            body = f.read()
        with open(victim, "w") as f:
            f.write(body)  # the same record: only the link is wrong
        os.unlink(seq)
        os.symlink(victim, seq)
        with self.assertRaisesRegex(md.UnsafeFileError, "group-0.seq is a symbolic link"):
            self.group()
        with open(victim) as f:
            self.assertEqual(f.read(), body)
        # the groups made from a built server: a link under a .seq's name
        # is refused, not written through (nor replaced)
        single = os.path.join(self.tmp.name, "single")
        with mess.Server.create(single, Fixture.p) as s:
            s.apply_upload(Fixture.ups[0])
            s.checkpoint()
        groups = os.path.join(self.tmp.name, "groups")
        os.makedirs(groups)
        os.symlink(victim, os.path.join(groups, "group-1.seq"))
        with self.assertRaisesRegex(md.UnsafeFileError, "group-1.seq is a symbolic link"):
            md.extract_groups(single, Fixture.p, 2, groups)
        with open(victim) as f:
            self.assertEqual(f.read(), body)
        self.assertTrue(os.path.islink(os.path.join(groups, "group-1.seq")))


@unittest.skipIf(MISSING is not None, MISSING or "")
class TestDask(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # fork: a worker starts in a fraction of a second (no imports; the
        # workers use no BLAS), where spawn or forkserver took over a minute
        # under make -j2 check on the loaded machine.  timeout: also how
        # long a worker may take to start.
        cls._cm = md.local_cluster(workers=2, threads_per_worker=1, timeout=120,
                                   memory_limit="1GB", start_method="fork")
        cls.dc = cls._cm.__enter__()
        cls.tmp = tempfile.TemporaryDirectory(prefix="mess-dask-test-")

    @classmethod
    def tearDownClass(cls):
        cls._cm.__exit__(None, None, None)
        cls.tmp.cleanup()

    def deployment(self, groups, name, **kw):
        self.dc.wait_for_workers(1, timeout=30)  # after a kill: the nanny restarts it
        # timeout: a call that takes longer counts as a lost group (reopened)
        d = md.Deployment(self.dc, Fixture.p, groups,
                          tempfile.mkdtemp(prefix=name, dir=self.tmp.name), timeout=10, **kw)
        for u in Fixture.ups:
            d.apply_upload(u)
        self.assertEqual(d.apply_delete(Fixture.dels[0]), 0)
        return d

    def check_identical(self, d, in_flight):
        reqs = Fixture.requests()
        got = d.search_many([r for _, r in reqs], in_flight=in_flight)
        for (qs, r), resp in zip(reqs, got):
            self.assertEqual(bytes(resp), bytes(Fixture.single.search(r)))
        ids, _, _ = Fixture.client.finish(reqs[0][0], got[0], 10)
        self.assertEqual(len(ids), 10)
        self.assertFalse(set(int(x) for x in ids) & set(range(0, N, 10)))  # deleted

    def test_a_groups_identical(self):
        for g in (1, 2, 4):
            with self.subTest(groups=g), self.deployment(g, "g%d" % g) as d:
                self.check_identical(d, in_flight=1 if g == 1 else 4)
                info = d.info()
                self.assertEqual(sum(i["entries"] for i in info), Fixture.single.stats().entries)
                self.assertEqual(sorted(j for i in info for j in i["shards"]), list(range(16)))

    def test_b_upload_and_delete_after_serving(self):
        with self.deployment(2, "later") as d, mess.Server(Fixture.p) as s:
            # a second client's life on a fresh pair: same changes both ways
            for u in Fixture.ups:
                s.apply_upload(u)
            s.apply_delete(Fixture.dels[0])
            more = Fixture.client.delete(np.arange(1, 200, 7))
            self.assertEqual(d.apply_delete(more), s.apply_delete(more))
            reqs = Fixture.requests()
            for (qs, r), resp in zip(reqs, d.search_many([r for _, r in reqs])):
                self.assertEqual(bytes(resp), bytes(s.search(r)))
            # a refused change: the library's error, nothing pending
            with self.assertRaises(mess.StateError):
                d.apply_upload(Fixture.ups[0])  # those items are stored already

    def test_c_killed_worker(self):
        with self.deployment(2, "kill") as d:
            reqs = Fixture.requests()
            pid = d.info()[0]["pid"]
            self.assertNotEqual(pid, os.getpid())
            # calls in flight when the worker dies
            g0 = d.groups[0]
            issued = {g.k: d._call(g, "search", reqs[0][1]) for g in d.groups}
            os.kill(pid, signal.SIGKILL)  # a worker process this test's cluster started
            resp = d._merge(reqs[0][1], issued)
            self.assertEqual(bytes(resp), bytes(Fixture.single.search(reqs[0][1])))
            self.assertGreaterEqual(d.reopened, 1)
            self.assertNotEqual(d.info()[0]["pid"], pid)
            self.assertEqual(g0.seq, 3)
            self.check_identical(d, in_flight=4)
            # killed between requests: the fan-out path finds out and retries
            before = d.reopened
            os.kill(d.info()[1]["pid"], signal.SIGKILL)
            self.check_identical(d, in_flight=4)
            self.assertGreater(d.reopened, before)

    def test_d_killed_worker_without_files(self):
        with self.deployment(2, "nofiles", persist=False) as d:
            req = Fixture.requests()[0][1]
            self.assertEqual(bytes(d.search(req)), bytes(Fixture.single.search(req)))
            os.kill(d.info()[1]["pid"], signal.SIGKILL)
            with self.assertRaisesRegex(md.GroupUnavailableError,
                                        r"shard group [01] \(shards [08]\.\.[71]5?\) unavailable "
                                        r"during search: .*memory only"):
                d.search(req)

    def test_e_acknowledged_upload_survives_kill(self):
        # no checkpoint before the kill: the upload is only in group 0's log
        with self.deployment(2, "wal", checkpoint_every=1000) as d, \
                mess.Server(Fixture.p) as s:
            for u in Fixture.ups:
                s.apply_upload(u)
            s.apply_delete(Fixture.dels[0])
            more = Fixture.client.upload(np.arange(N, N + 40), Data.base[N - 40:])
            d.apply_upload(more)  # acknowledged: every group appended its part
            s.apply_upload(more)
            info = d.info()
            self.assertEqual([i["log_records"] for i in info], [4, 4])
            self.assertEqual([i["seq"] for i in info], [4, 4])
            gens = [i["generation"] for i in info]
            self.assertFalse(glob.glob(os.path.join(d.directory, "*.server")))
            os.kill(info[0]["pid"], signal.SIGKILL)  # a worker this test's cluster started
            reqs = Fixture.requests()
            got = d.search_many([r for _, r in reqs], in_flight=4)
            for (qs, r), resp in zip(reqs, got):
                self.assertEqual(bytes(resp), bytes(s.search(r)))
            after = d.info()
            self.assertNotEqual(after[0]["pid"], info[0]["pid"])
            self.assertEqual(after[0]["seq"], 4)          # the log replayed
            self.assertEqual(after[0]["log_records"], 4)
            self.assertEqual(after[0]["entries"], info[0]["entries"])
            # a checkpoint folds the logs; a kill after it reopens the files
            self.assertEqual(d.checkpoint(), [g + 1 for g in gens])
            self.assertEqual([i["log_records"] for i in d.info()], [0, 0])
            os.kill(d.info()[1]["pid"], signal.SIGKILL)
            got = d.search_many([r for _, r in reqs], in_flight=4)
            for (qs, r), resp in zip(reqs, got):
                self.assertEqual(bytes(resp), bytes(s.search(r)))
            self.assertEqual([i["seq"] for i in d.info()], [4, 4])

    def test_f_groups_extracted_from_a_built_server(self):
        root = tempfile.mkdtemp(prefix="extract", dir=self.tmp.name)
        single = os.path.join(root, "single")
        with mess.Server.create(single, Fixture.p) as s:
            for u in Fixture.ups:
                s.apply_upload(u)
            s.apply_delete(Fixture.dels[0])
            s.checkpoint()
        md.extract_groups(single, Fixture.p, 2, os.path.join(root, "groups"))
        with md.Deployment(self.dc, Fixture.p, 2, os.path.join(root, "groups"),
                           timeout=10, checkpoint_every=1) as d:
            self.assertEqual([i["seq"] for i in d.info()], [0, 0])
            self.check_identical(d, in_flight=4)
            more = Fixture.client.delete(np.arange(3, 300, 11))
            with mess.Server.open(single) as s:
                self.assertEqual(d.apply_delete(more), s.apply_delete(more))
                reqs = Fixture.requests()
                for (qs, r), resp in zip(reqs, d.search_many([r for _, r in reqs])):
                    self.assertEqual(bytes(resp), bytes(s.search(r)))
            # checkpoint_every=1: the change is in the files already
            self.assertEqual([i["log_records"] for i in d.info()], [0, 0])
        with self.assertRaises(OSError):  # the groups exist
            md.extract_groups(single, Fixture.p, 2, os.path.join(root, "groups"))

    def test_h_hostile_answers_refused(self):
        """A worker's answer that is not plain data (msgpack) is refused at
        the coordinator with RefusedAnswerError naming the group, the
        worker and the call, before any of it is unpickled: the file that
        unpickling would write is absent.  The search path (search_packed,
        asynchronous) and a synchronous call (info)."""
        marker = os.path.join(self.tmp.name, "unpickled")
        req = Fixture.requests()[0][1]
        want = bytes(Fixture.single.search(req))
        with self.deployment(2, "hostile") as d:
            for mode, why in (("pickle", "Data serialized with pickle"),
                              ("dask", "Data serialized with dask"),
                              ("topickle", r"a pickled object \(Dask's __Pickled__ frame\)"),
                              ("shape", r'not bytes nor \("error", code, message\)')):
                with self.subTest(mode=mode):
                    self.dc.run(install_hostile_answers, marker, mode, ("search_packed",))
                    try:
                        with self.assertRaisesRegex(
                                md.RefusedAnswerError,
                                r"shard group [01] \(shards [08]\.\.[71]5?\): the answer of the "
                                r"worker at tcp://127\.0\.0\.1:\d+ to search_packed is refused, "
                                r"nothing of it unpickled .*: " + why):
                            if mode == "shape":
                                d.search(req)
                            else:  # Dask logs the refused frame: kept out of the output
                                with self.assertLogs("distributed.protocol.core", "CRITICAL"):
                                    d.search(req)
                    finally:
                        self.dc.run(restore_honest_answers)
                    self.assertFalse(os.path.exists(marker))
                    self.assertEqual(bytes(d.search(req)), want)  # honest again
            self.dc.run(install_hostile_answers, marker, "pickle", ("info",))
            try:
                with self.assertRaisesRegex(md.RefusedAnswerError, "to info is refused"), \
                        self.assertLogs("distributed.protocol.core", "CRITICAL"):
                    d.info()
            finally:
                self.dc.run(restore_honest_answers)
            self.assertFalse(os.path.exists(marker))
            self.assertEqual(d.reopened, 0)  # refused, not retried elsewhere

    def test_g_loopback_only(self):
        """Every socket the cluster's processes listen on is on loopback
        (the scheduler's, the nannies', the workers', the HTTP servers'),
        and the HTTP servers serve no page (no dashboard, no /health)."""
        import psutil
        self.dc.wait_for_workers(2, timeout=30)  # after test_c's kills
        me = psutil.Process()
        pids = {me.pid} | {p.pid for p in me.children(recursive=True)}
        workers = self.dc.run(os.getpid)  # {address: pid} of the worker processes
        self.assertEqual(len(workers), 2)
        self.assertTrue(set(workers.values()) <= pids, (workers, pids))
        socks = listening_sockets(sorted(pids))
        self.assertGreaterEqual(len(socks), 5)  # scheduler, 2 nannies, 2 workers at least
        for pid, ip, port in socks:
            self.assertIn(ip, ("127.0.0.1", "::1"),
                          "process %d listens on %s port %d" % (pid, ip, port))
        info = self.dc.scheduler_info()
        ports = [info["services"]["dashboard"]] + \
            [w["services"]["dashboard"] for w in info["workers"].values()]
        self.assertEqual(len(ports), 3)
        for port in ports:
            for path in ("/", "/health", "/metrics", "/info/main/workers.html",
                         "/json/identity.json", "/statics/"):
                self.assertEqual(http_status(port, path), 404, "port %d %s" % (port, path))



@unittest.skipIf(MISSING is not None, MISSING or "")
class TestTLS(unittest.TestCase):
    """local_cluster(security=mess.dask.tls(...)) on loopback: every
    connection TLS with the cluster's own CA (not tested across hosts)."""

    def test_tls_cluster(self):
        import asyncio
        import psutil
        from distributed.comm import connect
        with tempfile.TemporaryDirectory(prefix="mess-dask-tls-") as tmp:
            security = md.tls(*make_certificates(tmp, "cluster"))
            stranger = md.tls(*make_certificates(tmp, "stranger"))
            with md.local_cluster(workers=1, threads_per_worker=1, timeout=120,
                                  memory_limit="1GB", start_method="fork",
                                  security=security) as dc:
                info = dc.scheduler_info()
                self.assertTrue(info["address"].startswith("tls://127.0.0.1:"), info["address"])
                self.assertEqual([w.split(":")[0] for w in info["workers"]], ["tls"])
                me = psutil.Process()
                pids = [me.pid] + [p.pid for p in me.children(recursive=True)]
                for pid, ip, port in listening_sockets(pids):
                    self.assertEqual(ip, "127.0.0.1", "process %d port %d" % (pid, port))
                with md.Deployment(dc, Fixture.p, 2, os.path.join(tmp, "groups"),
                                   timeout=30) as d:
                    for u in Fixture.ups:
                        d.apply_upload(u)
                    d.apply_delete(Fixture.dels[0])
                    reqs = Fixture.requests()
                    for (qs, r), resp in zip(reqs, d.search_many([r for _, r in reqs])):
                        self.assertEqual(bytes(resp), bytes(Fixture.single.search(r)))
                # a certificate of another CA is refused by the scheduler
                with self.assertRaises(OSError):
                    asyncio.run(connect(info["address"], timeout=3,
                                        **stranger.get_connection_args("client")))
                # and plain TCP gets nowhere either
                import distributed
                with self.assertRaises(OSError):
                    asyncio.run(connect(info["address"].replace("tls://", "tcp://"), timeout=3,
                                        **distributed.Security().get_connection_args("client")))


if __name__ == "__main__":
    unittest.main()
