"""Request field checks: required text, write-scope normalisation and overlap."""

from __future__ import annotations

import pytest

from dsh_team.errors import TeamError
from dsh_team.validation import (
    any_overlap,
    normalize_write_scope,
    normalize_write_scopes,
    required_text,
    scopes_overlap,
    text_list,
)


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
        """Scopes overlap when equal or one is a /-component prefix of the other."""
        assert scopes_overlap(first, second) is overlap

    def test_any_overlap(self) -> None:
        """Any pair overlapping is enough; empty lists never overlap."""
        assert any_overlap(("docs", "src"), ("src/x",)) and not any_overlap((), ("src",))
