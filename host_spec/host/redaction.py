"""Credentials out of every text a user or a log line sees: one function for URLs.

A URL may carry a password (``postgresql://user:secret@host/db``, an MCP
server's ``https://user:token@host/mcp``), and a URL is quoted in many
places: an invalid ``--store`` or profile value, a connection failure, a
``repr``, a driver's own error text. Every one of them goes through
:func:`redact_url`, so there is one rule to get right: the scheme, user, host,
port and database stay readable (an operator must see *which* server refused),
the password never does.

Over-redaction is the safe side: in a text the function cannot parse (a raw
``@`` in a query, a password holding a ``/``) it hides more than the password,
never less.

Replacing the configured secret *values* of an MCP server (its ``env`` and
``headers``) is another concept, :class:`host_spec.host.mcp.errors.Scrubber`:
it knows the values; this module only knows where a URL keeps its password.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MASK", "redact_url", "url_credentials"]

#: What a password is replaced by.
MASK: Final = "***"

# The userinfo of a URL: ``scheme://user:password@`` (the password runs to the last ``@``
# of the run of non-space characters, so a raw ``@`` or ``/`` in it is hidden too), or a
# bare ``user:password@host`` quoted on its own (a value that is not a URL at all).
_USERINFO: Final = re.compile(
    r"""(?P<lead>[A-Za-z][A-Za-z0-9+.\-]*://|(?<![^\s'"(<\[=,]))"""
    r"""(?P<user>[^\s:/?#@'"]*):(?!//)(?P<password>[^\s'"]+)@"""
)
# A userinfo without a password: ``https://TOKEN@host`` (kept by :func:`redact_url`: it is a user name there).
_LONE: Final = re.compile(r"""[A-Za-z][A-Za-z0-9+.\-]*://(?P<userinfo>[^\s/?#@'"]+)@""")
# A conninfo keyword or a URL query parameter: ``password=secret``, ``password = 'se cret'``.
_KEYWORD: Final = re.compile(r"""(?P<key>\bpassword\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'|[^\s&'"]*)""", re.IGNORECASE)


def redact_url(text: str) -> str:
    """``text`` with the password of every URL in it, and every ``password=`` setting, replaced by ``***``.

    ``text`` may be a URL, a libpq conninfo string or a whole message quoting
    either; everything but the passwords is left as it was.
    """
    text = _USERINFO.sub(lambda found: f"{found['lead']}{found['user']}:{MASK}@", text)
    return _KEYWORD.sub(lambda found: f"{found['key']}{MASK}", text)


def url_credentials(url: str) -> tuple[str, ...]:
    """The credentials ``url`` carries, as written: ``user:password`` and the password alone, or a lone userinfo.

    For a scrubber that must also remove them where a text quotes them without
    their URL around it. A lone userinfo (``https://TOKEN@host``) counts as a
    credential here: over HTTP it is often a token. Empty when there is none.
    """
    found = _USERINFO.search(url)
    if found is not None:
        return (f"{found['user']}:{found['password']}", found["password"])
    lone = _LONE.search(url)
    if lone is not None:
        return (lone["userinfo"],)
    keyword = _KEYWORD.search(url)
    value = keyword["value"].strip("'") if keyword is not None else ""
    return (value,) if value else ()
