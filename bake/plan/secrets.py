"""Build secrets, and keeping credentials out of plans.

A plan file is committed, uploaded as a CI artifact and printed in logs, and every arg and label
ends up in the image's metadata. So a build secret reaches a build only through bake's
``secret`` attribute: ``--secret id=NAME,env=VAR`` or ``--secret id=NAME,src=FILE`` puts
``id=NAME,env=VAR`` (the variable's *name*) or ``id=NAME,src=/abs/FILE`` (the file's *path*) on
every target, and a Dockerfile reads it with ``RUN --mount=type=secret,id=NAME``, where it exists
only for that step.

bake-plan refuses an arg or label that looks like a credential, by its name
(:func:`credential_name`) or its value (:func:`credential_value`); ``docs/security.md`` lists the
patterns. Nothing bake-plan shows or writes repeats a credential (:func:`redact`, the one
redaction every output goes through).
"""

from __future__ import annotations

import bisect
import io
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Iterator, List, Mapping, NamedTuple, Optional, Tuple

from bake.patterns import LazyPattern
from bake.plan.text import line_fault, printable

_SECRET_ID = LazyPattern(r"[A-Za-z0-9_.-]+\Z")
_ENV_NAME = LazyPattern(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MIN_KNOWN_VALUE = 8  # shorter secret values are not searched for: they would match ordinary text

# Names: words (split at _ - . and camelCase) that mean a credential on their own, substrings that
# hardly occur in anything else, and "<qualifier> key" pairs. "tokenizer", "MAX_TOKENS",
# "CACHE_SILO" and "secretary" are not credentials.
_NAME_WORDS = ("token", "secret", "secrets", "creds")
_NAME_SUBSTRINGS = ("password", "passwd", "passphrase", "credential", "apikey", "privatekey", "secretkey",
                    "accesskey", "accesstoken", "authtoken", "apitoken", "clientsecret")
_KEY_QUALIFIERS = ("api", "private", "access", "secret", "signing", "client", "deploy", "ssh", "encryption", "auth")
_WORD = LazyPattern(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

# A URL's userinfo (scheme://USERINFO@host) is a credential when it has a password, or when its
# user name looks like a token (16 or more URL-safe characters, letters and digits both:
# https://<token>@github.com/x.git); "git@", "ssh://deploy@" are names. "name:tag@sha256:…" in
# docker-image:// and oci-layout:// values is a pinned image, not userinfo.
_URL_SCHEME = r"\b(?!docker-image://|oci-layout://)[A-Za-z][A-Za-z0-9+.-]*://"
_NOT_A_DIGEST = r"(?![A-Za-z0-9]+:[0-9a-fA-F]{32,})"
_URL_PASSWORD = LazyPattern(
    rf"(?P<head>{_URL_SCHEME}[^\s/?#@:]*:)(?P<secret>[^\s/?#@]+)(?P<tail>@){_NOT_A_DIGEST}"
)
_URL_TOKEN_USER = LazyPattern(
    rf"(?P<head>{_URL_SCHEME})(?P<secret>(?=[\w.~%+-]*[0-9])(?=[\w.~%+-]*[A-Za-z])[\w.~%+-]{{16,}})"
    rf"(?P<tail>@){_NOT_A_DIGEST}", re.ASCII
)
_URL_PATTERNS = (_URL_PASSWORD, _URL_TOKEN_USER)  # redacted keeping the URL around the secret
VALUE_PATTERNS: Tuple[Tuple[str, LazyPattern], ...] = (
    ("a private key", LazyPattern(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    ("a GitHub token", LazyPattern(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("a GitLab token", LazyPattern(r"\bgl(?:pat|dt|ptt|rt)-[A-Za-z0-9_-]{20,}")),
    ("an AWS access key id", LazyPattern(r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b")),
    ("a Slack token", LazyPattern(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("a Google API key", LazyPattern(r"\bAIza[A-Za-z0-9_-]{35}")),
    ("a Hugging Face token", LazyPattern(r"\bhf_[A-Za-z0-9]{30,}")),
    ("an npm token", LazyPattern(r"\bnpm_[A-Za-z0-9]{36}")),
    ("a PyPI token", LazyPattern(r"\bpypi-AgE[A-Za-z0-9_-]{20,}")),
    ("a Docker Hub token", LazyPattern(r"\bdckr_pat_[A-Za-z0-9_-]{20,}")),
    ("an OpenAI-style API key", LazyPattern(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{32,}")),
    ("a JSON web token", LazyPattern(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("a URL with a password", _URL_PASSWORD),
    ("a URL with a token as its user name", _URL_TOKEN_USER),
)
# One pass over a string first, as most strings match none of the token patterns; the URL
# patterns (slow: they try every word boundary) only run on strings with "://" and "@". The
# patterns that start at a word boundary share one "\b" (tested once per position, not once per
# pattern: four times faster), so it matches where one of them would.
_TOKEN_PATTERNS = [pattern.pattern for _, pattern in VALUE_PATTERNS if pattern not in _URL_PATTERNS]
_ANY_TOKEN = LazyPattern("|".join([f"(?:{p})" for p in _TOKEN_PATTERNS if not p.startswith(r"\b")]
                                  + [r"\b(?:" + "|".join(f"(?:{p[2:]})" for p in _TOKEN_PATTERNS
                                                         if p.startswith(r"\b")) + ")"]))
"""What a credential value looks like: (description, pattern searched anywhere in the string)."""
_URL_VALUE_PATTERNS = tuple(entry for entry in VALUE_PATTERNS if entry[1] in _URL_PATTERNS)

SECRET_HINT = ("build secrets go through --secret id=NAME,env=VAR (or src=FILE) and "
               "RUN --mount=type=secret,id=NAME, never args or labels")


def name_words(name: str) -> list:
    """The lower-case words of a name: ``GITHUB_TOKEN`` → ``github, token``; ``apiKey`` → ``api, key``."""
    return [w.lower() for w in _WORD.findall(name)]


@lru_cache(maxsize=4096)  # a family repeats its arg and label names in every target
def credential_name(name: str) -> Optional[str]:
    """Why an arg or label name looks like a credential (``"its name contains 'token'"``), or ``None``."""
    words = name_words(name)
    for word in words:
        if word in _NAME_WORDS:
            return f"its name contains '{word}'"
    joined = "".join(words)
    for sub in _NAME_SUBSTRINGS:
        if sub in joined:
            return f"its name contains '{sub}'"
    for first, second in zip(words, words[1:]):
        if first in _KEY_QUALIFIERS and second == "key":
            return f"its name contains '{first} key'"
    return None


@lru_cache(maxsize=65536)  # and most values (cache refs, platforms, paths) many times
def credential_value(value: str) -> Optional[str]:
    """What a value looks like when it holds a credential (``"a GitHub token"``), or ``None``."""
    for description, pattern in _patterns_for(value):
        if pattern.search(value):
            return description
    return None


_TOKEN_CLUES = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "gl", "A", "xox", "hf_", "npm_", "dckr_pat_",
                "sk-", "eyJ", "-----BEGIN")
"""Text a token pattern's match always holds, one of these: each pattern's own prefix, or ``A`` for
AWS (``AKIA``…), Google (``AIza``) and PyPI (``pypi-AgE``). Looking for them is a few substring
searches, several times cheaper than :data:`_ANY_TOKEN` on the strings of a large plan, most of
which hold none (``tests/test_scale.py`` checks every pattern's matches hold a clue)."""


def _has_clue(text: str) -> bool:
    """Whether ``text`` holds one of :data:`_TOKEN_CLUES` (a loop: cheaper than ``any()`` of a generator)."""
    for clue in _TOKEN_CLUES:
        if clue in text:
            return True
    return False


def _patterns_for(text: str) -> Tuple[Tuple[str, LazyPattern], ...]:
    """The entries of :data:`VALUE_PATTERNS` that can match ``text``: every one when a token
    pattern does (:data:`_ANY_TOKEN`), else the URL patterns when it has "://" and "@", else none.
    The token patterns are not searched, nor compiled, for text none of them matches."""
    if _has_clue(text) and _ANY_TOKEN.search(text):
        return VALUE_PATTERNS
    if "://" in text and "@" in text:
        return _URL_VALUE_PATTERNS
    return ()


@lru_cache(maxsize=8)  # one build redacts every console line with the same values
def _known_pattern(known: Tuple[str, ...]) -> "Optional[re.Pattern[str]]":
    """What to redact for ``known`` secret values: each value, and each line of a multi-line one
    (a key file a step prints comes out one line at a time), longest first, none shorter than 8
    characters; ``None`` when nothing is left."""
    parts = _known_parts(known)
    if not parts:
        return None
    return re.compile("|".join(re.escape(p) for p in parts))


@lru_cache(maxsize=8)
def _known_parts(known: Tuple[str, ...]) -> Tuple[str, ...]:
    """The texts :func:`redact` searches for ``known`` values: each value and each of its lines,
    stripped, none shorter than 8 characters, longest first."""
    parts = set()
    for value in known:
        for part in (value, *(line.strip() for line in value.splitlines())):
            if len(part) >= _MIN_KNOWN_VALUE:
                parts.add(part)
    return tuple(sorted(parts, key=len, reverse=True))


def redact(text: str, known: Iterable[str] = ()) -> str:
    """``text`` with every credential-looking part (:data:`VALUE_PATTERNS`; of a URL, its password
    or token user name only: ``https://<redacted>@host/x.git``) and every ``known`` secret value
    (each of its lines too) replaced by ``<redacted>``.

    The one redaction of bake-plan: error lines and their details, the build's console, the
    sitrep files and step summary, ``config`` output go through it (``docs/security.md``, "One
    redaction for every output").
    """
    known_pattern = _known_pattern(tuple(v for v in known if v))
    if known_pattern is not None:
        text = known_pattern.sub("<redacted>", text)
    for _, pattern in _patterns_for(text):
        if pattern in _URL_PATTERNS:
            text = pattern.sub(r"\g<head><redacted>\g<tail>", text)
        else:
            text = pattern.sub("<redacted>", text)
    return text


HOLD_CHARS = 4096
"""How much of an unfinished run of text without white space a :class:`StreamRedactor` holds back
at most, in characters, waiting for the rest of a credential pattern (a token, a URL's password)
that may start in it; a ``known`` secret's prefix is held back whatever its length."""

_SPACE_FREE_TAIL = LazyPattern(r"\S*\Z")
# A private key's header is the one pattern with spaces: a tail that could begin it.
_KEY_HEADER_TAIL = LazyPattern(r"-{1,5}(?:B(?:E(?:G(?:I(?:N(?: [A-Z0-9 ]*)?)?)?)?)?)?\Z")


@lru_cache(maxsize=8)
def _line_parts(known: Tuple[str, ...]) -> Tuple[Tuple[str, ...], int]:
    """The one-line texts :func:`redact` searches for ``known`` (:func:`_known_parts` but a
    multi-line value whole: each of its lines is one of them), sorted, and the longest length."""
    parts = tuple(sorted(p for p in _known_parts(known) if "\n" not in p and "\r" not in p))
    return parts, max((len(p) for p in parts), default=0)


def _known_prefix_at_end(text: str, known: Tuple[str, ...]) -> int:
    """The length of the longest end of ``text`` that is a proper prefix of one of ``known``'s
    one-line texts (:func:`_line_parts`); each candidate end is looked up in their sorted list
    (a prefix sorts just before the texts it begins)."""
    parts, longest = _line_parts(known)
    for size in range(min(len(text), longest - 1), 0, -1):
        end = text[-size:]
        i = bisect.bisect_left(parts, end)
        while i < len(parts) and parts[i].startswith(end):
            if len(parts[i]) > size:
                return size
            i += 1
    return 0


def held_back(text: str, known: Iterable[str] = ()) -> int:
    """How many characters at the end of ``text`` could be the start of a secret that the next
    piece of the same stream finishes: the longest proper prefix of a ``known`` value (or of one of
    its lines, as :func:`redact` searches them), the last run of text without white space (up to
    :data:`HOLD_CHARS`: a token or a URL's password has none), or the start of a private key's
    header. ``0`` when nothing could be."""
    hold = min(len(_SPACE_FREE_TAIL.search(text).group()), HOLD_CHARS)
    header = _KEY_HEADER_TAIL.search(text[-200:])
    if header:
        hold = max(hold, len(header.group()))
    return max(hold, _known_prefix_at_end(text, tuple(v for v in known if v)))


def _matches(text: str, known: Tuple[str, ...]) -> List[Tuple[int, int]]:
    """Where :func:`redact` finds something to redact in ``text``: ``(start, end)`` of each match."""
    found = []
    known_pattern = _known_pattern(known)
    if known_pattern is not None:
        found += [m.span() for m in known_pattern.finditer(text)]
    for _, pattern in _patterns_for(text):
        found += [m.span() for m in pattern.finditer(text)]
    return found


class StreamRedactor:
    """:func:`redact` for one stream of text that arrives in pieces (a step's output, which
    BuildKit sends as log chunks cut anywhere): a secret cut across two pieces is redacted as if it
    came whole. Each piece gives back what can be shown for sure; the end of it that could begin a
    secret (:func:`held_back`) waits for the next piece or :meth:`finish`.

    :param known: the current values of the build's secrets (``--secret``).
    """

    def __init__(self, known: Iterable[str] = ()):
        self.known = tuple(v for v in known if v)
        self._pending = ""

    def feed(self, piece: str) -> str:
        """The redacted text that ``piece`` (and what was held before it) lets out now; may be ``""``."""
        text = self._pending + piece
        cut = len(text) - held_back(text, self.known)
        if 0 < cut < len(text):  # never inside a secret the text already holds whole
            spans = _matches(text, self.known)
            moved = True
            while moved:
                moved = False
                for start, end in spans:
                    if start < cut < end:
                        cut, moved = start, True
        self._pending = text[cut:]
        return redact(text[:cut], self.known) if cut else ""

    def finish(self) -> str:
        """What is still held back, redacted: the stream has ended."""
        text, self._pending = self._pending, ""
        return redact(text, self.known) if text else ""

    @property
    def holding(self) -> bool:
        """Some text is held back (:meth:`finish` would give it)."""
        return bool(self._pending)


def shown(text: str, known: Iterable[str] = ()) -> str:
    """``text`` as bake-plan shows it to a person: :func:`redact`, then every control character
    escaped (:func:`bake.plan.text.printable`), so neither a credential nor a terminal control
    sequence gets through."""
    return printable(redact(text, known))


class SecretSpec(NamedTuple):
    """One ``--secret``: an ``id`` the Dockerfile mounts, taken from an environment variable
    (``env``) or a file (``src``, an absolute path) when the build runs."""

    id: str
    env: Optional[str] = None
    src: Optional[str] = None

    def to_bake(self) -> str:
        """The entry of bake's ``secret`` attribute: ``id=NAME,env=VAR`` or ``id=NAME,src=FILE``.

        buildx reads the entry as one CSV record (Go's ``encoding/csv``, which refuses a bare
        ``"``), so each field is written by CSV's rules: a field holding ``"`` (a path may) is
        quoted whole, its quotes doubled: ``id=x,"src=/a/b""c"``.
        """
        import csv  # only a plan with --secret writes one

        fields = [f"id={self.id}", f"env={self.env}" if self.env else f"src={self.src}"]
        out = io.StringIO()
        csv.writer(out, lineterminator="").writerow(fields)
        return out.getvalue()

    def value(self, environ: Mapping[str, str] = os.environ) -> Optional[str]:
        """The secret's value as the build would see it now, or ``None`` when it is not available."""
        if self.env:
            return environ.get(self.env)
        try:
            with open(self.src, encoding="utf-8", errors="replace") as handle:
                return handle.read(1 << 20)
        except OSError:
            return None


def parse_secret(text: str, cwd: Optional[Path] = None) -> SecretSpec:
    """Parse ``id=NAME,env=VAR`` or ``id=NAME,src=FILE`` (buildx's ``type=env``/``type=file``
    forms are accepted too). A relative ``src`` is made absolute, so the plan works from any
    directory; the file must exist (``docker buildx bake --print`` reads it).

    :raises ValueError: a malformed value, naming what is wrong (never the secret itself: only
        names and paths are ever written).
    """
    fields = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not value:
            raise ValueError(f"'{part}' is not KEY=VALUE (expected id=NAME,env=VAR or id=NAME,src=FILE)")
        if key == "source":
            key = "src"
        if key not in ("id", "env", "src", "type"):
            raise ValueError(f"unknown key '{key}' (expected id=NAME,env=VAR or id=NAME,src=FILE)")
        if key in fields:
            raise ValueError(f"'{key}' is given twice")
        fields[key] = value
    kind = fields.pop("type", None)
    if kind not in (None, "env", "file"):
        raise ValueError(f"type '{kind}' is not env or file")
    sid = fields.get("id")
    if not sid or not _SECRET_ID.match(sid):
        raise ValueError("needs id=NAME with NAME of letters, digits, _ . -")
    if kind == "env" and "env" not in fields and "src" not in fields:
        fields["env"] = sid
    if ("env" in fields) == ("src" in fields):
        raise ValueError("needs exactly one of env=VAR or src=FILE")
    if "env" in fields:
        if kind == "file" or not _ENV_NAME.match(fields["env"]):
            raise ValueError(f"env '{fields['env']}' is not an environment variable name")
        return SecretSpec(id=sid, env=fields["env"])
    src = Path(fields["src"]).expanduser()
    if not src.is_absolute():
        src = (cwd or Path.cwd()) / src
    src = Path(os.path.normpath(src))
    if not src.is_file():
        raise ValueError(f"src {src} is not a file")
    fault = "','" if "," in str(src) else line_fault(str(src))
    if fault:
        raise ValueError(f"src {str(src)!r} cannot be written in a bake secret entry (it holds {fault})")
    return SecretSpec(id=sid, src=str(src))


def walk_strings(node, path: str = "") -> Iterator[Tuple[str, str]]:
    """Every string in a plan node, keys included, as ``(path, string)``; paths read like
    ``args['X']``, ``labels key 'k'``, ``tags[0]``, ``dockerfile-inline``."""
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, dict):
        for key, value in node.items():
            if not isinstance(key, str):
                continue
            if path:
                yield f"{path} key {key!r}", key
            yield from walk_strings(value, f"{path}[{key!r}]" if path else key)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from walk_strings(value, f"{path}[{i}]")


def strings_in(node) -> List[str]:
    """The strings :func:`walk_strings` yields for ``node``, in its order, without their paths
    (the keys of nested mappings included, a top mapping's own keys not): making a path per string
    is most of the cost of checking a large plan, which needs the paths only to name an error."""
    out: List[str] = []
    _strings(node, True, out)
    return out


def _strings(node, top: bool, out: List[str]) -> None:
    # A string is taken where it is met, not in a call of its own: most of a plan's values are strings.
    if isinstance(node, str):
        out.append(node)
    elif isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, str):
                if not top:
                    out.append(key)
                if isinstance(value, str):
                    out.append(value)
                else:
                    _strings(value, top and not key, out)  # walk_strings' path is still empty under key ""
    elif isinstance(node, list):
        for value in node:
            if isinstance(value, str):
                out.append(value)
            else:
                _strings(value, False, out)


def find_secret_values(plan: dict, specs: Iterable[SecretSpec],
                       environ: Mapping[str, str] = os.environ) -> Optional[Tuple[SecretSpec, str, str]]:
    """The first place a ``--secret``'s current value appears in the plan:
    ``(spec, target name, path)``, or ``None``. Values shorter than 8 characters are not searched."""
    values = []
    for spec in specs:
        value = spec.value(environ)
        for candidate in {value, value.strip()} if value else ():
            if len(candidate) >= _MIN_KNOWN_VALUE:
                values.append((spec, candidate))
    if not values:
        return None
    for tname, target in plan.get("target", {}).items():
        for path, text in walk_strings(target):
            for spec, value in values:
                if value in text:
                    return spec, tname, path
    return None
