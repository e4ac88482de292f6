"""mtp-train runs a step's sequences together, padded to the longest: each sequence's logits, loss and
hits must be what it gives alone, and held-out figures the same as sequence by sequence."""
from __future__ import annotations

import torch

from engine import mtp_trainer
from engine.loader import load_model
from engine.messages import EngineConfig
from engine.mtp_train import Rows


def _rows(n: int, d: int, v: int, gen: torch.Generator) -> Rows:
    p = torch.rand(n, 4, generator=gen)
    return Rows(torch.randn(n, d, generator=gen), torch.randint(0, v, (n,), generator=gen),
                torch.randint(0, v, (n, 4), generator=gen), p / p.sum(-1, keepdim=True))


def test_a_padded_batch_gives_each_sequence_what_it_gives_alone(tmp_path):
    from engine.synthetic import make_model

    model = load_model(EngineConfig(model=str(make_model("llama", "tiny", tmp_path / "m.gguf")), dtype="float32",
                                    ctx=256))
    try:
        layer = mtp_trainer.new_layer(model)
        with torch.no_grad():
            for w in layer.w.values():          # away from the pass-through start, so rows mix
                w.add_(0.05 * torch.randn(w.shape, generator=torch.Generator().manual_seed(w.numel())))
        gen = torch.Generator().manual_seed(0)
        cfg = model.cfg
        seqs = [_rows(n, cfg.n_embd, cfg.vocab_size, gen) for n in (9, 3, 14)]
        with torch.no_grad():
            hidden, next_ids, *_ = layer.padded(seqs)
            lg1, lg2 = layer(hidden, next_ids, chain=True)
            for b, r in enumerate(seqs):
                a1, a2 = layer(r.hidden, r.next_ids, chain=True)
                n = len(r.next_ids)
                assert torch.allclose(lg1[b, :n], a1, atol=1e-5) and torch.allclose(lg2[b, :n - 1], a2, atol=1e-5)
            alone = [layer.loss(r, chain=True) for r in seqs]
            ce, hit = layer.loss(seqs, chain=True)
            assert abs(ce.item() - sum(c.item() for c, _ in alone) / 3) < 1e-4
            assert abs(hit - sum(h for _, h in alone) / 3) < 1e-6
            rows = sum(len(r.next_ids) for r in seqs)
            want_loss = sum(layer.loss(r)[0].item() * len(r.next_ids) for r in seqs) / rows
            for batch in (1, 2, 3):
                loss, acc, acc2 = mtp_trainer.held_out(layer, seqs, batch)
                assert abs(loss - want_loss) < 1e-4
                assert abs(acc - sum(layer.loss(r)[1] * len(r.next_ids) for r in seqs) / rows) < 1e-6
    finally:
        model.pipeline.close()
