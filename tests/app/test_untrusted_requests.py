"""Request parameters and settings the worker would otherwise take on trust (issue 25, items 3 and 16), through
Flask's test client: ``stop`` (count and length), ``seed`` beyond int64, a client key no client can send, and
a body of millions of empty arrays.
"""

from __future__ import annotations

import json

import pytest

from app.http.auth import load_keyring
from app.settings import Settings
from app.upstreams.codex.emulation import StopRules
from support.fakes import FakeUpstream, text_chunks
from support.invariants import check_error_envelope
from support.stops import BEYOND, BEYOND_IDS, refused_unsent, sent_on

USER = [{"role": "user", "content": "Hi."}]


def chat(client, **body):
    # the standard library writes integers of any size, as a client may
    return client.post("/v1/chat/completions", data=json.dumps({"model": "m", "messages": USER, **body}),
                       content_type="application/json")


def refused(response, param, message=""):
    error = check_error_envelope(response.status_code, response.get_data())
    assert (response.status_code, error["param"]) == (400, param), error
    assert message in error["message"]
    return error


# -- item 3: stop ----------------------------------------------------------------------------------------

def send_stop(client, stop):
    return chat(client, stop=stop)


@pytest.mark.parametrize(("stop", "where", "message"), [*BEYOND, ("x" * 257, "", "at most 256 characters")],
                         ids=[*BEYOND_IDS, "one-long-string"])
def test_too_many_or_too_long_stop_sequences_are_refused(make_app, stop, where, message):
    refused(refused_unsent(make_app, send_stop, stop), f"stop{where}", message)


def test_four_stop_sequences_are_sent_on(make_app):
    sent_on(make_app, send_stop, "stop")


def test_emulated_stops_are_found_all_at_once():
    rules = StopRules(("<end>", "STOP", "\n\n", "x.y"))
    assert rules.feed("one <en") == ("one ", None)  # "<en" may begin "<end>"
    assert rules.feed("d> two") == ("", "stop")
    rules = StopRules(("STOP", "TOPS"))
    assert rules.feed("a ST") == ("a ", None)  # the longest begun sequence is held
    assert rules.feed("x") == ("STx", None)
    assert StopRules(("STOP", "TOPS")).feed("b TOPSTOP") == ("b ", "stop")  # the earliest wins
    assert StopRules(("x.y",)).feed("xzy x.y") == ("xzy ", "stop")  # a regex metacharacter is literal


# -- item 16: seed ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [2 ** 64, 2 ** 63, -(2 ** 63) - 1, 1.5, 1e30, True, "7"])
def test_a_seed_that_is_no_int64_is_refused(make_app, seed):
    upstream = FakeUpstream(text_chunks("never"))
    refused(chat(make_app(upstream).test_client(), seed=seed), "seed")
    assert upstream.bodies == []


def test_an_int64_seed_is_sent_on_as_the_same_integer(make_app):
    upstream = FakeUpstream(text_chunks("Hello."))
    client = make_app(upstream).test_client()
    for seed in (2 ** 63 - 1, -(2 ** 63), 0):
        assert chat(client, seed=seed).status_code == 200
        sent = upstream.bodies[-1]["seed"]
        assert type(sent) is int and sent == seed


# -- item 16: a client key no client can send ------------------------------------------------------------

@pytest.mark.parametrize("key", ["clé-secrète", "sk-a\u00a0b", "sk-\u200bzero-width", "sk-tab\there"])
def test_a_key_that_is_not_printable_ascii_refuses_to_start_naming_the_variable(tmp_path, key):
    with pytest.raises(ValueError, match="TOOLWIRE_API_KEYS: key 2 .*not printable ASCII") as caught:
        load_keyring(Settings(api_keys=f"sk-fine,{key}"))
    assert key not in str(caught.value)
    path = tmp_path / "keys"
    path.write_text(f"# keys\nsk-fine\n{key}\n", encoding="utf-8")
    with pytest.raises(ValueError, match="TOOLWIRE_API_KEYS_FILE .*key 2 "):
        load_keyring(Settings(api_keys_file=path))


# -- item 16: a body of millions of values ---------------------------------------------------------------

@pytest.mark.parametrize(("unit", "message"), [(b"[],", "arrays and objects"), (b"{},", "arrays and objects"),
                                               (b"1,", "values")])
def test_a_body_of_millions_of_values_is_refused_before_it_is_parsed(make_app, unit, message):
    upstream = FakeUpstream(text_chunks("never"))
    head = json.dumps({"model": "m", "messages": USER})[:-1].encode() + b', "x": ['
    body = head + unit * ((16 * 1024 * 1024 - len(head) - 8) // len(unit)) + b"0]}"
    response = make_app(upstream).test_client().post("/v1/chat/completions", data=body,
                                                    content_type="application/json")
    error = check_error_envelope(response.status_code, response.get_data())
    assert response.status_code == 400 and error["code"] == "invalid_json" and message in error["message"]
    assert upstream.bodies == []


def test_brackets_and_commas_inside_strings_do_not_count(make_app):
    upstream = FakeUpstream(text_chunks("Hello."))
    code = "f(a, [b], {c}), " * 40_000  # 160,000 brackets and commas each, all in one string
    assert chat(make_app(upstream).test_client(), messages=[{"role": "user", "content": code}]).status_code == 200
    assert upstream.bodies[0]["messages"][-1]["content"] == code
