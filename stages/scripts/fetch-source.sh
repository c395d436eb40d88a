#!/usr/bin/env bash
# bake-fetch-source --urlref URL#REF --dest DIR --stage STAGE
#                   [--mode git-clone|pip-vcs] [--package NAME] [--patches "P1 P2 ..."]
#
# git-clone (default): clone URL into DIR, check out REF (branch, tag or commit),
#   apply the patches in order, then record "-e file://DIR" in requirements-STAGE.in
#   so the final stage installs the checkout in editable mode. A patch is either a git
#   ref fetched from URL (e.g. pull/12/head: the changes between it and its merge base
#   with REF are applied) or file://PATH, a patch file under ${BAKE_PATCH_DIR}
#   (default /opt/bake-patches, where the stages mount the "patches" named context).
#   Each applied patch becomes a commit, so `git log` in DIR shows them in order.
# pip-vcs: no clone; record "NAME @ git+URL@REF" and let pip fetch it in the final
#   stage. bake-pip-finalize refuses such a line unless REF is a 40-hex commit.
set -euo pipefail

pip_tools_d="${BAKE_PIP_TOOLS_D:-/opt/pip-tools.d}"
patch_dir="${BAKE_PATCH_DIR:-/opt/bake-patches}"

die() { echo "bake-fetch-source: $*" >&2; exit 1; }
usage() {
  die "usage: bake-fetch-source --urlref URL#REF --dest DIR --stage STAGE [--mode git-clone|pip-vcs] [--package NAME] [--patches LIST]"
}

urlref="" dest="" stage="" mode="git-clone" package="" patches=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --urlref) [ "$#" -ge 2 ] || usage; urlref="$2"; shift 2 ;;
    --dest) [ "$#" -ge 2 ] || usage; dest="$2"; shift 2 ;;
    --stage) [ "$#" -ge 2 ] || usage; stage="$2"; shift 2 ;;
    --mode) [ "$#" -ge 2 ] || usage; mode="$2"; shift 2 ;;
    --package) [ "$#" -ge 2 ] || usage; package="$2"; shift 2 ;;
    --patches) [ "$#" -ge 2 ] || usage; patches="$2"; shift 2 ;;
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
# git reads a leading '-' as an option (--upload-pack=CMD runs CMD): refuse, for URL, ref, patches.
for arg in "$url" "$ref" $patches; do
  case "$arg" in -*) die "'${arg}' starts with '-': git would take it for an option" ;; esac
done

case "$mode" in
  git-clone)
    [ -n "$dest" ] || die "--dest is required in git-clone mode"
    case "$dest" in /*) ;; *) die "--dest must be an absolute path, got '${dest}'" ;; esac
    if [ -e "$dest" ] && [ -n "$(ls -A "$dest" 2>/dev/null)" ]; then
      die "destination '${dest}' exists and is not empty"
    fi
    git clone --quiet -- "$url" "$dest"  # "--": a URL never reads as an option
    # A branch or tag is checked out directly; a commit that no branch or tag
    # reaches (e.g. a PR head) is fetched explicitly, then checked out detached.
    if ! git -C "$dest" checkout --quiet "$ref" 2>/dev/null; then
      git -C "$dest" fetch --quiet origin "$ref" \
        || die "ref '${ref}' not found in ${url}"
      git -C "$dest" checkout --quiet --detach FETCH_HEAD
    fi
    commit="$(git -C "$dest" rev-parse HEAD)"
    # Patches, in order, each as a commit (an identity is set if git has none).
    gitc() {
      git -C "$dest" -c user.name="${GIT_USER_NAME:-$(git config user.name || echo bake-fetch-source)}" \
        -c user.email="${GIT_USER_EMAIL:-$(git config user.email || echo bake-fetch-source@localhost)}" "$@"
    }
    for patch in $patches; do
      case "$patch" in
        file://*)
          file="${patch_dir}/${patch#file://}"
          [ -f "$file" ] || die "patch '${patch}': no such file ${file}"
          gitc apply --index --whitespace=nowarn "$file" \
            || die "patch '${patch}' does not apply on ${ref} of ${url}"
          ;;
        *)
          gitc fetch --quiet origin "$patch" || die "patch '${patch}': ref not found in ${url}"
          base="$(gitc merge-base HEAD FETCH_HEAD)" \
            || die "patch '${patch}': no common history with ${ref} of ${url}"
          if [ "$base" = "$(gitc rev-parse FETCH_HEAD)" ]; then
            # Already in the commit (e.g. the pull request was merged): nothing to apply.
            echo "bake-fetch-source: ${patch} is already in ${ref}"
            continue
          fi
          gitc diff --binary "$base" FETCH_HEAD | gitc apply --index --whitespace=nowarn \
            || die "patch '${patch}' does not apply on ${ref} of ${url}"
          ;;
      esac
      gitc commit --quiet --allow-empty -m "bake-fetch-source: apply ${patch}"
      echo "bake-fetch-source: applied ${patch}"
    done
    # Sources such as Transformer Engine vendor code as submodules.
    git -C "$dest" submodule update --init --recursive --quiet
    echo "bake-fetch-source: ${url} ${ref} -> ${dest} at ${commit}${patches:+ + patches: ${patches}}"
    line="-e file://${dest}"
    ;;
  pip-vcs)
    [ -z "$patches" ] || die "--patches needs --mode git-clone (pip installs a pip-vcs source as it is)"
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
out="${pip_tools_d}/requirements-${stage}.in"
# The stage may declare the same line (its REQUIREMENTS): write it once.
if ! { [ -f "$out" ] && grep -qxF -- "$line" "$out"; }; then
  printf '%s\n' "$line" >>"$out"
fi
