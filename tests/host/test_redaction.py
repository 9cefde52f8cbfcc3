"""One URL redaction function: the password never shows, the rest of the URL does.

The oracle is the URL's own parts: whatever password a URL is built with, it
must not appear in the redacted text, and the scheme, user, host and database
it was built with must.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from host_spec.host.mcp.config import load_config, secrets_of
from host_spec.host.mcp.errors import Scrubber
from host_spec.host.redaction import MASK, redact_url, url_credentials

#: Password characters a user may type without percent-encoding (a raw ``@`` or ``/`` included).
_PASSWORD = st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="'\"\\"), min_size=1,
                    max_size=30)
_WORD = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789_-"), min_size=1, max_size=12)


@given(scheme=st.sampled_from(["postgresql", "postgres", "mysql", "https", "sqlite"]), user=_WORD,
       password=_PASSWORD, host=_WORD, database=_WORD)
def test_no_password_survives_and_the_rest_stays(scheme: str, user: str, password: str, host: str, database: str) -> None:
    url = f"{scheme}://{user}:{password}@{host}:5432/{database}"
    expected = f"{scheme}://{user}:{MASK}@{host}:5432/{database}"
    for template in ("{}", "--store must be a postgresql:// URL, got '{}'", "failed ({}) twice"):
        assert redact_url(template.format(url)) == template.format(expected)


@pytest.mark.parametrize(("text", "shown"), [
    ("postgresql://u@h:5432/db", "postgresql://u@h:5432/db"),  # no password: nothing to hide
    ("postgresql:///db?host=/tmp/s&user=postgres", "postgresql:///db?host=/tmp/s&user=postgres"),
    ("postgresql:///db?host=/tmp&user=u&password=zz&sslmode=off", "postgresql:///db?host=/tmp&user=u&password=***&sslmode=off"),
    ("host=h user=u password=secret dbname=d", "host=h user=u password=*** dbname=d"),
    ("host=h password = 'se cret' dbname=d", "host=h password = *** dbname=d"),
    ("got 'user:secret@host/db'", "got 'user:***@host/db'"),  # not a URL at all, still a password
    ("x postgres://a:bb@c/d and mysql://e:ff@g/h", "x postgres://a:***@c/d and mysql://e:***@g/h"),
    ("error: foo@bar", "error: foo@bar"),
])
def test_known_forms(text: str, shown: str) -> None:
    assert redact_url(text) == shown


def test_credentials_for_a_scrubber() -> None:
    assert url_credentials("https://user:pass@h/mcp") == ("user:pass", "pass")
    assert url_credentials("https://TOKEN123@h/mcp") == ("TOKEN123",)  # over HTTP a lone userinfo is a token
    assert url_credentials("postgresql:///d?password=zz9") == ("zz9",)
    assert url_credentials("https://h/mcp") == ()


def test_mcp_uses_the_same_function() -> None:
    server = load_config({"servers": {"h": {"url": "https://user:pass-word@h/mcp"}}}).servers["h"]
    scrub = Scrubber(secrets_of(server))
    assert scrub("refused pass-word") == "refused [redacted]"
    # a URL the server quotes (not its own) loses its password too
    assert scrub("see postgresql://db:other-pw@x/y") == "see postgresql://db:***@x/y"


def test_a_model_base_url_of_another_scheme_hides_its_password() -> None:
    from host_spec.errors import ModelError
    from host_spec.host.models.openai_settings import parse_settings

    with pytest.raises(ModelError) as caught:
        parse_settings("gpt", environ={"OPENAI_BASE_URL": "ftp://u:top-secret-1@h/v1"})
    assert caught.value.code == "MODEL_SPEC_INVALID" and "ftp://u:***@h/v1" in caught.value.message
    assert "top-secret-1" not in caught.value.message
