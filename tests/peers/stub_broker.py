"""A scripted name server + broker on loopback, only for testing the C++ peer harness.

This is NOT rmqrun's embedded broker and nothing outside ``tests/`` may use it.
It exists so the harness (``cpp_peer.py`` / ``cpp.py``) can be exercised end to
end before the real embedded broker is ready: it answers the dozen requests the
C++ client sends (see ``tests/data/protocol`` scenario f) with just enough
truth for a producer to get SEND_OK and a push consumer to receive, fail and
get back its messages. No persistence, no delay levels (a sent-back message is
redelivered at once), no DLQ, one broker, JSON headers only.

Every request is recorded (``requests``) so tests can assert what the C++
client actually put on the wire.
"""

from __future__ import annotations

import json
import socket
import socketserver
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

BROKER_NAME = "stub-broker"
QUEUES_PER_TOPIC = 4
MAGIC_CODE = -626843481  # 0xDAA320A7 as a signed int32: the 4.x message format
LONG_POLL_CAP_S = 1.0  # answer a suspended pull after at most this long

SUCCESS, SYSTEM_ERROR, NOT_SUPPORTED = 0, 1, 3
TOPIC_NOT_EXIST, PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY = 17, 19, 20


@dataclass(frozen=True)
class Request:
    """One request as received: enough to check what a client sends."""

    server: str  # "namesrv" or "broker"
    code: int
    flag: int
    language: str
    version: int
    ext: dict[str, Any]
    body: bytes


@dataclass
class Stored:
    topic: str
    queue_id: int
    queue_offset: int
    commit_offset: int
    body: bytes
    properties: dict[str, str]
    flag: int
    sys_flag: int
    born_ts: int
    store_ts: int
    reconsume_times: int = 0

    def encode(self, born_port: int, store_port: int) -> bytes:
        """The broker's on-wire message layout (MessageDecoder, IPv4 hosts)."""
        topic = self.topic.encode()
        props = "".join(f"{k}\x01{v}\x02" for k, v in self.properties.items()).encode()
        fixed = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8  # up to the prepared-transaction offset
        size = fixed + 4 + len(self.body) + 1 + len(topic) + 2 + len(props)
        loopback = socket.inet_aton("127.0.0.1")
        return b"".join([
            struct.pack(">iiiiiqqiq", size, MAGIC_CODE, 0, self.queue_id, self.flag, self.queue_offset,
                        self.commit_offset, self.sys_flag, self.born_ts),
            loopback, struct.pack(">i", born_port), struct.pack(">q", self.store_ts),
            loopback, struct.pack(">i", store_port),
            struct.pack(">iqi", self.reconsume_times, 0, len(self.body)), self.body,
            struct.pack(">b", len(topic)), topic, struct.pack(">h", len(props)), props,
        ])


def parse_properties(text: str) -> dict[str, str]:
    pairs = (item.split("\x01", 1) for item in text.split("\x02") if "\x01" in item)
    return {key: value for key, value in pairs}


def decode_batch(body: bytes) -> list[tuple[bytes, dict[str, str], int]]:
    """The client-side batch layout: size, magic, crc, flag, body, properties; per message."""
    out, pos = [], 0
    while pos < len(body):
        size, _magic, _crc, flag, body_len = struct.unpack_from(">iiiii", body, pos)
        start = pos + 20
        payload = body[start:start + body_len]
        (props_len,) = struct.unpack_from(">h", body, start + body_len)
        props = body[start + body_len + 2:start + body_len + 2 + props_len].decode()
        out.append((payload, parse_properties(props), flag))
        pos += size
    return out


def matches(expression: str, tags: str | None) -> bool:
    if expression.strip() in ("", "*"):
        return True
    return tags in {part.strip() for part in expression.split("||")}


