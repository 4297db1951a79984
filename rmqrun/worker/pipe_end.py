"""The worker's end of the socket pair to its supervisor: blocking reads, writes gathered until a flush."""

from __future__ import annotations

import select
import socket

from rmqrun.pipe.wire import Frame, FrameBuffer, encode

__all__ = ["PipeEnd"]


class PipeEnd:
    """The worker's end of the socket pair: blocking reads, writes gathered until a flush."""

    #: bytes asked of one read; the buffer is allocated once: a fresh 256 KiB bytes object per
    #: ``recv`` (mapped, faulted in, unmapped) cost ~17 us per batch, more than the copy itself
    READ_SIZE = 1 << 18

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.frames = FrameBuffer()
        self.out: list[bytes] = []
        self._inbuf = memoryview(bytearray(self.READ_SIZE))
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLIN)

    def send(self, frame: Frame) -> None:
        self.out.append(encode(frame))

    def flush(self) -> None:
        if self.out:
            data = b"".join(self.out)
            self.out.clear()
            self.sock.sendall(data)

    def has_frame(self) -> bool:
        return self.frames.has_frame()

    def read(self) -> memoryview:
        """What one read returned; valid until the next read (feed it to ``frames`` at once)."""
        return self._inbuf[:self.sock.recv_into(self._inbuf)]

    def wait_readable(self) -> None:
        """Sleep until the supervisor sent something, hung up or broke the socket (then :meth:`read`).

        Not asleep in ``recv`` itself: a unix socket wakes everything asleep on it whenever its peer reads
        what this side sent (room to write again), so a worker blocked in ``recv`` was woken, for nothing, each
        time the supervisor read one of its DONE frames, and the supervisor paid for that wake-up (~10 us on
        a VM; 0.65 of them per batch read in a no-op drain). ``poll`` for POLLIN only is woken by data alone.
        """
        self._poll.poll()
