"""The incremental SSE decoder, fed whole and split at every byte."""

from __future__ import annotations

import pytest

from app.upstreams.sse import SSEDecoder


def decode_whole(data: bytes) -> list[bytes]:
    decoder = SSEDecoder()
    return decoder.feed(data) + decoder.end()


def decode_bytewise(data: bytes) -> list[bytes]:
    decoder = SSEDecoder()
    out = []
    for i in range(len(data)):
        out += decoder.feed(data[i:i + 1])
    return out + decoder.end()


def decode_split_at(data: bytes, cut: int) -> list[bytes]:
    decoder = SSEDecoder()
    return decoder.feed(data[:cut]) + decoder.feed(data[cut:]) + decoder.end()


CASES = [
    (b'data: {"a":1}\n\ndata: [DONE]\n\n', ['{"a":1}', "[DONE]"]),
    (b'data: {"a":1}\r\n\r\ndata: [DONE]\r\n\r\n', ['{"a":1}', "[DONE]"]),
    (b'data: {"a":1}\r\rdata: [DONE]\r\r', ['{"a":1}', "[DONE]"]),
    (b'data:{"a":1}\n\n', ['{"a":1}']),
    (b"data: line one\ndata: line two\n\n", ["line one\nline two"]),
    (b": keep-alive\n\ndata: x\n\n", ["x"]),
    (b"event: message\nid: 7\nretry: 100\ndata: x\n\n", ["x"]),
    (b"event: ping\n\n", []),
    (b"data:  two spaces\n\n", [" two spaces"]),
    ('data: {"t":"h\u00e9llo \u2603 \U0001F600"}\n\n'.encode(), ['{"t":"h\u00e9llo \u2603 \U0001F600"}']),
    (b"\xef\xbb\xbfdata: bom\n\n", ["bom"]),
    (b"data: no blank line at the end", ["no blank line at the end"]),
    (b"data: x\r", ["x"]),
    (b"data\n\n", [""]),
]


@pytest.mark.parametrize("data, expected", CASES)
def test_decodes_whole_and_bytewise(data, expected):
    expected = [payload.encode() for payload in expected]
    assert decode_whole(data) == expected
    assert decode_bytewise(data) == expected


@pytest.mark.parametrize("data, expected", CASES)
def test_every_single_split_point(data, expected):
    expected = [payload.encode() for payload in expected]
    for cut in range(len(data) + 1):
        assert decode_split_at(data, cut) == expected, cut


def test_crlf_split_between_cr_and_lf_is_one_line_end():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\n\r") == []
    assert decoder.feed(b"\ndata: b\n\n") == [b"a", b"b"]


def test_events_are_returned_as_soon_as_complete():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n") == []
    assert decoder.feed(b"\n") == [b"a"]


def test_data_goes_out_as_it_came_its_utf8_checked_where_it_is_parsed():
    assert SSEDecoder().feed(b"data: \xff\xfe\n\n") == [b"\xff\xfe"]


def decode_as_the_stream(pieces: list[bytes]) -> list[bytes]:
    """As ``HttpStream`` reads: each receive asked of ``one`` first, fed when it is not one whole event."""
    decoder = SSEDecoder()
    out = []
    for piece in pieces:
        payload = decoder.one(piece)
        out += [payload] if payload is not None else decoder.feed(piece)
    return out + decoder.end()


@pytest.mark.parametrize("data, expected", CASES)
def test_a_token_a_receive_reads_as_the_decoder_does(data, expected):
    expected = [payload.encode() for payload in expected]
    for cut in range(len(data) + 1):
        assert decode_as_the_stream([data[:cut], data[cut:]]) == expected, cut


def test_one_takes_a_whole_one_line_event_alone():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: first\n\n") == [b"first"]
    assert decoder.one(b'data: {"a":1}\n\n') == b'{"a":1}'
    for not_one in (b"data: a\n\ndata: b\n\n", b"data: a\n", b"data: a", b"data: a\r\n\r\n", b": ping\n\n",
                    b"data: a\ndata: b\n\n", b"event: x\ndata: a\n\n", b"data: a\n\n\n"):
        assert decoder.one(not_one) is None, not_one
    assert decoder.feed(b"data: a") == []  # held: the next receive is not a whole event on its own
    assert decoder.one(b"data: b\n\n") is None
    assert decoder.feed(b"\n\n") == [b"a"]


def test_one_waits_for_the_first_line_end_and_keeps_the_bound():
    assert SSEDecoder().one(b"data: x\n\n") is None  # the first receive may start with a byte order mark
    decoder = SSEDecoder(max_event_bytes=16)
    assert decoder.feed(b"data: a\n\n") == [b"a"]
    assert decoder.one(b"data: " + b"x" * 20 + b"\n\n") is None
