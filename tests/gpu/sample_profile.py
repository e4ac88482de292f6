"""Where the engine's threads spend their time during a bench run (a sampling profiler over all
threads, using sys._current_frames). Usage: python3 tests/gpu/sample_profile.py MODEL DEVICES STREAMS"""
import collections
import sys
import threading
import time

from app.cli import main

counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
stop = False


def sampler():
    names = {}
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
            counts[name][" < ".join(stack[:3])] += 1
        time.sleep(0.0005)


th = threading.Thread(target=sampler, name="sampler", daemon=True)
th.start()
main(["bench", "--model", sys.argv[1], "--devices", sys.argv[2], "--streams", sys.argv[3], "--max-tokens", "128"])
stop = True
for name, c in counts.items():
    total = sum(c.values())
    if total < 50:
        continue
    print(f"--- thread {name}: {total} samples")
    for stack, n in c.most_common(12):
        print(f"{100 * n / total:5.1f}%  {stack}")
