"""Schemathesis over the OpenAPI document: generated requests for every
operation, as an agent with its token and as the partner with a session,
must never get a 5xx nor a response that breaks the document.

Bounded: a fixed number of examples per operation (``MAX_EXAMPLES``),
derandomized so a run is repeatable, and each kind of the coverage phase's
cases tried at most ``COVERAGE_EACH`` times per operation.  What it found on
the way is kept as explicit regression tests in ``test_api.py`` and
``test_hostile_input.py`` here and in each app's ``test_api.py``.
"""

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import Client
from hypothesis import HealthCheck, settings
from schemathesis.generation.meta import TestPhase
from schemathesis.specs.openapi.checks import ignored_auth, positive_data_acceptance

from coordination.groups.services import group_create, group_member_add
from coordination.work.services import handoff_create, task_create
from folders.files.services import file_write, folder_attach, folder_create
from memory.blocks.services import block_create
from memory.longterm.services import (
    archival_entry_create,
    conversation_start,
    messages_append,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue
from tests.factories import AgentFactory
from tests.pattern_site.test_api import DOCUMENTED

pytestmark = pytest.mark.slow

MAX_EXAMPLES = 12
# The coverage phase enumerates cases without a bound: one kind (an array of
# block operations with an invalid item, say) comes hundreds of times for a
# single operation, each the same rule against another value.  A few of each
# kind find what the kind finds; the rest was two thirds of this file's time.
COVERAGE_EACH = 4
CSRF = "schemathesisCsrfSecretOf32Chars0"

# A schema-valid request may still break a domain rule the schema cannot
# express (a section the block does not have, a block full to its limit):
# that is a documented 409/422, not a failure to accept valid data.
DOMAIN_RULES = [positive_data_acceptance]

# Streams answer with a body that never ends within a request (a run's
# Server-Sent Events last until the run finishes; the inbox long-polls for
# ``wait`` seconds): their behaviour is tested in tests/coordination/groups.
STREAMS = ["/api/runs/{run_id}/events", "/api/inbox"]
# A multipart upload's body is files, which the generator makes as random
# bytes named at random: tested with real files in tests/folders.
UPLOADS = ["/api/folders/{folder_id}/files"]

schema = (
    schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application())
    .include(tag=sorted(DOCUMENTED))
    .exclude(path=STREAMS, method="GET")
    .exclude(path=UPLOADS, method="POST")
)
# A string one past its maximum may not fit the request size limit (a block
# holds up to a million characters, which escaped JSON makes six
# megabytes): the body is then refused whole, with a documented 413.
schema.config.checks.negative_data_rejection.expected_statuses.append("413")


@pytest.fixture(autouse=True)
def _keep_the_test_connection() -> Iterator[None]:
    # Django's WSGI handler closes the database connection after each
    # request; the test client prevents that, and so must this test, whose
    # requests run inside the test's transaction.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def credentials(partner: Any, agent: Any, constellation: Any) -> list[Any]:
    """Headers of an agent token and of the partner's session, with some
    memory, tasks, a group and a folder behind the small ids the generator
    likes."""
    sibling = AgentFactory(constellation=constellation, name="Flux")
    for owner in (agent, sibling):
        block_create(actor=Actor.system(), owner=owner, label="human", template="human")
        block_create(actor=Actor.system(), owner=owner, label="notes")
        archival_entry_create(agent=owner, content="Sam's sister visits in June")
        conversation = conversation_start(agent=owner, title="Planning")
        messages_append(
            conversation=conversation,
            messages=[{"role": "user", "content": "Dentist on Friday?"}],
            author="partner",
        )
    partner_actor = Actor.for_user(partner)
    task = task_create(
        actor=partner_actor, constellation=constellation, title="Book the dentist"
    )
    task_create(
        actor=partner_actor,
        constellation=constellation,
        title="Confirm the time",
        assignee=agent,
        parent=task,
    )
    handoff_create(actor=Actor.for_agent(sibling), to_agent=agent, content="Friday")
    group = group_create(
        constellation=constellation, name="Planning", pattern="round_robin"
    )
    group_member_add(group=group, agent=agent)
    group_member_add(group=group, agent=sibling)
    folder = folder_create(
        actor=partner_actor, constellation_id=constellation.pk, name="trip"
    )
    file_write(actor=partner_actor, folder=folder, path="a.md", text="Hotel\nFlight")
    folder_attach(actor=partner_actor, folder=folder, agent_id=agent.pk, access="read")
    client = Client()
    client.force_login(partner)
    session = client.cookies["sessionid"].value
    return [
        ({"Authorization": f"Bearer {agent_token_issue(agent=agent).raw}"}, {}),
        ({"X-CSRFToken": CSRF}, {"sessionid": session, "csrftoken": CSRF}),
    ]


@pytest.fixture
def coverage_kinds() -> Counter:
    """How many coverage cases of each kind this operation has been sent."""
    return Counter()


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_api_answers_within_its_document(
    case: Any, credentials: list[Any], coverage_kinds: Counter
) -> None:
    if case.meta is not None and case.meta.phase.name == TestPhase.COVERAGE:
        data = case.meta.phase.data
        kind = (data.scenario, data.parameter_location, data.parameter)
        coverage_kinds[kind] += 1
        if coverage_kinds[kind] > COVERAGE_EACH:
            return
    for headers, cookies in credentials:
        # The session is sent as explicit cookies, which Schemathesis cannot
        # swap for a bad one when it probes ignored authentication.
        excluded = [*DOMAIN_RULES, *([ignored_auth] if cookies else [])]
        case.call_and_validate(
            headers=headers, cookies=cookies, excluded_checks=excluded
        )
