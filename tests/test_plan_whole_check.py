"""The finished plan is checked as a whole, and errors name the culprit.

A plugin's ``bake_plan_adjust_target`` may change any attribute of a target, and (keeping a
reference) even a target finished earlier; the configuration's stage overrides feed values too.
So the plan is checked once every hook has run, before anything is written: attribute names
against the ones buildx's bake reads, the type of each, tags, platforms, contexts, text and
credentials. Each error is one line naming who put the value there (the plugin, the option, or
the configuration file and key), exit status 2, and no file.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import textwrap

import pytest
from conftest import ROOT
from test_errors import STAGE_IMPORTS, assert_one_line_error

from bake.errors import BakePlanError
from bake.plan.checks import TARGET_ATTRIBUTES
from bake.plan.compose import ignores_lock
from bake.plan.render import shell_word, to_hcl, to_json

ERR = "bake-plan: error: "
SECRET_HINT = ("build secrets go through --secret id=NAME,env=VAR (or src=FILE) and "
               "RUN --mount=type=secret,id=NAME, never args or labels")
TOKEN = "ghp_" + "a1B2c3D4e5" * 4  # shaped like a GitHub token


def error_line(proc) -> str:
    """The one error line of a failed run (exit 2, no traceback)."""
    assert_one_line_error(proc)
    return proc.stderr.strip()


def adjuster(make_plugin, body: str, name: str = "adj"):
    """A plugin whose ``bake_plan_adjust_target`` runs ``body`` for the target ``jax``."""
    return make_plugin("from bake import hookimpl\n@hookimpl\ndef bake_plan_adjust_target(name, target):\n"
                       "    if name == 'jax':\n" + textwrap.indent(textwrap.dedent(body), "        "), name=name)


# --- kind 1: what a plugin leaves in a target ---------------------------------------------------

def test_an_attribute_name_that_would_write_more_attributes_is_refused(cli, make_plugin, tmp_path):
    """``"no-cache = true\\n  pull"`` was written into the HCL as it is, and buildx read
    ``no-cache`` and ``pull`` from it."""
    site = adjuster(make_plugin, 'target["no-cache = true\\n  pull"] = True\n')
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[site])
    assert error_line(proc) == (
        # (the error line folds runs of spaces into one, as every error line does)
        ERR + "plugin 'adj', stage 'jax', target 'jax': 'no-cache = true\\n pull' is not an attribute of a "
        "bake target (see buildx's bake file reference: " + ", ".join(sorted(TARGET_ATTRIBUTES)) + ")")
    assert list(tmp_path.iterdir()) == []


def test_a_misspelt_attribute_buildx_would_ignore_is_refused(cli, make_plugin, tmp_path):
    """buildx (0.13 and 0.29 alike) silently drops an attribute it does not know."""
    site = adjuster(make_plugin, 'target["no_cache"] = True\n')
    proc = cli("--target", "jax", "--format", "json", cwd=tmp_path, pythonpath=[site])
    assert error_line(proc) == (ERR + "plugin 'adj', stage 'jax', target 'jax': 'no_cache' is not an attribute "
                                "of a bake target; did you mean 'no-cache'?")


BAD_VALUES = [
    ('target["no-cache"] = float("nan")', "no-cache: float nan is not a finite number; bake files cannot hold it"),
    ('target["labels"]["x"] = "ok"\ntarget["shm-size"] = float("inf")',
     "shm-size: float inf is not a finite number; bake files cannot hold it"),
    ('target["args"] = ["A=1"]', "args: list ['A=1'] is not a mapping of string to string"),
    ('target["tags"] = "localhost:5555/jax:latest"', "tags: str 'localhost:5555/jax:latest' is not a list of strings"),
    ('target["tags"] = ["Bad Tag!"]', "tags[0]: 'Bad Tag!' is not an image reference ([host[:port]/]path[:tag][@digest], "
                                      "path in lower case)"),
    ('target["tags"].append("localhost:5555/jax:" + "t" * 129)',
     "tags[2]: 'localhost:5555/jax:" + "t" * 41 + "'… is not an image reference "
     "([host[:port]/]path[:tag][@digest], path in lower case)"),
    ('target["context"] = "stages/jax"',
     "context: 'stages/jax' is not an absolute directory, target:, docker-image://, oci-layout:// or a URL"),
    ('target["context"] = "cwd://stages/jax"',
     "context: 'cwd://stages/jax' is relative to wherever bake runs; give an absolute directory"),
    ('target["contexts"]["extra"] = "../wheels"',
     "contexts['extra']: '../wheels' is not an absolute directory, target:, docker-image://, oci-layout:// or a URL"),
    ('target["platforms"] = 5', "platforms: int 5 is not a list of strings"),
    ('target["platforms"] = ["linux/sparc"]',
     "platforms[0]: unsupported platform 'linux/sparc' (known: linux/amd64, linux/arm64, linux/arm/v7, linux/arm/v6, "
     "linux/ppc64le, linux/s390x, linux/riscv64, linux/386)"),
    ('target["platforms"] = []', "platforms: no platform; buildx would build for the engine's own platform under "
                                 "every tag"),
    ('target["labels"] = []', "labels: list [] is not a mapping of string to string"),
    ('target["args"]["BAD NAME"] = "1"', "args: 'BAD NAME' is not a build-arg name ([A-Za-z_][A-Za-z0-9_]*)"),
    ('target["pull"] = "yes"', "pull: str 'yes' is not true or false"),
    ('target["target"] = 3', "target: int 3 is not a string"),
    ('target["cache-to"] = [{"type": "registry", "ref": 1.5}]', "cache-to[0]['ref']: float 1.5 is not a string"),
    ('del target["platforms"]', "platforms: missing; buildx would build for the engine's own platform under every tag"),
    ('target.pop("context")', "context: missing; buildx would use the directory bake runs in"),
]


@pytest.mark.parametrize("body, message", BAD_VALUES,
                         ids=["nan", "inf", "args-list", "tags-string", "bad-tag", "long-tag", "relative-context",
                              "cwd-context", "relative-named-context", "platforms-int", "unknown-platform",
                              "no-platform", "labels-list", "arg-name", "pull-string", "target-int", "entry-float",
                              "no-platforms", "no-context"])
def test_a_value_of_the_wrong_kind_is_refused_naming_plugin_target_and_field(cli, make_plugin, tmp_path, body,
                                                                             message):
    site = adjuster(make_plugin, body + "\n")
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[site])
    assert error_line(proc) == ERR + "plugin 'adj', stage 'jax', target 'jax', " + message
    assert list(tmp_path.iterdir()) == []


def test_every_attribute_bake_reads_is_accepted_and_read_back_by_buildx(cli, make_plugin, buildx, tmp_path):
    """The attribute set is buildx's own: a value of the right kind for each goes through the
    check and comes back from the real ``bake --print`` (both versions, both formats)."""
    values = {
        "description": "the jax image", "annotations": ["index:org.opencontainers.image.description=jax"],
        "attest": ["type=sbom"], "no-cache": True, "pull": False, "network": "none", "no-cache-filter": ["final"],
        "shm-size": "128m", "ulimits": ["nofile=1024:1024"], "call": "build",
    }
    site = adjuster(make_plugin, f"target.update({values!r})\n")
    for fmt in ("hcl", "json"):
        out = tmp_path / f"plan.{fmt}"
        cli("--target", "jax", "--format", fmt, "-o", str(out), cwd=tmp_path, pythonpath=[site], check=True)
        printed = buildx.print_plan(out, ["jax"], cwd=tmp_path)["target"]["jax"]
        for attr, value in values.items():
            if buildx.version < (0, 14) and attr in ("call", "description", "network"):
                continue  # buildx 0.13 does not know these (and drops them silently)
            got = printed.get(attr)
            if attr == "attest":
                assert got and "sbom" in json.dumps(got), (buildx, got)
            else:
                assert got == value, (buildx, fmt, attr, got)


def test_a_plugin_changing_a_finished_target_later_is_named(cli, make_plugin, tmp_path):
    """It keeps the meal kit's target from one call and changes it in the call for the next
    target: a token-shaped arg in the plan, exit 0, until the plan was checked as a whole."""
    site = make_plugin(f"""
