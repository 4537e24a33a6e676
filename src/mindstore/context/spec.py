"""What ``with_context(...)`` registers, and the one definition of its arguments.

``with_context`` exists on :class:`~mindstore.Session` and on
:class:`~mindstore.SessionManager`, and ``Session.add_context`` takes the same arguments. Their
parameters are written once, as the signature of :func:`block_spec`; the methods are declared
with :func:`block_arguments`, which gives them exactly that signature (for callers, type
checkers and ``help()``) and hands them the checked :class:`BlockSpec`. A new option is added
in one place and reaches every one of them.

Checking is eager and does no I/O: a bad label, scope, budget or provider raises at the
builder call, never later at the first ``await``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar, cast

from mindstore.context.providers import as_provider, provider_kind
from mindstore.store._checks import check_name

__all__ = ["BlockSpec", "Scope", "block_arguments", "block_spec"]

Scope = Literal["session", "namespace"]

P = ParamSpec("P")
S = TypeVar("S")
R = TypeVar("R")
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True, slots=True)
class BlockSpec:
    """One configured context block; ``provider=None`` means the store-backed writable block."""

    label: str
    description: str | None = None
    max_tokens: int | None = None
    provider: Any = None
    scope: Scope = "session"


def block_spec(
    label: str,
    description: str | None = None,
    max_tokens: int | None = None,
    provider: Any = None,
    scope: Scope = "session",
) -> BlockSpec:
    """The checked :class:`BlockSpec` for ``with_context``'s arguments.

    Args:
        label: the block's name (≤ 256 characters); the header of its prompt section.
        description: shown next to the label in the system prompt and the tool descriptions.
        max_tokens: the block's budget (a positive integer), checked on the result of a write.
        provider: a provider object or a mapping of its methods (``{"get": fn}``); ``None``
            is the store-backed writable block.
        scope: ``"session"`` or ``"namespace"`` (the block is shared by every session of the
            namespace).

    Raises:
        InvalidKeyError: a bad label.
        ValueError: a bad scope or ``max_tokens``.
        TypeError: ``provider`` is not a provider (no ``get()``).
    """
    check_name(label, "label")
    if scope not in ("session", "namespace"):
        raise ValueError(f"scope must be 'session' or 'namespace', got {scope!r}")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens <= 0):
        raise ValueError("max_tokens must be a positive integer")
    provider = as_provider(provider)
    provider_kind(provider)  # a provider without get() is a configuration error: say so now
    return BlockSpec(
        label=label,
        description=description,
        max_tokens=max_tokens,
        provider=provider,
        scope=scope,
    )


def _arguments_of(
    build: Callable[P, T],
) -> Callable[[Callable[[S, T], R]], Callable[Concatenate[S, P], R]]:
    """A decorator turning ``method(self, built)`` into ``method(self, *build's arguments)``:
    the wrapper calls ``build`` with the arguments and ``method`` with its result. Coroutine
    methods stay coroutine functions (``mindstore.sync`` relies on telling them apart)."""
    params = list(inspect.signature(build).parameters.values())

    def decorate(method: Callable[[S, T], R]) -> Callable[Concatenate[S, P], R]:
        def call(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            return method(self, build(*args, **kwargs))

        async def call_async(self: S, /, *args: P.args, **kwargs: P.kwargs) -> Any:
            return await cast(Any, method(self, build(*args, **kwargs)))

        wrapper: Any = call_async if inspect.iscoroutinefunction(method) else call
        functools.update_wrapper(wrapper, method)
        own = inspect.signature(method)
        first = next(iter(own.parameters.values()))
        wrapper.__signature__ = own.replace(parameters=[first, *params])
        return cast(Callable[Concatenate[S, P], R], wrapper)

    return decorate


block_arguments = _arguments_of(block_spec)
"""Declare a method that takes ``with_context``'s arguments: ``@block_arguments def
with_context(self, spec: BlockSpec)`` is called as ``with_context(label, description=None,
max_tokens=None, provider=None, scope="session")`` and receives the checked spec."""
