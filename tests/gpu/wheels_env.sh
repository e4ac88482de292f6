# Sourced by the GPU scripts that need only the carried wheels (not env.sh's tiny models): installs .wheels/
# (else .whl/) into /tmp/site, sets PYTHONPATH and OUT (./gpu-out unless set), and sends the script's output
# to $OUT/log.txt as well.
W=.wheels; [ -d $W ] || W=.whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $W/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
