"""Modal credentials never reach a record: the scrubber itself, and the paths that carry Modal's error text
(a failed remote job, an authentication failure) with a token present in the environment."""

from __future__ import annotations

import cloudpickle
import pytest

pytest.importorskip("modal")
from hydra_plugins.sweep_launcher._modal import _app as _modal_app  # noqa: E402

TOKEN_ID, TOKEN_SECRET = "ak-UNITTOKENID9921", "as-UNITTOKENSECRET3310"


@pytest.fixture
def token(monkeypatch):
    monkeypatch.setenv("MODAL_TOKEN_ID", TOKEN_ID)
    monkeypatch.setenv("MODAL_TOKEN_SECRET", TOKEN_SECRET)


def test_scrub_removes_both_parts_of_the_token_wherever_they_appear(token):
    text = (
        f"AuthError: token {TOKEN_ID}:{TOKEN_SECRET} rejected\n"
        f"  headers: x-modal-token-id={TOKEN_ID}; x-modal-token-secret={TOKEN_SECRET}"
    )
    out = _modal_app.scrub(text)
    assert TOKEN_ID not in out and TOKEN_SECRET not in out
    assert out.count("***") == 4 and out.startswith("AuthError: token ***:*** rejected")


def test_scrub_leaves_text_without_a_token_alone(token):
    assert _modal_app.scrub("Modal: TimeoutError: container timed out") == "Modal: TimeoutError: container timed out"


def test_scrub_ignores_short_or_empty_values(monkeypatch):
    monkeypatch.setenv("MODAL_TOKEN_ID", "ab")  # too short to be a token: replacing it would mangle any text
    monkeypatch.delenv("MODAL_TOKEN_SECRET", raising=False)
    assert _modal_app.scrub("a tab and a label") == "a tab and a label"


def test_remote_failure_and_auth_failure_replies_carry_no_token(token):
    """The reply a failed remote job (or an AuthError for every job) becomes is what the launcher records:
    its error text is scrubbed before it leaves the Modal thread."""
    remote = _modal_app.failure(3, f"Modal: RemoteError: worker saw MODAL_TOKEN_SECRET={TOKEN_SECRET}\n")
    auth = _modal_app.failure(4, f"Modal: AuthError: Token {TOKEN_ID} is invalid\n{_modal_app.token_help()}")
    for data, idx in ((remote, 3), (auth, 4)):
        reply = cloudpickle.loads(data)
        assert reply.idx == idx and reply.job_return is None
        assert TOKEN_ID not in reply.error and TOKEN_SECRET not in reply.error and "***" in reply.error
