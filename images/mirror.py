"""Find the Debian mirror the host's apt uses, for debootstrap and for apt inside the builds.

Parsers are pure functions over file text; only `host_mirror` reads /etc/apt.
Ref: sources.list(5) — the one-line format and the deb822 ``.sources`` format.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from slurmpod.errors import BadInput, PermanentError

_SUPPORTED_SCHEMES = ("http://", "https://", "file:/")


@dataclass(frozen=True, slots=True)
class AptSource:
    """One source entry (a deb822 stanza or a one-line entry)."""

    types: tuple[str, ...]
    uris: tuple[str, ...]
    suites: tuple[str, ...]
    components: tuple[str, ...]
    enabled: bool = True


def parse_deb822(text: str) -> list[AptSource]:
    """Parse a ``.sources`` file: stanzas separated by blank lines, ``#`` comment lines,
    continuation lines starting with white space. Ref: sources.list(5), DEB822-STYLE FORMAT."""
    stanzas: list[dict[str, str]] = []
    fields: dict[str, str] = {}
    last = ""
    for raw in [*text.splitlines(), ""]:
        if raw.startswith("#"):
            continue
        if not raw.strip():
            if fields:
                stanzas.append(fields)
            fields, last = {}, ""
            continue
        if raw[0] in " \t" and last:
            fields[last] += " " + raw.strip()
            continue
        key, sep, value = raw.partition(":")
        if not sep:
            continue  # not a field; apt would reject the file, we just ignore the line
        last = key.strip().lower()
        fields[last] = value.strip()
    return [
        AptSource(
            types=tuple(f.get("types", "").split()),
            uris=tuple(f.get("uris", "").split()),
            suites=tuple(f.get("suites", "").split()),
            components=tuple(f.get("components", "").split()),
            enabled=f.get("enabled", "yes").strip().lower() not in {"no", "false", "0"},
        )
        for f in stanzas
    ]


def parse_one_line(text: str) -> list[AptSource]:
    """Parse the one-line format: ``deb [opt=val ...] URI SUITE [COMPONENT ...]``."""
    out: list[AptSource] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if "[" in line:  # options in brackets carry no information we need
            head, _, rest = line.partition("[")
            line = head + rest.partition("]")[2]
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        if len(words) < 3 or words[0] not in {"deb", "deb-src"}:
            continue
        out.append(AptSource((words[0],), (words[1],), (words[2],), tuple(words[3:])))
    return out


def _is_security(uri: str, suites: Iterable[str]) -> bool:
    return "security" in uri or any(s.endswith("-security") for s in suites)


def pick_mirror(sources: Iterable[AptSource]) -> str | None:
    """The first enabled binary (``deb``) archive that is not the security archive."""
    for src in sources:
        if not src.enabled or "deb" not in src.types or _is_security(" ".join(src.uris), src.suites):
            continue
        for uri in src.uris:
            if uri.startswith(_SUPPORTED_SCHEMES):
                return uri.rstrip("/")
    return None


def read_host_sources(etc_apt: Path) -> list[AptSource]:
    """Every entry in ``sources.list`` and ``sources.list.d/*.{list,sources}``, in apt's order."""
    found: list[AptSource] = []
    main = etc_apt / "sources.list"
    if main.is_file():
        found += parse_one_line(main.read_text(encoding="utf-8", errors="replace"))
    parts = etc_apt / "sources.list.d"
    if parts.is_dir():
        for path in sorted(parts.iterdir()):
            text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
            if path.suffix == ".sources":
                found += parse_deb822(text)
            elif path.suffix == ".list":
                found += parse_one_line(text)
    return found


def host_mirror(etc_apt: Path = Path("/etc/apt")) -> str:
    """The Debian mirror the host uses; PermanentError when none is configured."""
    mirror = pick_mirror(read_host_sources(etc_apt))
    if mirror is None:
        raise PermanentError(f"no Debian mirror found in {etc_apt}/sources.list*; pass --mirror URL")
    return mirror


def check_mirror(url: str) -> str:
    """Validate a --mirror value; apt inside the image needs plain http (no CA certificates)."""
    if not url.startswith(_SUPPORTED_SCHEMES) or any(c.isspace() for c in url):
        raise BadInput.one("mirror", url, "expected an http:// or https:// URL without spaces")
    return url.rstrip("/")
