"""Archival entries gain lifecycle fields: tier, lifetime, the conversation
they came from, and a superseded mark with its history; per-tier decay
rates and a per-scope cap on the retrieval config; consolidation runs.
The rows already stored get their values in 0013.
"""

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("coordination", "0004_agent_answered_by_llm"),
        ("memory", "0011_pgsearch_text_and_vector_tables"),
    ]

    operations = [
        migrations.CreateModel(
            name="ConsolidationRun",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True,
                        primary_key=True,
                        serialize=False,
                        verbose_name="ID",
                    ),
                ),
                ("started_at", models.DateTimeField()),
                ("finished_at", models.DateTimeField()),
                (
                    "decided_by",
                    models.CharField(
                        help_text='"llm" or "rules": who decided merges', max_length=8
                    ),
                ),
                ("scored", models.PositiveIntegerField(default=0)),
                ("promoted", models.PositiveIntegerField(default=0)),
                ("merged", models.PositiveIntegerField(default=0)),
                ("contradicted", models.PositiveIntegerField(default=0)),
                ("pruned", models.PositiveIntegerField(default=0)),
                ("capped", models.PositiveIntegerField(default=0)),
            ],
            options={
                "ordering": ["-finished_at", "-id"],
            },
        ),
        migrations.AddField(
            model_name="archivalentry",
            name="history",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="archivalentry",
            name="lifetime",
            field=models.CharField(
                choices=[
                    ("long_term", "long-term"),
                    ("short_term", "short-term"),
                    ("conversation", "conversation"),
                ],
                default="short_term",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="archivalentry",
            name="source_conversation",
            field=models.ForeignKey(
                blank=True,
                help_text="The conversation this entry was learned in.",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="archival_entries",
                to="memory.conversation",
            ),
        ),
        migrations.AddField(
            model_name="archivalentry",
            name="superseded_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="archivalentry",
            name="superseded_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="supersedes",
                to="memory.archivalentry",
            ),
        ),
        migrations.AddField(
            model_name="archivalentry",
            name="superseded_reason",
            field=models.CharField(
                blank=True,
                choices=[
                    ("merged", "merged into another entry"),
                    ("contradicted", "contradicted by a newer entry"),
                    ("pruned", "relevance fell below the floor"),
                    ("capped", "over the scope's entry cap"),
                ],
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="archivalentry",
            name="tier",
            field=models.CharField(
                choices=[
                    ("conversation", "conversation"),
                    ("agent", "agent"),
                    ("constellation", "constellation"),
                ],
                default="agent",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="retrievalconfig",
            name="archival_cap",
            field=models.PositiveIntegerField(
                default=10000,
                help_text="Live archival entries a scope keeps; consolidation supersedes the least relevant beyond it.",
                validators=[django.core.validators.MinValueValidator(1)],
            ),
        ),
        migrations.AddField(
            model_name="retrievalconfig",
            name="constellation_decay_rate",
            field=models.FloatField(
                default=0.998,
                help_text="Hourly decay of constellation-tier entries (slow).",
                validators=[
                    django.core.validators.MinValueValidator(0.5),
                    django.core.validators.MaxValueValidator(1.0),
                ],
            ),
        ),
        migrations.AddField(
            model_name="retrievalconfig",
            name="conversation_decay_rate",
            field=models.FloatField(
                default=0.99,
                help_text="Hourly decay of conversation-tier entries (fast).",
                validators=[
                    django.core.validators.MinValueValidator(0.5),
                    django.core.validators.MaxValueValidator(1.0),
                ],
            ),
        ),
        migrations.AlterField(
            model_name="archivalentry",
            name="source",
            field=models.CharField(
                choices=[
                    ("agent", "agent"),
                    ("partner", "partner"),
                    ("system", "system"),
                    ("consolidation", "consolidation"),
                    ("import", "import"),
                ],
                default="agent",
                max_length=20,
            ),
        ),
        migrations.AlterField(
            model_name="retrievalconfig",
            name="decay_rate",
            field=models.FloatField(
                default=0.995,
                help_text="Hourly decay of agent-tier entries (0.995/h keeps ~43% after 7 d).",
                validators=[
                    django.core.validators.MinValueValidator(0.5),
                    django.core.validators.MaxValueValidator(1.0),
                ],
            ),
        ),
        migrations.AddIndex(
            model_name="archivalentry",
            index=models.Index(
                fields=["constellation", "tier", "superseded_at"],
                name="memory_arch_constel_c273bd_idx",
            ),
        ),
        migrations.AddField(
            model_name="consolidationrun",
            name="agent",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="consolidation_runs",
                to="coordination.agent",
            ),
        ),
        migrations.AddField(
            model_name="consolidationrun",
            name="constellation",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="consolidation_runs",
                to="coordination.constellation",
            ),
        ),
        migrations.AddIndex(
            model_name="consolidationrun",
            index=models.Index(
                fields=["constellation", "agent", "-finished_at"],
                name="memory_cons_constel_9cbf87_idx",
            ),
        ),
    ]