from bake import hookimpl
kept = {{}}
@hookimpl
def bake_plan_adjust_target(name, target):
    if name == "jax-mealkit":
        kept["t"] = target
    elif name == "jax":
        kept["t"]["args"]["GH"] = {TOKEN!r}
""", name="keeper")
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[site])
    assert error_line(proc) == (
        ERR + "plugin 'keeper', target 'jax-mealkit', args['GH']: changed in bake_plan_adjust_target for stage 'jax', "
        "target 'jax', after the target was finished; a plugin may change a target only in bake_plan_adjust_target "
        "for that target")
    assert TOKEN not in proc.stderr


@pytest.mark.parametrize("hook", ["bake_plan_tags", "bake_plan_cache_key"])
def test_a_plugin_changing_a_finished_target_from_a_policy_hook_is_named(cli, make_plugin, tmp_path, hook):
    site = make_plugin(f"""
from bake import hookimpl
kept = {{}}
@hookimpl
def bake_plan_adjust_target(name, target):
    if name == "base":
        kept["t"] = target
@hookimpl
def {hook}(stage, flavor):
    if stage.name == "jax" and "t" in kept:
        kept["t"]["labels"]["org.example.name"] = "cafe\\u0301"
""", name="sneaky")
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[site])
    assert error_line(proc) == (
        ERR + f"plugin 'sneaky', target 'base', labels['org.example.name']: changed in {hook} for stage 'jax', "
        "after the target was finished; a plugin may change a target only in bake_plan_adjust_target for that target")


def test_the_error_names_the_plugin_that_changed_the_value_not_the_last_one_to_run(cli, make_plugin, tmp_path):
    bad = adjuster(make_plugin, 'target["labels"]["org.example.name"] = "cafe\\u0301"\n', name="first")
    good = adjuster(make_plugin, 'target["labels"]["org.example.vendor"] = "ACME"\ntarget["args"]["X"] = "1"\n',
                    name="second")
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[bad, good])
    assert error_line(proc) == (
        ERR + "plugin 'first', stage 'jax', target 'jax', labels['org.example.name']: not in Unicode NFC; bake stores "
        "every string NFC-normalised, so buildx would read a different value (normalise it with "
        "unicodedata.normalize('NFC', value))")


def test_a_value_no_plugin_changed_is_blamed_on_the_stages_plugin(cli, make_plugin, tmp_path):
    site = make_plugin(STAGE_IMPORTS + f"""
