"""Records: one frozen discriminated union; bad input names the field; unknown kinds refused."""
import pydantic
import pytest

from journal.records import Command, Observed, Outcome, RecordError, dump_record, parse_record, parse_records


def test_records_are_frozen():
    rec = Command(name="repo.gc", at=1)
    with pytest.raises(pydantic.ValidationError):
        rec.name = "other"


def test_stamping_returns_a_copy_with_the_sequence_number():
    draft = Command(name="repo.gc", at=1)
    assert draft.seq == -1 and draft.stamped(7).seq == 7 and draft.seq == -1


@pytest.mark.parametrize("record", [
    Observed(seq=1, at=5, cluster="c", api_version="v1", kind="Pod", namespace="ns", name="p", uid="u",
             rv="9", event="ADDED", obj={"metadata": {"name": "p"}}),
    Command(seq=2, at=None, name="session.configure", args={"clusters": ["local"]}),
    Outcome(seq=3, at=7, effect_id="1.0", machine="pod", key="c/ns/p", result="conflict",
            status_reason="Conflict", code=409, items=({"a": 1},)),
], ids=["observed", "command", "outcome"])
def test_a_record_round_trips_through_json(record):
    assert parse_record(dump_record(record)) == record
    assert parse_records([dump_record(record), dump_record(record)]) == [record, record]


def test_an_unknown_record_kind_is_refused_by_name():
    with pytest.raises(RecordError, match="line 3: .*unknown record kind 'gossip'"):
        parse_record(b'{"rec": "gossip", "seq": 1}', "line 3")


def test_a_missing_field_is_named():
    with pytest.raises(RecordError, match=r"field observed\.name: Field required"):
        parse_record(b'{"rec":"observed","seq":1,"cluster":"c","api_version":"v1","kind":"Pod","event":"ADDED"}')


def test_an_event_type_outside_the_watch_vocabulary_is_refused():
    with pytest.raises(RecordError, match="event"):
        parse_record(b'{"rec":"observed","seq":1,"cluster":"c","api_version":"v1","kind":"Pod","name":"p","event":"BOOKMARK"}')


def test_unknown_fields_are_refused_rather_than_dropped():
    with pytest.raises(RecordError, match="surprise"):
        parse_record(b'{"rec":"command","seq":1,"name":"x","surprise":true}')
