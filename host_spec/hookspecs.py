"""Every ``dsh_*`` hook a host calls, documented one by one.

Conventions (pytest's ``hookspec.py`` is the model):

* Every hook takes ``host`` first; implementations may accept any subset of the
  arguments, and must never give their parameters defaults.
* Implementations live on the plugin module or on *hook objects*: per-host state
  a plugin builds in :func:`dsh_plugin_loaded` and registers with
  ``ctx.register(obj)`` (pytest registers its stateful plugins the same way), so a
  module loaded into several hosts keeps nothing keyed by host. An object's
  methods usually leave ``host`` out (the object knows its host) and may keep a
  domain name with ``@hookimpl(specname="dsh_...")``. An object belongs to its
  plugin: its vetoes name that plugin, the plugin's teardown and unload reach it,
  and the plugin's ledger unregisters it.
* The host calls hooks with keyword arguments only.
* *Observer* hooks: the host contains each implementation's exception (logs it
  and goes on), so one broken plugin cannot stop another.
* *Veto* hooks say so explicitly; their exceptions propagate to the caller.
* Registration (tools, prompt sections, providers) is **not** a hook: it goes
  through :class:`host_spec.protocols.PluginContext` and agent scopes, so every
  registration has an owner that unload and reload dispose exactly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from host_spec.events import Event
    from host_spec.protocols import Agent, Host, PluginContext, Session
    from host_spec.records import Violation

hookspec = pluggy.HookspecMarker("dsh")

# ---------------------------------------------------------------- plugin lifecycle


@hookspec
def dsh_plugin_loaded(host: Host, ctx: PluginContext) -> None:
    """The plugin has just been registered (at start-up, or again after a reload).

    Called for the loading plugin's module only, never broadcast (a hook object
    may not implement it: the object is built here). The plugin validates
    ``ctx.config`` (raise ``ConfigError`` naming the field to fail the load), builds
    its per-host state and registers it (``ctx.register``), makes its other
    registrations through ``ctx`` (``provide``, ``own``: every handle lands in its
    ledger), and installs into agents that are already live
    (``host.agents.list()``), because ``dsh_agent_created`` is not replayed for them.

    Args:
        host: The host.
        ctx: This plugin's context: name, raw config table, ownership ledger.

    May veto: yes. An exception fails the load; the host disposes the ledger, unregisters
    the plugin and reports the error (on reload it restores the previous version).
    """


@hookspec
def dsh_plugin_unload(host: Host, ctx: PluginContext) -> None:
    """The plugin is about to be unregistered (shutdown or reload).

    Called for the unloading plugin and its hook objects only. Afterwards the host
    disposes every handle in ``ctx``'s ledger in reverse order (unregistering its hook
    objects) and cancels its supervised tasks. Async work that must finish first goes
    through :func:`dsh_plugin_teardown`.

    May veto: no (exceptions are logged; the unload completes).
    """


@hookspec
async def dsh_plugin_teardown(host: Host, ctx: PluginContext) -> None:
    """Awaited for the unloading plugin (and its hook objects) before ``dsh_plugin_unload``.

    Used for bounded settlement of in-flight work (the Team service object drains its
    live teammates here).

    May veto: no (exceptions are logged and reported; the unload completes).
    """


# ---------------------------------------------------------------- sessions


@hookspec
def dsh_session_created(host: Host, session: Session) -> None:
    """A session was created or resumed and is about to be published.

    Fires once per session activation, after its stored or seeded events are
    loaded and before anything new is appended. Seed events are not replayed
    through :func:`dsh_session_event`; a stateful plugin folds ``session.events``
    here.

    May veto: yes. An exception aborts the creation; the host still calls
    :func:`dsh_session_disposed` for this session.
    """


@hookspec
def dsh_pre_append(host: Host, session: Session, event: Event) -> Violation | None:
    """Check a candidate event before it is appended.

    Called inside ``session.append`` after ``seq`` and ``time`` are assigned and
    before the event becomes visible. Implementations must be fast (O(1) in the log
    length), must not mutate anything, and must not append.

    Returns:
        ``None`` to allow, or a :class:`~host_spec.records.Violation` to veto.

    May veto: yes. The host calls every implementation; if any returned a
    violation it raises ``InvariantError`` (code ``INVARIANT``, naming the first
    vetoing plugin) from ``append``. Nothing is written and no observer runs.
    """


@hookspec
def dsh_session_event(host: Host, session: Session, event: Event) -> None:
    """An event was committed to ``session`` (visible in memory, not yet durable).

    Synchronous, in append order. Implementations must not append to the same
    session inline (that raises ``ReentrantAppendError``); schedule work with
    ``host.call_soon`` instead.

    May veto: no (exceptions are logged; the append stays committed).
    """


@hookspec
def dsh_session_flushed(host: Host, session: Session, durable_seq: int) -> None:
    """Every event of ``session`` up to ``durable_seq`` is on stable storage.

    Fires once per completed group commit (not once per ``flush`` caller).

    May veto: no.
    """


@hookspec
def dsh_session_disposed(host: Host, session: Session) -> None:
    """The session left the live store (after its final flush). Fires once per activation.

    May veto: no.
    """


# ---------------------------------------------------------------- agents


@hookspec
def dsh_agent_created(host: Host, agent: Agent) -> None:
    """A new or resumed agent was built; its scope exists; it has not run yet.

    Plugins install scoped tools and prompt sections into ``agent.scope`` here, so
    they are present before the agent's first model request (cold resume too).

    May veto: yes. An exception rolls the creation back.
    """


@hookspec
def dsh_agent_session_start(host: Host, agent: Agent, source: str) -> None:
    """The agent is published and may now be driven.

    Args:
        source: ``"startup"`` for a new agent, ``"resume"`` after a cold resume.

    The first point where a plugin may steer the agent or start recovery work
    (the Team service re-dispatches queued mail here).

    May veto: no.
    """


@hookspec
def dsh_agent_status(host: Host, agent: Agent, status: str) -> None:
    """The agent's live status changed (``"running"`` <-> ``"idle"``). Never repeats a status.

    May veto: no.
    """


@hookspec
def dsh_agent_pre_step(host: Host, agent: Agent, turn: int, step: int) -> None:
    """The driver is about to start model call ``step`` of turn ``turn`` of ``agent``.

    Step 1 is a new turn: the check runs before ``turn/start`` is appended and
    before any pending inbox item is claimed, so a refusal writes nothing to the
    agent's log and every pending item stays pending. A later step is checked
    before its items are claimed; a refusal there closes the running turn with
    ``turn/end {kind: "error", error: {code, message}}`` (the refusal's). Either
    way the driver stops and the agent goes idle with its inbox intact: a later
    send wakes it (and is checked again), and a resume continues the kept work.

    Called once per model call, so implementations must be fast; they run between
    appends (they may append to other sessions, and to this one).

    May veto: yes. Raise a ``DshError`` to refuse the call (its ``code`` and
    message say why, e.g. a spending limit); the first refusal wins.
    """


@hookspec
def dsh_tool_pre_call(host: Host, agent: Agent, tool: str) -> None:
    """``agent`` is about to run the tool named ``tool`` (its arguments are valid).

    Called once per tool call, after the arguments were decoded and before the
    tool body runs, so a refusal runs nothing and writes nothing the tool would
    have written. This is how a coordination plugin holds an agent to a rule the
    tools themselves do not know (for instance: no file writes or shell commands
    before its plan is approved). Implementations must be fast and synchronous;
    they answer from state they already hold.

    May veto: yes. Raise a ``DshError``: the call's result is that error (its
    ``code`` and message), the tool does not run; the first refusal wins.
    """


@hookspec
def dsh_agent_disposed(host: Host, agent: Agent) -> None:
    """The agent is quiescent and its scope was unwound; its session detaches next.

    May veto: no.
    """


@hookspec
def dsh_agent_turn_end(host: Host, agent: Agent, turn: int, reason: dict[str, Any]) -> None:
    """The agent closed turn ``turn`` with ``reason`` (``{"kind": "completed" | ...}``).

    May veto: no.
    """


# ---------------------------------------------------------------- model context


@hookspec
def dsh_context_brief(host: Host, agent: Agent) -> str | None:
    """A short, current text the host adds to ``agent``'s model context, or ``None``.

    Asked before every model call of an agent whose context was compacted or that was
    cold-resumed: the turns that told it who it is and what it works on may be
    summarised or far behind. The host joins every non-empty answer (plugin call order)
    into one ``<system-reminder>`` user message placed *last* in the request, after the
    newest turn, so the cached prefix stays the same when the answer changes. It is
    never written to the log: it is derived from durable state each time, an addition to
    the context and never a rewrite of history. Keep it small (it is paid on every step)
    and fast (it runs on the step's path).

    Returns:
        The text (without the reminder tags), or ``None``/empty for nothing.

    May veto: no (an exception is logged and that plugin's text is left out).
    """
