"""Lexical search shared by every backend (DESIGN §5.1). Pure: no I/O.

* :mod:`.tokens` — the one tokenizer: text → terms (folded, stemmed, CJK n-grams). Both stores
  index and query through it, so their tokenisation cannot drift apart.
* :mod:`.bm25` — a document's index rows; the plan of a search (which keys of a parsed query
  are read in full, which only for the best candidates, within bounded work); Okapi BM25 over
  the postings read from one namespace; the rules a candidate must pass (``match="any"``/
  ``"all"``, phrases).
* :mod:`.snippet` — snippets made from a bounded window of a result's text.
"""
