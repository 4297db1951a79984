"""The typed client over the remoting layer: what a 4.9.8 Java client sends, and how.

The wire schema it sends (headers, bodies, subscriptions) is :mod:`rmqrun.protocol`, shared with the
embedded broker, which parses and answers with the same classes.

* :mod:`.route` – topic routes from the name server, and the queues they imply;
* :mod:`.namesrv` – :class:`~.namesrv.NameServerClient` (routes, failover);
* :mod:`.broker` – :class:`~.broker.BrokerClient` (send, pull, offsets, heartbeat, locks, send-back);
* :mod:`.instance` – :class:`~.instance.ClientInstance` (client id, pool, route cache, heartbeat,
  broker → client requests);
* :mod:`.producer` – :class:`~.producer.Producer`;
* :mod:`.msgid` / :mod:`.netutil` – UNIQ_KEY ids and the announced host address;
* :mod:`.errors` – the client layer's own exceptions.

Nothing is imported here, so importing one module never drags in the others.
"""
