#!/bin/sh
# tests/cli_defaults.sh - the Defaults table of README.md against the code
# in all three interfaces: the C defaults (mess_params_default through the
# Python bindings' ctypes call), the CLI (`mess init` with no parameter
# option, every row read back with `mess info --server` and `--client`, a
# row neither prints failing; and the defaults its --help prints)
# and Python's mess.Params(dim), at several dimensions (kappa is 128 at
# every one of them).  The table's last column, the defaults for cosine and
# inner-product data (mess_params_default_for), the same way through
# mess.Params(dim, metric=...) and mess init --metric cos|ip; given the
# bits, both start from the paper's defaults.
set -u
MESS=${MESS:-build/mess}
PYTHON=${PYTHON:-/usr/bin/python3}
cd "$(dirname "$0")/.." || exit 1
MESS_LIBRARY="${MESS_LIBRARY:-$(pwd)/build/libmess.so}" MESS="$MESS" \
    exec "$PYTHON" - <<'PY'
import json, os, random, re, struct, subprocess, sys, tempfile
sys.path.insert(0, "python")
import mess

passed = failed = 0
def check(cond, name):
    global passed, failed
    if cond:
        passed += 1
        print("ok - " + name)
    else:
        failed += 1
        print("not ok - " + name)

# the table: | text | `field`[, `field`] | `--option` | `keyword` | value |
rows = {}
for line in open("README.md"):
    m = re.match(r"\|[^|]*\| `([a-z_]+)`(?:, `[a-z_]+`)? \| `(--[a-z-]+)` \| `([a-z_]+)` \| ([^|]+) \|", line)
    if m:
        rows[m.group(1)] = (m.group(2), m.group(3), m.group(4).strip())
check(len(rows) == 11, "README.md Defaults table has 11 rows (found %d)" % len(rows))
# its last column: the defaults for cosine / inner-product data
cos_rows = {}
for line in open("README.md"):
    m = re.match(r"\|[^|]*\| `([a-z_]+)`(?:, `[a-z_]+`)? \| `--[a-z-]+` \| `[a-z_]+` \| [^|]+ \| ([^|]+) \|", line)
    if m:
        cos_rows[m.group(1)] = m.group(2).strip()
check(len(cos_rows) == 11, "README.md cosine / inner product column has 11 rows (found %d)" % len(cos_rows))

def num(v):
    return float(v)

names = {"metric": {0: "l2", 1: "ip", 2: "cos"}, "payload": {0: "f32", 1: "f16", 2: "i8"}}
def as_text(field, value):
    if field in names:
        return names[field][value]
    return value

# C and Python: mess.Params(dim) is mess_params_default(dim)
for dim in (20, 100, 128, 960):
    p = mess.Params(dim)
    for field, (opt, kw, want) in rows.items():
        if field == "p_prr":
            got, kwval = p.p_query, p.p_query
        else:
            got = as_text(field, getattr(p, field))
            kwval = got
        ok = (got == want) if field in names else abs(num(got) - num(want)) < 1e-6
        check(ok, "C/Python default %s at dim %d: %s (table: %s)" % (field, dim, got, want))
    # the keyword the table names sets that field
    for field, (opt, kw, want) in rows.items():
        try:
            v = want if field in names else num(want)
            v = int(v) if field not in names and field not in ("p_store", "p_prr") else v
            q = mess.Params(dim, **{kw: v})
            assert field == "p_prr" or as_text(field, getattr(q, field)) == as_text(field, getattr(mess.Params(dim), field))
            check(True, "Python keyword %s accepted" % kw)
        except Exception as e:
            check(False, "Python keyword %s: %s" % (kw, e))

# cosine and inner product: mess.Params(dim, metric=...) is
# mess_params_default_for(dim, metric); with kappa given, the paper's flips
for dim in (20, 512):
    for metric in ("cos", "ip"):
        p = mess.Params(dim, metric=metric)
        for field, want in cos_rows.items():
            if field == "metric":
                got, ok = as_text(field, p.metric), as_text(field, p.metric) == metric
            else:
                got = p.p_query if field == "p_prr" else as_text(field, getattr(p, field))
                ok = got == want if field in names else abs(num(got) - num(want)) < 1e-6
            check(ok, "C/Python %s default %s at dim %d: %s (table: %s)" % (metric, field, dim, got, want))
    q = mess.Params(dim, metric="cos", kappa=128)
    check(q.kappa == 128 and abs(q.p_store - 0.08) < 1e-12 and abs(q.p_query - 0.08) < 1e-9
          and q.ef_search == 0 and q.metric == 2,
          "Python cos with kappa given starts from the paper's defaults (p_D %g)" % q.p_store)
import ctypes
from mess import _lib as L
d = mess.Params(64)
e = mess.Params()
L.params_default_for(ctypes.byref(e), ctypes.sizeof(e), 64, 0)
check(all(getattr(e, f) == getattr(d, f) for f, _ in L.mess_params._fields_),
      "mess_params_default_for(l2) is mess_params_default")

# CLI: init on 100-d data with no parameter option, then info
tmp = tempfile.mkdtemp()
rnd = random.Random(7)
train = os.path.join(tmp, "train.fvecs")
with open(train, "wb") as f:
    for i in range(1200):
        f.write(struct.pack("<i", 100))
        f.write(struct.pack("<100f", *[rnd.gauss(0, 1) for _ in range(100)]))
