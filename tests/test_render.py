"""HCL string escaping: the fast (regex) escaper gives exactly what escaping character by
character gives, for any string. The buildx round-trip tests prove that form is what bake reads."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bake.plan.render import escape_interpolation, hcl_string

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def reference_hcl_string(value: str) -> str:
    """The escaping rule spelled out one character at a time."""
    out = []
    for ch in escape_interpolation(value):
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 or ch in "\u2028\u2029":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_PIECES = st.sampled_from(["${", "%{", "$${", "%%{", "$", "%", "{", "}", '"', "\\", "\n", "\r\n", "\t",
                           "\x00", "\x1b", "\x7f", "\x85", "\x9f", "\xa0", "\u2028", "\u2029", "ä", "☃", "日本"])


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=8), _PIECES), max_size=12).map("".join))
def test_hcl_string_matches_the_character_rule(value):
    assert hcl_string(value) == reference_hcl_string(value)


def test_every_control_and_separator_character():
    for code in [*range(0x00, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]:
        assert hcl_string(chr(code)) == reference_hcl_string(chr(code)), hex(code)
    assert hcl_string("plain value/with:colons=and,commas") == '"plain value/with:colons=and,commas"'
    assert hcl_string('say "${HOME}"\n') == '"say \\"$${HOME}\\"\\n"'
