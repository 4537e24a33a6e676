"""The viewer in a real headless Chromium: the demo store read through the pages (branches,
a compaction expanded, folded tool calls, blocks, the prompt, search), reading without
JavaScript, and an XSS catalogue of hostile stored strings that must never execute.

Every page visit records dialogs, console errors and page errors (a Content-Security-Policy
violation is a console error): a test fails on any of them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from viewer_helpers import PageWatch, run_async

from mindstore.viewer.server import ViewerServer

SESSION = "/session?ns=default&id=deploy-incident"


def visible_text(page: Any) -> str:
    return str(page.inner_text("main"))


def test_browse_from_namespaces_to_a_session(watched: PageWatch, demo_server: str) -> None:
    page = watched.page
    page.goto(demo_server + "/")
    page.get_by_role("link", name="default", exact=True).click()
    page.wait_for_url("**/sessions?ns=default")
    rows = page.locator("table.sessions tbody tr")
    assert rows.count() == 2
    assert "Capacity planning" in visible_text(page)
    page.get_by_role("link", name="deploy-incident", exact=True).click()
    page.wait_for_url("**/session?ns=default&id=deploy-incident")
    text = visible_text(page)
    assert "Deploy incident" in text and "summary #1" in text
    assert "Split m17 into batches" in text  # the latest reply, after the summary
    # the compaction summary is shown; the messages it covers are folded away
    covered = page.locator("section.compaction details.covered")
    assert covered.count() == 1 and not covered.evaluate("d => d.open")
    assert not page.get_by_text("Rolled back to v41.", exact=False).first.is_visible()
    # per-message tokens and a running total
    last = page.locator("article.msg").last
    assert last.locator(".tokens").inner_text().endswith("tok")
    assert last.locator(".running").inner_text().startswith("Σ ")
    watched.assert_clean()


def test_expand_a_compaction_and_a_tool_call(watched: PageWatch, demo_server: str) -> None:
    page = watched.page
    page.goto(demo_server + SESSION)
    page.get_by_text("Show the 7 messages it covers").click()
    assert page.locator("section.compaction details.covered").evaluate("d => d.open")
    a1 = page.locator("article#m-a1")
    assert a1.get_by_text("Deployment v42 failed during the database migration step.").is_visible()
    tool = page.locator("details.tool").first
    assert tool.locator("summary").inner_text().strip().startswith("⚙ get_deploy_status")
    output = tool.locator("pre.json").last
    assert not output.is_visible()  # folded
    tool.locator("summary").click()
    assert output.is_visible()
    assert json.loads(output.inner_text()) == {
        "status": "failed",
        "step": "database migration",
        "version": "v42",
    }
    watched.assert_clean()


def test_switch_branch(watched: PageWatch, demo_server: str) -> None:
    page = watched.page
    page.goto(demo_server + SESSION)
    page.get_by_text("Show the 7 messages it covers").click()
    regen = page.locator("article#m-a2-regen")
    nav = regen.locator("nav.branches")
    assert nav.locator(".branch.current").inner_text() == "2"
    nav.get_by_role("link", name="1").click()
    page.wait_for_url("**leaf=a2**")
    text = visible_text(page)
    assert "Root cause: migration m17 locked the orders table for 9 minutes." in text
    assert "summary #1" not in text  # the overlay lies on the other branch
    assert "not the session's latest" in text
    a2 = page.locator("article#m-a2")
    assert "focus" in (a2.get_attribute("class") or "")
    assert a2.locator(".branch.current").inner_text() == "1"
    # the side panel marks the branch shown and where the latest leaf is
    shown = page.locator("ul.branchpoints li.on-path ol li.on-path a")
    assert shown.inner_text() == "a2"
    page.get_by_role("link", name="Go to the latest branch (a5)").click()
    page.wait_for_url("**/session?ns=default&id=deploy-incident")
    assert "summary #1" in visible_text(page)
    watched.assert_clean()


def test_search_highlights_and_links_into_the_tree(watched: PageWatch, demo_server: str) -> None:
    page = watched.page
    page.goto(demo_server + "/")
    box = page.get_by_role("searchbox", name="search messages")
    box.fill("orders")
    box.press("Enter")
    page.wait_for_url("**/search?**q=orders**")
    results = page.locator("ol.results > li")
    # four messages say "orders" (highlighted); replies to them follow, found by context
    assert results.count() >= 4
    assert all(results.nth(i).locator("mark").count() >= 1 for i in range(4))
    marks = page.locator("ol.results mark")
    assert marks.count() >= 4 and {m.lower() for m in marks.all_inner_texts()} == {"orders"}
    results.filter(has_text="a2-regen").get_by_role("link", name="a2-regen").click()
    page.wait_for_url("**focus=a2-regen**")
    focused = page.locator("article.msg.focus")
    assert focused.get_attribute("id") == "m-a2-regen"
    assert focused.is_visible()  # its compaction summary was opened for it
    assert "held a lock on the orders table" in focused.inner_text()
    watched.assert_clean()


def test_blocks_and_the_frozen_prompt(watched: PageWatch, demo_server: str) -> None:
    page = watched.page
    page.goto(demo_server + SESSION)
    page.get_by_role("link", name="Blocks & skills").click()
    memory = page.locator("section.block").filter(has=page.locator("h2", has_text="memory"))
    meter = memory.locator("meter")
    assert meter.get_attribute("max") == "200"
    assert 0 < float(meter.get_attribute("value") or 0) < 200
    assert "Deploys of v42+ need migration m17 split first." in memory.inner_text()
    assert "incident-report" in page.locator("table.skills").inner_text()
    page.get_by_role("link", name="System prompt").click()
    shown = page.locator("pre.prompt").text_content()
    api = page.request.get(demo_server + "/api/prompt?id=deploy-incident").json()
    assert shown == api["prompt"]  # exactly, every character
    watched.assert_clean()


def test_script_niceties(watched: PageWatch, demo_server: str) -> None:
    page = watched.page
    page.goto(demo_server + SESSION)
    page.get_by_role("button", name="Expand all").click()
    opened = page.locator("main details").evaluate_all("ds => ds.map(d => d.open)")
    assert opened and all(opened)
    page.get_by_role("button", name="Collapse all").click()
    assert not any(page.locator("main details").evaluate_all("ds => ds.map(d => d.open)"))
    # "]" switches to the next branch at the focused message
    page.goto(demo_server + SESSION + "&leaf=a2&focus=a2")
    page.keyboard.press("]")
    page.wait_for_url("**focus=a2-regen**")
    assert page.locator("article.msg.focus").get_attribute("id") == "m-a2-regen"
    page.keyboard.press("[")
    page.wait_for_url("**focus=a2#m-a2")
    watched.assert_clean()


def test_reading_works_without_javascript(browser: Any, demo_server: str) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(demo_server + SESSION)
        assert page.get_by_role("button", name="Expand all").count() == 0  # added by script
        page.get_by_text("Show the 7 messages it covers").click()  # <details> needs no script
        a1 = page.locator("article#m-a1")
        assert a1.get_by_text("Deployment v42 failed during the database migration").is_visible()
        page.locator("article#m-a2-regen nav.branches").get_by_role("link", name="1").click()
        page.wait_for_url("**leaf=a2**")
        assert "locked the orders table for 9 minutes" in visible_text(page)
    finally:
        context.close()


# ---- XSS catalogue ---------------------------------------------------------------------------

PAYLOADS = [
    "<script>alert('script')</script>",
    "<img src=x onerror=alert('img')>",
    '"><svg/onload=alert("svg")>',
    "'><body onload=alert('body')>",
    "javascript:alert('js')",
    "<a href=\"javascript:alert('link')\">click me</a>",
    "</pre></div></article><style>body{display:none}</style>",
    "<iframe srcdoc=\"<script>parent.alert('iframe')</script>\"></iframe>",
    '<meta http-equiv="refresh" content="0;url=javascript:alert(\'meta\')">',
    "{{ 7*7 }}{% raw %}${7*7}",
    "[<script>alert('snippet')</script>] [<img src=x onerror=alert('mark')>]",
    "<details open ontoggle=alert('toggle')>",
    '<link rel=stylesheet href="https://evil.example/x.css">',
    "\u202e<b>reversed</b> \x1b[31mred\x1b[0m",
]
HOSTILE_NS = "<img src=x onerror=alert('namespace')>"
HOSTILE_ID = "\"><script>alert('session')</script>"
HOSTILE_MSG_ID = "<svg onload=alert('id')>"

ALLOWED_TAGS = {
    "HTML", "HEAD", "META", "TITLE", "LINK", "SCRIPT", "BODY", "HEADER", "A", "SPAN", "NAV",
    "FORM", "INPUT", "BUTTON", "MAIN", "H1", "H2", "H4", "P", "SECTION", "DIV", "ARTICLE",
    "DETAILS", "SUMMARY", "PRE", "CODE", "ASIDE", "UL", "OL", "LI", "STRONG", "TABLE", "THEAD",
    "TBODY", "TR", "TH", "TD", "METER", "MARK", "FOOTER",
}  # fmt: skip

DOM_AUDIT = """
(allowed) => {
  const bad = [];
  for (const el of document.querySelectorAll('*')) {
    if (!allowed.includes(el.tagName)) bad.push('tag ' + el.tagName);
    for (const a of el.attributes) {
      if (a.name.toLowerCase().startsWith('on')) bad.push(el.tagName + ' @' + a.name);
      if (a.name === 'style') bad.push(el.tagName + ' @style');
    }
    const src = el.getAttribute('src'), href = el.getAttribute('href') || '';
    if (el.tagName === 'SCRIPT' && src !== '/static/viewer.js') bad.push('script');
    if (el.tagName === 'META' && el.hasAttribute('http-equiv')) bad.push('meta http-equiv');
    if (el.tagName === 'LINK' && !href.startsWith('/static/')) bad.push('link');
    if (el.tagName === 'A' && !/^([/](?![/])|#)/.test(href)) bad.push('href ' + href);
  }
  if (getComputedStyle(document.body).display === 'none') bad.push('body hidden');
  return bad;
}
"""


async def _hostile_store(path: Path) -> None:
    from mindstore.session import Session
    from mindstore.store.base import ScopeKey, SessionKey
    from mindstore.store.sqlite import SQLiteStore

    async with SQLiteStore(path) as store:
        for ns, sid in (("default", HOSTILE_ID), (HOSTILE_NS, "plain")):
            key = SessionKey(namespace=ns, session_id=sid)
            await store.create_session(key, name=PAYLOADS[0], model=PAYLOADS[1])
            s = Session.create(store, sid, namespace=ns)
            await s.append_message(
                {"id": HOSTILE_MSG_ID, "role": "user", "parts": [{"type": "text", "text": "x"}]}
            )
            for i, payload in enumerate(PAYLOADS):
                await s.append_message(
                    {
                        "id": f"m{i}",
                        "role": "user" if i % 2 else "assistant",
                        "metadata": {"note": payload},
                        "parts": [
                            {"type": "text", "text": f"alert payload {i}: {payload}"},
                            {"type": "reasoning", "text": payload},
                            {
                                "type": "tool-get<img src=x onerror=alert('tool')>",
                                "toolCallId": payload,
                                "state": payload,
                                "input": {"q": payload, payload: [payload]},
                                "output": payload,
                            },
                            {
                                "type": "dynamic-tool",
                                "toolName": payload,
                                "toolCallId": "c2",
                                "state": "output-error",
                                "input": payload,
                                "errorText": payload,
                            },
                            {"type": "file", "mediaType": payload, "url": "javascript:alert(1)"},
                            {"type": payload, "data": payload},
                        ],
                    }
                )
            # a branch whose sibling id is hostile, and a compaction with a hostile summary
            await s.append_message(
                {"id": f"b-{HOSTILE_MSG_ID}", "role": "assistant", "parts": []}, parent_id="m3"
            )
            await store.add_compaction(s.key, summary=PAYLOADS[6], from_id="m1", to_id="m4")
            await store.add_compaction(s.key, summary=PAYLOADS[2], from_id="m6", to_id="m8")
            label = "<script>alert('label')</script>"
            await store.set_block(ScopeKey(namespace=ns, session_id=sid, label=label), PAYLOADS[5])
            await store.set_block(
                ScopeKey(namespace=ns, session_id=sid, label="memory"), PAYLOADS[7]
            )
            sep = "═" * 46
            prompt = f"{sep}\nMEMORY ({PAYLOADS[1]}) [10% — 10/100 tokens] [writable]\n{sep}\n"
            await store.put_prompt(key, prompt + PAYLOADS[0], overwrite=True)
            await store.set_skill_loaded(key, PAYLOADS[3], PAYLOADS[4], True)


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = tmp_path_factory.mktemp("viewer-xss") / "hostile.db"
    run_async(_hostile_store(path))
    with ViewerServer(str(path)) as server:
        yield server.url


def _pages() -> list[str]:
    from urllib.parse import urlencode

    out = ["/"]
    for ns, sid in (("default", HOSTILE_ID), (HOSTILE_NS, "plain")):
        q = {"ns": ns, "id": sid}
        out += [
            "/sessions?" + urlencode({"ns": ns}),
            "/sessions?" + urlencode({"ns": ns, "filter": PAYLOADS[0]}),
            "/session?" + urlencode(q),
            "/session?" + urlencode({**q, "raw": 1, "limit": 500}),
            "/session?" + urlencode({**q, "focus": "m2"}),
            "/session?" + urlencode({**q, "leaf": f"b-{HOSTILE_MSG_ID}"}),
            "/session?" + urlencode({**q, "leaf": f"m{len(PAYLOADS) - 1}"}),
            "/session?" + urlencode({**q, "leaf": f"m{len(PAYLOADS) - 1}", "raw": 1}),
            "/blocks?" + urlencode(q),
            "/prompt?" + urlencode(q),
            "/search?" + urlencode({"ns": ns, "q": "alert script"}),
            "/search?" + urlencode({"ns": ns, "q": "img onerror"}),
            "/session?" + urlencode({**q, "leaf": PAYLOADS[0]}),  # 404 echoing the input
            "/search?" + urlencode({"ns": ns, "q": PAYLOADS[2]}),
        ]
    return out


@pytest.mark.parametrize("path", _pages())
def test_hostile_strings_never_execute(watched: PageWatch, hostile_server: str, path: str) -> None:
    page = watched.page
    response = page.goto(hostile_server + path)
    if response is not None and response.status == 404:  # the page naming a hostile leaf
        assert "leaf=%3Cscript" in path
        watched.errors.remove(
            "console error: Failed to load resource: the server responded with a status of 404 "
            "(Not Found)"
        )
    page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
    page.wait_for_timeout(50)  # let any injected handler have its chance
    bad = page.evaluate(DOM_AUDIT, sorted(ALLOWED_TAGS))
    assert bad == [], bad
    watched.assert_clean()
    text = page.inner_text("body")
    if "alert payload 9: " in text:  # stored text is never evaluated as a template
        assert "alert payload 9: {{ 7*7 }}{% raw %}${7*7}" in text
    if "/session?" in path and "leaf=%3Cscript" not in path:
        assert "<script>alert('script')</script>" in text or "alert payload" in text


def test_hostile_strings_read_back_exactly_from_the_api(hostile_server: str) -> None:
    from urllib.parse import urlencode
    from urllib.request import urlopen

    q = urlencode({"ns": "default", "id": HOSTILE_ID, "raw": 1, "leaf": f"m{len(PAYLOADS) - 1}"})
    with urlopen(f"{hostile_server}/api/session?{q}") as r:
        view = json.load(r)
    assert view["session"]["name"] == PAYLOADS[0]
    texts = [i["message"]["parts"][0]["text"] for i in view["items"] if i["message"]["parts"]]
    assert f"alert payload 6: {PAYLOADS[6]}" in texts


# ---- screenshots -----------------------------------------------------------------------------

SHOTS = {
    "namespaces.png": ("/", None),
    "sessions.png": ("/sessions?ns=default", None),
    "session.png": (SESSION, None),
    "session-expanded.png": (SESSION, "Show the 7 messages it covers"),
    "branch.png": (SESSION + "&leaf=a2&focus=a2", None),
    "blocks.png": ("/blocks?ns=default&id=deploy-incident", None),
    "prompt.png": ("/prompt?ns=default&id=deploy-incident", None),
    "search.png": ("/search?ns=default&q=orders+table", None),
}


def test_screenshots_of_every_page(browser: Any, demo_server: str, tmp_path: Path) -> None:
    """Every page renders; with MINDSTORE_WRITE_SCREENSHOTS=1 they go to docs/img/ (the images
    in docs/viewer.md are made by this test)."""
    out = tmp_path
    if os.environ.get("MINDSTORE_WRITE_SCREENSHOTS") == "1":
        out = Path(__file__).resolve().parents[2] / "docs" / "img"
        out.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1200, "height": 760})
    try:
        page = context.new_page()
        for name, (path, click) in SHOTS.items():
            page.goto(demo_server + path)
            if click:
                page.get_by_text(click).click()
            page.screenshot(path=str(out / name), full_page=click is not None)
            data = (out / name).read_bytes()
            assert data.startswith(b"\x89PNG") and 5_000 < len(data) < 400_000
            if out != tmp_path and shutil.which("pngquant"):  # smaller files for docs/img
                target = str(out / name)
                subprocess.run(
                    ["pngquant", "--force", "--skip-if-larger", "--output", target, target],
                    check=False,
                )
    finally:
        context.close()
