#!/usr/bin/env bash
# What the core and the full dev install weigh, and how fast onchip starts; writes results.md beside
# this script (date, machine, load) so the figures are never copied by hand.
# Usage: bash sweeps/lean_core/measure.sh [WORKDIR]   (from the repository root; makes two venvs
# in WORKDIR, default a temp folder, each installed with --no-cache-dir so both download alike, the
# README's way: the extra index offers torch's CPU build)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="${1:-$(mktemp -d)}"
rows=()
for kind in core dev; do
  venv="$work/venv-$kind"
  python -m venv "$venv"
  target="$repo"; [ "$kind" = dev ] && target="$repo[dev]"
  load=$(cut -d' ' -f1 /proc/loadavg)
  start=$(date +%s.%N)
  "$venv/bin/python" -m pip install --no-cache-dir -q -e "$target" \
    --extra-index-url https://download.pytorch.org/whl/cpu --retries 1 > "$work/$kind.log" 2>&1
  end=$(date +%s.%N)
  site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  size=$(du -sm "$site" | cut -f1)
  dists=$("$venv/bin/python" -m pip list 2>/dev/null | tail -n +3 | wc -l)
  # start-up: the first call after the install (cold: empty numba cache, files not yet read), then the
  # best of 7 (warm file cache)
  times=$("$venv/bin/python" - "$venv" <<'PY'
import subprocess, sys, time
venv = sys.argv[1]
def once(cmd):
    t = time.perf_counter(); subprocess.run(cmd, check=True, capture_output=True); return time.perf_counter() - t
help_cmd = [f"{venv}/bin/onchip", "--help"]
cold = once(help_cmd)
warm = min(once(help_cmd) for _ in range(7))
imp = min(once([f"{venv}/bin/python", "-c", "import onchip"]) for _ in range(7))
print(f"{imp:.2f} s | {cold:.2f} s | {warm:.2f} s")
PY
)
  label="core, \`pip install -e .\`"; [ "$kind" = dev ] && label="everything, \`pip install -e \".[dev]\"\`"
  rows+=("| $label | $(printf '%.0f' "$(echo "$end - $start" | bc)") s | $size MB | $dists | $times | $load |")
  echo "${rows[-1]}"
done
{
  echo "# What onchip weighs: measured"
  echo
  echo "Written by \`bash sweeps/lean_core/measure.sh\` on $(date -u +%Y-%m-%d), $(nproc) cores,"
  echo "$(awk '/MemTotal/ {printf "%.0f", $2/1048576}' /proc/meminfo) GiB, Python $(python -c 'import platform; print(platform.python_version())')."
  echo "Install times include the downloads and move with the network and the machine's load (the"
  echo "1-minute load average at the start of each install is given); sizes and counts are exact."
  echo "\`onchip --help\` cold: the first call after the install; warm: the best of 7 after it."
  echo
  echo "| install | time | site-packages | distributions | \`import onchip\` | \`onchip --help\` cold | \`onchip --help\` warm | load |"
  echo "|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} > "$here/results.md"
echo "wrote $here/results.md"
