"""English stop words, ignored in ``match="any"`` queries unless nothing else is left.

A short list (articles, pronouns, auxiliaries, prepositions, question words): words that carry
no topic. Compared with the query word folded and unstemmed (contractions already folded, so
"don't" arrives as "don").
"""

from __future__ import annotations

from typing import Final

__all__ = ["STOP_WORDS"]

_WORDS: Final = """
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing don down during each few for from
further had has have having he her here hers herself him himself his how i if in into is it
its itself just me more most my myself no nor not of off on once only or other our ours
ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself yourselves
s t ll re ve d m shall may might must also ever
"""

STOP_WORDS: Final = frozenset(_WORDS.split())
