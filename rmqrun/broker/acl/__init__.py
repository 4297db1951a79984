"""ACL 1.0 (RocketMQ 4.x ``plain_acl``) on the embedded broker.

``config`` reads a ``plain_acl.yml``; ``addresses`` matches white-listed
client addresses; ``signature`` checks a request's HMAC from the algorithm's
definition; ``resources`` says what each request code needs; ``validator``
puts them together in the order a 4.9.8 broker does and answers refusals.
"""
