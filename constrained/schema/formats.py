"""The string formats enforced during generation, each as one regular expression,
and the checks the parser's validation adds where a pattern cannot say it all.

The grammar emitters and :func:`format_matches` share these patterns, so what
the constraint lets through is exactly what the frame check accepts. They use
no look-around or back-references (the token automaton has neither) and match
the whole string. Dates are exact, leap years included.
"""

from __future__ import annotations

import re
from typing import Callable

import idna

_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}(\.{_OCTET}){{3}}"
_H16 = r"[0-9A-Fa-f]{1,4}"
_LS32 = rf"({_H16}:{_H16}|{_IPV4})"
_IPV6 = (
    "("
    + "|".join(
        [
            rf"({_H16}:){{6}}{_LS32}",
            rf"::({_H16}:){{5}}{_LS32}",
            rf"({_H16})?::({_H16}:){{4}}{_LS32}",
            rf"(({_H16}:){{0,1}}{_H16})?::({_H16}:){{3}}{_LS32}",
            rf"(({_H16}:){{0,2}}{_H16})?::({_H16}:){{2}}{_LS32}",
            rf"(({_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
            rf"(({_H16}:){{0,4}}{_H16})?::{_LS32}",
            rf"(({_H16}:){{0,5}}{_H16})?::{_H16}",
            rf"(({_H16}:){{0,6}}{_H16})?::",
        ]
    )
    + ")"
)
_LEAP_YEAR = r"([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)"
_DATE = (
    r"([0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])"
    r"|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
    r"|02-(0[1-9]|1[0-9]|2[0-8]))"
    rf"|{_LEAP_YEAR}-02-29)"
)
# No leap second: jsonschema's checker, which validates every parsed call,
# rejects them all, and RFC 3339 allows one only at 23:59:60 UTC.
_TIME = r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
# RFC 3986 section 3: scheme ":" ("//" authority path-abempty | path) [?query] [#fragment].
_PCT = r"%[0-9A-Fa-f]{2}"
_UNRESERVED_SUB = r"[A-Za-z0-9._~!$&'()*+,;=-]"
_PCHAR = rf"({_UNRESERVED_SUB}|{_PCT}|[:@])"
_AUTHORITY = (
    rf"(({_UNRESERVED_SUB}|{_PCT}|:)*@)?"
    rf"(\[{_IPV6}\]|({_UNRESERVED_SUB}|{_PCT})*)(:[0-9]*)?"
)
_URI = (
    rf"[A-Za-z][A-Za-z0-9+.-]*:(//{_AUTHORITY}(/{_PCHAR}*)*|/?({_PCHAR}+(/{_PCHAR}*)*)?)"
    rf"(\?({_PCHAR}|[/?])*)?(#({_PCHAR}|[/?])*)?"
)
# RFC 5321 section 4.1.2: a dot-atom or quoted local part; a domain, or an address literal.
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_QUOTED = r'"([ !#-\[\]-~]|\\[ -~])*"'
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DOMAIN = rf"({_LABEL}(\.{_LABEL})*|\[{_IPV4}\]|\[IPv6:{_IPV6}\])"

FORMAT_PATTERNS: dict[str, str] = {
    "date-time": rf"{_DATE}[Tt]{_TIME}",
    "date": _DATE,
    "time": _TIME,
    "uuid": r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}",
    "email": rf"({_ATOM}(\.{_ATOM})*|{_QUOTED})@{_DOMAIN}",
    "uri": _URI,
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "hostname": rf"{_LABEL}(\.{_LABEL})*",
}

_COMPILED = {name: re.compile(pattern) for name, pattern in FORMAT_PATTERNS.items()}


def format_matches(format_name: str, text: str) -> bool:
    """Whether ``text`` is in ``format_name`` as the constraint enforces it."""
    return _COMPILED[format_name].fullmatch(text) is not None


CHECKED_AFTER_GENERATION = {"hostname": "IDNA A-labels and the 253-character limit"}
"""What of a format the pattern leaves to the parser's validation (the
compiler warns of it): rules no regular expression of the automaton states."""


def _hostname(text: str) -> bool:
    """JSON Schema's ``hostname`` (RFC 1123, RFC 5890): the pattern's
    labels, at most 253 characters, every A-label (``xn--``) valid IDNA 2008,
    and no other label with ``--`` in its third and fourth places."""
    if len(text) > 253 or not format_matches("hostname", text):
        return False
    for label in text.split("."):
        if label[2:4] != "--":
            continue
        if label[:2].lower() != "xn":
            return False
        try:
            idna.decode(label)
        except (idna.IDNAError, UnicodeError):
            return False
    return True


_RELATIVE_JSON_POINTER = re.compile(r"(0|[1-9][0-9]*)(#|(/([^/~]|~[01])*)*)")

FORMAT_CHECKS: dict[str, Callable[[str], bool]] = {
    "hostname": _hostname,
    "relative-json-pointer": lambda text: _RELATIVE_JSON_POINTER.fullmatch(text) is not None,
}
"""The parser's checks of formats where jsonschema's own differ from JSON
Schema: its ``hostname`` check needs an optional package (``fqdn``) and
knows no A-labels; its ``relative-json-pointer`` rejects ``100`` and takes
non-ASCII digits."""
