"""The ``Store`` contract as pytest tests: run them on a store of your own.

In a test module, import them and give the fixture they take, ``contract_store_factory``:
a callable taking ``lease_ttl`` (seconds, keyword) and returning a new store object on a
new, empty store (it is called at most once per test; the tests close what it returns)::

    import pytest
    from hpd_agent.testing.store_contract import *  # noqa: F403  (the tests and fixture)

    from my_package import MyStore

    @pytest.fixture
    def contract_store_factory():
        return lambda *, lease_ttl: MyStore(lease_ttl=lease_ttl)

The tests are async (``pytest.mark.anyio``: needs anyio's pytest plugin, installed with
anyio; asyncio by default, parametrise ``anyio_backend`` for trio too). They check every
``Store`` method (requests, answers and their refusals, waiting, recovery, the journal, run
records, leases), the lease as a fence (a session whose lease was taken over writes
nothing, whatever the store declares in ``capabilities()``), runs through the store (a
question, an interrupt and a resume that runs no tool twice, leases held, released and
lost, ``cancel_run``), that each declared capability implements its protocol, and the
thread tables, the request feed and remembered grants when the store offers them (skipped
otherwise). ``question`` and ``permission`` make the request records they store, for tests of your
own. The shipped
stores run the same tests (tests/store/test_store_contract.py); docs/durability.md,
"Writing a store", shows a store written from scratch that passes them.
"""

from __future__ import annotations

import pytest

# Plain ``assert`` in these modules explains its failures as in a test module.
pytest.register_assert_rewrite(
    "hpd_agent.testing._contract_grants",
    "hpd_agent.testing._contract_requests",
    "hpd_agent.testing._contract_leases",
    "hpd_agent.testing._contract_runs",
    "hpd_agent.testing._contract_threads",
    "hpd_agent.testing._contract_feed",
)

from ._contract_feed import (  # noqa: E402
    test_store_request_feed_tells_each_request_opening_and_ending,
)
from ._contract_grants import (  # noqa: E402
    test_store_a_grant_approves_a_later_run_without_asking,
    test_store_grants_are_kept_once_found_by_what_they_cover_and_revoked,
)
from ._contract_leases import (  # noqa: E402
    test_store_a_gone_holders_lease_is_taken_over_at_once,
    test_store_a_runs_fencing_token_grows_from_take_to_take,
    test_store_a_stale_session_writes_nothing_and_the_new_holder_writes,
    test_store_an_expired_lease_is_taken_over,
    test_store_each_declared_capability_implements_its_protocol,
    test_store_take_renew_release,
)
from ._contract_requests import (  # noqa: E402
    StoreFactory,
    contract_store,
    permission,
    question,
    test_store_add_request_is_idempotent_and_round_trips,
    test_store_answer_context_is_merged_key_by_key,
    test_store_journal_and_run_records,
    test_store_keeps_who_answered_once,
    test_store_list_requests_filters_by_run_and_status,
    test_store_permission_answers_are_checked_and_kept_as_json,
    test_store_recover_expires_only_old_or_overdue_requests,
    test_store_respond_refuses_each_case_with_a_distinct_error,
    test_store_wait_resolved_wakes_when_answered,
)
from ._contract_runs import (  # noqa: E402
    test_store_a_cancelled_run_releases_its_lease,
    test_store_a_new_run_on_a_kept_id_is_refused_and_takes_no_lease,
    test_store_a_new_run_on_a_leased_id_is_refused_and_writes_nothing,
    test_store_a_refused_resume_gives_the_lease_back,
    test_store_a_run_holds_its_lease_while_it_runs_and_releases_it,
    test_store_a_run_that_loses_its_lease_stops_and_writes_nothing_more,
    test_store_an_answer_through_the_store_wakes_the_waiting_run,
    test_store_an_interrupted_run_resumes_and_runs_nothing_twice,
    test_store_cancel_run_stops_a_run_waiting_for_a_human,
)
from ._contract_threads import (  # noqa: E402
    test_store_thread_tables_keep_rows_in_order_and_items_once,
    test_store_thread_tables_keep_spaces_apart_and_find_a_rows_thread,
)

__all__ = [
    "StoreFactory",
    "contract_store",
    "permission",
    "question",
    "test_store_a_cancelled_run_releases_its_lease",
    "test_store_a_gone_holders_lease_is_taken_over_at_once",
    "test_store_a_grant_approves_a_later_run_without_asking",
    "test_store_a_new_run_on_a_kept_id_is_refused_and_takes_no_lease",
    "test_store_a_new_run_on_a_leased_id_is_refused_and_writes_nothing",
    "test_store_a_refused_resume_gives_the_lease_back",
    "test_store_a_run_holds_its_lease_while_it_runs_and_releases_it",
    "test_store_a_run_that_loses_its_lease_stops_and_writes_nothing_more",
    "test_store_a_runs_fencing_token_grows_from_take_to_take",
    "test_store_a_stale_session_writes_nothing_and_the_new_holder_writes",
    "test_store_add_request_is_idempotent_and_round_trips",
    "test_store_an_answer_through_the_store_wakes_the_waiting_run",
    "test_store_an_expired_lease_is_taken_over",
    "test_store_an_interrupted_run_resumes_and_runs_nothing_twice",
    "test_store_answer_context_is_merged_key_by_key",
    "test_store_cancel_run_stops_a_run_waiting_for_a_human",
    "test_store_each_declared_capability_implements_its_protocol",
    "test_store_grants_are_kept_once_found_by_what_they_cover_and_revoked",
    "test_store_journal_and_run_records",
    "test_store_keeps_who_answered_once",
    "test_store_list_requests_filters_by_run_and_status",
    "test_store_permission_answers_are_checked_and_kept_as_json",
    "test_store_recover_expires_only_old_or_overdue_requests",
    "test_store_request_feed_tells_each_request_opening_and_ending",
    "test_store_respond_refuses_each_case_with_a_distinct_error",
    "test_store_take_renew_release",
    "test_store_thread_tables_keep_rows_in_order_and_items_once",
    "test_store_thread_tables_keep_spaces_apart_and_find_a_rows_thread",
    "test_store_wait_resolved_wakes_when_answered",
]
