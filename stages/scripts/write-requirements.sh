#!/usr/bin/env bash
# bake-write-requirements STAGE LINES
#
# Appends each non-empty line of LINES to ${BAKE_PIP_TOOLS_D}/requirements-STAGE.in
# (default /opt/pip-tools.d). The meal kit only records what to install; the final
# stage's bake-pip-finalize compiles every requirements-*.in into one lock.
set -euo pipefail

pip_tools_d="${BAKE_PIP_TOOLS_D:-/opt/pip-tools.d}"

die() { echo "bake-write-requirements: $*" >&2; exit 1; }

[ "$#" -eq 2 ] || die "usage: bake-write-requirements STAGE LINES"
stage="$1"
lines="$2"

# The stage name becomes part of a file name that bake-plan matches on.
case "$stage" in
  "" | *[!A-Za-z0-9._-]*) die "invalid stage name '${stage}' (allowed: letters, digits, '.', '_', '-')" ;;
esac

mkdir -p "$pip_tools_d"
out="${pip_tools_d}/requirements-${stage}.in"
# Create the file even when LINES is empty: an empty .in is valid for pip-compile
# and shows that the stage took part.
touch "$out"

# Strip CRs (args written on Windows) and surrounding blanks; skip blank lines.
while IFS= read -r line || [ -n "$line" ]; do
  line="${line%$'\r'}"
  line="${line#"${line%%[![:space:]]*}"}"
  line="${line%"${line##*[![:space:]]}"}"
  [ -n "$line" ] || continue
  # A line already recorded (e.g. by bake-fetch-source) is written once.
  grep -qxF -- "$line" "$out" || printf '%s\n' "$line" >>"$out"
done <<<"$lines"
