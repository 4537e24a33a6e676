"""Convert mindstore histories to and from model-API message shapes. Pure: no I/O.

``to_openai_chat(history)``, ``to_openai_responses(history)`` and ``to_anthropic(history)``
(→ ``(system, messages)``) turn a history — typically ``await session.get_history()`` — into
what each API takes; ``from_openai_chat``, ``from_openai_responses`` and ``from_anthropic`` turn a
model reply (an SDK response object or its dict) into an assistant message to append (anything
but an assistant reply raises ``InvalidMessageError``; a role is never changed).
``from_openai_chat_messages``, ``from_openai_responses_items`` and ``from_anthropic_messages``
turn whole conversations back into messages (see :mod:`mindstore.formats.history`), so
``to_X(from_X(history))`` round-trips.

mindstore's own file format — one session as JSON Lines, what ``mindstore export`` writes and
``mindstore import`` reads — is :mod:`mindstore.formats.export`.

Guarantees shared by all three formats (details in :mod:`mindstore.formats._plan`):

* every tool call sent has exactly one result and every result follows its call in the place
  the API requires; a call with no result yet is dropped (``pending="drop"``, the default) or
  sent with a stub error result (``pending="stub"``); orphaned results are dropped;
* non-string tool outputs are sent as JSON; ``output-error`` is sent as the error text
  (flagged ``is_error`` for Anthropic); unloaded skills (whose result reads
  ``[skill unloaded: <key>]`` in ``get_history()``) are sent as that short result, so the call
  stays paired while the document's tokens are reclaimed;
* a compaction overlay is sent as a user turn ``[Summary of earlier conversation]`` + summary,
  never folded into the system prompt (which stays frozen for prefix caching);
* the ``system=`` argument places the (frozen) system prompt first.
"""

from mindstore.formats._plan import PENDING_STUB, SUMMARY_PREFIX
from mindstore.formats.anthropic_messages import from_anthropic, to_anthropic
from mindstore.formats.history import (
    from_anthropic_messages,
    from_openai_chat_messages,
    from_openai_responses_items,
)
from mindstore.formats.openai_chat import from_openai_chat, to_openai_chat
from mindstore.formats.openai_responses import from_openai_responses, to_openai_responses

__all__ = [
    "PENDING_STUB",
    "SUMMARY_PREFIX",
    "from_anthropic",
    "from_anthropic_messages",
    "from_openai_chat",
    "from_openai_chat_messages",
    "from_openai_responses",
    "from_openai_responses_items",
    "to_anthropic",
    "to_openai_chat",
    "to_openai_responses",
]