@hookimpl
def bake_plan_stages():
    return [Stage(registry="ghcr.io/nvidia", name="odd", image="odd", parent="jax", context=stage_dir("jax"), labels={{"note": {TOKEN!r}}})]
@hookimpl
def bake_plan_adjust_target(name, target):
    target["labels"]["other"] = "fine"
""", name="odd-plugin")
    proc = cli("--target", "odd", cwd=tmp_path, pythonpath=[site])
    assert error_line(proc) == (ERR + "plugin 'odd-plugin', stage 'odd', target 'odd-mealkit', labels['note']: the "
                                "value looks like a GitHub token; " + SECRET_HINT)


def test_the_renderer_writes_no_attribute_name_it_did_not_check():
    plan = {"group": {"default": {"targets": ["t"]}},
            "target": {"t": {"context": "/tmp", 'no-cache = true\n  pull': True}}}
    for render in (lambda p: to_hcl(p, ROOT / "docker-bake.hcl.tmpl", ["t"]), to_json):
        with pytest.raises(BakePlanError) as info:
            render(plan)
        assert str(info.value) == ("cannot write the plan: target 't': 'no-cache = true\\n  pull' is not an attribute "
                                   "of a bake target (see buildx's bake file reference: "
                                   + ", ".join(sorted(TARGET_ATTRIBUTES)) + ")")
    with pytest.raises(BakePlanError, match=r"^cannot write the plan: group 'default': 'target' is not an attribute "
                                            r"of a bake group; did you mean 'targets'\?$"):
        to_json({"group": {"default": {"target": ["t"]}}, "target": {}})
    with pytest.raises(BakePlanError, match=r"^cannot write the plan: 'variable' is not a block of a bake file$"):
        to_json({"variable": {"TAG": {}}, "target": {}})


# --- kind 8: culprits and copy-paste -------------------------------------------------------------

def test_a_cache_branch_too_long_for_a_tag_names_the_option(cli, tmp_path):
    branch = "feature/" + "x" * 120
    proc = cli("--target", "base", "--cache-branch", branch, cwd=tmp_path)
    tag = "cache-silo-base-mealkit-feature-" + "x" * 120
    assert error_line(proc) == (
        ERR + f"--cache-branch '{branch[:60]}'…: the cache ref of stage 'base' (mealkit) would not be a tag: tag "
        f"'{tag[:60]}'… is {len(tag)} characters long: registries take 1 to 128 of A-Z a-z 0-9 _ . -, not starting "
        "with . or -")
    assert "default-policies" not in proc.stderr


def test_a_cache_from_branch_too_long_for_a_tag_names_the_option_and_the_key(cli, tmp_path):
    (tmp_path / "bake-plan.toml").write_text('cache-from-branch = "' + "m" * 120 + '"\n')
    proc = cli("--target", "base", cwd=tmp_path)
    assert error_line(proc).startswith(
        ERR + "--cache-from-branch (cache-from-branch in the configuration) '" + "m" * 60 + "'…: "
        "the cache ref of stage 'base' (mealkit) would not be a tag: tag 'cache-silo-base-mealkit-mmm")
    assert list(tmp_path.iterdir()) == [tmp_path / "bake-plan.toml"]


@pytest.mark.parametrize("table, message", [
    ('args = { GITHUB_TOKEN = "abc" }',
     "args.GITHUB_TOKEN: arg 'GITHUB_TOKEN' looks like a credential (its name contains 'token'); " + SECRET_HINT
     + " (if it is not one: --not-secret GITHUB_TOKEN)"),
    (f'args = {{ NOTE = "{TOKEN}" }}', "args.NOTE: the value looks like a GitHub token; " + SECRET_HINT),
    ('sources = { JAX = { url = "https://me:hunter22@git.example/jax.git" } }',
     "sources.JAX.url: the value looks like a URL with a password; " + SECRET_HINT),
    ('args = { NAME = "cafe\\u0301" }',
     "args.NAME: not in Unicode NFC; bake stores every string NFC-normalised, so buildx would read a different "
     "value (normalise it with unicodedata.normalize('NFC', value))"),
], ids=["credential-name", "token-value", "url-password", "not-nfc"])
def test_a_credential_or_bad_text_from_the_configuration_names_the_file_and_key(cli, tmp_path, table, message):
    (tmp_path / "bake-plan.toml").write_text(f"[stages.jax]\n{table}\n")
    proc = cli("--target", "jax", cwd=tmp_path)
    assert error_line(proc) == ERR + "bake-plan.toml:stages.jax: " + message
    assert TOKEN not in proc.stderr and "hunter22" not in proc.stderr


def test_not_secret_lets_a_configured_arg_through(cli, tmp_path):
    (tmp_path / "bake-plan.toml").write_text('[stages.jax]\nargs = { PAD_TOKEN = "<pad>" }\n')
    proc = cli("--target", "jax", "--not-secret", "PAD_TOKEN", "--format", "json", "-o", "plan.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "plan.json").read_text())["target"]["jax"]["args"]["PAD_TOKEN"] == "<pad>"


def test_the_header_command_lines_paste_into_a_shell(cli, make_plugin, tmp_path):
    """Every path in the header's command lines comes back exactly from a real shell: one with a
    space and ``${`` in a context directory, and in the plan file's own name."""
    context = tmp_path / "ctx dir ${HOME} $(echo no)"
    context.mkdir()
    (context / "Dockerfile").write_text("FROM scratch AS mealkit\nFROM mealkit AS final\n")
    site = make_plugin(f"""
from bake import Stage, hookimpl
@hookimpl
def bake_plan_stages():
    return [Stage(registry="ghcr.io/nvidia", name="spaced", image="spaced", base_image="busybox", context={str(context)!r})]
""", name="spaced")
    out = tmp_path / "out"
    out.mkdir()
    name = "my plan ${X}'s.hcl"
    cli("--target", "spaced", "-o", name, cwd=out, pythonpath=[site], check=True)
    header = (out / name).read_text().splitlines()[:8]
    build = next(line for line in header if "Build it all:" in line).split("docker buildx bake ", 1)[1]
    allow = next(line for line in header if "--allow=fs.read=" in line).lstrip("# ")
    printed = subprocess.run(["bash", "-c", f"printf '%s\\n' {build} {allow}"], capture_output=True, text=True,
                             check=True, timeout=30).stdout.splitlines()
    assert printed[:2] == ["-f", name]
    assert f"--allow=fs.read={context}" in printed[2:]
    assert all(word.startswith("--allow=fs.read=/") for word in printed[2:])
    assert shlex.split(allow) == printed[2:]


def test_a_header_word_with_a_newline_stays_on_one_line():
    for text in ["/tmp/a\nb", "/tmp/tab\there", "/tmp/it's ${x}\x85\u2028", "/tmp/\x1bé 1"]:
        word = shell_word(text)
        assert "\n" not in word and word.isprintable()
        for locale in ("C", "C.UTF-8"):  # the same bytes whatever the shell's locale
            got = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, check=True, timeout=30,
                                 env={"LC_ALL": locale, "PATH": "/usr/bin:/bin"}).stdout
            assert got.decode("utf-8") == text, (locale, word)


