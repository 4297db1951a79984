"""Peers for conformance tests: clients nobody on this project wrote.

`cpp_peer.py` drives the Apache RocketMQ C++ client (PyPI ``rocketmq==0.4.4``)
in a child process; `cpp.py` is the test-side handle on that child.
"""
