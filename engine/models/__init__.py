"""Models: the stock transformers classes of each family with Unmask's own masks and positions (``model``), the
families' table (``families``), the references' float32 islands (``precision``) and the embedded tokenizer
(``tokenizer``). A loaded model is a ``ModelAdapter``; what it offers a decoder is ``ModelAdapter.offers``."""
