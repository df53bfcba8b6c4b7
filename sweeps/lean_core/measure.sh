#!/usr/bin/env bash
# What the core and the full dev install weigh, and how fast onchip starts.
# Usage: bash sweeps/lean_core/measure.sh [WORKDIR]   (from the repository root; makes two venvs
# in WORKDIR, default a temp folder, each installed with --no-cache-dir so both download alike)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
work="${1:-$(mktemp -d)}"
for kind in core dev; do
  venv="$work/venv-$kind"
  python -m venv "$venv"
  target="$repo"; [ "$kind" = dev ] && target="$repo[dev]"
  start=$(date +%s.%N)
  "$venv/bin/python" -m pip install --no-cache-dir -q -e "$target" > "$work/$kind.log" 2>&1
  end=$(date +%s.%N)
  site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  printf '%s install: %.0f s, %s MB in site-packages, %s distributions\n' "$kind" "$(echo "$end - $start" | bc)" \
    "$(du -sm "$site" | cut -f1)" "$("$venv/bin/python" -m pip list 2>/dev/null | tail -n +3 | wc -l)"
  # start-up, best of 7 (warm file cache): `import onchip` and `onchip --help`
  "$venv/bin/python" - "$venv" "$kind" <<'PY'
import subprocess, sys, time
venv, kind = sys.argv[1], sys.argv[2]
def best(cmd):
    times = []
    for _ in range(7):
        t = time.perf_counter(); subprocess.run(cmd, check=True, capture_output=True); times.append(time.perf_counter() - t)
    return min(times)
print(f"{kind} import onchip: {best([f'{venv}/bin/python', '-c', 'import onchip']):.2f} s, "
      f"onchip --help: {best([f'{venv}/bin/onchip', '--help']):.2f} s")
PY
done
