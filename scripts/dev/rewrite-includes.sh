#!/usr/bin/env bash
# scripts/dev/rewrite-includes.sh [ROOT]: moves rdmactor's public headers
# under include/rdmactor/ (internal ones that public headers need under
# include/rdmactor/detail/) and rewrites every #include of their old paths
# ("actors/node.hpp") in the tree to the new ones ("rdmactor/node.hpp").
#
# Idempotent: re-run it after merging branches that still include the old
# paths (it rewrites their includes and leaves everything else alone).  A
# header still present at its old path next to its new one (a merge that
# brought it back) is reported and left for a human: merge its changes into
# the new file, then delete the old one.  Files it changes are re-sorted by
# clang-format (include order only: the tree is clang-formatted).
set -euo pipefail
root=${1:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)}
cd "$root"

# old path (from the root)          new path (under include/)
map=(
  "rdmactor.hpp                     rdmactor/rdmactor.hpp"
  "actors/node.hpp                  rdmactor/node.hpp"
  "actors/node_actor.hpp            rdmactor/node_actor.hpp"
  "actors/connection.hpp            rdmactor/connection.hpp"
  "actors/config.hpp                rdmactor/config.hpp"
  "actors/atoms.hpp                 rdmactor/atoms.hpp"
  "actors/allocator.hpp             rdmactor/allocator.hpp"
  "actors/memory_pool.hpp           rdmactor/memory_pool.hpp"
  "actors/remote_mr.hpp             rdmactor/remote_mr.hpp"
  "actors/agent_stats.hpp           rdmactor/agent_stats.hpp"
  "actors/agent.hpp                 rdmactor/detail/agent.hpp"
  "actors/actor_directory.hpp       rdmactor/detail/actor_directory.hpp"
  "common/errc.hpp                  rdmactor/errc.hpp"
  "common/error.hpp                 rdmactor/error.hpp"
  "common/options.hpp               rdmactor/options.hpp"
  "common/system_hook.hpp           rdmactor/system_hook.hpp"
  "transport/local_mr.hpp           rdmactor/local_mr.hpp"
  "transport/mr_token.hpp           rdmactor/mr_token.hpp"
  "transport/fabric.hpp             rdmactor/transport/fabric.hpp"
  "transport/link_params.hpp        rdmactor/transport/link_params.hpp"
  "transport/atoms.hpp              rdmactor/detail/transport_atoms.hpp"
  "transport/transport_actor.hpp    rdmactor/detail/transport_actor.hpp"
  "transport/completion_mode.hpp    rdmactor/detail/completion_mode.hpp"
)

status=0
sed_args=()
for line in "${map[@]}"; do
  read -r old new <<<"$line"
  if [[ -e "$old" && ! -e "include/$new" ]]; then
    mkdir -p "$(dirname "include/$new")"
    git mv "$old" "include/$new"
    echo "moved $old -> include/$new"
  elif [[ -e "$old" ]]; then
    echo "CONFLICT: both $old and include/$new exist; merge $old into" \
         "include/$new and delete it" >&2
    status=1
  fi
  # #include "actors/node.hpp" and #include <actors/node.hpp>
  sed_args+=(-e "s|^\\([[:space:]]*#[[:space:]]*include[[:space:]]*\\)[\"<]${old//./\\.}[\">]|\\1\"${new}\"|")
done

# Every C++ source of the tree (tracked or not, build outputs excluded).
mapfile -t files < <(git ls-files --cached --others --exclude-standard \
  -- '*.cpp' '*.hpp' '*.h' '*.cc' '*.hpp.in' | sort -u)
changed=()
for f in "${files[@]}"; do
  [[ -f "$f" ]] || continue
  if ! sed "${sed_args[@]}" "$f" | cmp -s - "$f"; then
    sed -i "${sed_args[@]}" "$f"
    changed+=("$f")
  fi
done
if ((${#changed[@]})); then
  if command -v clang-format >/dev/null; then
    clang-format -i "${changed[@]}"
  fi
  printf 'rewrote includes in %s\n' "${changed[@]}"
else
  echo "includes are up to date"
fi
exit $status
