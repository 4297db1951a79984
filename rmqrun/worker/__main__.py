"""``python -m rmqrun.worker <fd>``: how the pool starts a worker process (see rmqrun.worker.main)."""

from rmqrun.worker.main import main

if __name__ == "__main__":
    main()
