"""Operate agent groups: ``group list | create | add-member | status |
export | import``.

Groups and agents are named; ``--constellation`` may be left out when the
database holds one constellation.  ``export`` writes the group's
configuration as TOML (to ``-o FILE`` or standard output) and ``import``
reads it back.
"""

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from coordination.groups.models import CoordinationPattern, MemberRole
from coordination.groups.selectors import (
    constellation_get_by_name,
    group_export,
    group_get_by_name,
    group_list_for_actor,
    run_list_for_group,
)
from coordination.groups.services import group_create, group_import, group_member_add
from coordination.groups.toml_io import document_dumps, document_loads
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.selectors import agent_get_by_name
from pattern_site.kernel.errors import ApplicationError


class Command(BaseCommand):
    help = "List, create, inspect, export and import agent groups."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--constellation", default=None)
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list", help="List the groups.")
        create = sub.add_parser("create", help="Create a group.")
        create.add_argument("name")
        create.add_argument(
            "--pattern", required=True, choices=CoordinationPattern.values
        )
        create.add_argument("--description", default="")
        create.add_argument(
            "--config",
            type=Path,
            default=None,
            help="A TOML file whose tables are the pattern's configuration.",
        )
        add = sub.add_parser("add-member", help="Add an agent to a group.")
        add.add_argument("group")
        add.add_argument("agent")
        add.add_argument("--role", default="regular", choices=MemberRole.values)
        add.add_argument("--domain", default="")
        add.add_argument("--capability", action="append", default=[])
        status = sub.add_parser("status", help="Show a group and its recent runs.")
        status.add_argument("group")
        export = sub.add_parser("export", help="Write a group's configuration.")
        export.add_argument("group")
        export.add_argument("-o", "--output", type=Path, default=None)
        imp = sub.add_parser("import", help="Create a group from an export.")
        imp.add_argument("file", type=Path)
        imp.add_argument("--replace", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            constellation = constellation_get_by_name(name=options["constellation"])
            getattr(self, "do_" + options["action"].replace("-", "_"))(
                constellation, options
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        except OSError as exc:
            raise CommandError(str(exc)) from exc

    def _group(self, constellation: Any, name: str) -> Any:
        return group_get_by_name(constellation_name=constellation.name, group_name=name)

    def do_list(self, constellation: Any, options: dict[str, Any]) -> None:
        groups = group_list_for_actor(
            actor=Actor.system(), constellation_id=constellation.pk
        )
        for group in groups:
            members = ", ".join(
                f"{m.agent.name} ({m.role})" for m in group.memberships.all()
            )
            self.stdout.write(
                f"{group.name}\t{group.pattern}\t{members or 'no members'}"
            )

    def do_create(self, constellation: Any, options: dict[str, Any]) -> None:
        config = (
            document_loads(options["config"].read_text()) if options["config"] else {}
        )
        group = group_create(
            constellation=constellation,
            name=options["name"],
            pattern=options["pattern"],
            description=options["description"],
            config=config,
        )
        self.stdout.write(f"Created group {group.name!r} ({group.pattern}).")

    def do_add_member(self, constellation: Any, options: dict[str, Any]) -> None:
        group = self._group(constellation, options["group"])
        agent = agent_get_by_name(
            constellation_name=constellation.name, agent_name=options["agent"]
        )
        group_member_add(
            group=group,
            agent=agent,
            role=options["role"],
            domain=options["domain"],
            capabilities=options["capability"],
        )
        self.stdout.write(f"Added {agent.name} to {group.name!r} as {options['role']}.")

    def do_status(self, constellation: Any, options: dict[str, Any]) -> None:
        group = self._group(constellation, options["group"])
        self.stdout.write(f"{group.name} ({group.pattern})")
        if group.description:
            self.stdout.write(group.description)
        self.stdout.write("Members:")
        for m in group.memberships.select_related("agent"):
            extra = f" [{m.domain}]" if m.domain else ""
            available = "" if m.agent.is_active else " (unavailable)"
            llm = f" (LLM: {m.agent.model_name})" if m.agent.answered_by_llm else ""
            self.stdout.write(f"  {m.agent.name}: {m.role}{extra}{available}{llm}")
        self.stdout.write("Configuration:")
        self.stdout.write(document_dumps(group_export(group=group)["config"]).strip())
        self.stdout.write(f"State: {group.state}")
        self.stdout.write("Recent runs:")
        for run in run_list_for_group(group=group, limit=10):
            self.stdout.write(
                f"  #{run.pk} {run.status} {run.started_at:%Y-%m-%d %H:%M} "
                f"{run.message[:60]!r}"
            )

    def do_export(self, constellation: Any, options: dict[str, Any]) -> None:
        group = self._group(constellation, options["group"])
        text = document_dumps(group_export(group=group))
        if options["output"]:
            options["output"].write_text(text)
            self.stderr.write(f"Wrote {options['output']}.")
        else:
            self.stdout.write(text)

    def do_import(self, constellation: Any, options: dict[str, Any]) -> None:
        document = document_loads(options["file"].read_text())
        group = group_import(
            constellation=constellation, document=document, replace=options["replace"]
        )
        self.stdout.write(f"Imported group {group.name!r} ({group.pattern}).")
