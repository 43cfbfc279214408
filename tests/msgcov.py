#!/usr/bin/python3
"""tests/msgcov.py LOGDIR - every message the `mess` tool can print on
stderr, and the tests/cli_*.sh that made it print it.

The messages are read from the source: each cli_error / fprintf(stderr)
format in cli/*.c and bench/*.c (`mess bench` runs build/mess-bench), and for cli_fail(WHAT, PATH, rc) the line it prints
(WHAT: reason without a path; PATH: reason (WHAT) with one, when the
reason is not the system's).  LOGDIR holds what each test's `mess` runs
wrote on stderr (tests/shlib.sh records it when MESS_MESSAGE_LOG is set,
as `make check` does).  A message no test printed fails, unless it is
listed in EXEMPT below with the reason it cannot be triggered from
outside, or in KNOWN_GAPS (printed as "# gap", not yet tested).  Last line: "N passed, N failed".
"""
import glob
import os
import re
import sys

# message format (exactly as in the source) -> why no test prints it
EXEMPT = {
    "out of memory": "allocation failure: not reachable from the command line "
                     "(the library's paths are covered by tests/test_oom.c)",
    "\\r%s %zu/%zu": "progress line, printed only when stderr is a terminal",
    "\\r  build %s: %zu/%zu": "progress line, printed only when stderr is a terminal",
    "'%s' row %zu: component %zu is %s; vectors must be finite":
        "insert reads FILE through the same reader as every vector file, which "
        "refuses a non-finite component first (cli/files.c, tested in "
        "tests/cli_errors.sh); kept for a library refusal",
    "--popcount hw: this CPU has no POPCNT instruction":
        "only on a CPU without POPCNT (hnsw_popcount_force; the build and test "
        "machines have it)",
    "bench batch: <reason>": "printed only with MESS_ENOMEM (bench/bench_batch.c)",
    "%s: %s saves the client file after the server applies it, and this one "
    "cannot be saved; refused before changing anything":
        "only for a user who may not write the client file's directory: "
        "tests/cli_state.sh runs it as an unprivileged user (setpriv), whose "
        "stderr the recording wrapper cannot append to the root-owned log",
    "the old client file stays as %s: %s":
        "init putting a kept client file back failed: link(2) in the directory "
        "the same init just wrote to (cli/files.c cli_undo_init; the path that "
        "succeeds is tested in tests/cli_init.sh)",
    "choosing the configuration: <reason>":
        "mess_plan_choose fails otherwise only out of memory or when training a "
        "candidate fails on input the tool checked first (cli/init_choose.c; the "
        "library's refusals are tests/test_choose.c's)",
    "'%s' holds %zu queries; a request file holds at most 4294967295":
        "a query file of more than 2^32 - 1 rows (34 GB at one dimension; "
        "cli/twoparty.c)",
    "PATH: <reason> (cannot write query state)":
        "mess_query_save fails otherwise only with MESS_EIO, which prints the "
        "system's reason (tested), or out of memory (cli/twoparty.c)",
    "--layout codes: server '%s': %s":
        "mess_server_set_layout fails otherwise only with MESS_ENOMEM (the "
        "other than 128 bits case is tested); cli/server.c",
    "PATH: <reason> (cannot build the code layout)":
        "mess bench server: mess_server_set_layout fails otherwise only with "
        "MESS_ENOMEM (bench/bench_server.c)",
    "bench open: %s": "a directory that opened once fails to open or load again "
                      "within the run (files changed under it); bench/bench_open.c",
    "%zu queries returned no result (a bug)": "an internal consistency check of "
                                              "bench batch; fails only on a bug",
    "%zu responses differ between server modes":
        "an internal consistency check of bench throughput (the server's "
        "throughput mode against its groups); fails only on a bug",
    "bench throughput: %s": "printed only when a batch call fails on a directory "
                            "that opened and searched, or out of memory "
                            "(bench/bench_throughput.c)",
    "PATH: <reason> (bench throughput)": "only when the directory's delta chains "
                                         "fail to apply after it opened "
                                         "(bench/bench_throughput.c)",
    "%zu entries failed to open (a bug)": "an internal consistency check of "
                                          "bench payload; fails only on a bug",
    "the mapped graph returned other hits than the heap graph":
        "an internal consistency check of bench hnsw --mapped; fails only on a bug",
    "%zu entries failed to open or SIVs to match (a bug)":
        "an internal consistency check of bench client; fails only on a bug",
    "bench client: <reason>": "printed only when sodium_init or the client's "
                              "training fails, or out of memory (bench/bench_client.c)",
    "bench: cannot find this program's directory (/proc/self/exe: %s)":
        "only without /proc (or a path of 4096 bytes and more) to find the "
        "benchmark program beside the tool (cli/bench.c)",
    "%s: %zu queries ranked differently with verify-all or per entry":
        "an internal consistency check of bench protocol; fails only on a bug",
    "account summary: <reason>": "printed only when out of memory: the client's "
                                 "parameters passed mess_params_check when it "
                                 "loaded and the tool checks the angle, delta and "
                                 "flips first (cli/account.c)",
    "%zu responses differ between search variants":
        "an internal consistency check of bench server; fails only on a bug",
    "--resume: '%s' row %zu (id %llu) is partly stored (%zu of its %zu entries): "
    "not what an interrupted insert leaves":
        "an upload is applied all or nothing, so only a damaged directory or "
        "another program's partial buffer leaves an item partly stored (cli/resume.c)",
    "--resume: server probe: <reason>":
        "mess_server_count_stored fails only where the insert's own upload would "
        "(a shard's delta chain, reported by cli_server_unusable in "
        "tests/cli_server.sh) or out of memory (cli/resume.c)",
    "bench io: search: %s": "a search of a directory that opened and searched "
                            "once fails later in the run (out of memory, or its "
                            "files changed under it); bench/bench_io.c",
}

