#!/usr/bin/env bash
# The CUDA backend is a plugin (libfluxtrain_cuda.so next to the binary, cli/device_plugins.h), loaded
# the first time a command asks for a CUDA device: a command that never asks (--help, plan, a
# training run on the CPU) maps no CUDA library (the loader's own trace, LD_DEBUG=libs, is what is read); train.device =
# "cuda" loads it, and every way it cannot be loaded is one error line naming why, with a hint;
# train.device = "auto" without a GPU trains on the CPU and says so in one info line.
source "$(dirname "$0")/lib.sh"
cfg=$ROOT/configs/tiny.toml
cuda_libs='libfluxtrain_cuda\.so|libcublas|libcudnn|libnvrtc|libcudart|libcuda\.so'
have_gpu=0
command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1 && have_gpu=1

# The shared objects a command loaded (the dynamic loader's trace on stderr: each object it maps or
# initialises; "trying file=" lines are only places it looked).
loaded() {
  LD_DEBUG=libs "$@" 2>&1 >/dev/null | grep -v 'trying file=' | grep -oE '(calling init: |file=)[^ ]+' |
    sed -E 's/^(calling init: |file=)//' | xargs -r -n1 basename | sort -u || true
}
train_cuda=(train --config "$cfg" --set train.steps=2 --set 'train.device="cuda"')

for cmd in "--help" "plan --help" "train --help" "train --config $cfg --set train.steps=1 --run-dir $WORK/cpu"; do
  # shellcheck disable=SC2086
  libs=$(loaded "$FT" $cmd)
  [ -n "$libs" ] || fail "LD_DEBUG=libs showed nothing for fluxtrain $cmd: the check would pass blindly"
  if grep -Eq "$cuda_libs" <<<"$libs"; then fail "fluxtrain $cmd mapped a CUDA library: $(grep -E "$cuda_libs" <<<"$libs")"; fi
  echo "ok: fluxtrain ${cmd%% --config*} maps no CUDA library ($(wc -l <<<"$libs") shared objects)"
done
[ -s "$WORK/cpu/metrics.jsonl" ] || fail "the CPU training run (train.device = \"cpu\") did not train"

if [ -z "${FT_EXPECT_CUDA_BUILD:-}" ]; then
  expect_error 'device cuda: this fluxtrain was built without CUDA' "$FT" "${train_cuda[@]}" --run-dir "$WORK/r0"
  exit 0
fi

# train.device = "cuda" loads the plugin and, through it, the CUDA libraries (the check above can fail).
libs=$(loaded "$FT" "${train_cuda[@]}" --run-dir "$WORK/r1")
grep -q 'libfluxtrain_cuda\.so' <<<"$libs" || fail "train.device = cuda did not load the plugin: $libs"
grep -q 'libcublasLt' <<<"$libs" || fail "the plugin did not bring cuBLASLt: $libs"
echo "ok: train.device = cuda loads $(grep -Ec "$cuda_libs" <<<"$libs") CUDA objects (the plugin and its libraries)"
if [ $have_gpu = 0 ]; then
  out=$("$FT" "${train_cuda[@]}" --run-dir "$WORK/r2" 2>&1 >/dev/null) && fail "train.device = cuda trained without a GPU"
  grep -q '^error: device cuda: cudaGetDeviceCount: .*(cudaError[A-Za-z]*)$' <<<"$out" ||
    fail "not the driver's reason through the plugin: $out"
  echo "ok: through the plugin: $(grep '^error: ' <<<"$out")"
fi

# One error line and a hint for each way the plugin cannot be loaded.
one_error() {  # one_error WANT cmd...: fails with exactly one error line containing WANT, and a hint
  local want=$1; shift
  local out
  out=$("$@" 2>&1 >/dev/null) && fail "expected failure of: $*"
  [ "$(grep -c '^error: ' <<<"$out")" = 1 ] || fail "not one error line: $out"
  grep -qF -- "$want" <<<"$(grep '^error: ' <<<"$out")" || fail "expected '$want' in: $out"
  grep -q '^hint: ' <<<"$out" || fail "no hint: $out"
  echo "ok: $(grep '^error: ' <<<"$out")"
}
one_error "device cuda: FT_CUDA_PLUGIN=$WORK/none.so: no such file" \
  env FT_CUDA_PLUGIN="$WORK/none.so" "$FT" "${train_cuda[@]}" --run-dir "$WORK/r3"
