"""The tolerant fastjson reader and writer: what it accepts beyond JSON, and how it refuses the rest.

Bodies come from Java brokers and name servers (bare integer keys, object keys);
anything else that is not JSON must be a :class:`ProtocolError` naming the place,
never a Python exception from deep inside the parser.
"""

from __future__ import annotations

import pytest

from rmqrun.remoting import fastjson
from rmqrun.remoting.errors import ProtocolError


def test_fastjson_extensions_parse() -> None:
    text = '{0:"a",{"topic":"t","queueId":1}:[1,2.5,-3e2,true,false,null],"s":{} , "e":[ ]}'
    value = fastjson.loads(text)
    assert value["0"] == "a"
    key = next(k for k in value if k.startswith("{"))
    assert fastjson.object_key(key) == {"queueId": 1, "topic": "t"}
    assert value[key] == [1, 2.5, -300.0, True, False, None]
    assert value["s"] == {} and value["e"] == []


@pytest.mark.parametrize(("text", "words"), [
    (b"\xff{}", "JSON body is not UTF-8"),
    ('{0:"a"} extra', "trailing data at offset"),
    ('{0:"a" "b":1}', "expected ',' or '}'"),
    ("{0 1}", "expected ':'"),
    ("{0:[1 2]}", "expected ',' or ']'"),
    ("{0:", "expected a value"),
    ("{0:@}", "expected a value"),
    ("{@:1}", "expected an object key"),
    ('{0:"\\x"}', "invalid JSON string at offset"),
    ('{0:1,"\\q":2}', "invalid JSON key at offset"),
    ("{0:" + "[" * 5000 + "]" * 5000 + "}", "nested too deeply"),
])
def test_what_is_not_fastjson_is_a_protocol_error(text: str | bytes, words: str) -> None:
    with pytest.raises(ProtocolError, match=words.replace("(", r"\(")):
        fastjson.loads(text)


class _Queue:
    def to_json(self) -> dict[str, object]:
        return {"topic": "t", "queueId": 1}


def test_dumps_with_objects_and_bare_integer_keys() -> None:
    assert fastjson.dumps({"q": _Queue()}) == b'{"q":{"topic":"t","queueId":1}}'
    assert fastjson.dumps({0: "a", "k": [_Queue(), (1, None)]}, unquoted_int_keys=True) == (
        b'{0:"a","k":[{"topic":"t","queueId":1},[1,null]]}')
    assert fastjson.dumps({True: 1}, unquoted_int_keys=True) == b'{"True":1}', "a bool is no integer key"
    with pytest.raises(TypeError, match="object is not JSON serializable"):
        fastjson.dumps({"x": object()})
