"""Request field checks: required text, write-scope normalisation and overlap."""

from __future__ import annotations

import pytest

from hypothesis import given
from hypothesis import strategies as st

from dsh_team.errors import TeamError
from dsh_team.core.task_view import write_scope_warnings
from dsh_team.core.validation import normalize_write_scope, normalize_write_scopes, required_text, text_list

from team_builders import Log


def overlaps(first: str, second: str) -> bool:
    """§7.6, stated naively: equal, or one a ``/``-component prefix of the other."""
    shorter, longer = sorted((first, second), key=len)
    return first == second or (longer.startswith(shorter) and longer[len(shorter)] == "/")


def warnings_for(scopes: list[tuple[str, ...]], in_progress: list[bool], viewed: tuple[str, ...]) -> tuple[str, ...]:
    """The real (indexed) warnings of a new task with ``viewed`` scopes against a built board."""
    log = Log()
    for number, (task_scopes, busy) in enumerate(zip(scopes, in_progress, strict=True), 1):
        log.task(f"task-{number}", write_scopes=task_scopes)
        if busy:
            log.task(f"task-{number}", 2, status="in_progress", write_scopes=task_scopes, owner_id="lead")
    log.task("task-99", write_scopes=viewed)
    state = log.fold()
    return write_scope_warnings(state.tasks, state.tasks.tasks["task-99"])


class TestRequiredText:
    def test_trims_and_bounds(self) -> None:
        """Text is trimmed; the bound applies to the trimmed text."""
        assert required_text("  hi  ", "subject", 2) == "hi"
        with pytest.raises(TeamError, match="subject must be at most 2 characters"):
            required_text("abc", "subject", 2)

    @pytest.mark.parametrize(("value", "message"), [(None, "must be a string"), (" \n", "must not be blank")])
    def test_rejects_non_text(self, value: object, message: str) -> None:
        """Non-strings and blank strings are TEAM_INVALID_ARGUMENT naming the field."""
        with pytest.raises(TeamError, match=f"description {message}") as caught:
            required_text(value, "description", 10)
        assert caught.value.code == "TEAM_INVALID_ARGUMENT" and caught.value.details == {"field": "description"}

    def test_text_list(self) -> None:
        """Lists and tuples of strings become tuples; anything else is rejected."""
        assert text_list(["a", "b"], "x") == ("a", "b") == text_list(("a", "b"), "x")
        for bad in ("ab", ["a", None], {"a": 1}):
            with pytest.raises(TeamError, match="x must be a list of strings"):
                text_list(bad, "x")


class TestWriteScopes:
    @pytest.mark.parametrize(
        ("raw", "normal"),
        [("src", "src"), ("./src/", "src"), ("src\\app\\", "src/app"), ("a/b//", "a/b"), (" src ", " src "), ("..a", "..a")],
    )
    def test_normalisation(self, raw: str, normal: str) -> None:
        """Backslashes, one leading ./ and trailing slashes are normalised; spaces kept."""
        assert normalize_write_scope(raw) == normal

    @pytest.mark.parametrize("raw", ["", ".", "..", "/root", "C:\\root", "C:root", "c:x", "a//b", "a/../b", "a/./b", "./", "/", "././x"])
    def test_rejections(self, raw: str) -> None:
        """Empty, absolute, drive-letter and dot segments are TEAM_INVALID_WRITE_SCOPE."""
        with pytest.raises(TeamError, match="invalid workspace-relative write scope") as caught:
            normalize_write_scope(raw)
        assert caught.value.code == "TEAM_INVALID_WRITE_SCOPE"

    def test_dedupe_keeps_first_order(self) -> None:
        """['src', './src/', 'src', 'docs'] -> ('src', 'docs')."""
        assert normalize_write_scopes(["src", "./src/", "src", "docs"]) == ("src", "docs")

    @pytest.mark.parametrize(
        ("first", "second", "overlap"),
        [("src", "src", True), ("src", "src/a", True), ("src/a", "src", True), ("src", "srcx", False),
         ("docs", "src", False), ("src/a", "src/b", False)],
    )  # fmt: skip
    def test_overlap_is_component_prefix(self, first: str, second: str, overlap: bool) -> None:
        """Scopes overlap when equal or one is a /-component prefix of the other (the board's index agrees)."""
        assert overlaps(first, second) is overlap
        expected = ("write scopes overlap with task-1",) if overlap else ()
        assert warnings_for([(first,)], [True], (second,)) == expected

    @given(
        st.lists(st.lists(st.sampled_from(["a", "a/b", "a/b/c", "ab", "b", "b/a"]), max_size=3), max_size=5),
        st.lists(st.booleans(), min_size=5, max_size=5),
        st.lists(st.sampled_from(["a", "a/b", "a/bc", "b", "c"]), max_size=3),
    )
    def test_indexed_warnings_equal_the_naive_rule(
        self, scopes: list[list[str]], busy: list[bool], viewed: list[str]
    ) -> None:
        """Warnings name exactly the other in-progress tasks with an overlapping scope, in board order."""
        task_scopes = [tuple(dict.fromkeys(item)) for item in scopes]
        flags = busy[: len(task_scopes)]
        mine = tuple(dict.fromkeys(viewed))
        expected = tuple(
            f"write scopes overlap with task-{number}"
            for number, (theirs, flag) in enumerate(zip(task_scopes, flags), 1)
            if flag and any(overlaps(a, b) for a in mine for b in theirs)
        )
        assert warnings_for(task_scopes, flags, mine) == expected


