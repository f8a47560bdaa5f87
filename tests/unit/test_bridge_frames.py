"""The OpenCode bridge cuts the upstream's event stream into whole frames before merging its own:
however the bytes arrive, the frames that come out are the frames that went in."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elicitation_gateway.server.bridge.frames import FrameSplitter, FrameTooLarge

CONNECTED = b'data: {"payload":{"id":"evt_1","type":"server.connected","properties":{}}}\n\n'
CREATED = b'data: {"directory":"/p","payload":{"type":"session.created","properties":{"x":"\xc3\xa9"}}}\n\n'
COMMENT = b": heartbeat\n\n"
WITH_ID = b"id: evt_2\nevent: message\ndata: one\ndata: two\n\n"


def split(chunks: list[bytes]) -> list[bytes]:
    splitter = FrameSplitter()
    return [frame for chunk in chunks for frame in splitter.feed(chunk)]


def test_whole_frames_in_one_read():
    assert split([CONNECTED + CREATED]) == [CONNECTED, CREATED]


def test_a_frame_in_pieces_comes_out_once_it_is_whole():
    splitter = FrameSplitter()
    assert splitter.feed(CONNECTED[:10]) == []
    assert splitter.feed(CONNECTED[10:-1]) == []  # the blank line's last LF has not come yet
    assert splitter.feed(CONNECTED[-1:] + CREATED[:5]) == [CONNECTED]
    assert splitter.feed(CREATED[5:]) == [CREATED]


def test_comments_and_multi_line_frames_are_frames():
    assert split([COMMENT, WITH_ID]) == [COMMENT, WITH_ID]


def test_blank_lines_between_frames_are_dropped():
    assert split([b"\n\n\n" + CONNECTED + b"\n\n" + CREATED + b"\n"]) == [CONNECTED, CREATED]


@pytest.mark.parametrize("ending", [b"\r\n", b"\r"])
def test_crlf_and_cr_line_ends_come_out_as_lf(ending: bytes):
    stream = (CONNECTED + WITH_ID).replace(b"\n", ending)
    assert split([stream]) == [CONNECTED, WITH_ID]
    # A CRLF cut between its CR and its LF is one line end, not two.
    assert split([bytes([byte]) for byte in stream]) == [CONNECTED, WITH_ID]


def test_a_partial_frame_at_the_end_is_never_returned():
    assert split([CONNECTED, b"data: cut off"]) == [CONNECTED]


def test_an_endless_frame_is_refused():
    splitter = FrameSplitter(limit=1024)
    with pytest.raises(FrameTooLarge):
        splitter.feed(b"data: " + b"x" * 2000)


FRAMES = st.lists(st.sampled_from([CONNECTED, CREATED, COMMENT, WITH_ID]), min_size=1, max_size=12)


@given(frames=FRAMES, ending=st.sampled_from([b"\n", b"\r\n", b"\r"]), cuts=st.lists(st.integers(0, 2000)))
def test_any_cutting_of_any_stream_gives_its_frames(frames: list[bytes], ending: bytes, cuts: list[int]):
    stream = b"".join(frames).replace(b"\n", ending)
    points = sorted({cut % (len(stream) + 1) for cut in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    assert split(chunks) == frames
