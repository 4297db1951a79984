"""The embedded RocketMQ 4.x name server and broker.

Entry points live in :mod:`rmqrun.broker.app` (``EmbeddedBroker``,
``BrokerProcess``, ``run``); they are not imported here so that importing
``rmqrun.broker.store`` or a processor stays cheap.
"""
