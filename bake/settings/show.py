"""``bake-plan config``: the merged settings as a ``bake-plan.toml`` or as JSON, each value with
where it came from. Output is shown to people and pasted into tickets, so every value has its
credentials redacted (``https://me:<redacted>@host``) and control characters escaped."""

from __future__ import annotations

import datetime
import json
from typing import Any, Dict, List, Mapping, Tuple

from bake.patterns import LazyPattern
from bake.plan.secrets import credential_name, redact
from bake.plan.text import printable
from bake.settings.merge import FLAGS, Setting, Settings
from bake.settings.values import ENV_EPOCH, is_day_policy


# Characters a TOML basic string cannot hold (U+0000-U+001F but tab, U+007F) and those a terminal
# would obey (C1, the line separators, bidirectional controls): all written as \uXXXX escapes.
# A lone surrogate (undecodable bytes in an argument) is no Unicode scalar, so TOML has no form
# for it: it is written as the text "\udcff".
_TOML_ESCAPED = LazyPattern("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_SURROGATE = LazyPattern("[\ud800-\udfff]")
_JSON_RAW = LazyPattern("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_BARE_KEY = LazyPattern(r"[A-Za-z0-9_-]+\Z")


def _toml_string(value: str) -> str:
    """A TOML basic string holding ``value`` with every credential redacted
    (:func:`bake.plan.secrets.redact`) and every control character escaped."""
    text = redact(value).replace("\\", "\\\\").replace('"', '\\"')
    text = _TOML_ESCAPED.sub(_u_escape, text)
    return '"' + _SURROGATE.sub(lambda m: "\\" + _u_escape(m), text) + '"'


def _u_escape(match: "re.Match[str]") -> str:
    return f"\\u{ord(match.group()):04X}"


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _toml_string(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, datetime.date):
        return json.dumps(value.isoformat())
    if isinstance(value, (int, float)):  # a setting's number is finite (its parser says so)
        return repr(value)
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def to_toml(settings: Settings) -> str:
    """The merged configuration as a ``bake-plan.toml`` (valid TOML), each value followed by a
    comment naming its source; unset values are comments. ``date`` is the policy (``auto``), with
    the day it gives today in its comment."""
    origin = settings.file.name if settings.file else "no configuration file"
    lines = [f"# bake-plan configuration: built-in defaults < {origin} < environment (BAKE_PLAN_*) < command line", ""]
    rows: List[Tuple[str, str]] = []
    for key in FLAGS:
        setting = settings.provenance[key]
        if key == "date":  # the policy, so that the output reads back the same; the day in the comment
            rows.append((f"date = {_toml_value(setting.value)}", _date_comment(settings)))
        elif setting.value is None:
            rows.append((f"# {key} is not set", setting.source))
        else:
            rows.append((f"{key} = {_toml_value(setting.value)}", setting.source))
    rows.append(("", ""))
    rows.append(("[plugins]", ""))
    for sub in ("enable", "disable"):
        setting = settings.provenance[f"plugins.{sub}"]
        if setting.value is None:
            rows.append((f"# {sub} is not set: every installed plugin", setting.source))
        else:
            rows.append((f"{sub} = {_toml_value(setting.value)}", setting.source))
    for override in settings.stages:
        rows.append(("", ""))
        rows.append((f"[stages.{_toml_key(override.stage)}]", override.where))
        for key, value in _shown_table(override, settings.not_secret).items():
            rows.append((f"{key} = {_toml_value(value)}", ""))
    width = max(len(text) for text, _ in rows)
    for text, source in rows:  # a comment holds no control character either (a path may)
        lines.append(f"{text:<{width}}  # {printable(redact(source))}".rstrip() if source else text)
    return "\n".join(lines).rstrip("\n") + "\n"


def _date_comment(settings: Settings) -> str:
    """``default; today: 2026-11-29`` or ``bake-plan.toml; env SOURCE_DATE_EPOCH: 2023-11-14``; just
    the source when the policy is a day."""
    policy = settings.provenance["date"]
    if is_day_policy(policy.value):
        return policy.source
    return f"{policy.source}; {ENV_EPOCH if settings.date_source == ENV_EPOCH else 'today'}: {settings.date.isoformat()}"


def to_json(settings: Settings) -> str:
    """The merged configuration as JSON: ``file``, ``settings`` (key → ``{value, source}``) and
    ``stages`` (name → ``{value, source}``)."""
    out: Dict[str, Any] = {}
    for key in list(FLAGS) + ["plugins.enable", "plugins.disable"]:
        setting = Setting(settings.date, settings.date_source) if key == "date" else settings.provenance[key]
        value = setting.value.isoformat() if isinstance(setting.value, datetime.date) else setting.value
        out[key] = {"value": list(value) if isinstance(value, tuple) else value, "source": setting.source}
    stages = {o.stage: {"value": _shown_table(o, settings.not_secret), "source": o.where} for o in settings.stages}
    data = {"file": str(settings.file.path) if settings.file else None, "settings": out, "stages": stages}
    text = json.dumps(_redacted(data), indent=2, ensure_ascii=False)
    # json escapes C0 controls; DEL, C1, the line separators, bidi controls and lone surrogates
    # it leaves raw: escaped too (they appear only inside strings).
    return _JSON_RAW.sub(_u_escape, text) + "\n"


def _shown_table(override, not_secret) -> Dict[str, Any]:
    """A stage override's table with the value of every arg whose name looks like a credential
    (:func:`bake.plan.secrets.credential_name`, as the plan refuses it; ``--not-secret`` names
    excepted) shown as ``<redacted>``: ``config`` never prints what ``plan`` would call a secret."""
    table = override.as_table()
    for key in ("args", "variant-args"):
        if key in table:
            table[key] = {name: "<redacted>" if name not in not_secret and credential_name(name) else value
                          for name, value in table[key].items()}
    return table


def _redacted(node):
    """Every string of a JSON-shaped value, keys included, through :func:`bake.plan.secrets.redact`."""
    if isinstance(node, str):
        return redact(node)
    if isinstance(node, (list, tuple)):
        return [_redacted(v) for v in node]
    if isinstance(node, dict):
        return {_redacted(k) if isinstance(k, str) else k: _redacted(v) for k, v in node.items()}
    return node