def _code(action: object) -> tuple[str, object]:
    try:
        action()  # type: ignore[operator]
    except TeamError as error:
        return error.code, error.details.get("field")
    raise AssertionError("accepted")


class TestInputTheValidatorsOnceLetThrough:
    @pytest.mark.parametrize("content", [[{"type": "text", "text": ""}], [{"type": "text", "text": " \n\t "}],
                                         [{"type": "text", "text": " "}, {"type": "text", "text": "\n"}]])
    def test_blank_content_is_refused_with_its_field(self, content: list[dict[str, str]]) -> None:
        """A message or prompt made only of blank text says nothing: refused, field named."""
        from dsh_team.core.validation import check_content

        assert _code(lambda: check_content(content, "prompt")) == ("TEAM_INVALID_ARGUMENT", "prompt")
        assert check_content([{"type": "text", "text": " "}, {"type": "opaque-kind"}])

    @pytest.mark.parametrize("char", ["\x00", "\x01", "\x07", "\x1b", "\x1f", "\x7f"])
    def test_control_characters_are_refused_where_text_is_one_line_or_free(self, char: str) -> None:
        """NUL and other C0 controls: never in subjects, scopes or labels; free text keeps only line breaks and tabs."""
        from dsh_team.core.validation import LINE_CONTROLS, check_content

        assert _code(lambda: required_text(f"a{char}b", "subject", 50)) == ("TEAM_INVALID_ARGUMENT", "subject")
        assert _code(lambda: normalize_write_scope(f"src{char}x")) == ("TEAM_INVALID_ARGUMENT", "write_scopes")
        free = lambda: required_text(f"a{char}b", "description", 50, allowed=LINE_CONTROLS)  # noqa: E731
        assert _code(free) == ("TEAM_INVALID_ARGUMENT", "description")
        message = [{"type": "text", "text": f"hi{char}"}]
        assert _code(lambda: check_content(message)) == ("TEAM_INVALID_ARGUMENT", "content")

    def test_line_breaks_and_tabs_stay_in_free_text_only(self) -> None:
        from dsh_team.core.validation import LINE_CONTROLS, check_content

        assert required_text("a\nb\tc\r\nd", "description", 50, allowed=LINE_CONTROLS) == "a\nb\tc\r\nd"
        assert check_content([{"type": "text", "text": "line\n\tnext"}])[0]["text"] == "line\n\tnext"
        assert _code(lambda: required_text("a\nb", "subject", 50)) == ("TEAM_INVALID_ARGUMENT", "subject")
        with pytest.raises(TeamError, match="U\\+0000"):
            required_text("a\x00", "subject", 50)

    @pytest.mark.parametrize(
        ("action", "field", "value"),
        [("claim", "owner", "alpha"), ("delete", "write_scopes", ["src"]), ("complete", "subject", "x"),
         ("release", "blocked_by", []), ("reopen", "description", "d"), ("edit", "owner", "alpha"),
         ("set_dependencies", "subject", "x"), ("reassign", "write_scopes", [])],
    )  # fmt: skip
    def test_a_field_the_action_does_not_read_is_refused_by_name(self, action: str, field: str, value: object) -> None:
        """Stray fields are a mistake to report, never silently ignored (and nothing is decided)."""
        from dsh_team.core.actor import Actor
        from dsh_team.core.board import decide_update

        log = Log()
        log.task("task-1", status="in_progress", owner_id="lead")
        state = log.fold()
        update = lambda: decide_update(state, Actor("lead", "lead"), task_id="task-1", expected_revision=1,  # noqa: E731
                                       action=action, **{field: value})
        assert _code(update) == ("TEAM_INVALID_ARGUMENT", field)
        with pytest.raises(TeamError, match=f"{action} does not take {field}"):
            update()
