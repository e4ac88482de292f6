"""Where the engine's threads spend their time during a bench run (a sampling profiler over all
threads, using sys._current_frames), after a start-up delay that skips loading and kernel compiles.
Usage: python3 tests/gpu/sample_profile.py MODEL DEVICES STREAMS [DELAY_S] [MAX_TOKENS]"""
import collections
import sys
import threading
import time

from app.cli import main

counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
stop = False


def sampler():
    names = {}
    time.sleep(float(sys.argv[4]) if len(sys.argv) > 4 else 0.0)
    while not stop:
        for t in threading.enumerate():
            names[t.ident] = t.name
        for ident, frame in sys._current_frames().items():
            name = names.get(ident, "?")
            if name == "sampler":
                continue
            stack = []
            f = frame
            while f is not None and len(stack) < 6:
                stack.append(f"{f.f_code.co_filename.split('/')[-1]}:{f.f_code.co_name}")
                f = f.f_back
            counts[name][" < ".join(stack[:4])] += 1
        time.sleep(0.0005)


th = threading.Thread(target=sampler, name="sampler", daemon=True)
th.start()
main(["bench", "--model", sys.argv[1], "--devices", sys.argv[2], "--streams", sys.argv[3],
      "--max-tokens", sys.argv[5] if len(sys.argv) > 5 else "128"])
stop = True
for name, c in counts.items():
    total = sum(c.values())
    if total < 50:
        continue
    print(f"--- thread {name}: {total} samples")
    for stack, n in c.most_common(16):
        print(f"{100 * n / total:5.1f}%  {stack}")
