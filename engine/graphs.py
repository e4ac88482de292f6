"""CUDA graphs for a stage's forward over one tile, and for the MTP drafter's passes.

A tile always has the same number of rows and every kernel in the stage forward reads its bounds on
the device, so one captured graph per stage replays any tile: copy the tile's hidden states, slots and
positions into the graph's input buffers, replay, and read the output buffer. This takes the Python
and launch overhead of a few hundred kernels out of every decode step. `forward` returns (hidden,
logits or None): the last stage's decode-tile graph runs the head too.
"""
from __future__ import annotations

import torch


def on_device(values, device: torch.device) -> torch.Tensor:
    """values (a list of ints or a host tensor) on device without a host wait. A plain `.to(cuda)` or
    `torch.tensor(..., device=cuda)` from pageable memory is a copy followed by a wait for the stream (so
    the host could not queue a window's successor while the window ran): here the values go through
    pinned memory and an asynchronous copy. A tensor already on the device is returned as it is."""
    if isinstance(values, torch.Tensor) and values.device == device:
        return values
    if isinstance(values, torch.Tensor) and values.device.type != "cpu":      # another device's tensor
        return values.to(device, non_blocking=True)
    t = values if isinstance(values, torch.Tensor) else torch.tensor(values, dtype=torch.long)
    return staged(t, device).to(device, non_blocking=True)


def staged(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Host tensor t ready for an asynchronous copy to device: in pinned memory where device is a GPU."""
    return t.pin_memory() if device.type == "cuda" and t.device.type == "cpu" else t


def first_of_run(index: list[int]) -> int | None:
    """index[0] where index is a run of consecutive row numbers (a slice serves it), else None."""
    if not index:
        return None
    a = index[0]
    return a if index == list(range(a, a + len(index))) else None


def rows_at(t: torch.Tensor, index: list[int]) -> torch.Tensor:
    """t's rows `index`: a view where they are consecutive (no index copy, no kernel), else a gather."""
    a = first_of_run(index)
    return t[a:a + len(index)] if a is not None else t[on_device(index, t.device)]


def fed_over(values: torch.Tensor, device: torch.device, fed: tuple[list[int], torch.Tensor] | None) -> torch.Tensor:
    """values on device with fed (rows, device values) put over those rows; the caller's tensor stays as it is."""
    out = on_device(values, device)
    if fed is not None:
        out = out.clone() if out is values else out
        put_rows(out, *fed)
    return out


def put_rows(t: torch.Tensor, at: list[int], values: torch.Tensor) -> None:
    """t[at] = values (a list of row numbers): a slice copy where they are consecutive, else a scatter."""
    a = first_of_run(at)
    if a is not None:
        t[a:a + len(at)].copy_(values, non_blocking=True)
    elif at:
        t[on_device(at, t.device)] = values


def capture(body, device: torch.device) -> tuple:
    """(a CUDA graph of body(), body()'s outputs in the graph's own buffers): body runs once eagerly first
    (compiles kernels, makes lazy buffers), then under capture on a side stream."""
    with torch.cuda.device(device):
        stream = torch.cuda.Stream(device)          # capture needs a side stream
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            body()
            stream.synchronize()
            graph = torch.cuda.CUDAGraph()
            # thread-local mode: another thread's CUDA calls during a capture do not break it
            graph.capture_begin(capture_error_mode="thread_local")
            try:
                outputs = body()
            finally:
                graph.capture_end()
        torch.cuda.current_stream(device).wait_stream(stream)
    return graph, outputs


class TileGraph:
    """One captured pass over an n-row tile. Inputs: x [n, n_embd] float32, token ids, slots, positions
    and the number of real rows (meta[2, 0]); `forward(x, tok, slot, pos, n_real)` returns the tensors the
    graph leaves in its own buffers (read them before the next replay). embed (a first stage's token ids ->
    x rows): a replay given token ids and no x embeds them inside the graph (meta[4, 0] says which)."""

    def __init__(self, forward, n_rows: int, n_embd: int, scratch_slot: int, device: torch.device,
                 embed=None):
        self.x = torch.zeros((n_rows, n_embd), dtype=torch.float32, device=device)
        # slots, positions, (in [2, 0]) the number of real rows, token ids, (in [4, 0]) x from the token
        # ids: one copy per replay
        self.meta = torch.zeros((5, n_rows), dtype=torch.long, device=device)
        self.meta[0] = scratch_slot
        self.meta[2, 0] = n_rows
        self.slot, self.pos, self.n_real, self.tok = self.meta[0], self.meta[1], self.meta[2, :1], self.meta[3]
        self.embed = embed
        self.outputs = self._capture(forward, device)

    def _capture(self, forward, device: torch.device) -> tuple:
        self.graph, outputs = capture(lambda: forward(self._input(), self.tok, self.slot, self.pos, self.n_real),
                                      device)
        return outputs

    def _input(self) -> torch.Tensor:
        """The pass's x rows: the x buffer, or with embed the token ids' rows where meta[4, 0] says so."""
        if self.embed is None:
            return self.x
        return torch.where(self.meta[4, :1, None] != 0, self.embed(self.tok), self.x)

    def _replay(self) -> tuple:
        self.graph.replay()
        return self.outputs

    def replay(self, x: torch.Tensor | None, slot: torch.Tensor, pos: torch.Tensor, n_real: int,
               tok: torch.Tensor | None = None, fed: tuple[list[int], torch.Tensor] | None = None,
               fed_pos: tuple[list[int], torch.Tensor] | None = None) -> tuple:
        """Copy the inputs in and replay; returns the graph's own output buffers. slot and pos hold all
        the tile's rows (the caller pads them); x and tok may hold fewer rows (the others keep earlier
        values, read only by padding rows) and may be device tensors (no host wait). x None (a graph
        with embed): the rows are tok's embeddings, fed (rows, device token ids) put over tok's rows.
        pos may be a device tensor of the real rows (the padding rows' positions are then 0), and fed_pos
        (rows, device positions) goes over pos's rows (a chained draft window's, engine.draft_chain)."""
        n = slot.shape[0]
        dev_pos = pos.device != slot.device
        if x is not None:
            self.x[:x.shape[0]].copy_(x, non_blocking=True)
        count = torch.zeros((2, n), dtype=torch.long)
        count[0, 0] = n_real
        count[1, 0] = x is None
        host_tok = tok is not None and tok.device == slot.device
        zeros = count[1].new_zeros(n)
        rows = [slot, zeros if dev_pos else pos, count[0], tok if host_tok else zeros, count[1]]
        self.meta[:, :n].copy_(staged(torch.stack(rows), self.meta.device), non_blocking=True)
        if dev_pos:
            self.pos[:pos.shape[0]].copy_(pos, non_blocking=True)
        if tok is not None and not host_tok:
            self.tok[:tok.shape[0]].copy_(tok, non_blocking=True)
        if fed is not None:
            put_rows(self.tok, *fed)
        if fed_pos is not None:
            put_rows(self.pos, *fed_pos)
        return self._replay()

    def run(self, x: torch.Tensor | None, slot: torch.Tensor, pos: torch.Tensor, n_real: int,
            tok: torch.Tensor | None = None, fed=None, fed_pos=None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """A stage tile: (hidden out, the real rows' logits where the graph runs the head, else None),
        both copies: the next replay reuses the graph's buffers."""
        out, logits = self.replay(x, slot, pos, n_real, tok, fed, fed_pos)
        return out.clone(), (logits[:n_real].clone() if logits is not None else None)
