"""``python -m rmqrun.worker <fd>``: how the pool starts a worker process (see rmqrun.worker.main)."""

import signal

from rmqrun.pipe.procs import COMMAND_SIGNALS

# the supervisor blocks its command signals to read their senders, and the mask survives fork and exec:
# unblock them before anything else, so SIGTERM stops this worker as it always did
signal.pthread_sigmask(signal.SIG_UNBLOCK, COMMAND_SIGNALS)

from rmqrun.worker.main import main  # noqa: E402 (after the mask: importing may take a while)

if __name__ == "__main__":
    main()
