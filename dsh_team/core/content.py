"""Message content blocks: the shape every block of a peer message must have to be stored.

A message's content is a tuple of plain dicts (:mod:`host_spec.messages`), not
Structs, so a block kind this build does not know survives a round trip
unchanged. The price is that nothing checks a dict's shape for free: this rule
runs while a message snapshot decodes (and on every send), so a malformed core
block is refused at the door instead of surfacing later in a model context.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from dsh_team.config import MAX_SAFE_INTEGER

__all__ = ["validate_content"]

_MEDIA_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"})


def _is_int(value: Any, low: int) -> bool:
    return type(value) is int and low <= value <= MAX_SAFE_INTEGER


def _check_block(block: Any) -> None:
    if not isinstance(block, dict):
        raise ValueError("content block must be an object")
    kind = block.get("type")
    if not isinstance(kind, str) or not kind:
        raise ValueError("content block type must be a non-empty string")
    if kind in ("text", "reasoning"):
        if not isinstance(block.get("text"), str):
            raise ValueError(f"{kind} content block needs a string text")
    elif kind == "tool-call":
        call_id = block.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise ValueError("tool-call content block needs a non-empty id")
        if not isinstance(block.get("name"), str) or not isinstance(block.get("arguments"), str):
            raise ValueError("tool-call content block needs a string name and arguments")
    elif kind == "image":
        _check_attachment(block.get("attachment"))
    elif kind == "tool-result":
        raise ValueError("tool-result content blocks are retired")
    # Any other non-empty kind is a merge-extensible block: kept opaque.


def _check_attachment(attachment: Any) -> None:
    if not isinstance(attachment, dict):
        raise ValueError("image content block needs an attachment object")
    attachment_id = attachment.get("attachment_id")
    if not isinstance(attachment_id, str) or not attachment_id:
        raise ValueError("image attachment needs a non-empty attachment_id")
    if attachment.get("media_type") not in _MEDIA_TYPES:
        raise ValueError("image attachment media_type must be png, jpeg, webp or gif")
    if not _is_int(attachment.get("bytes"), 0):
        raise ValueError("image attachment bytes must be a non-negative safe integer")
    if not (_is_int(attachment.get("width"), 1) and _is_int(attachment.get("height"), 1)):
        raise ValueError("image attachment width and height must be positive safe integers")
    if "name" in attachment and not isinstance(attachment["name"], str):
        raise ValueError("image attachment name must be a string")


def validate_content(blocks: Sequence[Any]) -> None:
    """Check every block of a message's content.

    Core kinds (``text``, ``reasoning``, ``image``, ``tool-call``) must be well
    formed (extra keys are kept); ``tool-result`` is retired and rejected; any
    other object with a non-empty string ``type`` is kept opaque.

    Raises:
        ValueError: the first malformed block (decoding turns it into a
            ``msgspec.ValidationError``).
    """
    for block in blocks:
        _check_block(block)
