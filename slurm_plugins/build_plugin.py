"""Build job_submit_slurmpod.so with cffi's embedding API, against the Slurm headers of the image.

    python -m slurmpod.slurm_plugins.build_plugin --out DIR [--include /usr/include] [--site-dir D ...]

Run it with the Python that slurmctld's plugin should embed (the image's venv: its site-packages are
baked in so the plugin finds slurmpod). Needs cffi, setuptools, python3-dev and Slurm's public headers
(slurm/slurm.h, slurm/slurm_errno.h, slurm/slurm_version.h: Debian's libslurm-dev).

The C is in this package's .c/.h files: job_submit_slurmpod.c (the plugin: what it enforces is in its
header comment), fastpath.c (the built-in rules over a compiled table), slurmpod_job.h and fastpath.h
(the structs C and Python share, given to cffi's cdef), python_api.h (the functions the embedded Python
provides, given to cffi's embedding_api). The build lists those sources and passes the values Python owns
(paths, env names, the identity cache's TTL) as -D macros; the embedding init code only puts the image's
site-packages on sys.path and lets `embedded.register` bind the Python functions.
Ref: https://slurm.schedmd.com/job_submit_plugins.html, https://cffi.readthedocs.io/en/stable/embedding.html
"""

from __future__ import annotations

import argparse
import sys
import sysconfig
from pathlib import Path

from slurmpod import well_known as wk
from slurmpod.slurm_plugins import bridge

MODULE = "_slurmpod_job_submit"
C_DIR = Path(__file__).resolve().parent
SOURCES = ("job_submit_slurmpod.c", "fastpath.c")
# The structs and the fast path's entry point, for cffi's cdef (and the tests' FFIs).
CDEF_HEADERS = ("slurmpod_job.h", "fastpath.h")
EMBEDDING_HEADER = "python_api.h"
COMPILE_ARGS = ("-O2", "-Wall", "-Wno-unused-function")

INIT_CODE = """\
import os
import site
for _dir in SITE_DIRS:
    site.addsitedir(_dir)
from _slurmpod_job_submit import ffi
from slurmpod.slurm_plugins import embedded
embedded.register(ffi, os.environ)
"""


def declarations(*headers: str) -> str:
    """The headers' C declarations without their preprocessor lines, which cffi's cdef does not read
    (include guards, #include, and the bit macros, whose Python twins live in embedded)."""
    text = "".join((C_DIR / name).read_text(encoding="utf-8") for name in headers)
    return "".join(line for line in text.splitlines(keepends=True) if not line.lstrip().startswith("#"))


def macros(libpython: str) -> list[tuple[str, str]]:
    """The -D values job_submit_slurmpod.c is compiled with: names Python owns, in one place each."""
    strings = (("SP_LIBPYTHON", libpython), ("SP_POLICY_FILE", wk.POLICY_FILE), ("SP_STATS_FILE", wk.PLUGIN_STATS_FILE),
               ("SP_ENV_POLICY", wk.ENV_POLICY), ("SP_ENV_STATS", wk.ENV_PLUGIN_STATS))
    ttl = ("SP_IDENTITY_TTL_S", f"{int(bridge.IDENTITY_TTL_S)}ull")  # seconds, as bridge.IDENTITY_TTL_S
    return [(name, f'"{value}"') for name, value in strings] + [ttl]


def init_code(site_dirs: list[str]) -> str:
    return INIT_CODE.replace("SITE_DIRS", repr(tuple(site_dirs)))


def libpython_soname() -> str:
    """libpython3.X.so.1.0 of the running interpreter (the one the plugin embeds)."""
    name = sysconfig.get_config_var("INSTSONAME") or f"libpython{sysconfig.get_python_version()}.so.1.0"
    return str(name)


def build(out: Path, include_dirs: list[str], site_dirs: list[str], verbose: bool = False) -> Path:
    import cffi  # noqa: PLC0415 - a build-time dependency only

    ffi = cffi.FFI()
    ffi.cdef(declarations(*CDEF_HEADERS))
    ffi.embedding_api(declarations(EMBEDDING_HEADER))
    ffi.embedding_init_code(init_code(site_dirs))
    includes = [str(C_DIR), *(str(Path(d).resolve()) for d in include_dirs)]  # cffi compiles from inside ``out``
    ffi.set_source(MODULE, f'#include "{EMBEDDING_HEADER}"\n', sources=[str(C_DIR / s) for s in SOURCES],
                   include_dirs=includes, define_macros=macros(libpython_soname()), libraries=["dl"],
                   extra_compile_args=list(COMPILE_ARGS))
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    built = ffi.compile(tmpdir=str(out), target=wk.PLUGIN_FILE.replace(".so", ".*"), verbose=verbose)
    return Path(built)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slurmpod.slurm_plugins.build_plugin", description=__doc__)
    parser.add_argument("--out", required=True, type=Path, help="directory for job_submit_slurmpod.so")
    parser.add_argument("--include", action="append", default=[],
                        help="directory holding slurm/slurm.h (repeatable; default /usr/include)")
    parser.add_argument("--site-dir", action="append", default=None,
                        help="site-packages the embedded Python adds (default: this interpreter's)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    site_dirs = args.site_dir or [sysconfig.get_paths()["purelib"]]
    built = build(args.out, args.include or ["/usr/include"], site_dirs, args.verbose)
    print(built)
    return 0


if __name__ == "__main__":
    sys.exit(main())
