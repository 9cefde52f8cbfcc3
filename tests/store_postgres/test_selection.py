"""Which store a command opens: ``--store`` over ``DSH_STORE`` over the profile's ``[store] url``."""

from __future__ import annotations

from pathlib import Path

import pytest

from host_spec.errors import ConfigError
from host_spec.host.plugins.profiles import load_profile
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.store.selection import chosen_store, is_store_url, open_backend, profile_store_url

A, B, C = "postgresql://a@h/db", "postgres://b@h/db", "postgresql:///c?host=/tmp"


@pytest.fixture(autouse=True)
def _no_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSH_STORE", raising=False)


def _profile(path: Path, body: str) -> Path:
    path.write_text(body)
    return path


class TestPrecedence:
    def test_the_flag_wins_then_the_variable_then_the_profile(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        profile = _profile(tmp_path / "p.toml", f'extends = "headless"\n[store]\nurl = "{C}"\n')
        assert chosen_store(None, profile) == C
        monkeypatch.setenv("DSH_STORE", B)
        assert chosen_store(None, profile) == B
        assert chosen_store(A, profile) == A

    def test_nothing_chosen_means_the_embedded_jsonl_store(self, tmp_path: Path) -> None:
        assert chosen_store(None, "agent-teams") is None and chosen_store(None, None) is None
        assert isinstance(open_backend(tmp_path), JsonlStore)

    def test_the_outermost_profile_that_names_a_store_wins(self, tmp_path: Path) -> None:
        _profile(tmp_path / "base.toml", f'extends = "headless"\n[store]\nurl = "{A}"\n')
        middle = _profile(tmp_path / "middle.toml", 'extends = "base.toml"\n')
        top = _profile(tmp_path / "top.toml", f'extends = "middle.toml"\n[store]\nurl = "{B}"\n')
        assert profile_store_url(middle) == A and profile_store_url(top) == B
        assert load_profile(top).name == str(top)  # the profile loader accepts the table


class TestRefusals:
    @pytest.mark.parametrize("value", ["sqlite:///x", "/a/dir", "", "http://h/db"])
    def test_a_flag_or_variable_that_is_no_store_url_is_refused(self, value: str, monkeypatch: pytest.MonkeyPatch) -> None:
        if value:
            with pytest.raises(ConfigError) as caught:
                chosen_store(value)
            assert caught.value.code == "STORE_INVALID" and "--store" in caught.value.message
        monkeypatch.setenv("DSH_STORE", value)
        if value:
            with pytest.raises(ConfigError, match="DSH_STORE"):
                chosen_store(None)
        else:
            assert chosen_store(None) is None  # an empty variable is unset

    @pytest.mark.parametrize(("table", "path"), [('url = 3', "store.url"), ('url = "x"', "store.url"),
                                                 (f'url = "{A}"\nextra = 1', "store")])
    def test_a_bad_store_table_names_its_field(self, tmp_path: Path, table: str, path: str) -> None:
        profile = _profile(tmp_path / "p.toml", f'extends = "headless"\n[store]\n{table}\n')
        with pytest.raises(ConfigError) as caught:
            profile_store_url(profile)
        assert caught.value.details["path"] == path

    def test_urls_are_told_from_paths(self) -> None:
        assert is_store_url(A) and is_store_url(B) and not is_store_url("postgresql:") and not is_store_url(None)
