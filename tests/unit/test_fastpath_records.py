"""Fast paths of the journal: trusted construction of verified rows, stamping, parse_records.

Each fast path must give exactly what the validating path gives (equal records, same fields set),
and must still refuse what validation refuses: an unknown kind is an error, never skipped."""
import orjson
import pydantic
import pytest

from journal.chain import dump, parse_payloads, stamp
from journal.records import (Command, Deadline, EffectIssued, ListedKey, Observed, Outcome, RecordAdapter,
                             Relist, dump_record, observed_draft, parse_records, trusted_record)

RECORDS = [
    Observed(seq=1, at=5, cluster="c", api_version="v1", kind="Pod", namespace="ns", name="p", uid="u",
             rv="9", event="MODIFIED", obj={"metadata": {"name": "p", "labels": {"a": "b"}}, "n": [1, 2.5, None]}),
    Observed(seq=2, at=None, cluster="c", api_version="v1", kind="Pod", name="p", event="DELETED"),
    Command(seq=3, at=6, name="session.configure", args={"clusters": ["local"]}),
    Deadline(seq=4, at=7, timer="pod:k:budget", machine="pod", key="k", name="budget", due=7),
    EffectIssued(seq=5, at=8, effect={"id": "1.0", "type": "get"}),
    Outcome(seq=6, at=9, effect_id="1.0", machine="pod", key="c/ns/p", result="ok", items=({"a": 1},)),
    Relist(seq=7, at=10, cluster="c", api_version="v1", kind="Pod", keys=(ListedKey(name="p"),)),
    Command(seq=8, at=11, name="big", args={"n": 2 ** 63 - 1, "f": 0.5}),
]
IDS = ["observed", "observed-bare", "command", "deadline", "effect", "outcome", "relist", "int64-float"]


@pytest.mark.parametrize("record", RECORDS, ids=IDS)
@pytest.mark.parametrize("dumper", [dump, dump_record], ids=["orjson-dump", "pydantic-dump"])
def test_a_verified_payload_reads_back_as_the_validated_record(record, dumper):
    payload = dumper(record)
    [fast] = parse_payloads([payload])
    slow = RecordAdapter.validate_json(payload)
    assert fast == slow == record
    assert type(fast) is type(record)
    assert fast.__pydantic_fields_set__ == slow.__pydantic_fields_set__
    assert dump(fast) == dump(slow)


def test_trusted_construction_still_refuses_an_unknown_kind():
    with pytest.raises(Exception, match="gossip|union_tag_invalid|tag"):
        trusted_record({"rec": "gossip", "seq": 1})


def test_another_field_layout_is_validated_not_trusted():
    data = orjson.loads(dump(RECORDS[2]))
    data["surprise"] = True
    with pytest.raises(Exception, match="surprise"):
        trusted_record(data)
    wrong = orjson.loads(dump(RECORDS[0]))
    del wrong["name"]
    with pytest.raises(Exception, match="name"):
        trusted_record(wrong)


def test_stamp_equals_stamped_fields_set_included():
    draft = Command(name="repo.gc", at=1, args={"x": 1})
    fast, slow = stamp(draft, 7), draft.stamped(7)
    assert fast == slow and fast.seq == 7 and draft.seq == -1
    assert fast.__pydantic_fields_set__ == slow.__pydantic_fields_set__
    assert fast.__dict__ is not draft.__dict__


def test_parse_records_validates_each_record_fully():
    assert parse_records([dump_record(r) for r in RECORDS]) == RECORDS
    with pytest.raises(Exception, match="surprise"):
        parse_records([b'{"rec":"command","seq":1,"name":"x","surprise":true}'])


class TestObservedDraft:
    """``observed_draft``: what the observer builds per watch event, without validation when the
    values already have their fields' types, and validated (so refused the same way) otherwise."""

    ARGS = dict(at=1_893_456_000_000, cluster="c1", api_version="v1", kind="Pod", namespace="ns", name="a",
                uid="u-1", rv="11", event="MODIFIED", obj={"metadata": {"name": "a"}, "spec": {"x": [1, None]}})

    @pytest.mark.parametrize("change", [{}, {"at": None}, {"namespace": ""}, {"event": "DELETED"}, {"obj": {}}])
    def test_equals_the_validated_record_field_for_field(self, change):
        args = self.ARGS | change
        fast, slow = observed_draft(**args), Observed(**args)
        assert fast == slow and fast.__pydantic_fields_set__ == slow.__pydantic_fields_set__
        assert list(fast.__dict__) == list(slow.__dict__) and dump(fast) == dump(slow)
        assert fast.seq == -1 and fast.rec == "observed" and fast.obj is args["obj"]

    @pytest.mark.parametrize("change", [{"name": 7}, {"rv": None}, {"event": "BOOKMARK"}, {"obj": ["x"]},
                                        {"at": "soon"}, {"namespace": 3.5}])
    def test_a_value_of_another_type_is_refused_as_the_model_refuses_it(self, change):
        with pytest.raises(pydantic.ValidationError) as fast:
            observed_draft(**(self.ARGS | change))
        with pytest.raises(pydantic.ValidationError) as slow:
            Observed(**(self.ARGS | change))
        assert fast.value.errors() == slow.value.errors()
