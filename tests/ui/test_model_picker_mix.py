"""The model picker's "Tensor types" row: the mix of types by weight share and the bits per weight,
read from the file header (engine.model_info, no torch), and a type the engine cannot decode named."""
from __future__ import annotations

from engine.messages import ModelInfo

BASE = dict(path="/m/x.gguf", name="x", arch="llama", n_layers=2, n_embd=256, n_heads=4, n_kv_heads=2,
            vocab_size=49152, context_length=4096, quant_types={"IQ3_S": 31, "F32": 13, "Q4_K": 12, "Q6_K": 1})


def test_picker_shows_the_mix_and_bits_per_weight(qtbot):
    from ui.model_picker import ModelPicker

    p = ModelPicker()
    qtbot.addWidget(p)
    mix = {"IQ3_S": 6_684_672, "Q6_K": 12_582_912, "Q4_K": 983_040, "F32": 3_328}
    p.set_info("default", ModelInfo(**BASE, quant_weights=mix, bits_per_weight=4.8512))
    assert p.values["quant"].text() == "Q6_K 62% · IQ3_S 33% · Q4_K 4.9% · F32 0.016%, 4.85 bits/weight"
    p.set_info("default", ModelInfo(**BASE, quant_weights={"MXFP4": 65_536, "Q8_0": 100}, bits_per_weight=4.26,
                                    unsupported="tensor 'blk.0.attn_q.weight' is MXFP4, a type this engine "
                                                "cannot decode"))
    lines = p.values["quant"].text().splitlines()
    assert lines[0] == "MXFP4 100% · Q8_0 0.15%, 4.26 bits/weight"
    assert lines[1] == "⚠ cannot load: tensor 'blk.0.attn_q.weight' is MXFP4, a type this engine cannot decode"
    p.set_info("default", ModelInfo(**BASE))            # an engine without the mix: the tensor counts
    assert p.values["quant"].text() == "IQ3_S ×31, F32 ×13, Q4_K ×12, Q6_K ×1"


def test_probe_reads_the_mix_from_a_mixed_file(qtbot, tmp_path):
    from engine.model_info import probe_model
    from engine.synthetic import make_model
    from tests.engine.test_quant_iq import ALL_IQ_MAP, SMALL2
    from ui.model_picker import ModelPicker

    path = make_model("llama", SMALL2, tmp_path / "m.gguf", qtype="IQ3_S", qtype_map=ALL_IQ_MAP)
    p = ModelPicker(probe=probe_model)
    qtbot.addWidget(p)
    p.choose_file(str(path))
    qtbot.waitUntil(lambda: "bits/weight" in p.values["quant"].text(), timeout=10_000)
    text = p.values["quant"].text()
    assert text.startswith("IQ3_S 50% · Q6_K 48% · ") and "IQ1_M" in text and "IQ4_NL" in text, text
    assert "cannot load" not in text


def test_picker_names_the_mtp_layer_shipped_for_the_bundled_model(qtbot):
    """The bundled default has no MTP layer in its file; drafts load the one trained for it and shipped
    with the app (engine/mtp), so the picker says that rather than "none"; a model whose own file has
    one says so, and one with neither says drafts are unavailable."""
    from engine.model_info import probe_model
    from ui.model_picker import ModelPicker

    p = ModelPicker(probe=probe_model)
    qtbot.addWidget(p)
    assert p.model() == "default"
    qtbot.waitUntil(lambda: "bits/weight" in p.values["quant"].text(), timeout=20_000)
    assert p.values["mtp"].text() == "1 trained for this file, in SmolLM2-135M-Instruct.Q4_1.mtp.gguf"
    p.set_info("default", ModelInfo(**BASE, mtp_layers=1))
    assert p.values["mtp"].text() == "1 in the file"
    p.set_info("default", ModelInfo(**BASE))
    assert p.values["mtp"].text() == "none (MTP drafts unavailable; lookup drafts still work)"
