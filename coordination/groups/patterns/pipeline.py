"""Pipeline: the message passes through stages, each with its own agents.

Each stage's agents get a ``stage`` delivery with a deadline (the stage's
``timeout``; a Celery task expires it).  A stage is done when every agent
of its current attempt answered; the next stage gets the message and the
answers so far.  When a delivery fails or expires, ``on_failure`` decides:
``skip`` goes on without the stage, ``retry`` asks the same agent again
(``max_attempts`` in all) and then aborts, ``abort`` ends the run with an
error.  With ``parallel_stages`` every stage starts at once on the
original message and the run is done when all stages are.
"""

import random
from typing import Any, Literal

from pydantic import Field, model_validator

from coordination.groups.patterns.base import (
    Decision,
    Deliver,
    DeliveryView,
    Member,
    Pattern,
    PatternConfig,
    RunContext,
    Step,
    observers,
)
from pattern_site.kernel.errors import Conflict, InvalidInput


class PipelineStage(PatternConfig):
    name: str = Field(min_length=1, max_length=100)
    agent_ids: list[int] = Field(min_length=1)
    timeout: float = Field(default=60.0, gt=0, le=86400)
    on_failure: Literal["skip", "retry", "abort"] = "abort"
    max_attempts: int = Field(default=2, ge=1, le=10)


class PipelineConfig(PatternConfig):
    stages: list[PipelineStage] = Field(default_factory=list)
    parallel_stages: bool = False

    @model_validator(mode="after")
    def names_unique(self) -> "PipelineConfig":
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise ValueError("stage names must be unique")
        return self


def stage_input(message: str, outputs: list[dict[str, Any]]) -> str:
    if not outputs:
        return message
    parts = [message, "", "Earlier stages:"]
    for output in outputs:
        for answer in output["answers"]:
            parts.append(f"[{output['stage']}] {answer}")
    return "\n".join(parts)


class Pipeline(Pattern):
    name = "pipeline"
    Config = PipelineConfig

    def check_members(self, config: Any, members: tuple[Member, ...]) -> None:
        ids = {m.agent_id for m in members}
        for stage in config.stages:
            strangers = [a for a in stage.agent_ids if a not in ids]
            if strangers:
                raise InvalidInput(
                    f"stage {stage.name!r} names agent(s) {strangers} that are"
                    " not members of this group"
                )

    def deliveries_for(
        self, config: Any, index: int, content: str, attempt: int = 1
    ) -> list[Deliver]:
        stage = config.stages[index]
        return [
            Deliver(
                agent_id=agent_id,
                kind="stage",
                content=content,
                stage=index,
                attempt=attempt,
                timeout=stage.timeout,
            )
            for agent_id in stage.agent_ids
        ]

    def route(
        self,
        *,
        config: Any,
        state: dict[str, Any],
        members: tuple[Member, ...],
        message: str,
        rng: random.Random,
    ) -> Decision:
        if not config.stages:
            raise Conflict(
                "this pipeline has no stages yet; add one to its configuration"
            )
        indexes = range(len(config.stages)) if config.parallel_stages else [0]
        deliveries = [
            d for i in indexes for d in self.deliveries_for(config, i, message)
        ]
        return Decision(
            deliveries=[*deliveries, *observers(members, message)],
            group_state=state,
            run_state={"stage": 0, "outputs": [], "finished_stages": []},
        )

    def advance(self, *, config: Any, ctx: RunContext, finished: DeliveryView) -> Step:
        if finished.stage is None:
            return Step()
        index = finished.stage
        stage = config.stages[index]
        run_state = dict(ctx.run_state)
        if index in run_state.get("finished_stages", []):
            return Step()
        if finished.status != "completed":
            why = finished.failure or finished.status
            if stage.on_failure == "retry" and finished.attempt < stage.max_attempts:
                redo = Deliver(
                    agent_id=finished.agent_id,
                    kind="stage",
                    content=self.current_input(config, ctx, index),
                    stage=index,
                    attempt=finished.attempt + 1,
                    timeout=stage.timeout,
                )
                return Step(
                    deliveries=[redo],
                    notices=[
                        f"stage {stage.name!r} attempt {finished.attempt} of"
                        f" {stage.max_attempts} failed ({why}); retrying"
                    ],
                )
            if stage.on_failure == "skip":
                return self.stage_done(
                    config,
                    ctx,
                    index,
                    skipped=True,
                    notice=f"stage {stage.name!r} skipped: {why}",
                )
            attempts = (
                f" after {finished.attempt} attempt(s)"
                if stage.on_failure == "retry"
                else ""
            )
            return Step(error=f"stage {stage.name!r} failed{attempts}: {why}; aborted")
        latest = self.latest(ctx, index)
        if any(d.status != "completed" for d in latest.values()):
            return Step()
        return self.stage_done(config, ctx, index, skipped=False)

    def latest(self, ctx: RunContext, index: int) -> dict[int, Any]:
        """Each agent's latest attempt at stage ``index``."""
        latest: dict[int, Any] = {}
        for d in ctx.deliveries:
            if d.kind != "stage" or d.stage != index:
                continue
            if d.agent_id not in latest or d.attempt > latest[d.agent_id].attempt:
                latest[d.agent_id] = d
        return latest

    def current_input(self, config: Any, ctx: RunContext, index: int) -> str:
        if config.parallel_stages:
            return ctx.message
        return stage_input(ctx.message, ctx.run_state.get("outputs", []))

    def stage_done(
        self,
        config: Any,
        ctx: RunContext,
        index: int,
        *,
        skipped: bool,
        notice: str = "",
    ) -> Step:
        stage = config.stages[index]
        answers = (
            [] if skipped else [d.answer for d in self.latest(ctx, index).values()]
        )
        outputs = [
            *ctx.run_state.get("outputs", []),
            {"stage": stage.name, "skipped": skipped, "answers": answers},
        ]
        done_stages = [*ctx.run_state.get("finished_stages", []), index]
        run_state = {
            **ctx.run_state,
            "outputs": outputs,
            "finished_stages": done_stages,
            "stage": index + 1,
        }
        notices = [notice] if notice else []
        if len(done_stages) == len(config.stages):
            return Step(
                run_state=run_state,
                done=True,
                result={"stages": outputs},
                notices=notices,
            )
        deliveries = []
        if not config.parallel_stages:
            deliveries = self.deliveries_for(
                config, index + 1, stage_input(ctx.message, outputs)
            )
        return Step(deliveries=deliveries, run_state=run_state, notices=notices)
