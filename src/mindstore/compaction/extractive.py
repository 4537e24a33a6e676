"""A built-in extractive summariser: no model, no network. Pure.

``extractive_summarize(prompt)`` reads a prompt built by
:func:`~mindstore.compaction.compact_function.build_summary_prompt` (any other text works too:
it is then treated as the conversation) and fills the four sections by *picking* sentences:

* **Topic** — the first thing the user asked about in the excerpt (or the earlier topic);
* **Key Points** — the earlier summary's points, then the highest-scoring sentences (words
  that recur across the excerpt score high, stop words do not; tool results count);
* **Current State** — the last assistant statement;
* **Open Items** — questions and to-dos that appear in the last part of the excerpt.

It respects the prompt's ``about N tokens`` target roughly (about 4 characters per token). It
is meant for demos, tests and offline use; a real model writes better summaries.
"""

from __future__ import annotations

import math
import re
from collections import Counter

__all__ = ["extractive_summarize"]

_STOP_WORDS = (
    "a an and are as at be but by can could did do does for from had has have he her his "
    "how i if in into is it its just let me my no not of on or our she so than that the "
    "their them then there these they this to too up us was we were what when where which "
    "who why will with would you your yes ok okay please thanks thank sure here also about "
    "all any been being "
)
_STOP = frozenset(_STOP_WORDS.split())
_LINE = re.compile(r"^\[(?P<tag>[^\]]+)\]\s?(?P<body>.*)$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_'-]*")
_OPEN_ITEM_CUE = re.compile(
    r"\b(todo|to-do|next|need to|needs to|must|should|pending|remaining|follow up|not yet|"
    r"later|will)\b",
    re.IGNORECASE,
)


def _block(prompt: str, tag: str) -> str | None:
    m = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", prompt, re.DOTALL)
    return m.group(1) if m else None


def _lines(conversation: str) -> list[tuple[str, str]]:
    """``(role_tag, text)`` per line of the excerpt; untagged lines continue the previous."""
    out: list[tuple[str, str]] = []
    for raw in conversation.splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _LINE.match(line)
        if m:
            out.append((m.group("tag"), m.group("body").strip()))
        elif out:
            out[-1] = (out[-1][0], f"{out[-1][1]} {line}")
        else:
            out.append(("text", line))
    return out


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if len(s.strip()) > 2]


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP and len(w) > 1]


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _previous_points(previous: str) -> tuple[str | None, list[str]]:
    topic: str | None = None
    points: list[str] = []
    section = ""
    for raw in previous.splitlines():
        line = raw.strip()
        if line.startswith("#"):
            section = line.lstrip("#").strip().lower()
            continue
        if not line:
            continue
        if section == "topic" and topic is None:
            topic = line
        elif section in ("key points", "current state") or not section:
            points.append(line.lstrip("-* ").strip())
    return topic, [p for p in points if p and p.lower() != "none noted."]


def extractive_summarize(prompt: str) -> str:
    """Summarise by picking sentences; returns Markdown with the four sections."""
    target_match = re.search(r"about (\d+) tokens", prompt)
    target = int(target_match.group(1)) if target_match else 200
    budget_chars = max(400, target * 4)
    previous = _block(prompt, "previous_summary")
    conversation = _block(prompt, "conversation")
    if conversation is None:
        conversation = prompt
    lines = _lines(conversation)

    prev_topic, prev_points = _previous_points(previous) if previous else (None, [])

    # candidate sentences with their position and role
    candidates: list[tuple[int, str, str]] = []
    for tag, body in lines:
        role = tag.split()[0]
        if " tool " in f" {tag} ":
            candidates.append((len(candidates), role, _clip(f"{tag.split()[-1]}: {body}", 240)))
            continue
        for sentence in _sentences(body):
            candidates.append((len(candidates), role, _clip(sentence, 240)))

    freq = Counter(w for _, _, s in candidates for w in set(_words(s)))

    def score(item: tuple[int, str, str]) -> float:
        pos, role, sentence = item
        words = _words(sentence)
        if not words:
            return 0.0
        base = sum(math.log1p(freq[w]) for w in set(words)) / math.sqrt(len(words))
        if role == "user":
            base *= 1.15
        if re.search(r"\d", sentence):
            base *= 1.1  # numbers, versions, dates tend to matter
        return base + 0.01 * pos / max(1, len(candidates))  # later is slightly fresher

    user_lines = [body for tag, body in lines if tag == "user" and body]
    if prev_topic:
        topic = prev_topic
    elif user_lines:
        first = _sentences(user_lines[0])
        topic = _clip(first[0] if first else user_lines[0], 200)
    else:
        common = [w for w, _ in freq.most_common(5)]
        topic = ", ".join(common) if common else "Conversation"

    assistant = [
        body for tag, body in lines if tag.startswith("assistant") and " tool " not in f" {tag} "
    ]
    state_sentences = _sentences(assistant[-1]) if assistant else []
    state = (
        _clip(" ".join(state_sentences[-2:]), 300)
        if state_sentences
        else (_clip(lines[-1][1], 300) if lines else "No activity recorded.")
    )

    recent = candidates[len(candidates) * 2 // 3 :]
    open_items: list[str] = []
    for _, role, sentence in recent:
        wanted = (role == "user" and sentence.endswith("?")) or _OPEN_ITEM_CUE.search(sentence)
        if wanted and sentence not in open_items:
            open_items.append(sentence)
    open_items = open_items[-4:]

    points: list[str] = []
    seen: set[str] = {topic.lower(), *(x.lower() for x in state_sentences[-2:])}
    used = len(topic) + len(state) + sum(len(o) for o in open_items) + 80

    def add(point: str) -> bool:
        nonlocal used
        key = point.lower()
        if key in seen or not point:
            return True
        if used + len(point) + 3 > budget_chars and points:
            return False
        seen.add(key)
        points.append(point)
        used += len(point) + 3
        return True

    for point in prev_points:
        if not add(point):
            break
    ranked = sorted(candidates, key=score, reverse=True)
    picked = sorted(
        (c for c in ranked[: max(3, len(ranked) // 3)] if c[2] != state),
        key=lambda c: c[0],
    )
    for _, _, sentence in picked:
        if not add(sentence):
            break
    if not points:
        points = [state]

    out = [
        "## Topic",
        topic,
        "",
        "## Key Points",
        *(f"- {p}" for p in points),
        "",
        "## Current State",
        state,
        "",
        "## Open Items",
        *(f"- {o}" for o in open_items),
    ]
    if not open_items:
        out.append("- None noted.")
    return "\n".join(out)
