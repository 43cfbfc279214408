"""mess.dask - one MESS deployment served by shard groups on Dask distributed.

The library opens no connection (mess.h): this module takes its transport
from Dask distributed (Debian: python3-distributed).  The M shards are
split into G contiguous groups; each group is one stateful Dask actor
(GroupServer) holding a mess.Server with only its shards' records, on one
worker.  A query's request bytes go to every group, each answers a partial
response for its shards (mess_server_search_shards), and the caller's
process merges them (mess_response_merge) into the response the whole
server would have given, byte for byte, which Client.finish takes.
Uploads and deletes are cut per group (mess_records_split) and each group
receives only its records.  docs/DISTRIBUTED.md has the deployment shape,
what each worker sees, measurements and a sizing plan.

    from distributed import Client, LocalCluster
    import mess, mess.dask
    with mess.dask.local_cluster(workers=2) as dc:
        d = mess.dask.Deployment(dc, params, groups=2, directory="/srv/mess")
        d.apply_upload(client.upload(ids, base))
        q, req = client.request(vector, pool=1500)
        ids, dists, st = client.finish(q, d.search(req), 10)
        responses = d.search_many(requests, in_flight=8)

Each group keeps one server directory of its own (DIR/group-K, D20):
a change is one append to its write-ahead log, acknowledged only then;
the deployment checkpoints the groups every `checkpoint_every` changes
and at close().  extract_groups() makes the group directories from a
built single-server directory (mess_server_extract), so a deployment
over a built server is copies, not a second build.

Failures: a group's worker that dies, or a call that times out, makes the
deployment reopen that group on a live worker from its directory (its
log replayed: every acknowledged change is there) and retry the call;
after `retries` failed attempts it raises GroupUnavailableError naming
the group.  A response is returned only when every shard's section
arrived and the merge checked them (overlap, gap, request id, budgets),
so no query returns a partial answer silently.  A change that reached
only some groups is kept pending and completed (each group's part
carries a sequence number, so a resend is applied once) before any
further search or change.

Command line:
    python3 -m mess.dask demo --workers W --data DIR --pool B [--scheduler ADDR]
        [--tls-ca-file CA --tls-cert CERT --tls-key KEY]
prints progress on stderr and, as its last line on stdout, one JSON object
(workers, queries, pool, recall_at_10, identical_to_single, ms_per_query,
queries_per_second, bytes_per_query, ...).
"""
import argparse
import asyncio
import concurrent.futures
import ctypes
import contextlib
import errno
import functools
import glob
import json
import logging
import os
import stat
import sys
import tempfile
import time
import uuid

import numpy as np

from . import _lib as L
from .core import Params, Server, merge_responses, split_records

try:  # the transport: Debian python3-distributed (+ python3-dask)
    import dask
    import distributed
except ImportError as e:  # pragma: no cover - depends on the machine
    dask = distributed = None
    _IMPORT_ERROR = e
else:
    _IMPORT_ERROR = None

MISSING = ("mess.dask needs Dask distributed: apt-get install python3-distributed "
           "python3-dask (Debian; no pip)")


def require():
    """Raises ImportError naming the Debian packages if Dask is missing."""
    if distributed is None:
        raise ImportError("%s (%s)" % (MISSING, _IMPORT_ERROR))


class GroupUnavailableError(RuntimeError):
    """A shard group could not answer (its worker died or timed out, and
    reopening it elsewhere failed `retries` times).  .group, .shards and
    .cause say which and why.  Nothing partial was returned."""

    def __init__(self, group, shards, cause, what):
        self.group, self.shards, self.cause = group, shards, cause
        super().__init__("shard group %d (shards %d..%d) unavailable during %s: %s"
                         % (group, shards[0], shards[-1], what, cause))


class RefusedAnswerError(RuntimeError):
    """A worker answered a group's call with something other than plain
    data of the call's shape (msgpack: bytes, strings, integers, tuples,
    dicts; docs/SECURITY.md, section 8): refused before any of it was
    unpickled, and not retried (a worker that sends objects is not asked
    again).  .group, .shards, .address, .method and .cause say which and
    why."""

    def __init__(self, group, shards, address, method, cause):
        self.group, self.shards, self.address = group, shards, address
        self.method, self.cause = method, cause
        super().__init__("shard group %d (shards %d..%d): the answer of the worker at %s to "
                         "%s is refused, nothing of it unpickled (a worker's answers must "
                         "be plain data: msgpack, or bytes): %s"
                         % (group, shards[0], shards[-1], address, method, cause))


def _bytes_dumps(x):
    # the "mess-bytes" family: a uint8 array (pack_answers') as one frame
    # of its own, no copy; anything else is another family's to send
    if not (type(x) is np.ndarray and x.dtype == np.uint8 and x.ndim == 1
            and x.flags.c_contiguous):
        raise NotImplementedError
    return {}, [memoryview(x)]


def _bytes_loads(header, frames):
    # bytes, and nothing else: a read-only view of the frame as it arrived
    # (no copy); nothing in the header or the frame is interpreted
    if len(frames) != 1:
        raise ValueError("a mess-bytes object is one frame, got %d" % len(frames))
    return memoryview(frames[0]).toreadonly().cast("B")


if distributed is not None:  # in the coordinator and in every worker
    from distributed.protocol.serialize import register_serialization_family
    register_serialization_family("mess-bytes", _bytes_dumps, _bytes_loads)

# What the coordinator sends to a group's actor (msgpack) and accepts back:
# msgpack, and a search's packed partials as "mess-bytes" (msgpack would
# copy 400 KB into its buffer on the worker: 0.5 ms where a frame of its
# own costs 0.1, and again on arrival).  Dask 2022.12 decodes any other family a worker's header
# names: "pickle" by pickle.loads, "dask" by first unpickling the type the
# header carries.
_SEND = ("msgpack",)
_ACCEPT = ("mess-bytes", "msgpack")

# Each GroupServer method's answer: a tuple of the types after "ok", or a
# type alone for a bare value (returned as ("ok", value)); a failure is
# ("error", code, message) from every method.
_SHAPES = {"search": (bytes,), "search_packed": memoryview, "apply": (int, str),
           "checkpoint": (int,), "close": (int,), "info": (dict,)}


def _plain(x, depth=0):
    """True if x is made of what msgpack decodes to (bytes, str, int,
    float, bool, None, tuples, lists, dicts with str keys) and nothing else."""
    t = type(x)
    if t in (bytes, str, int, float, bool, type(None)):
        return True
    if depth > 16:
        return False
    if t in (tuple, list):
        return all(_plain(v, depth + 1) for v in x)
    if t is dict:
        return all(type(k) is str and _plain(v, depth + 1) for k, v in x.items())
    return False


def _why(e):
    """What Dask said when it refused to decode a worker's answer."""
    text = str(e)
    if text.startswith("Unpickle on the Scheduler isn't allowed"):
        # its advice (turn pickling on) is the opposite of what is wanted
        return "a pickled object (Dask's __Pickled__ frame)"
    return "%s: %s" % (type(e).__name__, text)


class _EstimateResult(ctypes.Structure):
    # mess_estimate_result (mess_experimental.h), first layout
    _fields_ = [("size", ctypes.c_uint32), ("payload_bytes", ctypes.c_uint32),
                ("items", ctypes.c_uint64), ("entries", ctypes.c_uint64),
                ("shard_entries", ctypes.c_double), ("code_bytes", ctypes.c_uint64),
                ("label_bytes", ctypes.c_uint64), ("link_bytes", ctypes.c_uint64),
                ("map_bytes", ctypes.c_uint64), ("resident_bytes", ctypes.c_uint64),
                ("arena_bytes", ctypes.c_uint64), ("disk_bytes", ctypes.c_uint64),
                ("travel_bytes", ctypes.c_uint64), ("memory_bytes", ctypes.c_uint64),
                ("resident_per_entry", ctypes.c_double), ("disk_per_entry", ctypes.c_double),
                ("memory_per_entry", ctypes.c_double)]


