"""Each committed window as one line of JSON, for finding where a request's wall time goes (issue 17: a
lone request with the draft guard on measured slower than the window times add up to). STRATA_WINDOW_LOG
names the file; unset, nothing is written. tests/gpu/window_log.py sums a log by kind of window."""
from __future__ import annotations

import json
import os
import time



class WindowLog:
    def __init__(self, path: str | None = None):
        path = os.environ.get("STRATA_WINDOW_LOG", "") if path is None else path
        self.f = open(path, "a", buffering=1) if path else None

    def __bool__(self) -> bool:
        return self.f is not None

    def write(self, **fields) -> None:
        fields["t"] = round(time.monotonic() * 1e6)
        self.f.write(json.dumps(fields) + "\n")
