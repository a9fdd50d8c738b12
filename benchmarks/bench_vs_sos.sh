#!/bin/sh
# Side by side on this machine, same run: fabricase's capture against sos report limited to the fabric plugins.
# Needs Debian's sosreport (apt-get install sosreport). Run as root. Usage: sh benchmarks/bench_vs_sos.sh [RUNS]
set -eu
runs=${1:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v sos >/dev/null || { echo "sos is not installed (apt-get install sosreport)" >&2; exit 1; }
FAB=${FAB:-fabricase}
script="$tmp/capture.sh"
python3 - "$script" <<'PY'
import sys
from fabricase.collectors import select_collectors
from fabricase.collectors.plan import CapturePlan, compile_script
open(sys.argv[1], "w").write(compile_script(CapturePlan(tuple(select_collectors()), interval_s=0)))
PY
measure() { # label, command...
  label=$1; shift
  /usr/bin/time -f "%U %S %e %M" -o "$tmp/t" "$@" >/dev/null 2>&1 || true
  read -r u s e m < "$tmp/t"
  printf '%-34s cpu %6.2f s  wall %6.2f s  maxrss %6d KiB\n' "$label" "$(echo "$u + $s" | bc)" "$e" "$m"
}
i=0
while [ "$i" -lt "$runs" ]; do
  i=$((i + 1))
  measure "capture script alone (sh)" sh "$script"
  measure "fabricase collect (whole CLI)" env FABRICASE_HOME="$tmp/home" "$FAB" collect --hosts localhost \
    --interval 0 -o "$tmp/cap$i"
  measure "sos report (6 plugins)" sos report --batch --quiet -o networking,kernel,pci,nvidia,infiniband,hardware \
    --tmp-dir "$tmp"
done
