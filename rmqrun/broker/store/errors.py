"""Exceptions raised by the message store.

They are split by what the caller should do: a bad record is the caller's bug
(reject the request), a too-large message is the producer's problem (answer
MESSAGE_ILLEGAL), and an I/O failure fences the store (answer SYSTEM_ERROR and
stop accepting writes), because after a failed fsync nobody knows what reached
the disk.
"""

from __future__ import annotations

from rmqrun.errors import RmqrunError


class StoreError(RmqrunError):
    """Base class of every error the store raises on purpose."""


class RecordFormatError(StoreError, ValueError):
    """A record handed to the store (or found on disk) is not a valid stored-message record."""


class MessageTooLargeError(StoreError, ValueError):
    """A record is larger than ``StoreConfig.max_message_size``."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"message record of {size} bytes exceeds max_message_size={limit}")
        self.size = size
        self.limit = limit


class StoreClosedError(StoreError):
    """The store is not open (never opened, or already closed)."""


class DataDirError(StoreError):
    """The data directory cannot be used: not a directory, not writable, in use, disk full.

    The message names the directory; callers (the ``rmqrun broker`` command) print it as
    one line instead of a traceback.
    """

    def __init__(self, data_dir: object, reason: str) -> None:
        super().__init__(f"data directory {data_dir}: {reason}")
        self.data_dir = data_dir
        self.reason = reason


class StoreLockedError(DataDirError):
    """Another process already has this data directory open."""

    def __init__(self, data_dir: object, reason: str = "already in use by another broker or store "
                 "(its lock file is held)") -> None:
        super().__init__(data_dir, reason)


class StoreIOError(StoreError, OSError):
    """A write or fsync failed; the store refuses further writes until reopened."""


class DiskFullError(StoreError):
    """The data directory's disk is above ``disk_space_warning_level_ratio``: writes are refused.

    Not a fence like :class:`StoreIOError`: nothing went wrong on disk, and writes are
    accepted again as soon as retention (or the operator) brings use back at or under
    ``disk_space_clean_forcibly_ratio``. The broker answers sends SERVICE_NOT_AVAILABLE,
    as RocketMQ does when its running flags say DISK_FULL.
    """

    def __init__(self, data_dir: object, used: float, limit: int) -> None:
        super().__init__(f"the disk of {data_dir} is {used:.0%} used (above {limit}%): the store refuses writes")
        self.data_dir = data_dir
        self.used = used
        self.limit = limit


class NoSpaceError(DiskFullError):
    """A write failed with ENOSPC (or EDQUOT) before a retention check saw the disk fill.

    The store rolled the failed write back (nothing of it stays, nothing acknowledged
    before it is touched) and holds the disk-full mark, so it is answered like
    :class:`DiskFullError`; writes resume once a check finds use at or under
    ``disk_space_clean_forcibly_ratio``, without a restart.
    """

    def __init__(self, data_dir: object, used: float, limit: int, reason: str) -> None:
        StoreError.__init__(self, f"the disk of {data_dir} is full ({reason}; {used:.0%} used): the store refuses "
                            "writes")
        self.data_dir = data_dir
        self.used = used
        self.limit = limit
