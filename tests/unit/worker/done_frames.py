"""The supervisor's end of a worker unit test: read the worker's frames for one RUN until its DONE."""

from __future__ import annotations

import socket

from rmqrun.pipe.wire import Done, FrameBuffer, Started


def read_done(sup: socket.socket) -> Done:
    """The DONE of the batch the worker just ran; only STARTED may come before it."""
    frames = FrameBuffer()
    while True:
        while not frames.has_frame():
            frames.feed(sup.recv(1 << 20))
        frame = frames.next()
        assert isinstance(frame, (Started, Done)), frame
        if isinstance(frame, Done):
            return frame
