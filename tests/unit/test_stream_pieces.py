"""How an event stream cuts what it writes: big frames in pieces, a backlog in chunks (pure), and the
kernel's share of a stream's allowance set on a real socket."""

import socket
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elicitation_gateway.server.protocol import SEND_BUFFER, limit_send_buffer
from elicitation_gateway.server.sse import PIECE, backlog_chunks, pieces

frames = st.lists(
    st.one_of(st.none(), st.binary(min_size=1, max_size=3 * PIECE)),
    max_size=30,
)


@given(st.binary(max_size=5 * PIECE + 3))
def test_pieces_are_the_frame_in_order_none_bigger_than_a_piece(frame):
    cut = list(pieces(frame))
    assert b"".join(cut) == frame
    assert all(0 < len(piece) <= PIECE for piece in cut)
    assert len(cut) == -(-len(frame) // PIECE)


def test_pieces_are_made_one_at_a_time():
    """A list of them would be a copy of the frame for each stream."""
    cut = pieces(b"x" * (3 * PIECE))
    assert not isinstance(cut, list | tuple)
    assert next(cut) == b"x" * PIECE


@given(frames)
def test_backlog_chunks_hold_every_frame_shown_in_order(given_frames):
    chunks = list(backlog_chunks(given_frames))
    shown = [frame for frame in given_frames if frame is not None]
    assert b"".join(chunk for chunk, _ in chunks) == b"".join(shown)
    assert sum(count for _, count in chunks) == len(shown)
    for chunk, count in chunks:
        # A chunk of several frames stays within a piece; a bigger frame goes alone, as it is.
        assert count >= 1
        assert len(chunk) <= PIECE or count == 1


def test_a_big_frame_goes_alone_and_is_not_copied():
    big = b"y" * (4 * PIECE)
    chunks = list(backlog_chunks([b"a", big, b"b"]))
    assert [count for _, count in chunks] == [1, 1, 1]
    assert chunks[1][0] is big


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux reports what it was given, doubled")
def test_the_kernel_send_buffer_is_limited_through_the_scope_extension():
    with socket.socket() as raw:
        scope = {"extensions": {SEND_BUFFER: {"socket": raw}}}
        assert limit_send_buffer(scope, 96 * 1024)
        assert raw.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == 96 * 1024


def test_without_the_extension_nothing_is_limited():
    assert not limit_send_buffer({"type": "http"}, 96 * 1024)
    assert not limit_send_buffer({"extensions": {}}, 96 * 1024)
