"""The retry rule every network model adapter shares, and the checks of a spec's options.

A transient failure (a rate limit, a 5xx, a dropped connection) is retried with
exponential backoff and jitter, or after the server's own ``Retry-After`` hint; a
permanent one (a bad key, a rejected request) is raised at once. One loop for
``openai:`` and ``llm:`` keeps their behaviour identical: the same codes, the same
attempt count in the final message, and a cancelled turn never retried.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from host_spec.errors import ModelError

__all__ = ["Classifier", "with_retries", "spec_error", "spec_number"]

T = TypeVar("T")

#: ``exception -> (retryable, server's delay hint in seconds or None, the typed error)``.
Classifier = Callable[[BaseException], tuple[bool, float | None, ModelError]]


async def with_retries(attempt_once: Callable[[], Awaitable[T]], classify: Classifier, *, retries: int,
                       backoff: float) -> T:
    """Run ``attempt_once`` until it succeeds, a failure is permanent, or ``retries`` are used up.

    Raises:
        ModelError: the classified error of the last attempt; after a retry its
            message says how many attempts were made.
    """
    attempt = 0
    while True:
        try:
            return await attempt_once()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            retryable, hint, error = classify(exc)
            if not retryable or attempt >= retries:
                if attempt:
                    error.message = f"{error.message} (after {attempt + 1} attempts)"
                    error.args = (error.message,)
                raise error from None
        delay = hint if hint is not None else backoff * (2**attempt) * random.uniform(0.5, 1.0)
        attempt += 1
        await asyncio.sleep(delay)


def spec_error(message: str) -> ModelError:
    """A model spec that cannot be used as written (``MODEL_SPEC_INVALID``)."""
    return ModelError(message, code="MODEL_SPEC_INVALID")


def spec_number(kind_name: str, key: str, text: str, kind: type[int] | type[float], low: float,
                high: float) -> int | float:
    """The numeric option ``key=text`` of a ``kind_name:`` spec, checked against ``[low, high]``.

    Raises:
        ModelError: ``MODEL_SPEC_INVALID`` naming the option, when it is not a number or out of range.
    """
    try:
        value = kind(text)
    except ValueError:
        raise spec_error(f"{kind_name} spec option {key}={text!r} is not a number") from None
    if not low <= value <= high:
        raise spec_error(f"{kind_name} spec option {key}={text!r} is out of range [{low}, {high}]")
    return value
