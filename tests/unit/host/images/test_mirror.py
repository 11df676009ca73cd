"""Mirror discovery from apt sources (pure parsers; one test reads a fake /etc/apt)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmpod.errors import BadInput, PermanentError
from slurmpod_host.images import mirror

HOST_DEB822 = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def test_deb822_host_file_picks_main_archive_not_security() -> None:
    sources = mirror.parse_deb822(HOST_DEB822)
    assert [s.uris for s in sources] == [("http://deb.debian.org/debian",), ("http://deb.debian.org/debian-security",)]
    assert sources[0].suites == ("bookworm", "bookworm-updates")
    assert mirror.pick_mirror(sources) == "http://deb.debian.org/debian"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("Types: deb-src\nURIs: http://src.example/debian\nSuites: trixie\n\n"
                     "Types: deb\nURIs: http://bin.example/debian/\nSuites: trixie\n", "http://bin.example/debian",
                     id="skips-deb-src-strips-slash"),
        pytest.param("Types: deb\nURIs: http://off.example/debian\nSuites: trixie\nEnabled: no\n\n"
                     "Types: deb\nURIs: http://on.example/debian\nSuites: trixie\n", "http://on.example/debian",
                     id="skips-disabled"),
        pytest.param("Types: deb deb-src\nURIs:\n http://cont.example/debian\nSuites: trixie\n",
                     "http://cont.example/debian", id="continuation-line"),
        pytest.param("Types: deb\nURIs: cdrom:/media/ http://after.example/debian\nSuites: trixie\n",
                     "http://after.example/debian", id="skips-unsupported-scheme"),
        pytest.param("Types: deb\nURIs: http://security.debian.org/debian-security\n"
                     "Suites: trixie-security\n", None, id="only-security"),
        pytest.param("", None, id="empty"),
    ],
)
def test_deb822_variants(text: str, expected: str | None) -> None:
    assert mirror.pick_mirror(mirror.parse_deb822(text)) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("deb http://deb.debian.org/debian bookworm main\n", "http://deb.debian.org/debian",
                     id="plain"),
        pytest.param("deb [arch=amd64 signed-by=/k.gpg] http://m.example/debian trixie main contrib\n",
                     "http://m.example/debian", id="options"),
        pytest.param("# deb http://commented.example/debian trixie main\n"
                     "deb-src http://src.example/debian trixie main\n"
                     "deb http://security.debian.org/debian-security trixie-security main\n"
                     "deb http://real.example/debian trixie main # trailing\n", "http://real.example/debian",
                     id="comments-src-security"),
        pytest.param("garbage line\n", None, id="garbage"),
    ],
)
def test_one_line_format(text: str, expected: str | None) -> None:
    assert mirror.pick_mirror(mirror.parse_one_line(text)) == expected


def test_host_mirror_reads_sources_list_d_in_order(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(HOST_DEB822)
    (tmp_path / "sources.list.d" / "other.sources.disabled-by-farm").write_text(
        "Types: deb\nURIs: http://ignored.example/debian\nSuites: x\n")
    assert mirror.host_mirror(tmp_path) == "http://deb.debian.org/debian"
    (tmp_path / "sources.list").write_text("deb http://first.example/debian trixie main\n")
    assert mirror.host_mirror(tmp_path) == "http://first.example/debian"


def test_host_mirror_missing_is_a_permanent_error(tmp_path: Path) -> None:
    with pytest.raises(PermanentError, match="--mirror"):
        mirror.host_mirror(tmp_path)


@pytest.mark.parametrize("bad", ["ftp://x/debian", "deb.debian.org/debian", "http://a b/"])
def test_check_mirror_rejects_bad_urls_naming_the_field(bad: str) -> None:
    with pytest.raises(BadInput, match="mirror="):
        mirror.check_mirror(bad)


def test_check_mirror_strips_trailing_slash() -> None:
    assert mirror.check_mirror("http://m.example/debian/") == "http://m.example/debian"
