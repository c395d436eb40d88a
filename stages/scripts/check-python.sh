#!/bin/sh
# bake-check-python
#
# The first step of a chain that has Python: is this image's python3 the Python the chain
# declares? bake-plan sets two build args on every target of a chain that declares one (the
# stage field `python`, or its nearest parent's):
#   BAKE_PYTHON_DECLARED   the declared version, "3.10" (compared as major.minor) or "3.10.14"
#                          (compared in full)
#   BAKE_PYTHON_STAGE      the stage that declares it, named in the error
# Nothing declared (both empty): nothing to check, exit 0. Otherwise one line on stderr and
# exit 1 when python3 is missing or another version, before anything is installed for it.
# POSIX sh, one python3 start without site (a few ms): it runs on any base image.
#
# Run it from a bind mount in the root stage's meal kit, right after the step that installs
# Python, e.g.
#   ARG BAKE_PYTHON_DECLARED
#   ARG BAKE_PYTHON_STAGE
#   RUN --mount=type=bind,from=bake-scripts,source=check-python.sh,target=/usr/local/bin/bake-check-python \
#       sh /usr/local/bin/bake-check-python
# A mount, not a COPY: the step before it and the image stay the same whatever the script holds.
set -eu

declared="${BAKE_PYTHON_DECLARED:-}"
stage="${BAKE_PYTHON_STAGE:-}"
[ -n "$declared" ] || exit 0

say() { echo "bake-check-python: stage '${stage:-?}' declares python = \"${declared}\", $*" >&2; exit 1; }
recipe="build on a base image of Python ${declared} (docs/plugins.md, \"A base of another Python\")"

case "$declared" in
  3.[0-9] | 3.[0-9][0-9]) fields=2 ;;
  3.[0-9].[0-9]* | 3.[0-9][0-9].[0-9]*) fields=3 ;;
  *) say "which is not a version such as 3.10 or 3.10.14" ;;
esac

python="$(command -v python3 || true)"
[ -n "$python" ] || say "but this image has no python3 on PATH: ${recipe}, or install it in a step before this one"
# -I -S: no site, no environment; only the interpreter's own version.
found="$("$python" -I -S -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null || true)"
[ -n "$found" ] || say "but ${python} does not run: ${recipe}"

if [ "$fields" = 2 ]; then
  have="${found%.*}"
else
  have="$found"
fi
[ "$have" = "$declared" ] && exit 0
say "but this image's python3 is ${found}: ${recipe}, or declare python = \"${have}\" only if the family runs on it"
