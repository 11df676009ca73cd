"""Kubernetes' ``$(VAR)`` expansion in env values, command and args.

A port of k8s.io/kubernetes/third_party/forked/golang/expansion: ``$(VAR)`` becomes VAR's value when
VAR is defined, and stays ``$(VAR)`` when it is not; ``$$`` is an escaped ``$``; anything else is copied.
Ref: https://kubernetes.io/docs/tasks/inject-data-application/define-interdependent-environment-variables/
Ref: https://github.com/kubernetes/kubernetes/blob/master/third_party/forked/golang/expansion/expand.go
"""

from __future__ import annotations

from collections.abc import Mapping

_OPERATOR = "$"
_OPENER = "("
_CLOSER = ")"


def _read_name(rest: str) -> tuple[str, bool, int]:
    """(text read, whether it names a variable, characters consumed after the operator)."""
    if rest[0] == _OPERATOR:  # escaped operator
        return _OPERATOR, False, 1
    if rest[0] == _OPENER:
        end = rest.find(_CLOSER, 1)
        if end != -1:
            return rest[1:end], True, end + 1
        return _OPERATOR + _OPENER, False, 1  # incomplete reference: copied as is
    return _OPERATOR + rest[0], False, 1


def expand(text: str, env: Mapping[str, str]) -> str:
    """Expand ``text`` against ``env`` exactly as kubelet does."""
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    while cursor < len(text):
        if text[cursor] == _OPERATOR and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            read, is_var, advance = _read_name(text[cursor + 1 :])
            if is_var:
                out.append(env.get(read, f"$({read})"))
            else:
                out.append(read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return "".join(out) + text[checkpoint:]
