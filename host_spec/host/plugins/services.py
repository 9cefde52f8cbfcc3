"""Services plugins provide to each other, found by their API type.

A plugin publishes an object as the implementation of an API class or Protocol
(``ctx.provide(TeamServiceAPI, service)``) and another plugin gets it back typed
(``host.service(TeamServiceAPI)``). The registry keys each service by the API's
import path, not by the class object: a plugin reload re-imports its package, so
the API class a long-lived caller imported earlier is a different object with the
same path, and the caller must still find the new service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar, cast

import attrs

from host_spec.errors import RegistrationError, ServiceNotFoundError
from host_spec.records import Handle

if TYPE_CHECKING:
    from typing_extensions import TypeForm

__all__ = ["ServiceRegistry", "service_key"]

S = TypeVar("S")

#: Cached API keys kept before the cache starts over.
_KEY_CACHE_SIZE = 256


def service_key(api: object) -> str:
    """The registry key of ``api``: ``module.QualifiedName``.

    Raises:
        RegistrationError: ``api`` is not a class or Protocol (``SERVICE_MISMATCH``).
    """
    module = getattr(api, "__module__", None)
    qualname = getattr(api, "__qualname__", None)
    if not isinstance(api, type) or not isinstance(module, str) or not isinstance(qualname, str):
        raise RegistrationError(f"a service API must be a class or a Protocol, not {api!r}", code="SERVICE_MISMATCH")
    return f"{module}.{qualname}"


def _conforms(service: object, api: type) -> bool:
    """Whether ``service`` is an ``api``; ``True`` when the type cannot tell at run time.

    A Protocol without ``@runtime_checkable`` refuses ``isinstance``; the static type
    check of ``provide`` is then the only check.
    """
    try:
        return isinstance(service, api)
    except TypeError:
        return True


@attrs.define(eq=False)
class ServiceRegistry:
    """Provided services by API key, each with the plugin that provided it."""

    _entries: dict[str, tuple[str, object]] = attrs.Factory(dict)
    #: ``service_key`` per API class already looked up: ``find`` runs on hot paths
    #: (once per folded Team event), and the key of a class never changes.
    _keys: dict[type, str] = attrs.Factory(dict)

    def _key(self, api: object) -> str:
        try:
            return self._keys[api]  # type: ignore[index]  # a miss (or an unhashable api) is computed below
        except (KeyError, TypeError):
            pass
        key = service_key(api)
        if len(self._keys) >= _KEY_CACHE_SIZE:  # reloads mint new classes: keep the cache bounded
            self._keys.clear()
        self._keys[api] = key  # type: ignore[index]  # service_key accepted it: a class
        return key

    def provide(self, owner: str, api: TypeForm[S], service: S) -> Handle:
        """Publish ``service`` for ``api`` on behalf of plugin ``owner``.

        Returns:
            The handle that withdraws exactly this publication.

        Raises:
            RegistrationError: ``api`` is already provided (``ALREADY_REGISTERED``), is not
                a type, or ``service`` is not an instance of it (``SERVICE_MISMATCH``).
        """
        key = service_key(api)
        taken = self._entries.get(key)
        if taken is not None:
            raise RegistrationError(f'service "{key}" is already provided by plugin "{taken[0]}"')
        if not _conforms(service, cast(type, api)):
            raise RegistrationError(
                f'plugin "{owner}" cannot provide {type(service).__name__} as service "{key}": not an instance of it',
                code="SERVICE_MISMATCH",
            )
        self._entries[key] = (owner, service)

        def withdraw() -> None:  # runs once (a Handle), while the key is still ours
            del self._entries[key]

        return Handle(withdraw, label=f"service:{key}")

    def find(self, api: TypeForm[S]) -> S | None:
        """The service provided for ``api``, or ``None``."""
        entry = self._entries.get(self._key(api))
        if entry is None:
            return None
        service: S = entry[1]  # type: ignore[assignment]  # provide() checked it against api (no cast call)
        return service

    def get(self, api: TypeForm[S]) -> S:
        """The service provided for ``api``.

        Raises:
            ServiceNotFoundError: nothing provides it (``SERVICE_NOT_FOUND``).
        """
        entry = self._entries.get(self._key(api))
        if entry is None:
            raise ServiceNotFoundError(f'no loaded plugin provides service "{service_key(api)}"')
        return cast("S", entry[1])

    def keys(self) -> list[str]:
        """Provided API keys in publication order (diagnostics, tests)."""
        return list(self._entries)
