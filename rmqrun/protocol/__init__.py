"""The wire schema: what travels in a RocketMQ frame's header and body, with no I/O.

* :mod:`.header_codec` – the :class:`~.header_codec.Header` base (ext fields both ways, in Java's order);
* :mod:`.headers` – the typed request and response headers;
* :mod:`.bodies` – the JSON bodies (heartbeat, locks, consumer lists, offset tables) and their enums;
* :mod:`.admin` – the operator requests' headers and bodies (stats, broker/name-server config, consume queues);
* :mod:`.subscription` – :class:`~.subscription.SubscriptionData`, tag expressions and tag matching;
* :mod:`.java_order` – Java ``HashSet`` iteration order, which the two above reproduce.

Both the client (which sends requests and reads answers) and the embedded broker (which reads requests and
answers them) stand on this package, the way aiokafka keeps its schema in ``aiokafka/protocol/`` below its
client and anything that serves it. It imports only :mod:`rmqrun.remoting` and :mod:`rmqrun.model`.

Nothing is imported here, so importing one module never drags in the others.
"""
