"""The string formats enforced during generation, each as one regular expression,
and the checks the parser's validation adds where a pattern cannot say it all.

The grammar emitters and :func:`format_matches` share these patterns, so what
the constraint lets through is exactly what the frame check accepts. They use
no look-around or back-references (the token automaton has neither) and match
the whole string. Dates are exact, leap years included.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable

import idna

from ..caches import cached

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
# No leap second: RFC 3339 allows one only where the UTC time is 23:59:60,
# which one pattern states only with thousands of hour/minute/offset cases
# (jsonschema's checker refuses every one too).
_TIME = r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
# RFC 3986 (URIs) and RFC 3987 (IRIs: the same with non-ASCII "ucschar"s
# unreserved, and private-use characters in the query).
_PCT = r"%[0-9A-Fa-f]{2}"
_ASCII_UNRESERVED_SUB = "A-Za-z0-9._~!$&'()*+,;="
_UCSCHAR = "\\u00a0-\\ud7ff\\uf900-\\ufdcf\\ufdf0-\\uffef" + "".join(
    f"\\U{plane:04x}0000-\\U{plane:04x}fffd" for plane in range(1, 14)
) + "\\U000e1000-\\U000efffd"
_IPRIVATE = "\\ue000-\\uf8ff\\U000f0000-\\U000ffffd\\U00100000-\\U0010fffd"


def _references(unreserved_sub: str, query_extra: str) -> tuple[str, str]:
    """The absolute form and the reference form (absolute or relative) of
    RFC 3986's grammar, with ``unreserved_sub`` (a character class body) as
    unreserved and sub-delims characters and ``query_extra`` allowed in queries."""
    char = f"[{unreserved_sub}-]"
    pchar = rf"({char}|{_PCT}|[:@])"
    future = rf"[vV][0-9A-Fa-f]+\.[{_ASCII_UNRESERVED_SUB}:-]+"
    host = rf"(\[({_IPV6}|{future})\]|({char}|{_PCT})*)"
    authority = rf"(({char}|{_PCT}|:)*@)?{host}(:[0-9]*)?"
    query = rf"(\?({pchar}|[/?{query_extra}])*)?"
    fragment = rf"(#({pchar}|[/?])*)?"
    segments = rf"(/{pchar}*)*"
    absolute = rf"[A-Za-z][A-Za-z0-9+.-]*:(//{authority}{segments}|/?({pchar}+{segments})?){query}{fragment}"
    no_colon = rf"({char}|{_PCT}|@)"
    relative = rf"(//{authority}{segments}|/({pchar}+{segments})?|{no_colon}+{segments}|){query}{fragment}"
    return absolute, rf"({absolute}|{relative})"


_URI, _URI_REFERENCE = _references(_ASCII_UNRESERVED_SUB, "")
_IRI, _IRI_REFERENCE = _references(_ASCII_UNRESERVED_SUB + _UCSCHAR, _IPRIVATE)
# RFC 6570 (the apostrophe allowed in literals, as the JSON Schema Test Suite has it).
_VARCHAR = rf"([A-Za-z0-9_]|{_PCT})"
_VARSPEC = rf"{_VARCHAR}(\.?{_VARCHAR})*(:[1-9][0-9]{{0,3}}|\*)?"
_URI_TEMPLATE = rf"([!#$&-;=?-\[\]_a-z~{_UCSCHAR}{_IPRIVATE}]|{_PCT}|\{{[+#./;?&=,!@|]?{_VARSPEC}(,{_VARSPEC})*\}})*"
# RFC 3339 appendix A.
_N = "[0-9]+"
_DURATION_TIME = rf"T({_N}H({_N}M({_N}S)?)?|{_N}M({_N}S)?|{_N}S)"
_DURATION = rf"P(({_N}D|{_N}M({_N}D)?|{_N}Y({_N}M({_N}D)?)?)({_DURATION_TIME})?|{_DURATION_TIME}|{_N}W)"
# RFC 6901 and draft-bhutton-relative-json-pointer-00.
_JSON_POINTER = "(/([^/~]|~[01])*)*"
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
    "uri-reference": _URI_REFERENCE,
    "iri": _IRI,
    "iri-reference": _IRI_REFERENCE,
    "uri-template": _URI_TEMPLATE,
    "duration": _DURATION,
    "json-pointer": _JSON_POINTER,
    "relative-json-pointer": rf"(0|[1-9][0-9]*)(#|{_JSON_POINTER})",
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "hostname": rf"{_LABEL}(\.{_LABEL})*",
}



@cached(len(FORMAT_PATTERNS))
def format_regex(format_name: str) -> re.Pattern[str]:
    """``format_name``'s pattern compiled, on first use: compiling all of
    them takes 0.1 s, which an import should not pay for formats it may
    never meet."""
    return re.compile(FORMAT_PATTERNS[format_name])


def format_matches(format_name: str, text: str) -> bool:
    """Whether ``text`` is in ``format_name`` as the constraint enforces it."""
    return format_regex(format_name).fullmatch(text) is not None


CHECKED_AFTER_GENERATION = {"hostname": "IDNA A-labels and the 253-character limit"}
"""What of a format the pattern leaves to the parser's validation (the
compiler warns of it): rules no regular expression of the automaton states."""


def _hostname(text: str) -> bool:
    """JSON Schema's ``hostname`` (RFC 1123, RFC 5890): the pattern's
    labels, at most 253 characters, every A-label (``xn--``) valid IDNA 2008,
    and no other label with ``--`` in its third and fourth places."""
    if len(text) > 253 or not format_matches("hostname", text):
        return False
    labels = text.split(".")
    return all(label[2:4] != "--" or _a_label(label) is not None for label in labels)


_IDN_SEPARATORS = re.compile("[.\u3002\uff0e\uff61]")


def _idn_hostname(text: str) -> bool:
    """JSON Schema's ``idn-hostname`` (RFC 5890-5893): labels between any of
    the four full stops, each valid IDNA 2008 (A-labels canonical, decoding
    to more than ASCII), at most 63 octets as an A-label and 253 in all; in
    a domain with a right-to-left label, every label keeps the Bidi rule."""
    labels = _IDN_SEPARATORS.split(text)
    try:
        encoded = [label if _a_label(label) else idna.encode(label).decode("ascii") for label in labels]
        decoded = [idna.decode(label) for label in encoded]
        if any(unicodedata.bidirectional(char) in ("R", "AL", "AN") for char in "".join(decoded)):
            for label in decoded:
                idna.check_bidi(label, check_ltr=True)
    except (idna.IDNAError, UnicodeError):
        return False
    return all(0 < len(label) <= 63 for label in encoded) and len(".".join(encoded)) <= 253


def _a_label(label: str) -> str | None:
    """``label`` when it is a valid, canonical A-label (``xn--``), else ``None``."""
    if not (label.isascii() and label[:4].lower() == "xn--"):
        return None
    try:
        decoded = idna.decode(label)
    except (idna.IDNAError, UnicodeError):
        return None
    return label if not decoded.isascii() and idna.encode(decoded).decode("ascii") == label.lower() else None


FORMAT_CHECKS: dict[str, Callable[[str], bool]] = {
    **{name: functools.partial(format_matches, name) for name in FORMAT_PATTERNS},
    "hostname": _hostname,
    "idn-hostname": _idn_hostname,
}
"""The parser's checks of formats: each enforced format by its pattern (so
validation and constraint agree) plus what :data:`CHECKED_AFTER_GENERATION`
names; ``idn-hostname``, which no pattern states, in full. jsonschema's own
checkers differ: its ``hostname`` needs an optional package and knows no
A-labels, its ``idn-hostname`` takes trailing dots and Bidi-breaking labels,
its ``relative-json-pointer`` rejects ``100``."""