MESS = os.environ["MESS"]
C, S = os.path.join(tmp, "c"), os.path.join(tmp, "s")
r = subprocess.run([MESS, "init", "--client", C, "--server", S, "--train", train,
                    "--seed-env", "MESS_TEST_SEED", "--threads", "2"],
                   capture_output=True, text=True,
                   env=dict(os.environ, MESS_TEST_SEED="00" * 32))
check(r.returncode == 0, "mess init with the defaults (%s)" % r.stderr.strip())
init = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
# every row through the CLI: the server's info (public parameters) and the
# client's (also the client-side train_sample); a row neither prints fails
cli = {}
for role, path in (("--server", S), ("--client", C)):
    r = subprocess.run([MESS, "info", role, path], capture_output=True, text=True)
    check(r.returncode == 0, "mess info %s (%s)" % (role, r.stderr.strip()))
    info = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
    for key, value in info.items():
        if key in cli and cli[key] != value:
            check(False, "mess info --server and --client disagree on %s: %s, %s" % (key, cli[key], value))
        cli[key] = value
cli["kappa"] = cli.get("bits")
cli["p_prr"] = init.get("p_query")
for field, (opt, kw, want) in rows.items():
    got = cli.get(field)
    ok = got is not None and (got == want if field in names else abs(num(got) - num(want)) < 1e-6)
    check(ok, "CLI default %s on 100-d data: %s (table: %s)" % (field, got, want))
# the effective 0.08 is split evenly (the table's PRR = IRR = 0.0417424)
m = re.search(r"PRR = IRR = ([0-9.]+)", open("README.md").read())
split = float(m.group(1)) if m else None
r = subprocess.run([MESS, "info", "--client", C], capture_output=True, text=True)
info = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
check(split is not None and all(abs(info.get(k, -1) - split) < 1e-6 for k in ("p_prr", "p_irr")),
      "CLI p_prr, p_irr %s, %s (table: PRR = IRR = %s)" % (info.get("p_prr"), info.get("p_irr"), split))
# CLI: --metric cos and ip alone take the cosine column; with --bits, the paper's
def cli_init(extra, name):
    c, sv = os.path.join(tmp, "c" + name), os.path.join(tmp, "s" + name)
    r = subprocess.run([MESS, "init", "--client", c, "--server", sv, "--train", train,
                        "--seed-env", "MESS_TEST_SEED", "--threads", "2"] + extra,
                       capture_output=True, text=True,
                       env=dict(os.environ, MESS_TEST_SEED="00" * 32))
    if r.returncode != 0:
        return {}, r.stderr.strip()
    ini = json.loads(r.stdout.strip().splitlines()[-1])
    r = subprocess.run([MESS, "info", "--server", sv], capture_output=True, text=True)
    inf = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
    out = dict(inf)
    out["kappa"] = inf.get("bits")
    out["p_prr"] = ini.get("p_query")
    return out, ""
for metric in ("cos", "ip"):
    got, err = cli_init(["--metric", metric], metric)
    check(bool(got), "mess init --metric %s (%s)" % (metric, err))
    for field, want in cos_rows.items():
        if field in got and field not in names:
            check(got[field] is not None and abs(num(got[field]) - num(want)) < 1e-6,
                  "CLI --metric %s default %s: %s (table: %s)" % (metric, field, got[field], want))
# "cosine" (Python's and MESS_METRIC_COSINE's spelling) is cos (issue 29)
got, err = cli_init(["--metric", "cosine"], "cosine")
cos_got, _ = cli_init(["--metric", "cos"], "cos2")
check(got.get("metric") == "cos" and got == cos_got,
      "CLI --metric cosine is --metric cos (%s)" % (err or got.get("metric")))
check(mess.Params(100, metric="cosine") == mess.Params(100, metric="cos") and
      mess.Params(100, metric="cosine").metric == 2,
      "Python metric='cosine' is metric='cos'")
got, err = cli_init(["--metric", "cos", "--bits", "128"], "cos128")
check(got.get("kappa") == 128 and got.get("p_store") is not None and
      abs(num(got["p_store"]) - 0.08) < 1e-9 and abs(num(got.get("p_prr", 0)) - 0.08) < 1e-6,
      "CLI --metric cos --bits 128 starts from the paper's flips (%s, %s)" %
      (got.get("p_store"), got.get("p_prr")))
# the CLI's help prints the defaults it uses: "--option ... (value)"
help_text = subprocess.run([MESS, "init", "--help"], capture_output=True, text=True).stdout
for field, (opt, kw, want) in rows.items():
    i = help_text.find(opt + " ")
    j = help_text.find("--", i + len(opt)) if i >= 0 else -1
    seg = help_text[i:j if j >= 0 else len(help_text)] if i >= 0 else ""
    m = re.findall(r"\(([^()]*)\)", seg)
    shown = m[-1] if m else None
    ok = shown is not None and (shown == want if field in names else abs(num(shown) - num(want)) < 1e-6)
    check(ok, "mess init --help shows %s (%s) (table: %s)" % (opt, shown, want))
m = re.search(r"with --metric cos or ip and no --bits the defaults are --bits (\d+),\s+"
              r"--p-store ([0-9.]+), --p-query ([0-9.]+), --ef-search (\d+)", help_text)
check(m is not None and m.groups() == (cos_rows["kappa"], cos_rows["p_store"], cos_rows["p_prr"],
                                       cos_rows["ef_search"]),
      "mess init --help shows the cosine defaults (%s)" % (m.groups() if m else None,))
subprocess.run(["rm", "-rf", tmp])
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
PY
