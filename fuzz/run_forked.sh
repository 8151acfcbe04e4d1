#!/usr/bin/env bash
# Runs fuzz targets side by side on a machine with many cores, each in libFuzzer's fork mode
# (WORKERS processes per target) for SECONDS over its committed seed corpus, then keeps the new
# inputs that add coverage beyond that corpus, minimized by -merge=1, in OUT/kept/<target>/, and
# writes OUT/summary.{json,md}: per target, worker-seconds, executions, new inputs and findings.
# A finding's input is left in OUT/artifacts/<target>/ and the run exits non-zero. The programs
# and the whole grown corpora stay in build-fuzz-forked/.
#   fuzz/run_forked.sh SECONDS WORKERS OUT TARGET...
#   FUZZ_BIN    the folder of the fuzz_<target> programs (default build-fuzz/fuzz)
#   FUZZ_CARRY  instead, the folder fuzz/pack_for_device.sh filled (programs, libraries, data)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 4 ] || ! [[ $1 =~ ^[1-9][0-9]*$ && $2 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: fuzz/run_forked.sh SECONDS WORKERS OUT TARGET... (whole numbers >= 1; got '$*')" >&2
  exit 2
fi
seconds=$1 workers=$2 out=$3
shift 3
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$PWD/build-fuzz-forked
rm -rf "$work" && mkdir -p "$work"
bin=${FUZZ_BIN:-build-fuzz/fuzz}
if [ -n "${FUZZ_CARRY:-}" ]; then
  bin=$work/bin
  mkdir -p "$bin"
  for packed in "$FUZZ_CARRY"/fuzz_*.xz; do xz -dc "$packed" >"$bin/$(basename "$packed" .xz)"; done
  chmod +x "$bin"/fuzz_*
  mkdir -p "$work/lib"
  for packed in "$FUZZ_CARRY"/lib/*.xz; do xz -dc "$packed" >"$work/lib/$(basename "$packed" .xz)"; done
  export LD_LIBRARY_PATH=$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # The programs read tests/data and ../shared where they were built: link them there if absent.
  source_dir=$(cat "$FUZZ_CARRY/source_dir")
  if [ ! -d "$source_dir/tests/data" ]; then
    mkdir -p "$(dirname "$source_dir")" && ln -sfn "$PWD" "$source_dir"
  fi
  stories=$source_dir/../shared/models/stories260K.gguf
  if [ ! -f "$stories" ]; then
    mkdir -p "$(dirname "$stories")" && cp "$FUZZ_CARRY/shared/models/stories260K.gguf" "$stories"
  fi
fi
for target in "$@"; do
  [ -x "$bin/fuzz_$target" ] || { echo "fuzz: no program $bin/fuzz_$target" >&2; exit 2; }
done

# The per-input limits scripts/fuzz.sh passes too (fuzz/limits.sh says why).
source fuzz/limits.sh
pids=()
for target in "$@"; do
  mkdir -p "$work/new/$target" "$out/artifacts/$target" "$out/logs"
  # shellcheck disable=SC2046  # the limits are several words
  "$bin/fuzz_$target" -fork="$workers" -max_total_time="$seconds" $(fuzz_limits "$target") \
    -artifact_prefix="$out/artifacts/$target/" "$work/new/$target" "fuzz/corpus/$target" \
    >"$out/logs/$target.log" 2>&1 &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done

# New inputs that add coverage beyond the committed corpus: merged into a copy of it, then packed
# into OUT/kept.tar.xz (thousands of small files).
for target in "$@"; do
  merged=$work/merge/$target
  rm -rf "$merged" && mkdir -p "$merged" "$out/kept/$target"
  cp "fuzz/corpus/$target"/* "$merged/"
  # shellcheck disable=SC2046
  timeout 120 "$bin/fuzz_$target" -merge=1 $(fuzz_limits "$target") "$merged" "$work/new/$target" \
    >"$out/logs/$target.merge.log" 2>&1 || echo "fuzz: $target: merge did not finish" >&2
  for f in "$merged"/*; do
    [ -e "fuzz/corpus/$target/$(basename "$f")" ] || cp "$f" "$out/kept/$target/"
  done
done

tar -cJf "$out/kept.tar.xz" -C "$out" kept

python3 - "$out" "$seconds" "$workers" "$@" <<'PY'
import json, re, shutil, sys
from pathlib import Path
out, seconds, workers, targets = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
rows = []
for t in targets:
    log = (out / "logs" / f"{t}.log").read_text(errors="replace")
    # The fork-mode parent's progress lines: executions and coverage so far.
    stats = re.findall(r"^#(\d+): cov: (\d+) ", log, re.M)
    execs, cov = map(int, stats[-1]) if stats else (0, 0)
    # What it found is what it left in the artifact folder (the parent stops at a crash).
    artifacts = sorted(p.name for p in (out / "artifacts" / t).iterdir())
    names = {"crash": "crashes", "timeout": "timeouts", "oom": "ooms", "leak": "leaks", "slow-unit": "slow_units"}
    kinds = {key: sum(a.startswith(prefix + "-") for a in artifacts) for prefix, key in names.items()}
    rows.append({"target": t, "seconds": seconds, "workers": workers, "worker_seconds": seconds * workers,
                 "executions": execs, "coverage": cov, **kinds,
                 "artifacts": artifacts, "new_inputs_kept": len(list((out / "kept" / t).iterdir()))})
(out / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
lines = ["| target | seconds x workers | executions | coverage | new inputs kept | crash / timeout / oom / leak "
         "| slow inputs (over 10 s) |", "| --- | --- | ---: | ---: | ---: | --- | ---: |"]
for r in rows:
    lines.append(f"| `{r['target']}` | {r['seconds']} x {r['workers']} | {r['executions']:,} | {r['coverage']:,} "
                 f"| {r['new_inputs_kept']} | {r['crashes']} / {r['timeouts']} / {r['ooms']} / {r['leaks']} "
                 f"| {r['slow_units']} |")
(out / "summary.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
shutil.rmtree(out / "kept")  # packed in kept.tar.xz
if any(r["crashes"] or r["timeouts"] or r["ooms"] or r["leaks"] for r in rows):
    sys.exit(1)
PY
exit $failed
