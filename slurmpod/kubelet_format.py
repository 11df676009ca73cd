"""Parse the files kubelet writes for a downwardAPI volume (`labels`, `annotations`).

Each line is ``key="value"``, keys sorted, the value quoted with Go's strconv.Quote.
Ref: https://kubernetes.io/docs/concepts/workloads/pods/downward-api/#downwardapi-fieldRef
Ref: https://pkg.go.dev/strconv#Quote (escape set handled by ``go_unquote``)
"""

from __future__ import annotations

from slurmpod.problems import Problems

_SIMPLE = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"'}
_HEX_LEN = {"x": 2, "u": 4, "U": 8}


def go_unquote(quoted: str) -> str:
    """Inverse of Go's strconv.Quote for a double-quoted string; ValueError when malformed."""
    if len(quoted) < 2 or quoted[0] != '"' or quoted[-1] != '"':
        raise ValueError("value is not a double-quoted string")
    if "\n" in quoted:  # Go's Unquote refuses a raw newline in a quoted string
        raise ValueError("raw newline in quoted string")
    body, out, i = quoted[1:-1], [], 0
    raw = bytearray()  # \x and octal escapes are bytes; decode runs of them as UTF-8

    def flush() -> None:
        if raw:
            out.append(raw.decode("utf-8", errors="replace"))
            raw.clear()

    while i < len(body):
        ch = body[i]
        if ch == '"':
            raise ValueError(f"unescaped quote at offset {i}")
        if ch != "\\":
            flush()
            out.append(ch)
            i += 1
            continue
        if i + 1 >= len(body):
            raise ValueError("dangling backslash")
        esc = body[i + 1]
        if esc in _SIMPLE:
            flush()
            out.append(_SIMPLE[esc])
            i += 2
        elif esc in _HEX_LEN:
            n = _HEX_LEN[esc]
            digits = body[i + 2 : i + 2 + n]
            if len(digits) != n or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise ValueError(f"bad \\{esc} escape at offset {i}")
            code = int(digits, 16)
            if esc == "x":
                raw.append(code)
            elif code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:  # Go: !utf8.ValidRune -> ErrSyntax
                raise ValueError(f"\\{esc}{digits} is not a valid Unicode code point")
            else:
                flush()
                out.append(chr(code))
            i += 2 + n
        elif esc in "01234567":
            digits = body[i + 1 : i + 4]
            if len(digits) != 3 or any(c not in "01234567" for c in digits) or int(digits, 8) > 255:
                raise ValueError(f"bad octal escape at offset {i}")
            raw.append(int(digits, 8))
            i += 4
        else:
            raise ValueError(f"unknown escape \\{esc} at offset {i}")
    flush()
    return "".join(out)


def go_quote(value: str) -> str:
    """Go strconv.Quote for the characters kubelet meets (used by the emulator and tests)."""
    out = ['"']
    rev = {v: k for k, v in _SIMPLE.items()}
    for ch in value:
        if ch in rev:
            out.append("\\" + rev[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def parse(text: str, source: str) -> dict[str, str]:
    """Parse a kubelet map file; every malformed line is reported, naming ``source`` and the line."""
    result: dict[str, str] = {}
    problems = Problems()
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, quoted = line.partition("=")
        field = f"{source}:{lineno}"
        if not sep or not key:
            problems.add(field, line, 'expected key="value"')
            continue
        try:
            value = go_unquote(quoted)
        except ValueError as exc:
            problems.add(field, line, str(exc))
            continue
        if key in result:
            problems.add(field, line, f"duplicate key {key!r}")
            continue
        result[key] = value
    problems.raise_if_any()
    return result


def render(mapping: dict[str, str]) -> str:
    """The file kubelet would write for ``mapping``."""
    return "".join(f"{k}={go_quote(v)}\n" for k, v in sorted(mapping.items()))
