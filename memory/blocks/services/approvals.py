"""Deciding an agent's approval request: a rejection keeps its reason for
the agent; an approval applies the stored operations as the agent's change
(with write access, a human having authorised it), or records why they no
longer apply.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from memory.blocks.models import ApprovalStatus, BlockApproval
from memory.blocks.selectors import block_version_number
from memory.blocks.services.operations import _run_operations
from memory.blocks.services.rules import SUMMARY_MAX
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import InvalidInput, LimitExceeded, PermissionDenied


@transaction.atomic
def approval_decide(
    *, actor: Actor, approval: BlockApproval, approve: bool, reason: str = ""
) -> BlockApproval:
    """Approve (apply as the agent's change) or reject a pending request;
    a rejection's ``reason`` is kept as its result, for the agent to read."""
    approval.decided_by = actor.display_name[:150]
    approval.decided_at = timezone.now()
    fields = ["status", "decided_by", "decided_at", "result"]
    if not approve:
        approval.status = ApprovalStatus.REJECTED
        approval.result = " ".join(reason.split())[:SUMMARY_MAX]
        approval.full_clean()
        approval.save(update_fields=fields)
        return approval
    agent_actor = Actor.for_agent(approval.agent)
    try:
        with transaction.atomic():
            change = _run_operations(
                actor=agent_actor,
                block=approval.block,
                operations=approval.operations,
                summary=f"{approval.summary} (approved by {actor.display_name})",
                access="write",
            )
    except (InvalidInput, LimitExceeded, PermissionDenied) as exc:
        approval.status = ApprovalStatus.FAILED
        approval.result = exc.message
    else:
        approval.status = ApprovalStatus.APPROVED
        approval.result = (
            "version "
            f"{block_version_number(block=approval.block, version_id=change.update.pk)}"
            if change.update
            else "no change"
        )
    approval.full_clean()
    approval.save(update_fields=fields)
    return approval
