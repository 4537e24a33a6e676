"""Lexical search shared by every backend (DESIGN §5.1). Pure: no I/O.

* :mod:`.tokens` — the one tokenizer: text → terms (folded, stemmed, CJK n-grams). Both stores
  index and query through it, so their tokenisation cannot drift apart.
* :mod:`.plan` — a parsed query (:class:`mindstore.search.ParsedQuery`) → the index keys to read
  and the rules a candidate must pass (``match="any"``/``"all"``, phrases).
* :mod:`.bm25` — Okapi BM25 over postings read from one namespace, and the phrase check.
* :mod:`.snippet` — snippets made from a bounded window of a result's text.
"""
