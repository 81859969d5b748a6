"""The id allocator's rules: sequential ids, the same answer for a repeated request, bounded memory."""

from __future__ import annotations

from skyhop.contract.job_index import AllocatedIds, AllocateIds, ManagedJobIdsInput
from skyhop.workflows.id_ledger import IdLedger


def test_ids_are_sequential_from_one_and_a_count_takes_a_block() -> None:
    ledger = IdLedger(ManagedJobIdsInput())
    assert ledger.allocate(AllocateIds(request_id="a")) == AllocatedIds(first=1, count=1)
    assert ledger.allocate(AllocateIds(request_id="b", count=3)) == AllocatedIds(first=2, count=3)
    assert ledger.allocate(AllocateIds(request_id="c")) == AllocatedIds(first=5, count=1)
    assert ledger.last == 5


def test_a_repeated_request_gets_its_first_answer_and_takes_nothing() -> None:
    ledger = IdLedger(ManagedJobIdsInput())
    first = ledger.allocate(AllocateIds(request_id="retry"))
    ledger.allocate(AllocateIds(request_id="other"))
    assert ledger.allocate(AllocateIds(request_id="retry", count=5)) == first
    assert ledger.last == 2


def test_the_recent_answers_are_bounded_oldest_dropped_first() -> None:
    ledger = IdLedger(ManagedJobIdsInput(), keep=3)
    for n in range(5):
        ledger.allocate(AllocateIds(request_id=f"r{n}"))
    assert list(ledger.recent) == ["r2", "r3", "r4"]
    assert ledger.allocate(AllocateIds(request_id="r0")).first == 6  # forgotten: a new id


def test_what_a_continue_as_new_carries_gives_the_same_answers_and_counter() -> None:
    ledger = IdLedger(ManagedJobIdsInput())
    given = ledger.allocate(AllocateIds(request_id="a"))
    carried = ledger.carried(history_limit=50)
    assert carried.history_limit == 50
    again = IdLedger(ManagedJobIdsInput.model_validate_json(carried.model_dump_json()))
    assert again.allocate(AllocateIds(request_id="a")) == given
    assert again.allocate(AllocateIds(request_id="b")).first == 2
