# Sourced by the GPU scripts (run there from the repo root; tests/gpu/prepare.sh fills .whl/ here first):
# carried wheels, environment, the tiny
# synthetic models from .whl/ and the tokenizer source for make-model (the default model can't travel).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"
S="python3 -m app.cli"; M=/tmp/models; mkdir -p $M
cp .whl/*.gguf $M/ && export STRATA_TOKENIZER_FROM=$M/llama.gguf
