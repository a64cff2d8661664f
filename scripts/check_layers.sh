#!/usr/bin/env bash
# The layering check: a layer may include only itself and the layers below it,
#   dsl < target < schedules < backends < autotuner < debug < frontends
# (each its own static library, linked in that order; see CMakeLists.txt).
# The libraries keep a lower layer from linking against an upper one; this
# check catches the include that would need it, before anything is built.
#
#   scripts/check_layers.sh [ROOT]    check the tree at ROOT (default: this checkout)
#   scripts/check_layers.sh --self-test
#                                     plant violations in a temporary copy of this
#                                     tree and check that each one is reported
#
# Scans every #include "..." and #include <...> line of the .h/.cpp files
# under the layer folders. An include naming a folder above the layers
# (tools/, python/, apps/, test/) or reaching out with "../" is a violation
# too. Prints file:line: rule for each violation and exits 1 if there is any.
set -euo pipefail

LAYERS=(dsl target schedules backends autotuner debug frontends)
ABOVE=(tools python apps test)  # built on the layers; no layer may include them

check() {  # check <root>: prints one line per violation, returns 1 if any
  local root="$1" layer
  for layer in "${LAYERS[@]}"; do
    [ -d "$root/$layer" ] || continue
    grep -rnE --include='*.h' --include='*.hpp' --include='*.cpp' --include='*.cc' \
      '^[[:space:]]*#[[:space:]]*include' "$root/$layer" || true
  done | awk -v root="$root/" -v layers="${LAYERS[*]}" -v above="${ABOVE[*]}" '
    BEGIN {
      n = split(layers, L, " ")
      for (i = 1; i <= n; ++i) rank[L[i]] = i
      order = L[1]
      for (i = 2; i <= n; ++i) order = order " < " L[i]
      m = split(above, A, " ")
      for (i = 1; i <= m; ++i) up[A[i]] = 1
      bad = 0
    }
    {
      # grep -n: file:line:text (paths under root have no colon)
      file = $0; sub(/:.*/, "", file)
      rest = substr($0, length(file) + 2)
      line = rest; sub(/:.*/, "", line)
      text = substr(rest, length(line) + 2)
      if (!match(text, /include[[:space:]]*["<][^">]+[">]/)) next
      inc = substr(text, RSTART, RLENGTH)
      sub(/^include[[:space:]]*["<]/, "", inc); sub(/[">]$/, "", inc)
      if (index(file, root) == 1) file = substr(file, length(root) + 1)
      layer = file; sub(/\/.*/, "", layer)
      if (inc ~ /^\.\.\// || inc ~ /\/\.\.\//) {
        printf "%s:%s: includes \"%s\" by a relative path; include it as <layer>/<file> so the layering (%s) can be checked\n", file, line, inc, order
        bad = 1; next
      }
      if (inc !~ /\//) next  # system and library headers
      top = inc; sub(/\/.*/, "", top)
      if ((top in rank) && rank[top] > rank[layer]) {
        printf "%s:%s: %s/ includes %s from %s/, a layer above it; a layer may include only itself and the layers below it (%s)\n", file, line, layer, inc, top, order
        bad = 1
      } else if (top in up) {
        printf "%s:%s: %s/ includes %s from %s/, which is built on the layers; no layer may include it (%s)\n", file, line, layer, inc, top, order
        bad = 1
      }
    }
    END { exit bad }'
}

self_test() {
  local here out rc fail=0
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  for layer in "${LAYERS[@]}"; do cp -r "$here/$layer" "$tmp/"; done
  if ! out="$(check "$tmp")"; then
    echo "self-test: the unmodified tree should pass, got:"
    echo "$out"
    return 1
  fi
  # expect <file> <line to append> <text the report must contain>
  expect() {
    local f="$tmp/$1" n
    cp "$f" "$f.orig"
    echo "$2" >>"$f"
    n="$(wc -l <"$f")"
    rc=0
    out="$(check "$tmp")" || rc=$?
    mv "$f.orig" "$f"
    if [ "$rc" -eq 0 ] || ! grep -qF "$1:$n: $3" <<<"$out"; then
      echo "self-test: '$2' in $1 was not reported as '$1:$n: $3' (exit $rc):"
      echo "$out"
      fail=1
    fi
  }
  expect dsl/Program.h '#include "schedules/Schedule.h"' 'dsl/ includes schedules/Schedule.h from schedules/, a layer above it'
  expect target/Target.h '#include <backends/Jit.h>' 'target/ includes backends/Jit.h from backends/, a layer above it'
  expect schedules/Schedule.h '  #  include "autotuner/Tuner.h"' 'schedules/ includes autotuner/Tuner.h'
  expect backends/Jit.h '#include "tools/pto/GenCommand.h"' 'backends/ includes tools/pto/GenCommand.h from tools/'
  expect dsl/Type.h '#include "../backends/Jit.h"' 'includes "../backends/Jit.h" by a relative path'
  # Allowed: a layer's own headers and those below it.
  echo '#include "dsl/Program.h"' >>"$tmp/autotuner/Tuner.h"
  echo '#include "target/Target.h"' >>"$tmp/schedules/Schedule.h"
  if ! out="$(check "$tmp")"; then
    echo "self-test: includes from lower layers were reported:"
    echo "$out"
    fail=1
  fi
  [ "$fail" -eq 0 ] && echo "check_layers self-test: every planted violation reported, allowed includes accepted"
  return "$fail"
}

if [ "${1:-}" = "--self-test" ]; then
  self_test
  exit $?
fi
root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
if check "$root"; then
  echo "layers OK: ${LAYERS[*]} include only themselves and the layers below"
else
  exit 1
fi
