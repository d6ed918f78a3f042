"""Closed-vocabulary WordPiece tokenizer for the embedded models, built with the `tokenizers` library.

Numbers become digit tokens ("47" -> "4", "##7") so arithmetic is done digit by digit, and punctuation is split
off plain user text ("apples." -> "apples", "."). The WordPiece decoder joins "##" pieces back into numbers.
"""

from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

SPECIALS = {"pad_token": "[PAD]", "bos_token": "[BOS]", "eos_token": "[EOS]", "mask_token": "[MASK]",
            "unk_token": "[UNK]"}
EXTRA_PUNCT = [",", "!", "'", ";", "(", ")", "/", "%", "$"]


def build_tokenizer(words: list[str], extend: list[str] = ()) -> PreTrainedTokenizerFast:
    """Ids: specials, digits, sorted `words` + punctuation, then the `extend` words not yet present (sorted), so a
    tokenizer for a larger vocabulary keeps a smaller one's ids as its prefix."""
    digits = [str(d) for d in range(10)]
    vocab_list = list(SPECIALS.values()) + digits + [f"##{d}" for d in digits]
    vocab_list += [w for w in sorted(set(words) | set(EXTRA_PUNCT)) if w not in vocab_list]
    vocab_list += [w for w in sorted(set(extend)) if w not in vocab_list]
    vocab = {tok: i for i, tok in enumerate(vocab_list)}
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    return PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIALS)
