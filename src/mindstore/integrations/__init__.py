"""Adapters that plug mindstore into agent frameworks.

Each lives in its own module and needs its own extra; importing a module without its extra
raises :class:`~mindstore.errors.MissingDependencyError` naming the extra:

- :mod:`mindstore.integrations.openai_agents` — ``MindstoreSession``, an OpenAI Agents SDK
  session (``pip install 'mindstore[openai-agents]'``); its item mapping is the pure
  :mod:`mindstore.integrations.openai_items`.
"""
