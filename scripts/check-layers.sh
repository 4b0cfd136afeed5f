#!/usr/bin/env bash
# The include graph, checked against the layering: a part may include its own files and those of
# any part on a lower layer, never a part on its own layer or above. Prints every edge that breaks
# the rule (file, line, the include) and exits 1 if there is one; `--edges` prints the part-to-part
# edges found instead (docs/architecture.md shows them).
#
#   scripts/check-layers.sh            # from anywhere in the checkout
set -euo pipefail
cd "$(dirname "$0")/.."

# Layers, lowest first. Parts on one line are side by side: neither includes the other.
layers=(
  "ggml-like/core"
  "ggml-like/quant ggml-like/gguf"
  "ggml-like/graph"
  "ggml-like/backend"
  "ggml-like/cpu ggml-like/cuda"
  "ggml-like/registry"
  "src/tokenizer src/sampling"
  "src/model convert"
  "src/placement"
  "src/runtime src/synth src/parallel"
  "src/generate src/bench src/eval"
  "src/chat"
  "src/server"
  "src/cli"
)

declare -A rank
for i in "${!layers[@]}"; do
  for part in ${layers[$i]}; do rank[$part]=$i; done
done

# The part a path belongs to: the longest listed prefix.
part_of() {
  local path=$1 best=""
  for part in "${!rank[@]}"; do
    if [[ $path == "$part"/* && ${#part} -gt ${#best} ]]; then best=$part; fi
  done
  printf '%s' "$best"
}

mode=${1:-check}
bad=0
declare -A edges
while IFS=: read -r file line include; do
  from=$(part_of "$file")
  target=${include#*\"}
  target=${target%%\"*}
  to=$(part_of "$target")
  [[ -z $from ]] && { echo "check-layers: $file is in no layer (add its folder to scripts/check-layers.sh)"; bad=1; continue; }
  [[ -z $to || $from == "$to" ]] && continue
  edges["$from -> $to"]=1
  if (( ${rank[$to]} >= ${rank[$from]} )); then
    echo "$file:$line: $from includes $to, which is not below it: $target"
    bad=1
  fi
done < <(git ls-files 'ggml-like/*' 'src/*' 'convert/*' | grep -E '\.(h|cpp|cu)$' |
         xargs grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' /dev/null || true)

# Instruction-set intrinsics only under ggml-like/cpu/arch/: the portable kernels (cpu/simd/) take
# their innermost steps from there.
while IFS=: read -r file line text; do
  echo "$file:$line: intrinsics outside ggml-like/cpu/arch/: $text"
  bad=1
done < <(git ls-files 'ggml-like/*' 'src/*' 'convert/*' | grep -E '\.(h|cpp)$' | grep -v '^ggml-like/cpu/arch/' |
         xargs grep -nE '#[[:space:]]*include[[:space:]]*[<"]([a-z]*intrin\.h|arm_neon\.h|ggml-like/cpu/arch/(x86/x86|arm/arm)_intrinsics\.h)|\b_mm[0-9]*_[a-z0-9_]+\(|__m(128|256|512)[id]?\b|\b(u?int|float)(8|16|32|64)x[0-9]+(x[0-9])?_t\b|\bv(ld|st)[1-4]q?_' /dev/null || true)

if [[ $mode == --edges ]]; then
  printf '%s\n' "${!edges[@]}" | sort
  exit 0
fi
if (( bad )); then
  echo "check-layers: the include graph breaks the layering (scripts/check-layers.sh lists the layers)"
  exit 1
fi
echo "check-layers: ${#edges[@]} part-to-part edges, none from a lower part to a higher one"
