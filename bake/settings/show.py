"""``bake-plan config``: the merged settings as a ``bake-plan.toml`` or as JSON, each value with
where it came from."""

from __future__ import annotations

import datetime
import json
from typing import Any, Dict, List, Mapping, Tuple

from bake.settings.file import bare_or_quoted
from bake.settings.merge import FLAGS, Setting, Settings
from bake.settings.values import ENV_EPOCH, is_day_policy


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON's escapes are TOML basic-string escapes
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{bare_or_quoted(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, datetime.date):
        return json.dumps(value.isoformat())
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def to_toml(settings: Settings) -> str:
    """The merged configuration as a ``bake-plan.toml`` (valid TOML), each value followed by a
    comment naming its source; unset values are comments. ``date`` is the policy (``auto``), with
    the day it gives today in its comment."""
    origin = settings.file.name if settings.file else "no configuration file"
    lines = [f"# bake-plan configuration: built-in defaults < {origin} < command line", ""]
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
        rows.append((f"[stages.{bare_or_quoted(override.stage)}]", override.where))
        for key, value in override.as_table().items():
            rows.append((f"{key} = {_toml_value(value)}", ""))
    width = max(len(text) for text, _ in rows)
    for text, source in rows:
        lines.append(f"{text:<{width}}  # {source}".rstrip() if source else text)
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
    stages = {o.stage: {"value": o.as_table(), "source": o.where} for o in settings.stages}
    data = {"file": str(settings.file.path) if settings.file else None, "settings": out, "stages": stages}
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
