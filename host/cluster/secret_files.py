"""`cluster up --secret-file NAME:KEY=PATH`: a Secret the user creates from a file, as
`kubectl create secret generic NAME --from-file=KEY=PATH` does (the site's sssd.conf, a CA bundle).
Ref: https://kubernetes.io/docs/concepts/configuration/secret/#restriction-names-data
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from slurmpod.errors import BadInput
from slurmpod.problems import Problems

FIELD = "--secret-file"
# A Secret's name is a DNS subdomain; its data keys are [-._a-zA-Z0-9]+; a Secret holds at most 1 MiB.
NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")
MAX_BYTES = 1024 * 1024


def parse(args: Sequence[str]) -> dict[str, dict[str, bytes]]:
    """Secret name -> data key -> the file's bytes; BadInput naming the argument and what is wrong."""
    p = Problems()
    secrets: dict[str, dict[str, bytes]] = {}
    for arg in args:
        name, sep, rest = arg.partition(":")
        key, eq, path = rest.partition("=")
        if not (sep and eq and NAME.fullmatch(name) and KEY.fullmatch(key) and key not in (".", "..")):
            p.add(FIELD, arg, "must be NAME:KEY=PATH (NAME a DNS subdomain name, KEY of [-._a-zA-Z0-9])")
            continue
        if key in secrets.get(name, {}):
            p.add(FIELD, arg, f"key {key} of Secret {name} given twice")
            continue
        try:
            content = Path(path).read_bytes()
        except OSError as exc:
            p.add(FIELD, arg, f"cannot read {path}: {exc.strerror}")
            continue
        if len(content) > MAX_BYTES:
            p.add(FIELD, arg, f"{len(content)} bytes: a Secret holds at most {MAX_BYTES}")
            continue
        secrets.setdefault(name, {})[key] = content
    p.raise_if_any()
    return secrets


def check_free(secrets: Mapping[str, Mapping[str, bytes]], taken: set[str]) -> None:
    """BadInput for a Secret the emulator creates itself (auth key, host key, JWT key, db password)."""
    clash = sorted(set(secrets) & taken)
    if clash:
        raise BadInput.one(FIELD, clash[0], "this Secret is made by `cluster up` itself")
