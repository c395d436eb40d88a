#!/usr/bin/env bash
# bake-pip-finalize
#
# The "cooking" step of the final stage: install every Python package exactly once.
#  - If ${BAKE_PIP_TOOLS_D}/requirements.lock exists (a lock made before the build,
#    e.g. by `bake-plan lock`, put there directly or mounted as
#    /opt/pip-lock/requirements.lock, or /opt/pip-lock/requirements-<arch>.lock when
#    the lock differs by arch), sync the environment to it as is. First it checks that
#    the lock covers every line of every requirements-*.in (a lock made on the host
#    never sees the lines a Dockerfile writes at build time): a line the lock lacks,
#    or a pin the line does not allow, stops the build.
#  - Otherwise pip-compile every requirements-*.in in ONE call (so conflicts between
#    stages surface together, with annotations naming the .in that asked for each
#    package) into requirements.txt, and sync to that.
# Either way, a git+ requirement not pinned to a full 40-hex commit is refused:
# a branch or tag would make the image depend on when it was built.
#
# Environments (set up by the base stage):
#  - /opt/venv       the image's Python environment: the one that gets synced.
#  - /opt/pip-tools  pip-tools' own venv. Kept apart because pip-sync uninstalls
#                    whatever the lock does not list, which would otherwise include
#                    pip-tools' own dependencies.
# Without them (e.g. on a plain system Python) it falls back to pip-compile/pip-sync
# on PATH, then to `python3 -m piptools`.
#
# pip's own settings (PIP_INDEX_URL, PIP_FIND_LINKS, PIP_NO_INDEX, ...) are read from
# the environment by the pip that pip-tools runs; this script never sets or clears them.
#
# Overrides, mostly for tests: BAKE_PIP_TOOLS_D (default /opt/pip-tools.d),
# BAKE_PIP_TOOLS (pip-tools venv, default /opt/pip-tools), BAKE_PYTHON (interpreter
# to sync, default /opt/venv/bin/python, else python3 on PATH), BAKE_PIP_LOCK_DIR
# (default /opt/pip-lock), BAKE_ARCH (the arch of requirements-<arch>.lock, default
# from uname -m: x86_64 -> amd64, aarch64 -> arm64). BAKE_PIP_LOCKED=1 (a build arg a --locked
# plan sets on final targets): fail unless a pre-made lock is there.
#
# BAKE_PIP_COMPILE_ONLY=DIR (what `bake-plan lock --in-image` runs in the meal kit): compile as
# an unlocked build does, whatever lock is there, write DIR/requirements.txt (the compiled lock)
# and DIR/python (the image's Python, e.g. 3.11.2), and stop: nothing is synced. So a line a
# Dockerfile wrote at build time (`name @ file:///opt/…/name-1.0-py3-none-any.whl`, a wheel
# built in the image) is locked by the image's own pip-compile, as its in-image path.
set -euo pipefail

pip_tools_d="${BAKE_PIP_TOOLS_D:-/opt/pip-tools.d}"
pip_tools_venv="${BAKE_PIP_TOOLS:-/opt/pip-tools}"

die() { echo "bake-pip-finalize: $*" >&2; exit 1; }

# The interpreter whose site-packages end up matching the lock.
if [ -n "${BAKE_PYTHON:-}" ]; then
  target_python="$BAKE_PYTHON"
elif [ -x /opt/venv/bin/python ]; then
  target_python=/opt/venv/bin/python
else
  target_python="$(command -v python3 || true)"
fi
if [ -z "$target_python" ] || [ ! -x "$target_python" ]; then
  die "no Python interpreter to install into (set BAKE_PYTHON)"
fi