class StubCluster:
    """The shared state of the stub name server and broker; start() binds both on 127.0.0.1."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.queues: dict[tuple[str, int], list[Stored]] = {}
        self.offsets: dict[tuple[str, str, int], int] = {}
        self.consumers: dict[str, dict[str, float]] = {}  # group -> clientId -> last heartbeat
        self.by_commit_offset: dict[int, Stored] = {}
        self._next_commit_offset = 0
        self._cond = threading.Condition()
        self._servers: list[socketserver.ThreadingTCPServer] = []
        # seconds to hold a (non-pull) request before answering it: a broker stalled by a loaded machine
        self.stall: Callable[[Request], float] = lambda req: 0.0
        self.namesrv_port = self.broker_port = 0

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    def start(self) -> "StubCluster":
        for role in ("namesrv", "broker"):
            server = _Server(("127.0.0.1", 0), _Handler)
            server.cluster, server.role = self, role
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
            self._servers.append(server)
        self.namesrv_port = self._servers[0].server_address[1]
        self.broker_port = self._servers[1].server_address[1]
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.close_connections()
            server.server_close()

    def stored(self, topic: str) -> list[Stored]:
        """What the stub holds for ``topic``, every queue."""
        with self._cond:
            return [m for (t, _), msgs in self.queues.items() if t == topic for m in msgs]

    def seen(self, code: int) -> list[Request]:
        with self._cond:
            return [r for r in self.requests if r.code == code]

    # ---- requests

    def handle(self, role: str, req: Request) -> tuple[int, dict[str, str], bytes]:
        with self._cond:
            self.requests.append(req)
        delay = self.stall(req)
        if delay > 0:
            time.sleep(delay)
        if role == "namesrv":
            return self._route(req) if req.code == 105 else (NOT_SUPPORTED, {}, b"")
        handler = {10: self._send, 34: self._heartbeat, 35: self._unregister,
                   38: self._consumer_list, 14: self._query_offset, 15: self._update_offset,
                   36: self._send_back, 41: self._lock, 42: lambda r: (SUCCESS, {}, b"")}.get(req.code)
        return handler(req) if handler else (NOT_SUPPORTED, {}, b"")

    def _route(self, req: Request) -> tuple[int, dict[str, str], bytes]:
        topic = str(req.ext.get("topic", ""))
        queues = 1 if topic.startswith("%RETRY%") else QUEUES_PER_TOPIC
        # fastjson writes the brokerAddrs key as a bare integer; so do we.
        text = ('{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:%d"},"brokerName":"%s","cluster":"DefaultCluster"}],'
                '"filterServerTable":{},"queueDatas":[{"brokerName":"%s","perm":6,"readQueueNums":%d,'
                '"topicSysFlag":0,"writeQueueNums":%d}]}'
                ) % (self.broker_port, BROKER_NAME, BROKER_NAME, queues, queues)
        return SUCCESS, {}, text.encode()

    def _append(self, topic: str, queue_id: int, body: bytes, props: dict[str, str], flag: int, sys_flag: int,
                born_ts: int, reconsume_times: int = 0) -> Stored:
        with self._cond:
            queue = self.queues.setdefault((topic, queue_id), [])
            msg = Stored(topic, queue_id, len(queue), self._next_commit_offset, body, props, flag, sys_flag, born_ts,
                         int(time.time() * 1000), reconsume_times)
            self._next_commit_offset += 1000
            queue.append(msg)
            self.by_commit_offset[msg.commit_offset] = msg
            self._cond.notify_all()
            return msg

    def _send(self, req: Request) -> tuple[int, dict[str, str], bytes]:
        ext = {key: str(value) for key, value in req.ext.items()}
        topic, queue_id = ext["topic"], int(ext["queueId"])
        born_ts, sys_flag = int(ext.get("bornTimestamp", 0)), int(ext.get("sysFlag", 0))
        if ext.get("batch") == "1":
            parts = decode_batch(req.body)
        else:
            parts = [(req.body, parse_properties(ext.get("properties", "")), int(ext.get("flag", 0)))]
        stored = [self._append(topic, queue_id, body, props, flag, sys_flag, born_ts) for body, props, flag in parts]
        msg_id = ",".join(f"7F000001{self.broker_port:08X}{m.commit_offset:016X}" for m in stored)
        return SUCCESS, {"msgId": msg_id, "queueId": str(queue_id), "queueOffset": str(stored[0].queue_offset)}, b""

    def _heartbeat(self, req: Request) -> tuple[int, dict[str, str], bytes]:
        data = json.loads(req.body or b"{}")
        with self._cond:
            for consumer in data.get("consumerDataSet", []):
                self.consumers.setdefault(consumer["groupName"], {})[data["clientID"]] = time.time()
        return SUCCESS, {}, b""

    def _unregister(self, req: Request) -> tuple[int, dict[str, str], bytes]:
        with self._cond:
            self.consumers.get(str(req.ext.get("consumerGroup")), {}).pop(str(req.ext.get("clientID")), None)
        return SUCCESS, {}, b""

    def _consumer_list(self, req: Request) -> tuple[int, dict[str, str], bytes]:
        with self._cond:
            ids = sorted(self.consumers.get(str(req.ext.get("consumerGroup")), {}))
        return SUCCESS, {}, json.dumps({"consumerIdList": ids}).encode()

    def _key(self, req: Request) -> tuple[str, str, int]:
        return str(req.ext["consumerGroup"]), str(req.ext["topic"]), int(req.ext["queueId"])

    def _query_offset(self, req: Request) -> tuple[int, dict[str, str], bytes]:
        with self._cond:  # no stored offset: 0, as a 4.9.8 broker answers for a young topic
            return SUCCESS, {"offset": str(self.offsets.get(self._key(req), 0))}, b""

    def _update_offset(self, req: Request) -> tuple[int, dict[str, str], bytes]:
        with self._cond:
            self.offsets[self._key(req)] = int(req.ext["commitOffset"])
        return SUCCESS, {}, b""

    def _send_back(self, req: Request) -> tuple[int, dict[str, str], bytes]:
        with self._cond:
            original = self.by_commit_offset.get(int(req.ext["offset"]))
        if original is None:
            return SYSTEM_ERROR, {}, b""
        props = dict(original.properties)
        props.setdefault("RETRY_TOPIC", original.topic)
        props.setdefault("ORIGIN_MESSAGE_ID", f"7F000001{self.broker_port:08X}{original.commit_offset:016X}")
        self._append(f"%RETRY%{req.ext['group']}", 0, original.body, props, original.flag, original.sys_flag,
                     original.born_ts, original.reconsume_times + 1)
        return SUCCESS, {}, b""

    def _lock(self, req: Request) -> tuple[int, dict[str, str], bytes]:
        wanted = json.loads(req.body or b"{}").get("mqSet", [])
        return SUCCESS, {}, json.dumps({"lockOKMQSet": wanted}).encode()

    def pull(self, req: Request, born_port: int) -> tuple[int, dict[str, str], bytes]:
        """Messages from queueOffset on, or PULL_NOT_FOUND after a (capped) long poll."""
        with self._cond:
            self.requests.append(req)
        topic, queue_id = str(req.ext["topic"]), int(req.ext["queueId"])
        offset, limit = int(req.ext["queueOffset"]), int(req.ext.get("maxMsgNums", 32))
        expression = str(req.ext.get("subscription", "*"))
        wait = min(int(req.ext.get("suspendTimeoutMillis", 0)) / 1000, LONG_POLL_CAP_S)
        deadline = time.monotonic() + wait
        with self._cond:
            queue = self.queues.setdefault((topic, queue_id), [])
            while len(queue) <= offset and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
            scanned = queue[offset:offset + limit]
            ext = {"minOffset": "0", "maxOffset": str(len(queue)), "suggestWhichBrokerId": "0"}
        if not scanned:
            return PULL_NOT_FOUND, {**ext, "nextBeginOffset": str(min(offset, len(queue)))}, b""
        ext["nextBeginOffset"] = str(offset + len(scanned))
        found = [m for m in scanned if matches(expression, m.properties.get("TAGS"))]
        if not found:
            return PULL_RETRY_IMMEDIATELY, ext, b""
        return SUCCESS, ext, b"".join(m.encode(born_port, self.broker_port) for m in found)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    cluster: StubCluster
    role: str

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connections: set[socket.socket] = set()

    def close_connections(self) -> None:
        for conn in list(self.connections):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(socketserver.BaseRequestHandler):
    """One client connection: frames in, answers out (pulls answered from their own thread)."""

    server: _Server

    def handle(self) -> None:
        self.server.connections.add(self.request)
        self._write_lock = threading.Lock()
        try:
            while True:
                frame = self._read_frame()
                if frame is None:
                    return
                header, body = frame
                if header.get("flag", 0) & 1:
                    continue  # a response to a broker->client request; we send none
                req = Request(self.server.role, int(header["code"]), int(header.get("flag", 0)),
                              str(header.get("language")), int(header.get("version", 0)),
                              dict(header.get("extFields") or {}), body)
                if self.server.role == "broker" and req.code == 11:
                    port = self.client_address[1]
                    threading.Thread(target=lambda: self._answer(header, *self.server.cluster.pull(req, port)),
                                     daemon=True).start()
                else:
                    self._answer(header, *self.server.cluster.handle(self.server.role, req))
        finally:
            self.server.connections.discard(self.request)

    def _read_exact(self, size: int) -> bytes | None:
        data = b""
        while len(data) < size:
            chunk = self.request.recv(size - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def _read_frame(self) -> tuple[dict[str, Any], bytes] | None:
        prefix = self._read_exact(8)
        if prefix is None:
            return None
        length, mark = struct.unpack(">ii", prefix)
        header_len = mark & 0xFFFFFF
        rest = self._read_exact(length - 4)
        if rest is None:
            return None
        return json.loads(rest[:header_len]), rest[header_len:]

    def _answer(self, request: dict[str, Any], code: int, ext: dict[str, str], body: bytes) -> None:
        if int(request.get("flag", 0)) & 2:
            return  # oneway: no answer
        header = json.dumps({"code": code, "extFields": ext, "flag": 1, "language": "JAVA",
                             "opaque": request.get("opaque", 0), "serializeTypeCurrentRPC": "JSON",
                             "version": 409}).encode()
        frame = struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body
        with self._write_lock:
            try:
                self.request.sendall(frame)
            except OSError:
                pass
