"""Adapters that plug mindstore into agent frameworks.

Each lives in its own module and needs its own extra; importing a module without its extra
raises :class:`~mindstore.errors.MissingDependencyError` naming the extra:

- :mod:`mindstore.integrations.langgraph` — ``MindstoreStore``, a LangGraph ``BaseStore``
  (``pip install 'mindstore[langgraph]'``).
- :mod:`mindstore.integrations.langchain` — ``memory_tools``: the memory tools as LangChain
  ``StructuredTool`` objects (``pip install 'mindstore[langchain]'``).
- :mod:`mindstore.integrations.mcp` — the MCP server behind ``mindstore mcp``
  (``mindstore[mcp]``).
- :mod:`mindstore.integrations.openai_agents` — ``MindstoreSession``, an OpenAI Agents SDK
  session, ``memory_tools`` (the memory tools as ``FunctionTool`` objects) and
  ``memory_instructions`` (the frozen prompt as ``instructions``)
  (``pip install 'mindstore[openai-agents]'``); its item mapping is the pure
  :mod:`mindstore.integrations.openai_items`.
"""