# --- leftovers: overrides and --locked ----------------------------------------------------------

def test_variants_on_a_stage_without_variant_axes_are_refused(cli, tmp_path):
    (tmp_path / "bake-plan.toml").write_text('[stages.jax]\nvariants = { python = ["3.10", "3.12"] }\n')
    proc = cli("--target", "jax", cwd=tmp_path)
    assert error_line(proc) == (
        ERR + "bake-plan.toml:stages.jax: variants: stage 'jax' (plugin 'jax') declares no variant axes, so its "
        "build cannot use them (the values would only become build args its Dockerfile does not read); the plugin "
        "declares axes with Stage(variants=...)")


@pytest.mark.parametrize("table, target, message", [
    ('[stages.base]\nbase-image = "Bad Image!"\n', "base",
     "bake-plan.toml:stages.base: base-image: 'Bad Image!' is not an image reference ([host[:port]/]path[:tag][@digest], "
     "path in lower case)"),
    ('[stages.xla-ci]\nvariant-format = "dev-{pyhton}"\n', "xla-ci",
     "bake-plan.toml:stages.xla-ci: variant-format: '{pyhton}' is not an axis (python, cuda)"),
    ('[stages.xla-ci]\nvariant-args = { gcc = "GCC" }\n', "xla-ci",
     "bake-plan.toml:stages.xla-ci: variant-args: 'gcc' is not an axis (python, cuda)"),
    ('[stages.jax]\nargs = { "bad name" = "1" }\n', "jax",
     "bake-plan.toml:stages.jax: args: key 'bad name' is not a valid name"),
], ids=["base-image", "variant-format", "variant-args", "args"])
def test_override_errors_name_the_key_as_the_configuration_spells_it(cli, tmp_path, table, target, message):
    (tmp_path / "bake-plan.toml").write_text(table)
    proc = cli("--target", target, cwd=tmp_path)
    line = error_line(proc)
    assert line == ERR + message
    assert "_" not in line.split(": ", 3)[2]  # no Python field name
    assert "plugin '" not in line


