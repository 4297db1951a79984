"""The contract between the supervisor and its worker processes.

``wire`` holds the framed messages on each worker's socket pair (and the
worker exit-code table); ``progress`` the per-worker shared-memory block the
supervisor reads after a worker dies. Both the supervisor and the worker stand
on this package, so neither needs to import the other to talk.
"""
