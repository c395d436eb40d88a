#!/usr/bin/env bash
# bake-fetch-source --urlref URL#REF --dest DIR --stage STAGE
#                   [--mode git-clone|pip-vcs] [--package NAME]
#
# git-clone (default): clone URL into DIR, check out REF (branch, tag or commit),
#   then record "-e file://DIR" in requirements-STAGE.in so the final stage installs
#   the checkout in editable mode.
# pip-vcs: no clone; record "NAME @ git+URL@REF" and let pip fetch it in the final
#   stage. bake-pip-finalize refuses such a line unless REF is a 40-hex commit.
set -euo pipefail

pip_tools_d="${BAKE_PIP_TOOLS_D:-/opt/pip-tools.d}"

die() { echo "bake-fetch-source: $*" >&2; exit 1; }
usage() {
  die "usage: bake-fetch-source --urlref URL#REF --dest DIR --stage STAGE [--mode git-clone|pip-vcs] [--package NAME]"
}

urlref="" dest="" stage="" mode="git-clone" package=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --urlref) [ "$#" -ge 2 ] || usage; urlref="$2"; shift 2 ;;
    --dest) [ "$#" -ge 2 ] || usage; dest="$2"; shift 2 ;;
    --stage) [ "$#" -ge 2 ] || usage; stage="$2"; shift 2 ;;
    --mode) [ "$#" -ge 2 ] || usage; mode="$2"; shift 2 ;;
    --package) [ "$#" -ge 2 ] || usage; package="$2"; shift 2 ;;
    -h | --help) usage ;;
    *) die "unknown argument '$1'" ;;
  esac
done

[ -n "$urlref" ] || die "--urlref is required"
[ -n "$stage" ] || die "--stage is required"
case "$urlref" in
  *"#"*) ;;
  *) die "--urlref '${urlref}' has no '#REF' (expected <git url>#<branch, tag or commit>)" ;;
esac
# Split on the last '#': URLs themselves never carry a fragment here.
url="${urlref%"#"*}"
ref="${urlref##*"#"}"
[ -n "$url" ] || die "--urlref '${urlref}' has an empty URL"
[ -n "$ref" ] || die "--urlref '${urlref}' has an empty ref after '#'"

case "$mode" in
  git-clone)
    [ -n "$dest" ] || die "--dest is required in git-clone mode"
    case "$dest" in /*) ;; *) die "--dest must be an absolute path, got '${dest}'" ;; esac
    if [ -e "$dest" ] && [ -n "$(ls -A "$dest" 2>/dev/null)" ]; then
      die "destination '${dest}' exists and is not empty"
    fi
    git clone --quiet "$url" "$dest"
    # A branch or tag is checked out directly; a commit that no branch or tag
    # reaches (e.g. a PR head) is fetched explicitly, then checked out detached.
    if ! git -C "$dest" checkout --quiet "$ref" 2>/dev/null; then
      git -C "$dest" fetch --quiet origin "$ref" \
        || die "ref '${ref}' not found in ${url}"
      git -C "$dest" checkout --quiet --detach FETCH_HEAD
    fi
    # Sources such as Transformer Engine vendor code as submodules.
    git -C "$dest" submodule update --init --recursive --quiet
    commit="$(git -C "$dest" rev-parse HEAD)"
    echo "bake-fetch-source: ${url} ${ref} -> ${dest} at ${commit}"
    line="-e file://${dest}"
    ;;
  pip-vcs)
    if [ -z "$package" ]; then
      # Default the distribution name to the repository name.
      package="$(basename "${url%/}" .git)"
    fi
    case "$url" in git+*) vcs_url="$url" ;; *) vcs_url="git+${url}" ;; esac
    line="${package} @ ${vcs_url}@${ref}"
    echo "bake-fetch-source: ${package} will be installed from ${vcs_url}@${ref}"
    ;;
  *) die "unknown --mode '${mode}' (expected git-clone or pip-vcs)" ;;
esac

# Same file layout as bake-write-requirements (it may not be on PATH when testing).
case "$stage" in
  *[!A-Za-z0-9._-]*) die "invalid stage name '${stage}'" ;;
esac
mkdir -p "$pip_tools_d"
printf '%s\n' "$line" >>"${pip_tools_d}/requirements-${stage}.in"
