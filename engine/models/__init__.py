"""Models: the stock transformers classes of each family with Unmask's own masks and positions (``model``), the
families' table (``families``), the references' float32 islands (``precision``), the embedded tokenizer
(``tokenizer``), the attention masks (``masks``, numpy only: the explorer draws them too) and the ragged layout of
a batched round's attention (``ragged``). A loaded model is a ``ModelAdapter``; what it offers a decoder is ``ModelAdapter.offers``."""
