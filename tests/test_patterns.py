"""bake.patterns: a regular expression stated at module level is compiled on its first use."""

from __future__ import annotations

import re

import pytest

from bake.patterns import LazyPattern


def test_nothing_is_compiled_until_the_pattern_is_used():
    pattern = LazyPattern(r"(?P<word>[a-z]+)-(\d+)")
    assert "compiled" not in vars(pattern)
    assert pattern.pattern == r"(?P<word>[a-z]+)-(\d+)"  # its text, for patterns built from it
    assert "compiled" not in vars(pattern)
    assert pattern.match("abc-12").group("word") == "abc"
    assert isinstance(pattern.compiled, re.Pattern)


def test_it_answers_as_the_compiled_pattern_does():
    text, source = "Ab-1 cd-22 EF-333", r"([a-z]+)-(\d+)"
    lazy, compiled = LazyPattern(source, re.IGNORECASE), re.compile(source, re.IGNORECASE)
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in compiled.finditer(text)]
    assert lazy.findall(text) == compiled.findall(text)
    assert lazy.sub(r"\2", text) == compiled.sub(r"\2", text)
    assert lazy.subn("", text) == compiled.subn("", text)
    assert lazy.split(text) == compiled.split(text)
    assert lazy.search(text).group() == compiled.search(text).group()
    assert lazy.fullmatch("ab-1") and not lazy.fullmatch("ab-1 ")
    assert (lazy.flags, lazy.groups, lazy.groupindex) == (compiled.flags, compiled.groups, compiled.groupindex)


def test_after_the_first_use_the_methods_are_the_compiled_patterns_own():
    pattern = LazyPattern(r"x+")
    pattern.search("xx")
    assert vars(pattern)["search"].__self__ is pattern.compiled  # no lookup through LazyPattern again


def test_a_bad_pattern_fails_at_its_first_use_and_unknown_names_are_attribute_errors():
    broken = LazyPattern(r"(unclosed")
    with pytest.raises(re.error):
        broken.match("x")
    with pytest.raises(AttributeError):
        LazyPattern("x").no_such_method
    assert "compiled" not in vars(broken)
    assert repr(LazyPattern("a+", re.I)) == "LazyPattern('a+', re.IGNORECASE)"