def estimate(params, items):
    """The library's memory and disk estimate (mess_estimate) for a server
    of `params` holding `items` items, as a dict; None with a library that
    predates it."""
    if not L.has("mess_estimate_sized"):
        return None
    f = L.lib.mess_estimate_sized
    f.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
    f.restype = ctypes.c_int
    r = _EstimateResult()
    rc = f(ctypes.byref(params), int(items), ctypes.byref(r), ctypes.sizeof(r))
    if rc != 0:
        raise L.error(rc, "mess_estimate")
    return {name: getattr(r, name) for name, _ in _EstimateResult._fields_ if name != "size"}


def worker_memory_limit(params, items, groups_per_worker, groups):
    """Memory a worker may use (the nanny restarts one that goes past it):
    its groups' share of the estimated server (mess_estimate; memory_bytes,
    the whole server in memory), three times for a group's save (its body
    and compressed copy) and the changes in transit, plus 1 GiB for the
    interpreter and Dask."""
    est = estimate(params, items)
    if est is None:
        return "auto"
    return int(est["memory_bytes"] * 3 * groups_per_worker / groups) + (1 << 30)


def group_shards(shards, groups):
    """The shard sets of `groups` contiguous groups of M = shards."""
    if not 1 <= groups <= shards:
        raise ValueError("groups must be in 1..%d (the shards), got %d" % (shards, groups))
    return [list(range(k * shards // groups, (k + 1) * shards // groups))
            for k in range(groups)]


# ---- the worker side ------------------------------------------------------------

class _RWLock:
    """Searches share, changes are exclusive (mess.h, "Threads"); a waiting
    change blocks new searches so it is not starved."""

    def __init__(self):
        self._cond = asyncio.Condition()
        self._readers = 0
        self._writer = False
        self._waiting = 0

    @contextlib.asynccontextmanager
    async def read(self):
        async with self._cond:
            await self._cond.wait_for(lambda: not self._writer and not self._waiting)
            self._readers += 1
        try:
            yield
        finally:
            async with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextlib.asynccontextmanager
    async def write(self):
        async with self._cond:
            self._waiting += 1
            await self._cond.wait_for(lambda: not self._writer and not self._readers)
            self._waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            async with self._cond:
                self._writer = False
                self._cond.notify_all()


def _err(e):
    # errors cross the wire as plain tuples (status, code, message): the
    # coordinator reads nothing but msgpack from a worker
    return ("error", int(e.code), str(e))


def _plain_answers(method):
    """A GroupServer coroutine whose every outcome is a plain tuple: a
    library error as ("error", code, message) and any other exception as
    ("error", MESS_EIO, its text), so the worker never has to send an
    exception object (which Dask would pickle)."""
    @functools.wraps(method)
    async def run(self, *args):
        try:
            return await method(self, *args)
        except L.MessError as e:
            return _err(e)
        except Exception as e:  # noqa: BLE001 - reported as text, not as an object
            return ("error", L.EIO, "group %d: %s: %s" % (self.group, type(e).__name__, e))
    return run


def pack_answers(answers):
    """[(0, partial Buffer) or (error code, message bytes)] as one uint8
    array: u64 n, n x (u64 status, u64 length), then the bodies in order.
    Each Buffer is copied once, straight from the library's memory, and
    closed.  (Sent as plain bytes, "mess-bytes": the coordinator accepts
    nothing else from a worker.)"""
    n = len(answers)
    head = np.empty(1 + 2 * n, dtype="<u8")
    head[0] = n
    for i, (st, body) in enumerate(answers):
        head[1 + 2 * i] = st
        head[2 + 2 * i] = len(body)
    total = head.nbytes + int(head[2::2].sum())
    out = np.empty(total, dtype=np.uint8)
    out[:head.nbytes] = head.view(np.uint8)
    off = head.nbytes
    base = out.ctypes.data
    for st, body in answers:
        if st == 0:
            ctypes.memmove(base + off, body.ptr, len(body))
            off += len(body)
            body.close()
        else:
            out[off:off + len(body)] = np.frombuffer(body, dtype=np.uint8)
            off += len(body)
    return out


def unpack_answers(arr, count):
    """pack_answers' array back as [("ok", uint8 view) or ("error", code,
    message)], checked as hostile input (a worker's bytes): `count`
    answers, every length inside them; else ValueError.  Takes the bytes
    as they arrive (a memoryview) or a uint8 array."""
    if isinstance(arr, (bytes, bytearray, memoryview)):
        a = np.frombuffer(arr, dtype=np.uint8)
    else:
        a = np.asarray(arr)
    if a.dtype != np.uint8 or a.ndim != 1 or a.size < 8:
        raise ValueError("a shard group's answer is not a packed array")
    n = int(a[:8].view("<u8")[0])
    if n != count or a.size < 8 + 16 * n:
        raise ValueError("a shard group answered %d requests of %d" % (n, count))
    head = a[8:8 + 16 * n].view("<u8")
    off, out = 8 + 16 * n, []
    for i in range(n):
        st, ln = int(head[2 * i]), int(head[2 * i + 1])
        if ln > a.size - off:
            raise ValueError("a shard group's answer is cut short")
        body = a[off:off + ln]
        off += ln
        out.append(("ok", body) if st == 0 else
                   ("error", st, bytes(body).decode("utf-8", "replace")))
    if off != a.size:
        raise ValueError("a shard group's answer has trailing bytes")
    return out


def group_path(directory, k):
    """The server directory of group k under a deployment's directory."""
    return os.path.join(directory, "group-%d" % k)


def _seq_path(directory, k):
    # "generation G holds this group's changes up to n": JSON {G: n}
    return group_path(directory, k) + ".seq"


class UnsafeFileError(OSError):
    """One of a deployment's own files (a group's .seq or .lock) is a
    symbolic link or not a regular file: refused, and whatever it points to
    is neither read, created nor written.  The message names the file."""


def _refuse(path, what):
    return UnsafeFileError(errno.ELOOP if what == "a symbolic link" else errno.EINVAL,
                           "%s is %s: refused (a deployment opens its files without "
                           "following links, and only regular files)" % (path, what))


def _open_plain(path, flags, mode=0o600):
    """os.open of one of the deployment's files that follows no symbolic
    link in the last component (O_NOFOLLOW) and takes nothing but a regular
    file: a link, FIFO or directory planted under that name by whoever can
    write the directory is refused (UnsafeFileError).  O_NONBLOCK so that
    a FIFO is refused, not waited on; the descriptor is blocking again
    when returned."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _refuse(path, "a symbolic link") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _refuse(path, "not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_json(path):
    with os.fdopen(_open_plain(path, os.O_RDONLY)) as f:
        return json.load(f)


def _write_json(path, obj):
    """Replaces `path` by a new file holding obj (JSON), durably: written to
    a temporary of an unguessable name beside it (mkstemp: O_EXCL, so a
    link planted there is never followed), synced, renamed over it, the
    directory synced.  A link or other non-regular file under `path` is
    refused rather than replaced."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise _refuse(path, "a symbolic link" if os.path.islink(path)
                          else "not a regular file")
    except FileNotFoundError:
        pass
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".",
                               prefix=os.path.basename(path) + ".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def extract_groups(single_dir, params, groups, directory):
    """Makes the G group directories of a deployment under `directory` from
    the checkpointed server directory `single_dir` (mess_server_extract:
    each group's shards' files copied, the others empty), so a deployment
    over a built server costs copies, not a second build.  A Deployment
    over `directory` with the same `groups` then opens them; the groups
    start at change 0."""
    sets = group_shards(params.shards, int(groups))
    os.makedirs(directory, exist_ok=True)
    with Server.open(single_dir, expect=params, shards=[0]) as s:
        gen = s.log_position()[0]
    for k, shards in enumerate(sets):
        # the change record first: a directory without one is refused
        _write_json(_seq_path(directory, k), {str(gen): 0})
        try:
            Server.extract(single_dir, shards, group_path(directory, k))
        except Exception:
            os.unlink(_seq_path(directory, k))
            raise
    return sets


class GroupServer:
    """One shard group's server: a Dask actor.  Its methods are coroutines
    on the worker's event loop that hand the C call to a thread pool, so
    the actor's single thread never runs a search and several searches of
    one group overlap (ctypes releases the GIL during the call).

    The group keeps one server directory of its own, DIR/group-K (D20),
    opened whole: mess_server_create the first time (or made by
    extract_groups from a built server), mess_server_open after (the log
    replayed).  Only its shards ever receive records; it answers
    mess_server_search_shards on its shards only.  A change is one
    write-ahead log append (durable when apply returns); checkpoint()
    folds the log into the files.  Its change number is kept as
    DIR/group-K.seq, {generation: changes up to it}: a reopened group is
    at seq[G] + the records in its log after G (mess_server_log_position;
    one record per change).  A lock on DIR/group-K.lock keeps a second
    actor of the group from opening it while the first lives.  Both are
    opened without following links and must be regular files
    (UnsafeFileError otherwise, naming the file)."""

    def __init__(self, params, shards, directory, group, threads=2, persist=True):
        self.params = Params(**params)
        self.shards = [int(j) for j in shards]
        self.directory = directory
        self.group = int(group)
        self.persist = bool(persist)
        self._threads = max(1, int(threads))
        self._pool = concurrent.futures.ThreadPoolExecutor(
            self._threads, thread_name_prefix="mess-group-%d" % self.group)
        self._set = np.asarray(self.shards, dtype=np.uint32)
        self._lock = _RWLock()
        self._held = None
        self.server = None
        try:
            self.seq, self.server = self._open()
        except BaseException:
            if self._held is not None:
                self._held.close()
            raise

    def _take_lock(self, timeout=30.0):
        import fcntl
        f = os.fdopen(_open_plain(group_path(self.directory, self.group) + ".lock",
                                  os.O_RDWR | os.O_CREAT), "r+b", buffering=0)
        end = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._held = f
                return
            except BlockingIOError:
                if time.monotonic() > end:
                    f.close()
                    raise RuntimeError("group %d's directory is held by another live "
                                       "actor (its lock file)" % self.group)
                time.sleep(0.2)

    def _open(self):
        if not self.persist:
            return 0, Server(self.params)
        self._take_lock()
        path = group_path(self.directory, self.group)
        seqp = _seq_path(self.directory, self.group)
        if not os.path.isdir(path):
            # a creation a crash interrupted left only a temporary directory
            # (a link of that name is not ours: left alone, never followed)
            for old in glob.glob(path + ".tmp-*"):
                if os.path.isdir(old) and not os.path.islink(old):
                    import shutil
                    shutil.rmtree(old, ignore_errors=True)
            tmp = "%s.tmp-%s" % (path, uuid.uuid4().hex)
            with Server.create(tmp, self.params) as s:
                gen = s.log_position()[0]
            _write_json(seqp, {str(gen): 0})
            os.rename(tmp, path)
            _write_json(seqp, {str(gen): 0})  # (syncs the directory too)
        server = Server.open(path, expect=self.params)
        gen, records = server.log_position()
        try:
            base = _read_json(seqp)[str(gen)]
        except UnsafeFileError:
            server.close()
            raise
        except (OSError, ValueError, KeyError) as e:
            server.close()
            raise RuntimeError("group %d: %s does not say which changes generation %d "
                               "holds (%s)" % (self.group, seqp, gen, e)) from None
        return int(base) + records, server

    def info(self):
        """("ok", {group, shards, seq, pid, entries, live, bytes, generation,
        log_records}): plain values only, as every answer."""
        try:
            st = self.server.stats()
            out = {"group": self.group, "shards": self.shards, "seq": self.seq,
                   "pid": os.getpid(), "entries": st.entries, "live": st.live,
                   "bytes": st.bytes, "generation": 0, "log_records": 0}
            if self.persist:
                out["generation"], out["log_records"] = self.server.log_position()
        except L.MessError as e:
            return _err(e)
        return "ok", out

    def _search(self, req):
        try:
            with self.server.search_shards(req, self.shards) as part:
                return ("ok", bytes(part))
        except L.MessError as e:
            return _err(e)

    @_plain_answers
    async def search(self, req):
        async with self._lock.read():
            return await asyncio.get_running_loop().run_in_executor(
                self._pool, self._search, req)

    def _search_run(self, reqs):
        # one pool job: the requests in turn (the GIL released in each C
        # search); the partials stay in the library's buffers
        out = []
        for r in reqs:
            try:
                out.append((0, self.server.search_shards(r, self._set)))
            except L.MessError as e:
                out.append((int(e.code), str(e).encode("utf-8", "replace")))
        return out

    @_plain_answers
    async def search_packed(self, reqs):
        """The answers to several requests as ONE uint8 array (pack_answers),
        which Dask sends as bytes in a frame of its own ("mess-bytes"): one
        message each way per call, where a call per request costs a message
        each way.  The requests are split into `threads` runs, one pool job
        each."""
        async with self._lock.read():
            loop = asyncio.get_running_loop()
            k = max(1, min(len(reqs), self._threads))
            if k == 1:  # one pool job searches and packs
                return await loop.run_in_executor(
                    self._pool, lambda: pack_answers(self._search_run(reqs)))
            cuts = [len(reqs) * i // k for i in range(k + 1)]
            runs = await asyncio.gather(*[
                loop.run_in_executor(self._pool, self._search_run, reqs[a:b])
                for a, b in zip(cuts, cuts[1:])])
            return await loop.run_in_executor(
                self._pool, pack_answers, [x for run in runs for x in run])

    def _apply(self, kind, part, seq):
        if seq <= self.seq:
            return ("ok", 0, "already applied")
        if seq != self.seq + 1:
            return ("error", L.ESTATE,
                    "group %d has applied changes up to %d and was sent change %d: "
                    "a change is missing" % (self.group, self.seq, seq))
        try:
            # a directory's server appends the part to its log first: when
            # this returns, the change survives the worker (nothing changed
            # if it raises)
            if kind == "upload":
                self.server.apply_upload(part)
                missing = 0
            else:
                missing = self.server.apply_delete(part)
        except L.MessError as e:
            return _err(e)
        self.seq = seq
        return ("ok", missing, "applied")

    @_plain_answers
    async def apply(self, kind, part, seq):
        async with self._lock.write():
            return await asyncio.get_running_loop().run_in_executor(
                self._pool, self._apply, kind, part, seq)

    def _checkpoint(self):
        if not self.persist:
            return ("ok", 0)
        gen, records = self.server.log_position()
        if records == 0:
            return ("ok", gen)
        seqp = _seq_path(self.directory, self.group)
        try:
            base = _read_json(seqp)
            # before the checkpoint: its generation gen + 1 holds self.seq
            _write_json(seqp, {str(gen): base[str(gen)], str(gen + 1): self.seq})
            self.server.checkpoint()
        except L.MessError as e:
            return _err(e)
        except (OSError, ValueError, KeyError) as e:
            return ("error", L.EIO, "group %d: %s: %s" % (self.group, seqp, e))
        return ("ok", self.server.log_position()[0])

    @_plain_answers
    async def checkpoint(self):
        """Folds the group's log into its files (mess_server_checkpoint);
        ("ok", generation)."""
        async with self._lock.write():
            return await asyncio.get_running_loop().run_in_executor(
                self._pool, self._checkpoint)

    @_plain_answers
    async def close(self):
        """Checkpoints, closes the server and lets the directory go."""
        async with self._lock.write():
            out = await asyncio.get_running_loop().run_in_executor(
                self._pool, self._checkpoint)
            if self.server is not None and out[0] == "ok":
                self.server.close()
            if self._held is not None and out[0] == "ok":
                self._held.close()
                self._held = None
            return out


# ---- the caller's side --------------------------------------------------------------

class _Group:
    # future: the actor's creation task; key: the actor's key on its
    # worker; address: that worker
    __slots__ = ("k", "shards", "future", "key", "address", "gen", "seq")


class Deployment:
    """A deployment served by `groups` shard groups on the Dask client
    `dask_client`'s workers (placed round-robin).

    directory: where the groups keep their directories (DIR/group-K, made
    on first use, or by extract_groups from a built server); every worker
    that may hold a group must reach it (one machine, or a shared
    filesystem).  threads: C search threads per group.  timeout: seconds
    any one call may take before its group counts as lost.  retries:
    reopenings per call.  checkpoint_every: the groups fold their logs into
    their files after this many changes (and at close()).  persist=False
    keeps groups in memory only (no recovery).

    The groups' answers are read as plain data only (docs/SECURITY.md,
    section 8): every call goes to the group's worker over the Dask client's
    connections with the serializers and the deserializers restricted to
    msgpack (and "mess-bytes" for a search's packed partials: bytes and
    nothing else), the actor's handle is never fetched from its worker, and
    Dask's configuration distributed.scheduler.pickle is set False in this
    process (else Dask unpickles a frame marked __Pickled__ whatever a
    connection accepts; this process's own scheduler, local_cluster's,
    then refuses run_on_scheduler and scheduler plugins).  An answer that
    is anything else raises RefusedAnswerError."""

    def __init__(self, dask_client, params, groups, directory, threads=2, timeout=60.0,
                 retries=2, persist=True, checkpoint_every=16):
        require()
        if not isinstance(params, Params):
            raise TypeError("params must be mess.Params")
        self.client = dask_client
        dask.config.set({"distributed.scheduler.pickle": False})  # for good, see above
        self._loop = dask_client.loop.asyncio_loop
        self.params = params.copy()
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        self.threads = int(threads)
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.persist = bool(persist)
        self.checkpoint_every = max(1, int(checkpoint_every))
        self.changes_since_checkpoint = 0
        self.sets = group_shards(self.params.shards, int(groups))
        self.groups = []
        self.reopened = 0
        self.bytes_sent = self.bytes_received = 0
        self._pending = None  # a change not yet acknowledged by every group
        for k, s in enumerate(self.sets):
            g = _Group()
            g.k, g.shards, g.future, g.key, g.address, g.gen, g.seq = k, s, None, None, None, 0, 0
            self.groups.append(g)
        starts = [self._start(g) for g in self.groups]
        for g, fut in zip(self.groups, starts):
            self._attach(g, fut)

    # -- placement and recovery
    def _workers(self):
        return sorted(self.client.scheduler_info()["workers"])

    def _start(self, g, avoid=None):
        ws = self._workers()
        if not ws or ws == [avoid]:  # a restarting worker: wait for it
            self.client.wait_for_workers(1 if not ws else 2, timeout=self.timeout)
            ws = self._workers()
        live = [w for w in ws if w != avoid] or ws
        if not live:
            raise GroupUnavailableError(g.k, g.shards, "no worker in the cluster", "placement")
        w = live[g.k % len(live)]
        return self.client.submit(GroupServer, self.params.as_dict(), g.shards,
                                  self.directory, g.k, self.threads, self.persist,
                                  actor=True, workers=[w], allow_other_workers=True,
                                  pure=False, key="mess-group-%d-%s" % (g.k, uuid.uuid4().hex))

    def _attach(self, g, fut, expect=None):
        """Takes the actor of `fut` for group g.  expect: the changes a
        reopened group may have applied (the acknowledged ones, or one
        more while a change is pending); anything else means it did not
        find its files, and answering from it would be wrong.

        The actor's handle is not fetched (fut.result() would unpickle one
        sent by the worker): its key is the task's, its worker the one the
        scheduler says holds it."""
        try:
            distributed.wait([fut], timeout=self.timeout)
            if fut.status != "finished":
                cause = fut.exception(timeout=self.timeout) if fut.status == "error" else ""
                raise RuntimeError("shard group %d's actor did not start (%s): %s"
                                   % (g.k, fut.status, cause))
            where = self.client.who_has([fut]).get(fut.key) or ()
            if not where:
                raise RuntimeError("no worker holds shard group %d's actor" % g.k)
            address = where[0]
            out = asyncio.run_coroutine_threadsafe(
                self._ask(g, address, fut.key, "info", ()), self._loop).result(self.timeout)
            if out[0] == "error":
                raise L.error(out[1], "info on shard group %d: %s" % (g.k, out[2]))
            info = self._info(g, address, out[1])
            if info["shards"] != g.shards:
                raise RuntimeError("group %d opened shards %r" % (g.k, info["shards"]))
            if expect is not None and info["seq"] not in expect:
                raise GroupUnavailableError(
                    g.k, g.shards, "reopened from %s at change %d, but change %d was "
                    "acknowledged (its files are not reachable from %s)"
                    % (self.directory, info["seq"], min(expect), address), "reopen")
        except BaseException:
            fut.release()
            raise
        old = g.future
        g.future, g.key, g.address = fut, fut.key, address
        g.gen += 1
        g.seq = info["seq"]
        if old is not None:
            old.release()
        return info

    def _reopen(self, g, cause, what):
        """Replaces group g's actor by a new one on a live worker, opened
        from the group's files."""
        if not self.persist:
            raise GroupUnavailableError(
                g.k, g.shards, "%s; the group was kept in memory only (persist=False), "
                "so it cannot be reopened" % cause, what)
        expect = {g.seq}
        if self._pending is not None and not self._pending[3][g.k]:
            expect.add(self._pending[2][g.k])
        last = cause
        for _ in range(self.retries):
            try:
                self._attach(g, self._start(g, avoid=g.address), expect)
                self.reopened += 1
                logging.getLogger("mess.dask").warning(
                    "shard group %d reopened on %s after: %s", g.k, g.address, cause)
                return
            except (GroupUnavailableError, RefusedAnswerError):
                raise
            except Exception as e:  # noqa: BLE001 - any transport failure
                last = e
                time.sleep(0.5)
        raise GroupUnavailableError(g.k, g.shards, last, what) from last

    async def _ask(self, g, address, key, method, args):
        """One call of a group's actor: Dask's actor_execute on its worker,
        over the client's connections, with the arguments sent and the
        answer read in msgpack only.  Returns the answer, a plain
        ("ok", ...) or ("error", code, message) tuple.  A transport failure
        (OSError: connection refused or closed, timeout) raises as it is;
        anything else a worker sends, RefusedAnswerError."""
        from distributed.protocol import to_serialize
        try:
            r = await self.client.rpc(address).actor_execute(
                actor=key, function=method, args=[to_serialize(a) for a in args],
                kwargs={}, serializers=_SEND, deserializers=_ACCEPT)
        except OSError:
            raise
        except Exception as e:  # noqa: BLE001 - Dask refused to decode it
            raise RefusedAnswerError(g.k, g.shards, address, method, _why(e)) from None
        out = r.get("result") if type(r) is dict and r.get("status") == "OK" else None
        shape = _SHAPES[method]
        if isinstance(shape, type):  # a bare value
            if type(out) is shape:
                return ("ok", out)
            want, shape = "bytes" if shape is memoryview else shape.__name__, ()
        else:
            want = "(%s)" % ", ".join(['"ok"'] + [t.__name__ for t in shape])
        if not (type(out) is tuple and _plain(out) and out and (
                (out[0] == "ok" and shape and len(out) == 1 + len(shape)
                 and all(type(v) is t for v, t in zip(out[1:], shape)))
                or (out[0] == "error" and len(out) == 3
                    and type(out[1]) is int and type(out[2]) is str))):
            raise RefusedAnswerError(g.k, g.shards, address, method,
                                     "not %s nor (\"error\", code, message)" % want)
        return out

    def _info(self, g, address, d):
        """A group's info answer, checked: a dict of integers and a shard
        list (as a list)."""
        ints = ("group", "seq", "pid", "entries", "live", "bytes", "generation",
                "log_records")
        if not (type(d) is dict and all(type(d.get(k)) is int for k in ints)
                and type(d.get("shards")) in (tuple, list)
                and all(type(j) is int for j in d["shards"])):
            raise RefusedAnswerError(g.k, g.shards, address, "info",
                                     "not the info dict (integers and a shard list)")
        d = dict(d)
        d["shards"] = list(d["shards"])
        return d

    def _lost(self, g):
        """An exception if the scheduler knows group g's actor is gone (its
        task no longer finished or pending), else None."""
        status = g.future.status if g.future is not None else "released"
        if status in ("finished", "pending"):
            return None
        return RuntimeError("the worker holding shard group %d's actor was lost (its task "
                            "is %s)" % (g.k, status))

    def _result(self, g, fut, what):
        """The ("ok", ...) tuple of an actor call, or the transport error."""
        try:
            out = fut.result(timeout=self.timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise
        if out[0] == "error":
            raise L.error(out[1], "%s on shard group %d: %s" % (what, g.k, out[2]))
        return out

    def _call(self, g, method, *args):
        """(gen, future) of a call, or (gen, exception) when its worker is
        known lost; _settle takes both."""
        lost = self._lost(g)
        if lost is not None:
            return g.gen, lost
        return g.gen, asyncio.run_coroutine_threadsafe(
            self._ask(g, g.address, g.key, method, args), self._loop)

    def _settle(self, g, issued, what, method, *args):
        """Waits for a call issued as (gen, future); on a transport failure
        reopens the group (unless a newer actor is already there) and calls
        again, at most `retries` times."""
        gen, fut = issued
        for attempt in range(self.retries + 1):
            try:
                if isinstance(fut, Exception):
                    raise fut
                return self._result(g, fut, what)
            except (L.MessError, RefusedAnswerError):
                raise
            except Exception as e:  # noqa: BLE001 - worker died, timeout, closed comm
                if attempt == self.retries:
                    raise GroupUnavailableError(g.k, g.shards, e, what) from e
                if g.gen == gen:
                    self._reopen(g, e, what)
                gen, fut = self._call(g, method, *args)
        raise AssertionError("unreachable")

    # -- changes
    def _change(self, kind, buf):
        self.complete_pending()
        parts = []
        for g in self.groups:
            with split_records(self.params, buf, g.shards) as part:
                parts.append(bytes(part))
        seqs = [g.seq + 1 for g in self.groups]
        self._pending = (kind, parts, seqs, [False] * len(self.groups))
        try:
            return self.complete_pending()
        finally:
            if self._pending is None:
                self.changes_since_checkpoint += 1
                if self.persist and self.changes_since_checkpoint >= self.checkpoint_every:
                    self.checkpoint()

    def complete_pending(self):
        """Sends a change that did not reach every group again (each group
        applies a change once: a resend of one it has is skipped).  Returns
        the delete's missing count (0 for an upload), None if nothing was
        pending."""
        if self._pending is None:
            return None
        kind, parts, seqs, done = self._pending
        issued = {g.k: self._call(g, "apply", kind, parts[g.k], seqs[g.k])
                  for g in self.groups if not done[g.k]}
        missing, failure, refused = 0, None, []
        for g in self.groups:
            if done[g.k]:
                continue
            try:
                out = self._settle(g, issued[g.k], kind, "apply", kind, parts[g.k], seqs[g.k])
            except L.MessError as e:
                # the group's server refused its part and changed nothing
                # (a server checks a whole buffer first): final, no resend
                refused.append((g.k, e))
                continue
            except Exception as e:  # noqa: BLE001 - reported below, after the others
                failure = failure or e
                continue
            self.bytes_sent += len(parts[g.k])
            missing += out[1]
            g.seq = seqs[g.k]
            done[g.k] = True
        if failure is not None:
            if refused:  # nothing to resend to those
                for k, _ in refused:
                    done[k] = True
            raise failure
        self._pending = None
        if refused:
            k, e = refused[0]
            applied = [g.k for g in self.groups if done[g.k] and g.k not in dict(refused)]
            if applied:
                e.args = ("%s; groups %s applied their part of this %s, groups %s refused "
                          "it: the deployment differs from one server that refused it"
                          % (e.args[0] if e.args else e, applied, kind,
                             [r[0] for r in refused]),)
            raise e
        return missing

    def checkpoint(self):
        """Every group folds its log into its files (a group that is lost is
        reopened first: its log is replayed); the groups' generations."""
        if self._pending is not None:
            self.complete_pending()
        issued = {g.k: self._call(g, "checkpoint") for g in self.groups}
        gens = [self._settle(g, issued[g.k], "checkpoint", "checkpoint")[1]
                for g in self.groups]
        self.changes_since_checkpoint = 0
        return gens

    def apply_upload(self, buf):
        """Routes an upload (Buffer or bytes): each group applies its own
        records.  All groups or an error; an error leaves the change pending
        (complete_pending, or the next call, sends it again)."""
        self._change("upload", buf)

    def apply_delete(self, buf):
        """Routes a delete; returns how many (shard, label) pairs no group
        found (as Server.apply_delete)."""
        return self._change("delete", buf)

    # -- queries
    def _merge(self, req, issued):
        """Synchronous path (one request; retries): the merged response."""
        parts = []
        for g in self.groups:
            out = self._settle(g, issued[g.k], "search", "search", req)
            parts.append(out[1])
        self.bytes_sent += len(req) * len(self.groups)
        self.bytes_received += sum(len(p) for p in parts)
        return merge_responses(self.params, req, parts)

    async def _fan_out(self, reqs, in_flight, batch):
        """Every request's fan-out and merge as coroutines on the Dask
        client's event loop (no thread hand-off per call): requests go out
        in calls of `batch` (one message per group and batch), at most
        in_flight requests out at once.  Item i is the merged response, or
        the per-group outcomes ((gen, answer) or (gen, exception)) when a
        group failed, for the synchronous path to retry."""
        sem = asyncio.Semaphore(max(1, in_flight // batch))

        async def one(chunk):
            async with sem:
                calls = []
                for g in self.groups:  # all out before the first answer is awaited
                    calls.append((g, g.gen, self._lost(g) or asyncio.ensure_future(
                        self._ask(g, g.address, g.key, "search_packed", (chunk,)))))
                answers = []
                for g, gen, fut in calls:
                    try:
                        if isinstance(fut, Exception):
                            raise fut
                        out = await asyncio.wait_for(fut, self.timeout)
                        if out[0] == "error":  # the group's own failure, as text
                            answers.append([(gen, out)] * len(chunk))
                            continue
                        answers.append([(gen, a) for a in unpack_answers(out[1], len(chunk))])
                    except Exception as e:  # noqa: BLE001 - retried synchronously
                        answers.append([(gen, e)] * len(chunk))
                results = []
                for i, req in enumerate(chunk):
                    outs = [a[i] for a in answers]
                    if any(not isinstance(o[1], tuple) or o[1][0] == "error" for o in outs):
                        results.append(outs)
                        continue
                    parts = [o[1][1] for o in outs]
                    self.bytes_sent += len(req) * len(self.groups)
                    self.bytes_received += sum(len(x) for x in parts)
                    results.append(merge_responses(self.params, req, parts))
                return results

        chunks = [reqs[i:i + batch] for i in range(0, len(reqs), batch)]
        done = await asyncio.gather(*[one(c) for c in chunks])
        return [r for d in done for r in d]

    def _recover(self, req, outs):
        """A request some group failed: library errors raise; transport
        failures reopen the group and ask again (synchronously)."""
        parts = []
        for g, (gen, out) in zip(self.groups, outs):
            if isinstance(out, RefusedAnswerError):
                raise out
            if isinstance(out, tuple):
                if out[0] == "error":
                    raise L.error(out[1], "search on shard group %d: %s" % (g.k, out[2]))
                parts.append(out[1])
                continue
            if g.gen == gen:
                self._reopen(g, out, "search")
            parts.append(self._settle(g, self._call(g, "search", req), "search",
                                      "search", req)[1])
        self.bytes_sent += len(req) * len(self.groups)
        self.bytes_received += sum(len(p) for p in parts)
        return merge_responses(self.params, req, parts)

    def search(self, request):
        """The merged response Buffer to one request."""
        return self.search_many([request], in_flight=1)[0]

    def search_many(self, requests, in_flight=8, batch=None):
        """Merged responses to many requests, in order, with up to
        `in_flight` requests out at once (each fanned out to every group),
        sent in calls of `batch` requests (default in_flight: one call per
        group carries them all, and the group spreads them over its
        threads; each answer is one bytes object, GroupServer.search_packed).
        A group that fails is reopened and asked again (or
        GroupUnavailableError); no response is returned without every
        group's part."""
        if self._pending is not None:
            self.complete_pending()
        in_flight = max(1, int(in_flight))
        batch = max(1, int(batch) if batch else in_flight)
        batch = min(batch, in_flight)
        reqs = [bytes(r) for r in requests]
        out = []
        for lo in range(0, len(reqs), 256):  # bounded memory per round
            chunk = reqs[lo:lo + 256]
            got = self.client.sync(self._fan_out, chunk, in_flight, batch)
            for req, r in zip(chunk, got):
                out.append(r if not isinstance(r, list) else self._recover(req, r))
        return out

    def info(self):
        """Each group's actor info (group, shards, seq, pid, entries, bytes)
        and worker address."""
        res = []
        for g in self.groups:
            d = self._info(g, g.address,
                           self._settle(g, self._call(g, "info"), "info", "info")[1])
            d["address"] = g.address
            res.append(d)
        return res

    def close(self):
        """Checkpoints every group (their logs folded into their files) and
        lets the actors go.  A group that cannot checkpoint keeps its log
        (replayed by the next open): nothing acknowledged is lost."""
        calls = []
        if self.persist:
            for g in self.groups:
                if g.key is not None:
                    calls.append((g, self._call(g, "close")))
        for g, (gen, fut) in calls:
            try:
                if isinstance(fut, Exception):
                    raise fut
                self._result(g, fut, "checkpoint")
            except Exception as e:  # noqa: BLE001 - reported, the log stays
                logging.getLogger("mess.dask").warning(
                    "shard group %d not checkpointed at close (its log keeps the "
                    "changes): %s", g.k, e)
        for g in self.groups:
            if g.future is not None:
                g.future.release()
                g.future = g.key = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---- local clusters ------------------------------------------------------------------

def tls(ca_file, cert_file, key_file):
    """A distributed.Security that requires TLS on every connection of a
    cluster (tls:// addresses), with one certificate and key (PEM files)
    for every role (scheduler, workers, nannies, client) and ca_file, the
    cluster's own CA, against which every peer's certificate is checked,
    both ways.  Pass it as security= to local_cluster, or to
    distributed.Client and to the dask scheduler/worker commands
    (--tls-ca-file, --tls-cert, --tls-key) of a cluster over several
    hosts; docs/DISTRIBUTED.md, "TLS", makes the files with openssl."""
    require()
    files = {"tls_ca_file": ca_file}
    for role in ("client", "scheduler", "worker"):
        files["tls_%s_cert" % role] = cert_file
        files["tls_%s_key" % role] = key_file
    return distributed.Security(require_encryption=True, **files)


@contextlib.contextmanager
def local_cluster(workers=2, threads_per_worker=2, memory_limit="auto", timeout=30,
                  processes=True, connect_timeout=5, log_level=logging.CRITICAL,
                  start_method="forkserver", host="127.0.0.1", security=None):
    """A cluster of local processes whose every socket listens on `host`
    only (127.0.0.1 unless told otherwise): the scheduler's, each nanny's
    and each worker's, and the HTTP servers Dask starts in the scheduler
    and in each worker, which serve no page at all (no dashboard, no
    /health, no /metrics).  Bounded timeouts (connect_timeout seconds to
    connect on loopback, `timeout` for the rest); the workers exit by
    themselves `timeout` seconds after losing the scheduler (and `timeout`
    is also how long a worker may take to start; start_method
    "forkserver" starts them about twice as fast as Dask's default
    "spawn").  Yields a distributed.Client that talks to the workers
    directly (actor calls do not hop through the scheduler); the cluster
    is closed when the block ends, whatever happens in it.

    security: a distributed.Security (tls() makes one) used by every
    process of the cluster and by the client; when it requires encryption
    every connection is TLS (tls:// addresses).  None: plain TCP, which is
    what loopback needs.

    Built as distributed.SpecCluster rather than LocalCluster: in Dask
    2022.12 LocalCluster(host="127.0.0.1", dashboard_address=None) still
    starts the scheduler's HTTP server on every interface, port 8787, and
    each worker's on every interface (an address without a host means
    all of them), and it cannot turn a worker's dashboard off while
    giving it an address."""
    require()
    from distributed.worker_memory import parse_memory_limit
    cfg = {"distributed.comm.timeouts.connect": "%ds" % connect_timeout,
           "distributed.comm.timeouts.tcp": "%ds" % timeout,
           # a group's actor is never recomputed by the scheduler (the
           # deployment reopens it from its files): its task fails at once
           # when its worker dies, so calls to it fail at once too instead of
           # waiting for a recomputation
           "distributed.scheduler.allowed-failures": 0,
           "distributed.worker.daemon": True,
           "distributed.admin.tick.limit": "30s",
           "distributed.logging.distributed": "error",
           # partials are ciphertexts: compressing them is CPU for nothing
           "distributed.comm.compression": None,
           # a deployment serves actor calls, it runs no task graphs: no
           # statistical profiler sampling every thread 100 times a second,
           # no work stealing, event-loop health checks once a second
           "distributed.worker.profile.enabled": False,
           "distributed.scheduler.work-stealing": False,
           "distributed.admin.tick.interval": "1s",
           "distributed.worker.multiprocessing-method": start_method,
           # the HTTP servers Dask always starts answer nothing (the nannies
           # copy this configuration into the worker processes they start)
           "distributed.scheduler.http.routes": [],
           "distributed.worker.http.routes": []}
    if memory_limit == "auto":  # as LocalCluster: the machine's memory shared
        memory_limit = parse_memory_limit("auto", 1, workers,
                                          logger=logging.getLogger("mess.dask"))
    if security is None:
        security = distributed.Security()
    elif not isinstance(security, distributed.Security):
        raise TypeError("security must be a distributed.Security (mess.dask.tls makes one)")
    protocol = "tls://" if security.require_encryption else "tcp://"
    # (host, 0): the HTTP server on that host, any free port; a port alone
    # or None would mean every interface
    http = (host, 0)
    scheduler = {"cls": distributed.Scheduler,
                 "options": {"host": host, "port": 0, "protocol": protocol,
                             "security": security, "dashboard": False,
                             "dashboard_address": http}}
    worker = {"cls": distributed.Nanny if processes else distributed.Worker,
              "options": {"host": host, "protocol": protocol, "security": security,
                          "nthreads": threads_per_worker,
                          "memory_limit": memory_limit, "dashboard": False,
                          "dashboard_address": http, "death_timeout": timeout,
                          "silence_logs": log_level}}
    with dask.config.set(cfg):
        cluster = distributed.SpecCluster(
            scheduler=scheduler, workers={i: worker for i in range(workers)},
            worker=worker, silence_logs=log_level, security=security)
        try:
            client = distributed.Client(cluster, timeout=timeout, direct_to_workers=True,
                                        security=security)
            try:
                yield client
            finally:
                client.close(timeout=timeout)
        finally:
            cluster.close(timeout=timeout)


# ---- the demo -----------------------------------------------------------------------------

def _read(dirname, name):
    from .vecs import read_f32
    for ext in ("bvecs", "fvecs"):
        path = os.path.join(dirname, "%s.%s" % (name, ext))
        if os.path.exists(path):
            return read_f32(path)
    raise FileNotFoundError("%s: no %s.bvecs or %s.fvecs" % (dirname, name, name))


def _cpu_seconds(pid):
    """User + system CPU seconds of process pid so far (Linux /proc), None
    where it cannot be read (a worker on another host)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            v = f.read().rsplit(")", 1)[1].split()
        return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _cpu_ratio(a, b):
    ta = [a["coordinator"]] + a["workers"]
    tb = [b["coordinator"]] + b["workers"]
    if None in ta or None in tb or sum(tb) <= 0:
        return None
    return round(sum(ta) / sum(tb), 3)


def _rounded(c):
    return {k: (None if v is None else [None if w is None else round(w, 3) for w in v]
                if isinstance(v, list) else round(v, 3)) for k, v in c.items()}


def _log(*a):
    print(*a, file=sys.stderr, flush=True)


def demo(args):
    from .core import Client
    from .vecs import read_ivecs
    require()
    base = _read(args.data, "base")
    queries = _read(args.data, "query")
    learn = _read(args.data, "learn")
    gt = read_ivecs(os.path.join(args.data, "groundtruth.ivecs"))
    nq = min(args.queries or len(queries), len(queries))
    queries, gt = queries[:nq], gt[:nq]
    if args.items and args.items < len(base):
        # the file's ground truth is over every base vector: recompute the
        # exact top 10 of the first N (L2, float64)
        base = base[:args.items]
        b2 = (base.astype(np.float64) ** 2).sum(1)
        gt = np.empty((nq, 10), dtype=np.int64)
        for i in range(nq):
            d = b2 - 2.0 * (base @ queries[i].astype(np.float64))
            top = np.argpartition(d, 10)[:10]
            gt[i] = top[np.lexsort((top, d[top]))]
    work = args.dir or tempfile.mkdtemp(prefix="mess-dask-")
    os.makedirs(work, exist_ok=True)
    t0 = time.perf_counter()
    if args.single:
        # a server directory built before (with the client file that built
        # it): no build here
        if not args.client or args.items:
            raise SystemExit("python3 -m mess.dask: --single needs --client and all the "
                             "items (no --items)")
        client = Client.load(args.client)
        single = Server.open(args.single)
        p = single.params
        single_dir = args.single
        n = len(base)
        t_single = 0.0
        _log("single-process server: %s (built before), M=%d, t=%d, %d entries"
             % (single_dir, p.shards, p.per_item, single.stats().entries))
    else:
        n = len(base)
        p = Params(base.shape[1])
        if args.shards:
            p.shards = args.shards
        if args.per_item:
            p.per_item = args.per_item
        if args.ef_construction:
            p.ef_construction = args.ef_construction
        seed = bytes(range(32))  # experiment mode: a repeatable run
        client = Client(p, learn, seed=seed, threads=args.threads)
        # the single server is a directory: the groups are extracted from it
        single_dir = os.path.join(work, "single")
        single = Server.create(single_dir, p)
        for i in range(0, n, 10000):
            with client.upload(np.arange(i, min(n, i + 10000), dtype=np.uint64),
                               base[i:i + 10000], threads=args.threads) as u:
                single.apply_upload(u, threads=args.threads)
        single.checkpoint()
        t_single = time.perf_counter() - t0
        _log("single-process server: %d items, M=%d, t=%d, built in %.1f s"
             % (n, p.shards, p.per_item, t_single))
    # each group's directory: its shards' files copied from the single one
    t0 = time.perf_counter()
    groups_dir = os.path.join(work, "groups")
    extract_groups(single_dir, p, args.workers, groups_dir)
    t_extract = time.perf_counter() - t0
    _log("%d group directories extracted in %.1f s" % (args.workers, t_extract))

    per = None
    security = tls(args.tls_ca_file, args.tls_cert, args.tls_key) if args.tls_ca_file else None
    if args.scheduler:
        cm = contextlib.closing(distributed.Client(args.scheduler, timeout=args.timeout,
                                                   direct_to_workers=True, security=security))
    else:
        # one group per worker; limit from the library's estimate
        per = worker_memory_limit(p, n, 1, args.workers)
        cm = local_cluster(workers=args.workers, threads_per_worker=2, memory_limit=per,
                           timeout=int(args.timeout), security=security)
    with cm as dc:
        t0 = time.perf_counter()
        with Deployment(dc, p, args.workers, groups_dir, threads=args.group_threads,
                        timeout=args.timeout) as d:
            t_build = time.perf_counter() - t0
            _log("%d shard groups on %d workers, opened in %.1f s"
                 % (args.workers, len(d._workers()), t_build))
            qs, reqs = [], []
            for q in queries:
                qo, r = client.request(q, args.pool)
                qs.append(qo)
                reqs.append(bytes(r))
                r.close()
            # timed phases, each the best of --rounds (the machine is shared):
            # the single process one query at a time (its C search only),
            # the deployment with 1 and with --in-flight queries out
            d.search_many(reqs[:min(8, nq)], in_flight=args.in_flight)  # warm the path
            pids = [i["pid"] for i in d.info()]
            modes = (1, args.in_flight)
            single_s = cpu_single = 0.0
            wall = {m: 0.0 for m in modes}
            cpu = {m: [0.0] * (1 + len(pids)) for m in modes}
            got = {m: [None] * nq for m in modes}
            sl = max(1, args.slice)
            sent0, recv0 = d.bytes_sent, d.bytes_received

            def cpu_now():
                return [_cpu_seconds(x) for x in [os.getpid()] + pids]

            # The machine is shared and its load moves by the second: the
            # two modes take turns on slices of --slice queries (the order
            # swapped every slice), so both see the same load; each mode's
            # wall time and its processes' CPU are summed over the slices.
            rounds = 0
            for _ in range(max(1, args.rounds)):
                rounds += 1
                t0, c0 = time.perf_counter(), time.process_time()
                singles = [single.search(r, threads=1) for r in reqs]
                single_s += time.perf_counter() - t0
                cpu_single += time.process_time() - c0
                for k, lo in enumerate(range(0, nq, sl)):
                    for m in (modes if k % 2 == 0 else modes[::-1]):
                        c0, t0 = cpu_now(), time.perf_counter()
                        got[m][lo:lo + sl] = d.search_many(reqs[lo:lo + sl], in_flight=m)
                        wall[m] += time.perf_counter() - t0
                        c1 = cpu_now()
                        cpu[m] = [None if t is None or a is None or b is None else t + b - a
                                  for t, a, b in zip(cpu[m], c0, c1)]
                one, many = got[1], got[args.in_flight]
                if not all(bytes(a) == bytes(b) == bytes(c)
                           for a, b, c in zip(singles, one, many)):
                    break
            n_all = nq * rounds
            one_s, many_s = wall[1] / rounds, wall[args.in_flight] / rounds
            single_s /= rounds
            cpu_single /= rounds
            sent1 = (d.bytes_sent - sent0) / (2 * rounds)
            recv1 = (d.bytes_received - recv0) / (2 * rounds)

            def per_query(m):
                c = [None if x is None else 1000.0 * x / n_all for x in cpu[m]]
                return {"coordinator": c[0], "workers": c[1:],
                        "cores": None if None in cpu[m] else sum(cpu[m]) / wall[m]}
            cpu = {m: per_query(m) for m in modes}
            identical = all(bytes(a) == bytes(b) == bytes(c)
                            for a, b, c in zip(singles, one, many))
            hits = 0
            for qo, resp, g in zip(qs, one, gt):
                ids, _, _ = client.finish(qo, resp, 10)
                hits += len(set(int(x) for x in ids) & set(int(x) for x in g[:10]))
            reopened = d.reopened
            group_bytes = [i["bytes"] for i in d.info()]
    st = single.stats()
    est = estimate(p, n)
    out = {
        "workers": args.workers,
        "queries": nq,
        "pool": args.pool,
        "items": n,
        "shards": p.shards,
        "per_item": p.per_item,
        "recall_at_10": round(hits / (10.0 * nq), 4),
        "identical_to_single": bool(identical),
        "ms_per_query": round(1000.0 * one_s / nq, 3),
        "single_ms_per_query": round(1000.0 * single_s / nq, 3),
        "overhead_ms_per_query": round(1000.0 * (one_s - single_s) / nq, 3),
        "queries_per_second": round(nq / many_s, 2),
        "queries_per_second_1_in_flight": round(nq / one_s, 2),
        "in_flight": args.in_flight,
        "rounds": rounds,
        "slice": args.slice,
        "load_average": round(os.getloadavg()[0], 2),
        "throughput_ratio": round(one_s / many_s, 3),
        "cpu_ms_per_query_single_search": round(1000.0 * cpu_single / nq, 3),
        # the throughput ratio the two modes would have with the same CPU
        "cpu_per_query_ratio": _cpu_ratio(cpu[1], cpu[args.in_flight]),
        "cpu_ms_per_query_1_in_flight": _rounded(cpu[1]),
        "cpu_ms_per_query_in_flight": _rounded(cpu[args.in_flight]),
        "cpus": os.cpu_count(),
        "bytes_per_query": int((sent1 + recv1) / nq),
        "request_bytes": len(reqs[0]),
        "response_bytes": int(sum(len(s) for s in singles) / nq),
        "reopened_groups": reopened,
        "entries": st.entries,
        "server_bytes": st.bytes,
        "bytes_per_entry": round(st.bytes / max(1, st.entries), 1),
        "group_bytes": group_bytes,
        "estimated_memory_bytes": est["memory_bytes"] if est else None,
        "estimated_resident_per_entry": round(est["resident_per_entry"], 1) if est else None,
        "estimated_disk_per_entry": round(est["disk_per_entry"], 1) if est else None,
        "worker_memory_limit": per if not args.scheduler else None,
        "build_seconds_single": round(t_single, 1),
        "extract_seconds_groups": round(t_extract, 1),
        "open_seconds_groups": round(t_build, 1),
        "single": args.single or "built",
        "scheduler": args.scheduler or "local cluster 127.0.0.1",
        "tls": bool(args.tls_ca_file),
    }
    print(json.dumps(out))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m mess.dask",
                                 description="MESS shard groups on Dask distributed")
    sub = ap.add_subparsers(dest="cmd", required=True)
    dp = sub.add_parser("demo", help="build a deployment over DIR, serve it from W workers, "
                        "run the queries, print one JSON line")
    dp.add_argument("--workers", type=int, default=2, help="shard groups = local workers (W)")
    dp.add_argument("--data", default="datasets/sift",
                    help="directory with base, query, learn (.bvecs/.fvecs), groundtruth.ivecs")
    dp.add_argument("--pool", type=int, default=1500, help="total candidate pool B")
    dp.add_argument("--queries", type=int, default=0, help="first N queries (0: all)")
    dp.add_argument("--items", type=int, default=0, help="first N base vectors (0: all)")
    dp.add_argument("--shards", type=int, default=0, help="M (default: the library's)")
    dp.add_argument("--per-item", type=int, default=0, help="t (default: the library's)")
    dp.add_argument("--ef-construction", type=int, default=0)
    dp.add_argument("--in-flight", type=int, default=8, help="queries in flight for the "
                    "throughput run")
    dp.add_argument("--rounds", type=int, default=3,
                    help="timed rounds (every query, each mode, each round)")
    dp.add_argument("--slice", type=int, default=50,
                    help="queries per turn: 1 and --in-flight queries in flight take "
                    "turns on slices of this many queries (the same load for both)")
    dp.add_argument("--threads", type=int, default=2, help="threads for building")
    dp.add_argument("--group-threads", type=int, default=2,
                    help="C search threads per group actor")
    dp.add_argument("--scheduler", default=None,
                    help="address of an existing Dask scheduler (else a LocalCluster "
                    "of W workers on 127.0.0.1)")
    dp.add_argument("--tls-ca-file", default=None,
                    help="TLS on every connection (mess.dask.tls): the cluster's CA "
                    "certificate (PEM); with --tls-cert and --tls-key")
    dp.add_argument("--tls-cert", default=None, help="this process's certificate (PEM)")
    dp.add_argument("--tls-key", default=None, help="its private key (PEM)")
    dp.add_argument("--dir", default=None, help="where the single server and the groups keep "
                    "their directories (default: a new temporary directory; with "
                    "--scheduler, one every worker reaches)")
    dp.add_argument("--single", default=None,
                    help="a server directory built before over DIR's base vectors (all of "
                    "them), checkpointed; with --client, the client file that built it")
    dp.add_argument("--client", default=None, help="the client file of --single")
    dp.add_argument("--timeout", type=float, default=120.0,
                    help="seconds any one call may take")
    args = ap.parse_args(argv)
    if args.workers < 1:
        ap.error("--workers must be at least 1")
    tls_args = (args.tls_ca_file, args.tls_cert, args.tls_key)
    if any(tls_args) and not all(tls_args):
        ap.error("--tls-ca-file, --tls-cert and --tls-key go together")
    try:
        require()
    except ImportError as e:
        print("python3 -m mess.dask: %s" % e, file=sys.stderr)
        return 2
    return demo(args)


if __name__ == "__main__":
    # run the package's module, not this file as __main__: the actor class
    # must be importable by name on the workers (mess.dask.GroupServer)
    from mess import dask as _this
    sys.exit(_this.main())
