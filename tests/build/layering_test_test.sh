#!/usr/bin/env bash
# Tests layering_test.sh itself: on a copy of trainer/ it passes, and each deliberate violation
# planted in the copy (an upward include, a sibling's include, a folder without a layer, LibTorch
# or another trainer/ folder in the launcher) makes it fail, naming the file.
# usage: layering_test_test.sh SOURCE_DIR
set -uo pipefail
src="$1"
check="$(dirname "$0")/layering_test.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

cp -r "$src/trainer" "$tmp/trainer"
if ! out=$(bash "$check" "$tmp" 2>&1); then
  echo "FAIL: the unchanged copy of trainer/ is refused: $out" >&2
  exit 1
fi

# plant FILE LINE WHAT: appends LINE to FILE (relative to the copy), expects a refusal naming
# FILE, then restores the copy.
plant() {
  local file="$1" line="$2" what="$3" out
  mkdir -p "$(dirname "$tmp/$file")"
  [[ -f "$tmp/$file" ]] && cp "$tmp/$file" "$tmp/saved"
  echo "$line" >> "$tmp/$file"
  if out=$(bash "$check" "$tmp" 2>&1); then
    echo "FAIL: $what ($file: $line) passes" >&2
    fail=1
  elif [[ "$out" != *"$file"* ]]; then
    echo "FAIL: $what is refused without naming $file: $out" >&2
    fail=1
  else
    echo "ok: $what refused: $(grep -m1 "$file" <<< "$out")"
  fi
  if [[ -f "$tmp/saved" ]]; then mv "$tmp/saved" "$tmp/$file"; else rm -rf "$tmp/$file"; fi
}

plant trainer/ddp/ddp.h '#include "trainer/worker/model_stage.h"' "an upward include"
plant trainer/worker/data_stage.h '#include "trainer/app/worker.h"' "an include of the composition root"
plant trainer/data/dataset.h '#include "trainer/models/model.h"' "a sibling's include"
plant trainer/checkpoint/checkpoint.h '#include "trainer/worker/step_meters.h"' "an upward include"
plant trainer/extra/extra.h '#include "trainer/models/model.h"' "a folder without a layer"
plant trainer/models/model.h '#include "trainer/extra/extra.h"' "an include of a folder without a layer"
plant trainer/launcher/config.h '#include <torch/torch.h>' "LibTorch in the launcher"
plant trainer/launcher/launcher.h '#include "trainer/named_tensor.h"' "another trainer/ folder in the launcher"

((fail == 0)) && echo "layering_test_test: OK"
exit $fail
