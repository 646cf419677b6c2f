# Shared set-up of the tools/gpu/ab_*.sh A/B scripts, sourced by them (not run on its own).
#
#   ab_setup USAGE NEEDED_DIR "$@"
#
# Checks that the script's arguments are two executables (A_BIN B_BIN [ROUNDS]) and that NEEDED_DIR
# exists (the scripts run from the repository root), else prints USAGE and exits 2; sets bin[A],
# bin[B], rounds (default 2) and tmp (a fresh folder under /tmp), puts A's bundle libraries first
# on LD_LIBRARY_PATH and prints the GPU's name, clock and power limit.
ab_setup() {
  local usage="$1" needed="$2"
  shift 2
  if [[ $# -lt 2 || ! -x "$1" || ! -x "$2" || ! -d "$needed" ]]; then
    echo "usage: $usage, from the repository root" >&2
    exit 2
  fi
  declare -gA bin=([A]="$1" [B]="$2")
  rounds="${3:-2}"
  local lib
  lib="$(dirname "$1")/../lib"
  if [[ -d "$lib" ]]; then
    lib="$(cd "$lib" && pwd)"
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  tmp="$(mktemp -d)"
  nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader 2>/dev/null
}
