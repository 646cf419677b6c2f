#!/usr/bin/env bash
# A/B of two beamserve binaries' attention kernels on the GPU machine, in one call (the GPU a call
# lands on moves sustained figures by ~20%, so A and B are only compared within one call):
#   1. bits: `forward --device cuda` on 700 tiny-beam tokens with fp32 and bf16 P, logits compared;
#   2. isolated kernel times: Nsight Compute's gpu__time_duration and tensor-pipe activity of every
#      prefill launch of `bench kernels --batches 1 --reps 3` (fp32 sliding, fp32 full, bf16
#      sliding, bf16 full; clocks left alone, caches flushed before each launch as ncu does);
#   3. sustained times: ROUNDS rounds of `bench kernels --batches 1`, A and B alternating.
#
#   tools/gpu/ab_attention.sh A_BIN B_BIN [ROUNDS]      # from the repository root; ROUNDS = 2
#
# Extra flags for bench kernels: AB_BENCH_ARGS (e.g. "--config dir" with another sliding_window).
# Prints everything; nothing is written outside /tmp.
set -u -o pipefail

source "$(dirname "$0")/ab_setup.sh"
ab_setup "tools/gpu/ab_attention.sh A_BIN B_BIN [ROUNDS]" models/tiny-beam "$@"

toks=$(python3 -c "import random; random.seed(5); print(','.join(str(random.randrange(512)) for _ in range(700)))")
for probs in fp32 bf16; do
  for v in A B; do
    "${bin[$v]}" forward --model models/tiny-beam --device cuda --tokens "$toks" \
      --attention-probs "$probs" --logits-out "$tmp/logits-$v-$probs.npy" >/dev/null 2>&1 ||
      echo "$v: forward with $probs P failed"
  done
  if cmp -s "$tmp/logits-A-$probs.npy" "$tmp/logits-B-$probs.npy"; then
    echo "bits: logits identical ($probs P, 700 tokens)"
  else
    echo "bits: logits DIFFER ($probs P, 700 tokens)"
  fi
done

metrics=gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for v in A B; do
  # shellcheck disable=SC2086
  ncu --clock-control none --metrics "$metrics" -k regex:prefill \
    "${bin[$v]}" bench kernels --device cuda --batches 1 --reps 3 ${AB_BENCH_ARGS:-} \
    >"$tmp/ncu-$v.log" 2>&1 || echo "$v: ncu failed"
  echo "$v isolated (fp32 sliding, fp32 full, bf16 sliding, bf16 full; each launch):"
  echo "  us/ms: $(grep gpu__time_duration "$tmp/ncu-$v.log" | awk '{printf "%s ", $NF}')"
  echo "  tensor %: $(grep sm__pipe_tensor "$tmp/ncu-$v.log" | awk '{printf "%s ", $NF}')"
done

for ((r = 1; r <= rounds; ++r)); do
  for v in A B; do
    # shellcheck disable=SC2086
    "${bin[$v]}" bench kernels --device cuda --batches 1 --reps 20 ${AB_BENCH_ARGS:-} \
      >"$tmp/kernels.log" 2>&1 || { echo "$v: bench kernels failed"; tail -3 "$tmp/kernels.log"; }
    grep "^attention prefill" "$tmp/kernels.log" | sed "s/^/$v$r /"
  done
done
rm -rf "$tmp"