# Not yet printed by any test (issue 13 leftover, listed so a NEW message
# without a test still fails): a library call that fails after the tool
# has checked its inputs.  They are reached by out of memory or by a
# library refusal no test provokes from the command line yet; the library
# refusals themselves are tested in tests/test_*.c and out of memory in
# tests/test_oom.c.  Remove an entry once a test prints it.
KNOWN_GAPS = [
    "account access: <reason>", "account search: <reason>",
    "account stored --tail: <reason>", "account random-lsh: <reason>",
    "account report: <reason>", "query accountants: <reason>",
    "hashing: <reason>", "stored accountant: <reason>",
    "training (kappa %u, M %u): %s", "hashing: %s", "training: %s",
    "hnsw_new: %s", "hnsw_add: %s", "hnsw_search: %s",
    "PATH: <reason> (cannot write)", "bench payload: <reason>",
    "invalid parameters: %s", "plan: %s",
    "PATH: <reason> (cannot write client state)",
    "insert: <reason>", "client upload: <reason>", "server apply: <reason>",
    "query: <reason>", "client request: <reason>", "server search: <reason>",
    "client finish: <reason>", "delete: <reason>", "PATH: <reason> (compact)",
    "cannot train the client: <reason>",
    "bench batch: build: <reason>", "PATH: <reason> (bench batch)",
]

CONV = re.compile(r"%[-+ #0]*[0-9*]*(?:\.[0-9*]+)?(?:hh|h|ll|l|z|j|t|L)?"
                  r"[diouxXeEfgGcsp%]")


def c_string(text):
    """The concatenated C string literals at the start of text, or None."""
    out, i, found = [], 0, False
    while True:
        m = re.match(r'\s*"((?:[^"\\]|\\.)*)"', text[i:])
        if not m:
            return "".join(out) if found else None
        out.append(m.group(1))
        found = True
        i += m.end()


def unescape(s):
    return s.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")


def to_regex(fmt):
    """A format's text as a regular expression over one stderr line."""
    parts = CONV.split(unescape(fmt).rstrip("\n"))
    convs = CONV.findall(unescape(fmt))
    rx = ""
    for i, part in enumerate(parts):
        rx += re.escape(part)
        if i < len(convs):
            rx += "%" if convs[i] == "%%" else ".*"
    return rx


def messages():
    """(label, format shown, regex) for every message in cli/*.c, bench/*.c."""
    out = {}
    for path in sorted(glob.glob("cli/*.c") + glob.glob("bench/*.c")):
        src = open(path).read()
        for m in re.finditer(r"\b(cli_error|cli_fail|fprintf)\s*\(", src):
            line = src.count("\n", 0, m.start()) + 1
            rest = src[m.end():]
            where = "%s:%d" % (path, line)
            if m.group(1) == "fprintf":
                if not rest.startswith("stderr"):
                    continue
                fmt = c_string(rest[rest.index(",") + 1:])
                if fmt is None:
                    continue
                key, rx = fmt, "^" + to_regex(fmt)
            elif m.group(1) == "cli_error":
                fmt = c_string(rest)
                if fmt is None:
                    continue  # the definition
                key, rx = fmt, "^mess: " + to_regex(fmt) + "$"
            else:
                what = c_string(rest)
                if what is None:
                    continue  # a WHAT passed through: the caller's literal counts
                after = rest[rest.index('"') + len(what) + 2:]
                arg = after.split(",")[1].strip() if "," in after else ""
                if arg == "NULL":
                    key = "%s: <reason>" % what
                    rx = "^mess: " + re.escape(unescape(what)) + ": .*$"
                else:
                    key = "PATH: <reason> (%s)" % what
                    rx = "^mess: .*\\(" + re.escape(unescape(what)) + "\\)$"
            out.setdefault(key, (where, rx))
    return out


def main():
    logdir = sys.argv[1] if len(sys.argv) > 1 else "build/cli-messages"
    logs = {}
    for f in sorted(glob.glob(os.path.join(logdir, "*.log"))):
        name = os.path.basename(f)[:-4]
        logs[name] = open(f, errors="replace").read().splitlines()
    passed = failed = 0
    if not logs:
        print("not ok - no recorded stderr in %s (run the tests/cli_*.sh with "
              "MESS_MESSAGE_LOG=%s first, as make check does)" % (logdir, logdir))
        print("0 passed, 1 failed")
        return 1
    msgs = messages()
    for key in list(EXEMPT) + KNOWN_GAPS:
        if key not in msgs:
            print("not ok - listed message no longer in cli/*.c or bench/*.c: %r" % key)
            failed += 1
    gaps = 0
    for key, (where, rx) in sorted(msgs.items(), key=lambda kv: kv[1][0]):
        r = re.compile(rx)
        hit = next((t for t, lines in logs.items() if any(r.search(l) for l in lines)), None)
        if hit:
            print("ok - %s %r <- tests/%s.sh" % (where, key, hit))
            passed += 1
        elif key in EXEMPT:
            print("ok - %s %r exempt: %s" % (where, key, EXEMPT[key]))
            passed += 1
        elif key in KNOWN_GAPS:
            print("# gap - %s %r: no test prints it yet (KNOWN_GAPS)" % (where, key))
            gaps += 1
        else:
            print("not ok - %s %r: no tests/cli_*.sh prints it (add a test that "
                  "triggers it, or list it in tests/msgcov.py with the reason)" % (where, key))
            failed += 1
    print("# %d messages: %d printed by a test, %d exempt, %d known gaps"
          % (len(msgs), passed - sum(1 for k in msgs if k in EXEMPT),
             sum(1 for k in msgs if k in EXEMPT), gaps))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
