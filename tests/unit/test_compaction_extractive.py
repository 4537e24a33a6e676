"""The built-in extractive summariser: four sections, content from the excerpt, no network."""

from __future__ import annotations

from mindstore.compaction.compact_function import build_summary_prompt
from mindstore.compaction.extractive import extractive_summarize
from mindstore.compaction.session_compaction import summary_has_content


def msg(mid: str, role: str, text: str) -> dict[str, object]:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": text}]}


CONVERSATION = [
    msg("1", "user", "We need to migrate the billing database to PostgreSQL 16 this week."),
    msg("2", "assistant", "The billing database runs PostgreSQL 12. Migration needs a dump."),
    {
        "id": "3",
        "role": "assistant",
        "parts": [
            {
                "type": "tool-disk_usage",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {"db": "billing"},
                "output": {"size_gb": 420},
            }
        ],
    },
    msg("4", "user", "Can we do it without downtime?"),
    msg(
        "5", "assistant", "Logical replication to PostgreSQL 16 avoids downtime. I will set it up."
    ),
]


def test_sections_and_content() -> None:
    prompt = build_summary_prompt(CONVERSATION, target_tokens=150)
    summary = extractive_summarize(prompt)
    lines = summary.splitlines()
    for heading in ("## Topic", "## Key Points", "## Current State", "## Open Items"):
        assert heading in lines
    assert (
        summary.index("## Topic")
        < summary.index("## Key Points")
        < summary.index("## Current State")
        < summary.index("## Open Items")
    )
    assert "migrate the billing database" in summary
    assert "Logical replication" in summary
    assert "Can we do it without downtime?" in summary
    assert summary_has_content(summary)


def test_previous_summary_points_carried_forward() -> None:
    previous = "## Topic\nBilling migration\n\n## Key Points\n- Database is 420 GB\n"
    prompt = build_summary_prompt(
        [msg("9", "user", "Replication finished at 14:00. Switch traffic tomorrow.")],
        target_tokens=100,
        previous_summary=previous,
    )
    summary = extractive_summarize(prompt)
    assert "Billing migration" in summary and "Database is 420 GB" in summary
    assert "Replication finished at 14:00." in summary


def test_plain_text_and_empty_input() -> None:
    assert summary_has_content(extractive_summarize("Deploy failed. Rollback done. Next: fix CI."))
    assert summary_has_content(extractive_summarize(""))


def test_summary_has_content() -> None:
    assert not summary_has_content("")
    assert not summary_has_content("   \n")
    assert not summary_has_content(
        "## Topic\n## Key Points\n- \n## Current State\n...\n## Open Items\n"
    )
    assert summary_has_content("## Topic\nDeploy")
