"""Token estimates and the tiktoken / tokenizers adapters, built offline (no downloads)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mindstore.errors import MissingDependencyError
from mindstore.tokens import (
    HuggingFaceTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    estimate_message_tokens,
    estimate_string_tokens,
)


def byte_level_encoding() -> object:
    """A tiny tiktoken Encoding: the 256 single bytes plus a few merges."""
    import tiktoken

    ranks = {bytes([i]): i for i in range(256)}
    for merge in [b"he", b"ll", b"hell", b"hello", b" w", b"or", b" wor", b" world"]:
        ranks[merge] = len(ranks)
    return tiktoken.Encoding(
        name="mindstore-test",
        pat_str=r"""'s|'t|'re|'ve|'m|'ll|'d| ?\w+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+""",
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": len(ranks)},
    )


def test_tiktoken_adapter_counts_offline() -> None:
    tok = TiktokenTokenizer(byte_level_encoding())
    assert isinstance(tok, Tokenizer)
    assert tok.count("") == 0
    assert tok.count("hello") == 1
    assert tok.count("hello world") == 2
    assert tok.count("hello x") == 3  # "hello", " ", "x"
    # special-token text in user content is ordinary text, never an error
    assert tok.count("<|endoftext|>") > 1
    assert "mindstore-test" in repr(tok)


def test_tiktoken_tokenizer_drives_message_estimate() -> None:
    tok = TiktokenTokenizer(byte_level_encoding())
    msgs = [{"role": "user", "parts": [{"type": "text", "text": "hello world"}]}]
    assert estimate_message_tokens(msgs, tok) == 4 + 2


def word_level_tokenizer() -> object:
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers, processors

    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "hello": 3, "world": 4, ",": 5, "!": 6}
    tok = HFTokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)]
    )
    return tok


def test_huggingface_adapter_counts_offline(tmp_path: Path) -> None:
    hf = word_level_tokenizer()
    tok = HuggingFaceTokenizer(hf)
    assert isinstance(tok, Tokenizer)
    assert tok.count("") == 0
    assert tok.count("hello, world!") == 4
    assert tok.count("unknown words here") == 3
    assert HuggingFaceTokenizer(hf, add_special_tokens=True).count("hello world") == 4
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))  # type: ignore[attr-defined]
    assert HuggingFaceTokenizer(path).count("hello world") == 2
    assert HuggingFaceTokenizer(str(path)).count("hello") == 1


def test_huggingface_bpe_model_in_memory() -> None:
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers

    vocab = {"a": 0, "b": 1, "ab": 2, "abab": 3, "c": 4}
    merges = [("a", "b"), ("ab", "ab")]
    hf = HFTokenizer(models.BPE(vocab=vocab, merges=merges))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = HuggingFaceTokenizer(hf)
    assert tok.count("abab") == 1
    assert tok.count("ababc ab") == 3


@pytest.mark.parametrize(
    ("cls", "module", "extra"),
    [
        (TiktokenTokenizer, "tiktoken", "tiktoken"),
        (HuggingFaceTokenizer, "tokenizers", "tokenizers"),
    ],
)
def test_missing_extra_names_itself(
    monkeypatch: pytest.MonkeyPatch, cls: type, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingDependencyError) as info:
        cls("anything")
    assert f"mindstore[{extra}]" in str(info.value)
    assert isinstance(info.value, ImportError)


def test_estimates() -> None:
    assert estimate_string_tokens("") == 0
    assert estimate_string_tokens("abcd") == 2  # 1 word × 1.3 → 2
    assert estimate_string_tokens("a" * 400) == 100
    assert estimate_string_tokens("你好世界") >= 4  # each ideograph at least one token
    msg = {"role": "assistant", "parts": [{"type": "tool-x", "toolCallId": "c", "input": {}}]}
    assert estimate_message_tokens([msg]) == 4 + estimate_string_tokens("{}")
