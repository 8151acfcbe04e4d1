# The per-input limits every fuzzing script passes to libFuzzer, sourced by scripts/fuzz.sh and
# fuzz/run_forked.sh.
#   -timeout: an input running this long is a hang. The codec target's slowest legitimate input
#     builds comm_vq at its heaviest (16 codebooks of 256 codewords, 100 EM rounds, fitted to 2048
#     synthetic tokens of head_dim 128): 168 s alone under the sanitizers, 15 s in a release build
#     (docs/reliability.md). The other targets' slowest take seconds.
#   -rss_limit_mb: 2 GB is far beyond what any input needs.
fuzz_limits() {
  local timeout=60
  [ "$1" = codec ] && timeout=600
  echo "-timeout=$timeout -rss_limit_mb=2048"
}
