#!/usr/bin/env bash
# bake-write-requirements STAGE LINES
# bake-write-requirements --wheels STAGE DIR
#
# Appends each non-empty line of LINES to ${BAKE_PIP_TOOLS_D}/requirements-STAGE.in
# (default /opt/pip-tools.d). The meal kit only records what to install; the final
# stage's bake-pip-finalize compiles every requirements-*.in into one lock.
#
# --wheels: one line per wheel in DIR (a wheel built in the image, copied in from a
# wheel-builder stage), `name @ file:///DIR/name-1.0-py3-none-any.whl`, the name read
# from the wheel's file name as the wheel spec gives it. DIR must hold at least one
# wheel. Such a line is only known at build time, so the host lock never sees it: lock
# the chain with `bake-plan lock --in-image` (docs/plugins.md, "A wheel built in the image").
set -euo pipefail

pip_tools_d="${BAKE_PIP_TOOLS_D:-/opt/pip-tools.d}"

die() { echo "bake-write-requirements: $*" >&2; exit 1; }

wheels=""
if [ "${1:-}" = --wheels ]; then
  [ "$#" -eq 3 ] || die "usage: bake-write-requirements --wheels STAGE DIR"
  wheels="$3"
  shift
elif [ "$#" -ne 2 ]; then
  die "usage: bake-write-requirements STAGE LINES (or --wheels STAGE DIR)"
fi
stage="$1"
lines="${2:-}"

# The stage name becomes part of a file name that bake-plan matches on.
case "$stage" in
  "" | *[!A-Za-z0-9._-]*) die "invalid stage name '${stage}' (allowed: letters, digits, '.', '_', '-')" ;;
esac

if [ -n "$wheels" ]; then
  case "$wheels" in
    /*) ;;
    *) die "--wheels ${wheels}: give the directory as an absolute path (the line is a file:// URL)" ;;
  esac
  [ -d "$wheels" ] || die "--wheels ${wheels}: no such directory (did the wheel-builder stage write its wheel there?)"
  lines=""
  found=0
  for whl in "${wheels%/}"/*.whl; do
    [ -f "$whl" ] || continue
    base="$(basename "$whl")"
    # {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl: the name is the first
    # part, with '_' for '-' (wheel spec); a file URL takes no blanks or '#'.
    case "$base" in
      *[!A-Za-z0-9._+-]*) die "--wheels ${wheels}: cannot write a line for '${base}' (a wheel's file name has letters, digits, '.', '_', '+', '-')" ;;
    esac
    name="${base%%-*}"
    lines+="${name//_/-} @ file://${whl}"$'\n'
    found=$((found + 1))
  done
  [ "$found" -gt 0 ] || die "--wheels ${wheels}: no wheel (*.whl) there (did the wheel-builder stage build one?)"
fi

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
