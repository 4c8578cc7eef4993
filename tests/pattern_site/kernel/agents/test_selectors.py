from typing import Any

from pattern_site.kernel.agents.selectors import actor_names


def test_actor_refs_read_as_names_people_know(agent: Any, partner: Any) -> None:
    refs = [f"agent:{agent.pk}", f"human:{partner.pk}", "system:system", "Sam"]
    assert actor_names(refs=refs) == {
        f"agent:{agent.pk}": "Entropy",
        f"human:{partner.pk}": "partner",
        "system:system": "System",
        # A name that is no ref (a conversation's author) stays as it is.
        "Sam": "Sam",
    }


def test_an_unknown_ref_stays_a_ref(db: None) -> None:
    assert actor_names(refs=["agent:999"]) == {"agent:999": "agent:999"}
