#!/bin/bash
# Coral's CUDA paths, on a machine with a GPU and Coral installed with its hf, ray and test
# extras (coral on the PATH, CORAL_DATA_DIR set): the hf model's tests on CUDA (bf16),
# batched decoding against batch size 1, one QuixBugs run on the local executor and on Ray
# (generation actors with num_gpus=1) compared sample by sample, and adapter switching with
# a 0.5B-shaped model in bf16. Every stage has a deadline; OUT (default ./gpu-check) gets
# the logs. Usage: bash benchmarks/gpu.sh
set -uo pipefail
OUT=${OUT:-gpu-check}
failed=0
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
start=$(date +%s)
stage() { echo "=== +$(( $(date +%s) - start ))s $*"; }
check() { [ "$1" -eq 0 ] || { echo "!!! stage failed (exit $1)"; failed=1; }; }

stage "versions"
nvidia-smi -L
$PY -c "import torch, transformers, peft; print('torch', torch.__version__, 'transformers',
transformers.__version__, 'peft', peft.__version__, torch.cuda.get_device_name(0))"

stage "hf model and evolution tests on CUDA"
timeout -k 5 300 $PY -m pytest tests/test_model_hf.py tests/test_evolution_hf.py -q \
    -p no:cacheprovider -n 4 -o addopts="" 2>&1 | tail -30 | tee "$OUT/pytest.txt"
check $?

stage "batched decoding"
timeout -k 5 180 $PY benchmarks/generation.py --requests 16 --max-new-tokens 32 \
    --batch-sizes 1,16 2>&1 | grep -v "Writing model" | tee "$OUT/generation.txt"
check $?

stage "one run, local executor and Ray"
$PY -c "import sys; sys.path.insert(0, 'tests'); from tiny_model import build_tiny_model
build_tiny_model('$OUT/tiny')" 2>/dev/null
for executor in local ray; do
    rm -rf "$OUT/run-$executor"
    timeout -k 5 300 coral run --plugin quixbugs --model "hf:$OUT/tiny" --limit 8 --samples 4 \
        --seed 3 --executor $executor --out "$OUT/run-$executor" --json \
        > "$OUT/$executor.json" 2> "$OUT/$executor.err"
    code=$?; echo "$executor: exit $code"; tail -2 "$OUT/$executor.err"; check $code
    coral export "$OUT/run-$executor" -o "$OUT/$executor.jsonl"
done
$PY - "$OUT" <<'PY' | tee "$OUT/e2e.txt"
import json, sys
def rows(name):
    with open(f"{sys.argv[1]}/{name}.jsonl") as lines:
        return {(r["trial"], r["task"], r["sample"]): (r["reply"], r["verdict"])
                for r in map(json.loads, lines)}
local, ray = rows("local"), rows("ray")
print(f"samples: local {len(local)}, ray {len(ray)}, "
      f"equal {sum(local.get(k) == v for k, v in ray.items())}")
PY

stage "adapter switching, 0.5B-shaped, bf16"
timeout -k 5 300 $PY benchmarks/models.py --repeat 1 --k 3 2>&1 | grep -v "Writing model" \
    | tee "$OUT/models.txt"
check $?
stage "done"
exit $failed
