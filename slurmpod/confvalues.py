"""Values that go into Slurm configuration: validated so none can add a line or a key.

slurm.conf and `slurmd --conf` are whitespace-separated ``Key=Value`` lists; a value containing
whitespace, ``#``, ``=`` or a quote could end the value early and start another key, and a newline
would start another line. Every value slurmpod writes passes through one of these functions.
Ref: https://slurm.schedmd.com/slurm.conf.html#SECTION_DESCRIPTION
"""

from __future__ import annotations

import re

from slurmpod.errors import BadInput

# Node and host names: RFC 1123 labels, as Kubernetes pod names are.
# Ref: https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-label-names
_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(:[0-9]{1,5})?$")
# Slurm feature names: letters, digits, '_', '-', '.'; no operators (& | , ! [ ] ( ) * :).
# Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_Features
_FEATURE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
# Generic safe token for other values (paths, plugin names, partition names).
_TOKEN = re.compile(r"^[A-Za-z0-9_@%+/.:,-]{1,255}$")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
# Accounts and users as slurmdbd stores them: lower case (sacctmgr lowercases what it is given).
# Ref: https://slurm.schedmd.com/sacctmgr.html
_DB_NAME = re.compile(r"^[a-z0-9_][a-z0-9_.-]{0,63}$")
# Absolute paths slurmpod writes into config files (supervisord expands '%', so it is not allowed).
_PATH = re.compile(r"^/[A-Za-z0-9_./-]{0,4095}$")


def _check(pattern: re.Pattern[str], field: str, value: str, what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise BadInput.one(field, value, f"not a valid {what}")
    return value


def node_name(field: str, value: str) -> str:
    """A Slurm NodeName that is also a pod name (RFC 1123 label)."""
    return _check(_DNS_LABEL, field, value, "node name (lowercase RFC 1123 label, at most 63 chars)")


def host(field: str, value: str) -> str:
    """A host name or host:port."""
    return _check(_HOST, field, value, "host name")


def feature(field: str, value: str) -> str:
    """One Slurm node feature."""
    return _check(_FEATURE, field, value, "Slurm feature name (letters, digits, _ . -)")


def name(field: str, value: str) -> str:
    """A Slurm object name: partition, nodeset, cluster."""
    return _check(_NAME, field, value, "name (letters, digits, _ . -)")


def db_name(field: str, value: str) -> str:
    """A Slurm account or user name for sacctmgr: a ``name`` in lower case."""
    return _check(_DB_NAME, field, value, "account or user name (lower-case letters, digits, _ . -)")


def path(field: str, value: str) -> str:
    """An absolute path of plain characters (no spaces, quotes, '%', '#' or '=')."""
    return _check(_PATH, field, value, "absolute path (letters, digits, _ . - /)")


def token(field: str, value: str) -> str:
    """A single whitespace-free value with no quoting, comment or assignment characters."""
    return _check(_TOKEN, field, value, "single token (no spaces, quotes, '#' or '=')")


def integer(field: str, value: object, low: int, high: int) -> int:
    """An integer within [low, high], given as int or decimal string."""
    if isinstance(value, bool):
        raise BadInput.one(field, value, "not an integer")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]{1,20}", value.strip()):
        number = int(value.strip())
    else:
        raise BadInput.one(field, value, "not an integer")
    if not low <= number <= high:
        raise BadInput.one(field, value, f"out of range [{low}, {high}]")
    return number


def quoted_text(field: str, value: str, max_len: int = 255) -> str:
    """Free text (e.g. a drain Reason) as one double-quoted Slurm value; control chars refused."""
    if any(ord(c) < 0x20 or c == "\x7f" for c in value) or '"' in value:
        raise BadInput.one(field, value, "text may not contain quotes or control characters")
    if len(value) > max_len:
        raise BadInput.one(field, value, f"longer than {max_len} characters")
    return f'"{value}"'


# A Slurm parameter name. Ref: https://slurm.schedmd.com/slurm.conf.html#SECTION_DESCRIPTION
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9]{0,63}")
# A value that opens with a double quote is one quoted string, which may hold whitespace (quoted_text).
_QUOTED = re.compile(r'"[^"]*"')


def _value_problem(value: str) -> str | None:
    """Why ``value`` cannot be one value of a ``Key=Value`` line, or None."""
    if "\n" in value or "\r" in value or "#" in value:
        return "line-breaking character"
    if value.startswith('"'):
        return None if _QUOTED.fullmatch(value) else "a value that opens a quote must be one quoted string"
    if any(c.isspace() for c in value):
        return "unquoted whitespace"
    return None


def kv_line(pairs: list[tuple[str, str]]) -> str:
    """Join already-validated pairs into one ``Key=Value Key=Value`` line; re-checks as a tripwire."""
    out = []
    for key, value in pairs:
        if not _KEY.fullmatch(key):
            raise ValueError(f"bad Slurm key {key!r}")
        problem = _value_problem(value)
        if problem is not None:
            raise ValueError(f"{problem} in {key}={value!r}")
        out.append(f"{key}={value}")
    return " ".join(out)


def parse_kv_line(field: str, line: str) -> list[tuple[str, str]]:
    """The pairs of one ``Key=Value Key=Value`` line, in order: the inverse of ``kv_line``.

    Pairs are separated by spaces; a value that opens with a double quote runs to the closing quote and
    keeps its quotes, as ``kv_line`` took it. Whatever ``kv_line`` would refuse is BadInput: a token
    without ``=`` or with a bad key under ``field``, a bad value under ``field`` and its key.
    """
    pairs: list[tuple[str, str]] = []
    i, end = 0, len(line)
    while i < end:
        if line[i] == " ":
            i += 1
            continue
        eq = line.find("=", i)
        space = line.find(" ", i)
        token_end = end if space < 0 else space
        key = line[i:eq] if 0 <= eq < token_end else ""
        if not _KEY.fullmatch(key):
            raise BadInput.one(field, line[i:token_end], "expected Key=Value")
        start = eq + 1
        value_end = token_end
        if line.startswith('"', start):
            close = line.find('"', start + 1)
            if close >= 0 and (close + 1 == end or line[close + 1] == " "):
                value_end = close + 1
        value = line[start:value_end]
        problem = _value_problem(value)
        if problem is not None:
            raise BadInput.one(f"{field} {key}", value, problem)
        pairs.append((key, value))
        i = value_end
    return pairs