@pytest.mark.parametrize("dockerfile, lacking", [
    ("FROM busybox AS mealkit\nFROM scratch AS pip-lock\nFROM mealkit AS final\nARG BAKE_PIP_LOCKED\n"
     "RUN bake-pip-finalize\n",
     "declares the pip-lock stage but never mounts it (RUN --mount=…,from=pip-lock)"),
    ("FROM busybox AS mealkit\nFROM mealkit AS final\nARG BAKE_PIP_LOCKED\nRUN bake-pip-finalize\n",
     "does not mount the pip-lock context"),
    ("FROM busybox AS mealkit\nFROM scratch AS pip-lock\nFROM mealkit AS final\nARG BAKE_PIP_LOCKED\n"
     "# RUN --mount=type=bind,from=pip-lock,target=/opt/pip-lock bake-pip-finalize\nRUN bake-pip-finalize\n",
     "declares the pip-lock stage but never mounts it (RUN --mount=…,from=pip-lock)"),
    ("FROM busybox AS mealkit\nFROM scratch AS pip-lock\nFROM mealkit AS final\nARG BAKE_PIP_LOCKED\n"
     "RUN --mount=type=bind,from=pip-lock,target=/opt/pip-lock bake-pip-finalize\n", None),
    ("FROM busybox AS mealkit\nFROM mealkit AS final\nARG BAKE_PIP_LOCKED\nCOPY --from=pip-lock / /opt/pip-lock\n"
     "RUN bake-pip-finalize\n", None),
], ids=["placeholder-only", "nothing", "mount-commented-out", "mount", "copy"])
def test_a_lock_is_reached_only_through_a_mount_or_copy(dockerfile, lacking):
    """``FROM scratch AS pip-lock`` is the placeholder the named context replaces; without a step
    that reads it, a --locked build compiles afresh and the lock is ignored."""
    assert ignores_lock(dockerfile) == lacking



