"""The embedded broker's POP consumption engine (RocketMQ 5.x ``PopMessageProcessor`` and friends).

:mod:`.checkpoint` one pop of one queue and its ack bitmap; :mod:`.ck_log` the durable table of them;
:mod:`.service` pops, acks and changes invisibility; :mod:`.revive` puts what was not acked in time into the
pop retry topic; :mod:`.order_info` the order-mode state (a queue blocked while its batch is out);
:mod:`.polling` holds POP and NOTIFICATION requests for long polling. The request handlers are
:mod:`rmqrun.broker.processors.pop` and :mod:`rmqrun.broker.processors.pop_ack`.
"""
