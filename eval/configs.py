"""eval/configs.py - a MESS configuration written as SPEC, a comma list of
key=value, as eval/text_sweep.py and eval/words.py take it: M shards,
t per item, k kappa, d p_store, q p_query (effective), ef ef_search,
pay payload; each script has its own defaults."""
import math
import sys

import common  # noqa: F401  (puts python/ on the path for mess)
import mess  # noqa: E402


def parse_spec(spec, defaults, who, literal=()):
    """SPEC over a copy of defaults: pay stays text, d and q become floats,
    the others integers; a value in literal stays as written (text_sweep's
    "match").  An unknown key exits with "WHO: unknown key ..."."""
    c = dict(defaults)
    for kv in filter(None, (x.strip() for x in spec.split(","))):
        k, _, v = kv.partition("=")
        if k not in c:
            sys.exit("%s: unknown key %r in %r" % (who, k, spec))
        c[k] = v if k == "pay" or v in literal else (float(v) if k in "dq" else int(v))
    return c


def eta(p):
    """ln((1-p)/p): a flip p's bound per bit (inf for p = 0, no noise)."""
    return math.log((1 - p) / p) if p > 0 else float("inf")


def params_of(c, dim, metric="cos"):
    return mess.Params(dim, metric=metric, shards=c["M"], per_item=c["t"], kappa=c["k"],
                       p_store=c["d"], p_query=c["q"], ef_search=c["ef"], payload=c["pay"])