lock="${pip_tools_d}/requirements.lock"
# The final stages mount an optional named context "pip-lock" here; keep a copy of
# its lock next to the .in files so the image records what it was synced to. A lock
# that differs by arch comes as requirements-<arch>.lock, one per arch.
pip_lock_dir="${BAKE_PIP_LOCK_DIR:-/opt/pip-lock}"
arch="${BAKE_ARCH:-}"
if [ -z "$arch" ]; then
  case "$(uname -m)" in
    x86_64) arch=amd64 ;;
    aarch64 | arm64) arch=arm64 ;;
    armv7l) arch=armv7 ;;
    armv6l) arch=armv6 ;;
    i386 | i686) arch=386 ;;
    *) arch="$(uname -m)" ;;
  esac
fi
premade=""
compile_only="${BAKE_PIP_COMPILE_ONLY:-}"
if [ -n "$compile_only" ]; then
  : # a compile for `bake-plan lock --in-image`: no pre-made lock is read
elif [ -f "${pip_lock_dir}/requirements-${arch}.lock" ]; then
  premade="${pip_lock_dir}/requirements-${arch}.lock"
elif [ -f "${pip_lock_dir}/requirements.lock" ]; then
  premade="${pip_lock_dir}/requirements.lock"
elif [ -n "$(find "$pip_lock_dir" -maxdepth 1 -name 'requirements-*.lock' 2>/dev/null)" ]; then
  die "${pip_lock_dir} has per-arch locks but none for ${arch}"
fi
# First things first: a --locked build (BAKE_PIP_LOCKED=1, set by bake-plan) must have its
# lock mounted, and a lock made for another Python than this image's is refused.
if [ -z "$compile_only" ] && [ "${BAKE_PIP_LOCKED:-}" = 1 ] && [ -z "$premade" ] && [ ! -f "$lock" ]; then
  die "a --locked build (BAKE_PIP_LOCKED=1) but no lock in ${pip_lock_dir}: the final stage must mount the pip-lock context (RUN --mount=type=bind,from=pip-lock,target=${pip_lock_dir} bake-pip-finalize)"
fi
# The target stage a lock was made for (its header), for the hint of a lock that does not cover a line.
lock_target="$(sed -n 's/^# bake-plan target: //p' "${premade:-$lock}" 2>/dev/null | head -n 1 || true)"
lock_python="$(sed -n 's/^# bake-plan python: //p' "${premade:-/dev/null}" 2>/dev/null | head -n 1)"
# Compared at the precision the stage declared (python-declared: 3.11 → major.minor, 3.11.2 → in full).
declared_python="$(sed -n 's/^# bake-plan python-declared: //p' "${premade:-/dev/null}" 2>/dev/null | head -n 1)"
python_fields=1,2
case "$declared_python" in *.*.*) python_fields=1,2,3 ;; esac
if [ -n "$lock_python" ]; then
  image_python="$("$target_python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null || true)"
  [ -n "$image_python" ] || die "cannot tell the Python version of ${target_python} to check the lock ${premade} (made for Python ${lock_python})"
  image_python="$(echo "$image_python" | cut -d. -f"$python_fields")"
  if [ "$(echo "$lock_python" | cut -d. -f"$python_fields")" != "$image_python" ]; then
    die "the lock ${premade} was made for Python ${lock_python}, this image has Python ${image_python}: build on a base image of Python ${declared_python:-${lock_python}} (docs/plugins.md, \"A base of another Python\"), or, only if the family runs on it, declare python = \"${image_python}\" and run bake-plan lock again"
  fi
fi

# How to run pip-tools.
if [ -x "${pip_tools_venv}/bin/pip-compile" ] && [ -x "${pip_tools_venv}/bin/pip-sync" ]; then
  pip_compile=("${pip_tools_venv}/bin/pip-compile")
  pip_sync=("${pip_tools_venv}/bin/pip-sync")
elif command -v pip-compile >/dev/null && command -v pip-sync >/dev/null; then
  pip_compile=(pip-compile)
  pip_sync=(pip-sync)
elif python3 -c 'import piptools' 2>/dev/null; then
  pip_compile=(python3 -m piptools compile)
  pip_sync=(python3 -m piptools sync)
