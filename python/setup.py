"""The package version is the C library's: MESS_VERSION_MAJOR/MINOR/PATCH
of ../mess.h (one source; pyproject.toml holds everything else)."""
import os
import re

from setuptools import setup


def version():
    header = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mess.h")
    try:
        with open(header, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise SystemExit("python/setup.py: the version comes from %s: %s "
                         "(build from the source tree)" % (header, e.strerror))
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(r"^#define\s+MESS_VERSION_%s\s+(\d+)" % part, text, re.M)
        if not m:
            raise SystemExit("python/setup.py: MESS_VERSION_%s not found in %s" % (part, header))
        parts.append(m.group(1))
    return ".".join(parts)


setup(version=version())