mkdir "$WORK/bin" && cp "$FT" "$WORK/bin/fluxtrain"
one_error "device cuda: libfluxtrain_cuda.so not found next to the binary ($WORK/bin)" \
  "$WORK/bin/fluxtrain" "${train_cuda[@]}" --run-dir "$WORK/r4"
echo 'not a shared object' > "$WORK/text.so"
one_error "device cuda: loading $WORK/text.so: " env FT_CUDA_PLUGIN="$WORK/text.so" "$FT" "${train_cuda[@]}" \
  --run-dir "$WORK/r5"
# A plugin whose library is missing where it runs (as a machine without cuDNN): linked against a
# library that is then removed.
if command -v cc > /dev/null 2>&1; then
  echo 'int ft_gone(void) { return 1; }' > "$WORK/gone.c"
  echo 'int ft_gone(void); int use(void) { return ft_gone(); }' > "$WORK/plugin.c"
  cc -shared -fPIC -o "$WORK/libft_gone.so" "$WORK/gone.c"
  cc -shared -fPIC -o "$WORK/plugin.so" "$WORK/plugin.c" -L"$WORK" -lft_gone
  rm "$WORK/libft_gone.so"
  one_error "device cuda: loading $WORK/plugin.so: libft_gone.so: cannot open shared object file" \
    env FT_CUDA_PLUGIN="$WORK/plugin.so" "$FT" "${train_cuda[@]}" --run-dir "$WORK/r6"
fi
# A plugin of another build (the same file with another build id, tensor/backend.h) is refused.
plugin=$(dirname "$FT")/libfluxtrain_cuda.so
id=$(grep -oE '"[^"]+"' "$(dirname "$FT")/generated/build_id.h" | tr -d '"')
/usr/bin/python3 - "$plugin" "$WORK/other.so" "$id" <<'PY'
import sys
src, dst, build_id = sys.argv[1], sys.argv[2], sys.argv[3].encode()
data = open(src, "rb").read()
assert build_id in data, "the plugin does not carry the build id"
open(dst, "wb").write(data.replace(build_id, build_id[:-4] + (b"ffff" if build_id[-4:] != b"ffff" else b"0000")))
PY
one_error "device cuda: $WORK/other.so: it was built by another build of fluxtrain (build id" \
  env FT_CUDA_PLUGIN="$WORK/other.so" "$FT" "${train_cuda[@]}" --run-dir "$WORK/r7"
for r in r3 r4 r5 r6 r7; do [ ! -e "$WORK/$r/metrics.jsonl" ] || fail "$r: a run that never started wrote metrics"; done

# train.device = "auto": tries the plugin; without a GPU trains on the CPU, saying so once.
if [ $have_gpu = 0 ]; then
  "$FT" train --config "$cfg" --run-dir "$WORK/auto" --set train.steps=2 --set 'train.device="auto"' > "$WORK/auto.log" 2>&1 ||
    { cat "$WORK/auto.log"; fail "train.device = auto did not train"; }
  [ "$(grep -c 'train.device = "auto": no usable GPU (cudaGetDeviceCount: .*); training on the CPU' "$WORK/auto.log")" = 1 ] ||
    fail "no single info line saying auto trains on the CPU: $(head -n 20 "$WORK/auto.log")"
  if grep -Eiq '^(warning|error)|warn:|cuda error' "$WORK/auto.log"; then fail "auto was not quiet: $(cat "$WORK/auto.log")"; fi
  echo "ok: $(grep -o 'train.device = "auto".*' "$WORK/auto.log")"
fi