def test_through_a_hook_wrapper_the_error_names_the_plugin_that_changed_the_value():
    """With a hook wrapper registered pluggy still calls each implementation through bake-plan's
    guard: who changed what is known."""
    import datetime

    from bake import hookimpl
    from bake.api import make_plan
    from bake.errors import PluginError
    from bake.plan.compose import PlanOptions
    from bake.plan.plugins import get_plugin_manager

    class Wrapper:
        @hookimpl(wrapper=True)
        def bake_plan_adjust_target(self):
            return (yield)

    class Bad:
        @hookimpl
        def bake_plan_adjust_target(self, name, target):
            if name == "jax":
                target["pull"] = "yes"

    pm = get_plugin_manager(plugins=[Wrapper(), Bad()])
    with pytest.raises(PluginError) as info:
        make_plan(PlanOptions(targets=("jax",), date=datetime.date(2026, 11, 29)), pm)
    assert str(info.value) == "plugin 'Bad', stage 'jax', target 'jax', pull: str 'yes' is not true or false"


@pytest.mark.parametrize("where", ["tags", "cache-from"])
def test_a_credential_in_a_value_too_long_to_show_whole_is_refused_as_one_never_shown(cli, make_plugin, tmp_path,
                                                                                     where):
    """A value an error line would cut short ('…'): the cut token would no longer look like one to
    the line's redaction, so the credential check comes before every check that shows a value."""
    value = f"localhost:5555/atk/jax:x {TOKEN}" if where == "tags" else f"type=registry,ref=x {TOKEN}"
    site = adjuster(make_plugin, f"target[{where!r}] = [{value!r}]\n")
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[site])
    line = error_line(proc)
    assert "looks like a GitHub token" in line and SECRET_HINT in line
    assert TOKEN[:12] not in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("key, value", [("k", "a\x1bb"), ("k", "right-to-left \u202e"), ("k\x01", "v")])
def test_a_label_a_plugin_adds_with_a_control_character_is_refused_as_a_stages_own(cli, make_plugin, tmp_path,
                                                                                  key, value):
    site = adjuster(make_plugin, f"target['labels'][{key!r}] = {value!r}\n")
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[site])
    line = error_line(proc)
    assert line.startswith(ERR + "plugin 'adj', stage 'jax', target 'jax', labels[") and " holds " in line
    assert "\x1b" not in line and "\u202e" not in line and "\x01" not in line
    assert list(tmp_path.iterdir()) == []
