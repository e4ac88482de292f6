"""A TileGraph that runs its pass again at every replay instead of capturing it (CPU tests of what the
graph path feeds in and reads out)."""
from __future__ import annotations

from engine.graphs import TileGraph


class EagerGraph(TileGraph):
    def _capture(self, forward, device):
        self._forward = forward
        return forward(self._input(), self.tok, self.slot, self.pos, self.n_real)

    def _replay(self):
        return self._forward(self._input(), self.tok, self.slot, self.pos, self.n_real)
