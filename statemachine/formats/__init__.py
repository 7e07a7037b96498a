"""Tool-call text formats: one module per format, and the registry a host can extend.

Built in: ``tool_call`` (format A, :mod:`.tool_call`), ``use_tool`` (format B,
:mod:`.use_tool`), ``function`` (format C, :mod:`.function`) and
``custom_tool_call`` (custom tools' raw input, :mod:`.custom`) and
``tag_aliases`` (format A in ``<function_call>``, ``<tool>``, ``<json>``…,
:mod:`.tag_aliases`); the model families' own formats: ``deepseek``
(:mod:`.deepseek`), ``mistral`` (:mod:`.mistral`), ``kimi_k2`` (:mod:`.kimi`), ``llama3`` (:mod:`.llama3`), ``glm`` (:mod:`.glm`), ``seed_oss``
(:mod:`.seed_oss`), ``minimax`` (:mod:`.minimax`), ``harmony`` (gpt-oss, :mod:`.harmony`), ``pythonic``
and ``olmo3`` (:mod:`.pythonic`), ``gemma`` and ``functiongemma`` (:mod:`.gemma`), ``functionary`` and
``functionary_v3_2`` (:mod:`.functionary`), ``gemma4`` (:mod:`.gemma4`), ``deepseek_v32`` and
``deepseek_v4`` (DSML, :mod:`.dsml`). A host adds a
format by subclassing :class:`TextFormat` and calling :func:`register_format`;
a ``ParserConfig`` then names it in ``formats``. A format whose blocks hold
JSON call objects can reuse the core's reader, :class:`JsonCallsReader`.
"""

from __future__ import annotations

import re
from typing import Callable

from .._jsonblock import JsonCallsBody as JsonCallsReader
from .._reader import BodyReader, CallSink, Outcome, Pending
from ._base import Refutation, TextFormat
from .custom import CustomToolFormat
from .deepseek import DeepSeekFormat
from .dsml import DsmlFormat, DsmlV4Format
from .function import FunctionFormat
from .functionary import FunctionaryFormat, FunctionaryV32Format
from .gemma import FunctionGemmaFormat, Gemma3Format
from .gemma4 import Gemma4Format
from .glm import GlmFormat
from .harmony import HarmonyFormat
from .kimi import KimiFormat
from .llama3 import Llama3Format
from .minimax import MiniMaxFormat
from .mistral import MistralFormat
from .pythonic import Olmo3Format, PythonicFormat
from .seed_oss import SeedOssFormat
from .tag_aliases import TagAliasFormat
from .tool_call import ToolCallFormat
from .use_tool import UseToolFormat

__all__ = ["BodyReader", "CallSink", "JsonCallsReader", "Outcome", "Pending", "Refutation", "TextFormat",
           "format_for_model", "get_format", "register_format", "registered_formats"]

_REGISTRY: dict[str, TextFormat] = {}


def register_format(fmt: TextFormat, *, replace: bool = False) -> None:
    """Add a text format to the registry so a ``ParserConfig`` can name it.

    Args:
        fmt: the format object; ``fmt.name`` is its key.
        replace: allow replacing a format of the same name.
    Raises:
        ValueError: the name is empty or taken (and ``replace`` is false), or
            the format has no opener.
    """
    if not fmt.name:
        raise ValueError("a text format needs a non-empty name")
    if not fmt.openers or not all(fmt.openers):
        raise ValueError(f"text format {fmt.name!r} needs non-empty openers")
    if fmt.name in _REGISTRY and not replace:
        raise ValueError(f"text format {fmt.name!r} is already registered")
    _REGISTRY[fmt.name] = fmt
    for hook in _ON_REGISTER:
        hook()


def on_register(hook: Callable[[], None]) -> None:
    """Call ``hook`` whenever a format is registered (the core's caches of formats by name clear themselves)."""
    _ON_REGISTER.append(hook)


_ON_REGISTER: list[Callable[[], None]] = []


def get_format(name: str) -> TextFormat:
    """The registered format called ``name``.

    Raises:
        KeyError: no format has that name.
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no text format named {name!r}; registered: {sorted(_REGISTRY)}") from None


def registered_formats() -> tuple[str, ...]:
    """Names of every registered format, in registration order."""
    return tuple(_REGISTRY)


def format_for_model(model: str) -> str | None:
    """The registered format that is the family's own for ``model`` (an upstream model name), if any.

    A format claims names through :attr:`TextFormat.model_names`. Names are compared in lower case on their
    letters and digits only, so ``gemma-3`` is found in ``google/gemma-3-27b-it``, ``gemma3:270m`` and
    ``gemma3-270m`` alike; of several fragments found, the longest wins (``deepseek-v3.2`` over ``deepseek``),
    then the format registered first.
    """
    name = _letters_and_digits(model)
    found = ((len(key), fmt.name) for fmt in _REGISTRY.values()
             for key in map(_letters_and_digits, fmt.model_names) if key and key in name)
    best = max(found, key=lambda hit: hit[0], default=None)
    return None if best is None else best[1]


def _letters_and_digits(name: str) -> str:
    return _NOT_ALNUM.sub("", name.lower())


_NOT_ALNUM = re.compile(r"[^a-z0-9]+")

for _fmt in (ToolCallFormat(), UseToolFormat(), FunctionFormat(), CustomToolFormat(), TagAliasFormat(),
             DeepSeekFormat(), MistralFormat(), KimiFormat(), Llama3Format(),
             GlmFormat(), SeedOssFormat(), MiniMaxFormat(), HarmonyFormat(), PythonicFormat(), Olmo3Format(),
             Gemma3Format(), FunctionGemmaFormat(), FunctionaryFormat(), FunctionaryV32Format(),
             Gemma4Format(), DsmlFormat(), DsmlV4Format()):
    register_format(_fmt)
