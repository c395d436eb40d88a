#!/usr/bin/env bash
# bake-pip-finalize
#
# The "cooking" step of the final stage: install every Python package exactly once.
#  - If ${BAKE_PIP_TOOLS_D}/requirements.lock exists (a lock made before the build,
#    e.g. by `bake-plan lock`, put there directly or mounted as
#    /opt/pip-lock/requirements.lock), sync the environment to it as is.
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
# (default /opt/pip-lock).
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

lock="${pip_tools_d}/requirements.lock"
# The final stages mount an optional named context "pip-lock" here; keep a copy of
# its lock next to the .in files so the image records what it was synced to.
pip_lock_dir="${BAKE_PIP_LOCK_DIR:-/opt/pip-lock}"
if [ -f "${pip_lock_dir}/requirements.lock" ]; then
  mkdir -p "$pip_tools_d"
  cp "${pip_lock_dir}/requirements.lock" "$lock"
fi
if [ -f "$lock" ]; then
  echo "bake-pip-finalize: using pre-made lock ${lock}"
  check_vcs_pins "$lock"
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
"${pip_sync[@]}" --python-executable "$target_python" "$out"
