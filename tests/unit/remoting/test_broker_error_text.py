"""What a broker's refusal reads like in rmqrun's messages (``BrokerError``'s text)."""

from __future__ import annotations

from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import BrokerError, error_for_code


def test_the_remark_is_shown_without_the_spaces_a_java_broker_puts_around_it() -> None:
    # the real 4.9.8 broker's answer to QUERY_ASSIGNMENT (400, what a POP consumer asks first): its remark begins
    # with a space
    exc = error_for_code(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 400 not supported", 400)
    assert str(exc) == "REQUEST_CODE_NOT_SUPPORTED (3): request type 400 not supported"
    assert exc.remark == " request type 400 not supported"  # kept as the broker sent it


def test_a_remark_of_spaces_only_reads_as_no_remark() -> None:
    assert str(BrokerError(ResponseCode.SYSTEM_ERROR, "  ")) == "SYSTEM_ERROR (1)"
    assert str(BrokerError(ResponseCode.SYSTEM_ERROR, None)) == "SYSTEM_ERROR (1)"
