#!/bin/bash
# One name, one thing: no two source files under src/ share a name (the stem: a unit's .h, .cpp
# and .cu are one) unless they are the same op in two backends — src/backends/A/X and
# src/backends/B/X, the same path inside each backend's folder. Two files named memory.cpp, one the
# allocator and one the planner's estimate, make every stack trace, grep and include ambiguous.
#
#   unique_names_test.sh <source dir>          (CTest: lint_unique_names, label unit)
set -u
src="${1:?usage: unique_names_test.sh <source dir>}/src"
cd "$src" || exit 2

declare -A first  # stem -> the folder that has it first ("backends/*/sub" for a backend's file)
bad=0
while IFS= read -r f; do
  name="${f##*/}"
  stem="${name%%.*}"
  dir="${f%/*}"
  # A backend's file is known by its path inside the backend: backends/cpu/x.cpp and
  # backends/cuda/x.cu are one op's two implementations.
  if [[ "$dir" =~ ^backends/[^/]+(/.*)?$ ]]; then
    where="backends/*${BASH_REMATCH[1]}"
  else
    where="$dir"
  fi
  if [[ -z "${first[$stem]+x}" ]]; then
    first[$stem]="$where"
  elif [[ "${first[$stem]}" != "$where" ]]; then
    echo "error: src/$f: the name '$stem' is also used in src/${first[$stem]}/ for something else" \
      "(hint: name the file for what it holds, e.g. ${stem}_$(basename "$dir"))"
    bad=1
  fi
done < <(find . -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' -o -name '*.inc' \) \
           | sed 's#^\./##' | sort)
[[ $bad == 0 ]] && echo "ok: every file name under src/ names one thing"
exit $bad
