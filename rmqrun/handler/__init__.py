"""The handler contract: what a ``module:function`` handler is, receives and returns.

The worker process (``rmqrun run``), the Spark runner (``rmqrun spark``) and
users' own code all stand on this contract, so it sits below all of them and
imports none of them: ``results`` (what a handler may return, and the
exceptions raised inside it), ``loading`` (``module:function`` references,
``@batch``, ``WorkerInfo``, the worker hooks) and ``outcome`` (a
concurrent-mode return value as "how many messages succeeded"). How those
become statuses on the supervisor's pipe is the worker's business
(:mod:`rmqrun.worker.handler`).

The package itself imports nothing, so a caller pays only for the parts it uses.
"""