else
  die "pip-tools not found (looked in ${pip_tools_venv}/bin, on PATH, and for python3 -m piptools)"
fi

# Refuse any VCS requirement whose ref is not a full commit hash.
check_vcs_pins() {
  local file="$1" n=0 bad=0 line body
  while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    body="${line#"${line%%[![:space:]]*}"}"
    case "$body" in "" | "#"*) continue ;; esac
    case "$body" in *git+*) ;; *) continue ;; esac
    if ! [[ "$body" =~ git\+[^[:space:]]*@[0-9a-fA-F]{40}([#[:space:]]|$) ]]; then
      echo "bake-pip-finalize: ${file}:${n}: VCS requirement not pinned to a 40-hex commit: ${body}" >&2
      bad=1
    fi
  done <"$file"
  [ "$bad" -eq 0 ] || die "refusing to install unpinned VCS requirements (pin the source's ref to a commit)"
}

# Does the pre-made lock cover every requirements-*.in line? Run by a Python with
# `packaging` (pip-tools' venv has it; pip vendors it otherwise).
check_lock_covers() {
  local lock="$1" python="${pip_tools_venv}/bin/python"
  [ -x "$python" ] || python="$(command -v python3 || true)"
  [ -n "$python" ] || die "no Python to check the lock with"
  local ins=()
  while IFS= read -r f; do
    ins+=("$f")
  done < <(LC_ALL=C find "$pip_tools_d" -maxdepth 1 -name 'requirements-*.in' -type f | LC_ALL=C sort)
  [ "${#ins[@]}" -gt 0 ] || return 0
  "$python" - "$lock" "$lock_target" "${ins[@]}" <<'PY' || die "the pre-made lock does not match this image's requirements"
import re, sys
try:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version
except ImportError:
    from pip._vendor.packaging.requirements import InvalidRequirement, Requirement
    from pip._vendor.packaging.utils import canonicalize_name
    from pip._vendor.packaging.version import InvalidVersion, Version

def logical_lines(path):
    text = open(path, encoding="utf-8").read().replace("\\\n", "")
    for n, line in enumerate(text.splitlines(), 1):
        line = re.split(r"(^|\s)#", line, maxsplit=1)[0].strip()
        if line:
            yield n, line

def editable(line):
    m = re.match(r"(?:-e|--editable)[\s=]+(\S+)", line)
    return m and re.sub(r"^file://", "", m.group(1)).split("#")[0].rstrip("/")

def parse(line):
    try:
        return Requirement(line)
    except InvalidRequirement:
        return None

lock_path, target, ins = sys.argv[1], sys.argv[2], sys.argv[3:]
pins, urls, editables = {}, {}, set()
in_image = 0  # problems with a URL line (a wheel built in the image), which a host lock never sees
for _, line in logical_lines(lock_path):
    if editable(line):
        editables.add(editable(line))
        continue
    req = None if line.startswith("-") else parse(line)
    if req is None or (req.marker and not req.marker.evaluate()):
        continue
    name = canonicalize_name(req.name)
    exact = [s.version for s in req.specifier if s.operator == "=="]
    pins[name] = exact[0] if exact else None
    urls[name] = req.url
problems = []
for path in ins:
    for n, line in logical_lines(path):
        where = f"{path}:{n}: {line}"
        if editable(line):
            if editable(line) not in editables:
                problems.append(f"{where}: not in the lock")
            continue
        if line.startswith("-"):
            continue
        req = parse(line)
        if req is None or (req.marker and not req.marker.evaluate()):
            continue
        name = canonicalize_name(req.name)
        if name not in pins:
            problems.append(f"{where}: not in the lock")
            in_image += bool(req.url)
        elif req.url and urls[name] and req.url != urls[name]:
            problems.append(f"{where}: the lock has {urls[name]}")
            in_image += 1
        elif req.url and not urls[name]:
            # A wheel (or checkout) the meal kit put in the image: a lock that pins the name from
            # the index would install the index's release instead of it.
            pin = f"{name}=={pins[name]}" if pins[name] else name
            problems.append(f"{where}: the lock pins {pin} from the index, not this URL")
            in_image += 1
        elif pins[name] and str(req.specifier):
            try:
                if not req.specifier.contains(Version(pins[name]), prereleases=True):
                    problems.append(f"{where}: the lock pins {name}=={pins[name]}")
            except InvalidVersion:
                pass
for problem in problems:
    print(f"bake-pip-finalize: {problem}", file=sys.stderr)
if problems:
    again = f" --target {target}" if target else ""
    if in_image:
        print(f"bake-pip-finalize: a line written at build time names a file in the image, which only a lock "
              f"made in the image has: remake it with `bake-plan lock --in-image{again}`", file=sys.stderr)
    else:
        print(f"bake-pip-finalize: remake it: `bake-plan lock{again}`", file=sys.stderr)
sys.exit(1 if problems else 0)
PY
}

if [ -n "$premade" ]; then
  mkdir -p "$pip_tools_d"
  cp "$premade" "$lock"
fi
if [ -z "$compile_only" ] && [ -f "$lock" ]; then
  echo "bake-pip-finalize: using pre-made lock ${lock}"
  check_vcs_pins "$lock"
  check_lock_covers "$lock"
  "${pip_sync[@]}" --python-executable "$target_python" "$lock"
  exit 0
fi

cd "$pip_tools_d" || die "${pip_tools_d} does not exist"
# Sorted, so the resolver sees the stages in the same order on every build.
ins=()
while IFS= read -r f; do
  ins+=("$f")
done < <(LC_ALL=C find . -maxdepth 1 -name 'requirements-*.in' -type f | sed 's|^\./||' | LC_ALL=C sort)
[ "${#ins[@]}" -gt 0 ] || die "no requirements-*.in files in ${pip_tools_d}"

out="${pip_tools_d}/requirements.txt"
# A leftover output would make pip-compile keep its old pins; start clean.
rm -f "$out"
echo "bake-pip-finalize: compiling ${ins[*]}"
# pip-tools 7.4 pip-compile has no --python-executable: it resolves with its own
# interpreter, which shares the target's Python version (same base interpreter).
# --allow-unsafe keeps setuptools/pip pins in the lock when a package needs them.
# --no-emit-*: pip-compile would copy pip's index settings from the environment
# into the lock unredacted (credentials in PIP_INDEX_URL would land in the image);
# pip-sync reads them from the environment anyway.
"${pip_compile[@]}" --quiet --no-header --strip-extras --allow-unsafe \
  --no-emit-index-url --no-emit-find-links --no-emit-trusted-host \
  --output-file "$out" "${ins[@]}"

# Index options that a stage wrote into its own .in (e.g. --extra-index-url for
# CUDA wheels) are still needed by pip-sync: put them back at the top of the lock.
opts="$(sed -n -E 's/^[[:space:]]*((-i|-f|--index-url|--extra-index-url|--find-links|--trusted-host|--no-index)([[:space:]=].*)?)$/\1/p' "${ins[@]}" \
  | sed -E 's/[[:space:]]+$//' | awk '!seen[$0]++')"
if [ -n "$opts" ]; then
  { printf '%s\n' "$opts"; cat "$out"; } >"${out}.tmp"
  mv "${out}.tmp" "$out"
fi

check_vcs_pins "$out"
if [ -n "$compile_only" ]; then
  mkdir -p "$compile_only"
  cp "$out" "${compile_only}/requirements.txt"
  "$target_python" -c 'import sys; print(".".join(map(str, sys.version_info[:3])))' >"${compile_only}/python" \
    || die "cannot tell the Python version of ${target_python}"
  echo "bake-pip-finalize: compiled ${compile_only}/requirements.txt (nothing synced: BAKE_PIP_COMPILE_ONLY)"
  exit 0
fi
"${pip_sync[@]}" --python-executable "$target_python" "$out"
